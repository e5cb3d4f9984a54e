"""multi_worker and distributed_ps: TF_CONFIG (local and from Slurm), the built commands (golden), and real
2-worker localhost runs through ``bench run`` on CPU, ingested. Trainings skip without TensorFlow."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from logtools import bench_run_result

from bench.runner.spec import RunSpec, build_command, build_sbatch_script
from bench.runner.train import cluster, trainer, workers
from bench.sql.errors import BenchError

GOLDEN = Path(__file__).parent / "golden"
TRAINER = ("python", "-m", "bench.runner.train.trainer")
BIN = Path(sys.executable).parent
TINY = ["--model", "trivial", "--device", "cpu", "--batch-size", "4", "--num-batches", "10",
        "--display-every", "5", "--num-warmup-batches", "2", "--data-format", "NHWC"]


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("BENCH_REGEN_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text


def test_local_task_envs_match_golden() -> None:
    envs = {mode: workers.task_envs(mode, 2, 1, [7001, 7002, 7003, 7004][: 2 if mode == "multi_worker" else 4])
            for mode in cluster.MODES}
    _check_golden("tf_config_local", json.dumps(envs, indent=1, sort_keys=True) + "\n")
    ps = [json.loads(e["TF_CONFIG"]) for e in envs["distributed_ps"]]
    assert [c["task"] for c in ps] == [{"type": "chief", "index": 0}, {"type": "ps", "index": 0},
                                       {"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert ps[0]["cluster"] == {"chief": ["localhost:7001"], "ps": ["localhost:7002"],
                                "worker": ["localhost:7003", "localhost:7004"]}


SLURM = {"SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_PROCID": "3"}


def test_slurm_tf_config_matches_golden() -> None:
    configs = {mode: cluster.slurm_tf_config(mode, SLURM) for mode in cluster.MODES}
    _check_golden("tf_config_slurm", json.dumps(configs, indent=1, sort_keys=True) + "\n")
    assert configs["multi_worker"]["cluster"]["worker"] == ["gpu07:23456", "gpu07:23457", "gpu08:23456", "gpu08:23457"]
    assert configs["multi_worker"]["task"] == {"type": "worker", "index": 3}
    assert configs["distributed_ps"]["task"] == {"type": "worker", "index": 1}  # chief, ps, worker 0, worker 1


@pytest.mark.parametrize(("nodelist", "hosts"), [
    ("n1", ["n1"]),
    ("gpu[01-03,07],login", ["gpu01", "gpu02", "gpu03", "gpu07", "login"]),
    ("a[8-10]", ["a8", "a9", "a10"]),
])
def test_expand_nodelist(nodelist: str, hosts: list[str]) -> None:
    assert cluster.expand_nodelist(nodelist) == hosts


def test_tasks_per_node_and_errors() -> None:
    assert cluster.tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(cluster.ClusterError, match="bad Slurm node list"):
        cluster.expand_nodelist("n[1-x]")
    with pytest.raises(cluster.ClusterError, match="needs TF_CONFIG"):
        cluster.resolve_tf_config("multi_worker", {})
    with pytest.raises(cluster.ClusterError, match="at least one worker"):
        cluster.cluster_spec("distributed_ps", ["a:1", "b:2"])


def test_is_chief() -> None:
    mw = cluster.tf_config("multi_worker", ["a:1", "b:2"], 0)
    ps = cluster.tf_config("distributed_ps", ["a:1", "b:2", "c:3"], 2)
    assert cluster.is_chief(mw) and not cluster.is_chief(cluster.tf_config("multi_worker", ["a:1", "b:2"], 1))
    assert not cluster.is_chief(ps) and cluster.is_chief(cluster.tf_config("distributed_ps", ["a:1", "b:2", "c:3"], 0))


CASES = {
    "multi_worker_local": RunSpec(model="resnet50", batch_size=64, variable_update="multi_worker", np=2),
    "distributed_ps_local": RunSpec(model="resnet50", batch_size=64, variable_update="distributed_ps", np=2),
    "multi_worker_srun": RunSpec(model="resnet50", batch_size=64, variable_update="multi_worker", num_gpus=4,
                                 launcher="slurm", hosts="n1:1,n2:1"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cluster_commands_match_golden(name: str) -> None:
    _check_golden(name, shlex.join(build_command(CASES[name], trainer=TRAINER)) + "\n")


def test_distributed_ps_sbatch_counts_chief_and_ps() -> None:
    spec = RunSpec(model="resnet50", variable_update="distributed_ps", np=4, launcher="slurm")
    script = build_sbatch_script(spec, run_dir="/l", job_name="j", trainer=TRAINER)
    assert "#SBATCH --ntasks=6\n" in script and "srun --ntasks=6 " in script


def test_cluster_modes_refuse_mpi_launchers() -> None:
    with pytest.raises(BenchError, match="starts its own processes with TF_CONFIG"):
        build_command(RunSpec(variable_update="multi_worker", launcher="mpirun", np=2), trainer=TRAINER)


def test_trainer_without_a_cluster_exits_1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    assert trainer.main([*TINY, "--variable-update", "multi_worker"]) == 1
    assert "needs TF_CONFIG (or a Slurm job step)" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "message"), [
    (["--variable-update", "multi_worker", "--num-gpus", "2"], "on CPU runs one device per worker"),
    (["--variable-update", "distributed_ps", "--data-dir", "d"], "--data-dir with distributed_ps is not implemented"),
])
def test_cluster_usage_errors(extra: list[str], message: str) -> None:
    args = trainer.build_parser().parse_args([*TINY, *extra])
    assert message in (trainer.usage_problem(args) or "")


_Runs = dict[str, tuple[subprocess.CompletedProcess[bytes], Path, str | None]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> _Runs:
    """``bench run --variable-update M --np 2`` for both modes, started together. A mode whose run fails is
    run once more, alone, and the first failure is handed to the test (which reports it as a warning): on
    this 2-core VM, TensorFlow's ParameterServerStrategy was once seen to die in warm-up (exit 245, no
    Python traceback) and pass on every re-run. Two failures in a row still fail the test."""
    pytest.importorskip("tensorflow")
    bench = BIN / "bench"
    if not bench.exists():
        pytest.skip(f"no bench command next to {sys.executable}")
    tmp = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CONFIG", None)

    def start(m: str, attempt: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([str(bench), "run", "--variable-update", m, "--np", "2", *TINY,
                                 "--telemetry-interval", "0", "--timeout", "150", "--out", str(tmp / attempt / m),
                                 "--store", str(tmp / attempt / f"store-{m}")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)

    def finish(p: subprocess.Popen[bytes]) -> subprocess.CompletedProcess[bytes]:
        out, err = p.communicate(timeout=200)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    done: _Runs = {}
    for m, proc in [(m, finish(p)) for m, p in {m: start(m, "first") for m in cluster.MODES}.items()]:
        first_failure = None
        if proc.returncode != 0:
            first_failure = (proc.stdout + proc.stderr).decode(errors="replace")[-1500:]
            proc = finish(start(m, "again"))
        done[m] = (proc, tmp / ("first" if first_failure is None else "again"), first_failure)
    return done


@pytest.mark.slow
@pytest.mark.filterwarnings("always::UserWarning")  # a re-run is reported, not turned into an error
@pytest.mark.parametrize("mode", cluster.MODES)
def test_two_workers_on_localhost_train_and_ingest(
        mode: str, runs: _Runs) -> None:
    proc, tmp, first_failure = runs[mode]
    if first_failure is not None:
        warnings.warn(f"{mode}: the first run failed and a re-run alone passed; the first run's output ends:\n"
                      f"{first_failure}", stacklevel=1)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()[-3000:]
    _, log, row = bench_run_result(tmp / mode, tmp / f"store-{mode}")
    assert log.count(b"TensorFlow:  2.") == 1  # the chief alone prints the header
    assert b"Devices:     ['/job:worker/replica:0/task:0/cpu:0']\n" in log
    assert f"Variables:   {mode}\nSync:        True\n".encode() in log
    assert b"Timed window: " in log and b" s for 80 images\n" in log  # 2 workers x 10 steps x 4
    assert (row["status"], row["variable_update"], row["global_batch_size"], row["batch_size_per_device"]) == (
        "ok", mode, 8, 4)
    assert row["num_ranks"] == 2  # run.json: --np 2 worker processes
    assert row["num_nodes"] == 2  # upstream's header arithmetic: global / (per device x devices) = workers
    assert row["num_steps"] == 10 and row["images_per_sec"] > 0


@pytest.mark.slow
def test_cpu_runs_of_one_and_two_devices_reach_scaling(tmp_path: Path) -> None:
    """`bench run --device cpu --num-gpus 2` stores 2 cpu devices (num_gpus stays NULL), so the
    1- and 2-device runs of one configuration are one configuration of `scaling`, baseline 1 device."""
    pytest.importorskip("tensorflow")
    bench = BIN / "bench"
    if not bench.exists():
        pytest.skip(f"no bench command next to {sys.executable}")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CONFIG", None)
    store = tmp_path / "store"
    for n in ("1", "2"):
        proc = subprocess.run([str(bench), "run", "--variable-update", "replicated", "--num-gpus", n, *TINY,
                               "--telemetry-interval", "0", "--timeout", "150", "--out", str(tmp_path / "logs"),
                               "--store", str(store)], capture_output=True, env=env, timeout=200)
        assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()[-3000:]
    from bench.sql.read import connect

    con = connect(store)
    runs = con.execute("SELECT num_gpus, num_devices, device_type, images_per_sec FROM runs ORDER BY num_devices").fetchall()
    assert [r[:3] for r in runs] == [(None, 1, "cpu"), (None, 2, "cpu")]
    got = con.execute("SELECT num_devices, baseline_devices, speedup, efficiency FROM scaling ORDER BY num_devices").fetchall()
    assert [(r[0], r[1]) for r in got] == [(1, 1), (2, 1)]
    assert got[1][2] == pytest.approx(runs[1][3] / runs[0][3]) and got[1][3] == pytest.approx(got[1][2] / 2)
