"""The runner under real schedulers, run for real: the one-machine Slurm cluster of tests/cluster/slurm-up.sh
(two node names, n1 and n2, on this host; `make test` starts it as root) and Debian's Open MPI.

Each test runs `bench` as a user would and checks run.json and the stored row: srun inside an allocation,
sbatch (returning at once; --wait; scancel; the time limit; a failed node), mpirun (Horovod with two ranks, and
any command per rank), a sweep as a job array cancelled and resumed, and bad input (a dead node, a cancelled array, a job that never starts). Without
the cluster, Open MPI, TensorFlow or Horovod-with-MPI the tests that need them skip and say which is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from logtools import only_run_dir, slurm_cluster_reason
from logtools import stored_runs as runs

BENCH = str(Path(sys.executable).parent / "bench")
TINY = ["--model", "trivial", "--device", "cpu", "--batch-size", "4", "--num-batches", "10", "--display-every", "5",
        "--num-warmup-batches", "2", "--data-format", "NHWC", "--telemetry-interval", "0"]
LONG = ["--model", "trivial", "--device", "cpu", "--batch-size", "8", "--num-batches", "100000",
        "--data-format", "NHWC", "--telemetry-interval", "0"]


def _trainer_reason(mpi: bool = True) -> str | None:
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        return f"TensorFlow or Horovod is not installed ({e}): make test installs them"
    if mpi and not hvd.mpi_built():
        return "Horovod was built without MPI (make horovod builds it with Open MPI when mpicxx is here)"
    return None


CLUSTER = slurm_cluster_reason()
needs_cluster = pytest.mark.skipif(CLUSTER is not None, reason=CLUSTER or "")
needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")


def needs_horovod_mpi() -> None:
    reason = _trainer_reason()
    if reason is not None:
        pytest.skip(reason)


def bench(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def run_json(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def rank0_total(log: str) -> float:
    """Rank 0's `total images/sec:` line, read from the log (srun --label '0: ', mpirun '[1,0]<stdout>:')."""
    (value,) = re.findall(r"^(?:0: |\[1,0\]<stdout>:)total images/sec: ([\d.]+)$", log, re.M)
    return float(value)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


# --- srun and sbatch --------------------------------------------------------------------------------------


@needs_cluster
def test_srun_inside_an_allocation_stores_one_ok_run_with_two_ranks(tmp_path: Path) -> None:
    needs_horovod_mpi()
    out, store = tmp_path / "logs", tmp_path / "store"
    done = subprocess.run(["salloc", "-n", "2", BENCH, "run", "--launcher", "slurm", "--np", "2",
                           "--variable-update", "horovod", *TINY, "--out", str(out), "--store", str(store)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(out)
    (row,) = runs(store)
    assert (row["status"], row["num_ranks"]) == ("ok", 2)
    assert row["images_per_sec"] == rank0_total((run_dir / "output.log").read_text())
    doc = run_json(run_dir)
    assert doc["argv"][:5] == ["srun", "--ntasks=2", "--label", "--kill-on-bad-exit=1", "--mpi=pmix"]
    assert len(doc["nodes"]) == 1 and doc["nodes"][0]["node"] in ("n1", "n2")  # salloc -n 2 fits one node of 2 CPUs


@needs_cluster
def test_sbatch_wait_runs_across_two_nodes_and_records_each_node(tmp_path: Path) -> None:
    needs_horovod_mpi()
    out, store = tmp_path / "logs", tmp_path / "store"
    done = bench("run", "--launcher", "slurm", "--sbatch", "--wait", "--hosts", "n1:1,n2:1", "--variable-update",
                 "horovod", *TINY, "--out", str(out), "--store", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(out)
    doc = run_json(run_dir)
    assert doc["status"] == "ok" and re.fullmatch(r"\d+", doc["slurm_job_id"])
    assert [n["node"] for n in doc["nodes"]] == ["n1", "n2"]
    assert all(n["host"]["hostname"] and n["host"]["logical_cpus"] for n in doc["nodes"])
    (row,) = runs(store)
    assert (row["status"], row["num_ranks"], row["num_nodes"]) == ("ok", 2, 2)
    assert row["images_per_sec"] == rank0_total((run_dir / "output.log").read_text())
    details = dict(row["details"])
    assert details["node_names"] == "n1,n2" and len(json.loads(details["nodes"])) == 2
    assert details["slurm_job_id"] == doc["slurm_job_id"]
    # the batch script and Slurm's own output file are not logs: ingesting the folder again adds nothing
    again = bench("ingest", str(out), "--store", str(store))
    assert again.returncode == 0 and len(runs(store)) == 1


@needs_cluster
def test_sbatch_returns_at_once_and_the_ended_job_ingests_ok(tmp_path: Path) -> None:
    _trainer_reason(mpi=False) and pytest.skip(_trainer_reason(mpi=False) or "")
    out, store = tmp_path / "logs", tmp_path / "store"
    t0 = time.monotonic()
    done = bench("run", "--launcher", "slurm", "--sbatch", *TINY, "--out", str(out), "--store", str(store))
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(out)
    doc = run_json(run_dir)
    assert doc["status"] == "submitted" and took < 10  # it did not wait for the training (about 8 s)
    assert f"(job {doc['slurm_job_id']})" in done.stdout
    wait_for(lambda: run_json(run_dir)["status"] not in ("submitted", "running"), 120, "the job's end")
    assert run_json(run_dir)["status"] == "ok"
    assert not (run_dir / "telemetry.csv").exists()  # --telemetry-interval 0 reached the job's driver
    assert bench("ingest", str(out), "--store", str(store)).returncode == 0
    (row,) = runs(store)
    assert row["status"] == "ok" and row["images_per_sec"] == rank0_total((run_dir / "output.log").read_text())


def _start_long_job(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "logs"
    proc = subprocess.Popen([BENCH, "run", "--launcher", "slurm", "--sbatch", "--wait", *extra, *LONG,
                             "--out", str(out), "--store", str(tmp_path / "store")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: out.exists() and any(out.glob("*/run.json")), 30, "the submitted run's run.json")
    run_dir = only_run_dir(out)
    wait_for(lambda: b"images/sec" in (run_dir / "output.log").read_bytes() if (run_dir / "output.log").exists()
             else False, 120, "the first step line")
    return proc, run_dir


def _stored_after(proc: subprocess.Popen[str], tmp_path: Path) -> tuple[str, dict[str, Any]]:
    text, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, text
    (row,) = runs(tmp_path / "store")
    assert row["images_per_sec"] is None  # never a number from a run that did not end ok
    return text, row


@needs_cluster
def test_a_job_cancelled_with_scancel_is_cancelled_in_slurms_words(tmp_path: Path) -> None:
    _trainer_reason(mpi=False) and pytest.skip(_trainer_reason(mpi=False) or "")
    proc, run_dir = _start_long_job(tmp_path)
    subprocess.run(["scancel", run_json(run_dir)["slurm_job_id"]], check=True)
    text, row = _stored_after(proc, tmp_path)
    doc = run_json(run_dir)
    assert doc["status"] == row["status"] == "cancelled"
    assert re.search(r"Slurm: \*\*\* JOB \d+ ON n\d CANCELLED AT \S+ \*\*\*", doc["status_detail"])
    assert doc["slurm_end"] == "slurmstepd's line" and "cancelled" in text


@needs_cluster
def test_a_job_killed_at_its_time_limit_is_timeout(tmp_path: Path) -> None:
    """Slurm enforces a limit in whole minutes, checked every 30 s: about 65 s."""
    _trainer_reason(mpi=False) and pytest.skip(_trainer_reason(mpi=False) or "")
    proc, run_dir = _start_long_job(tmp_path, "--timeout", "5")
    assert "#SBATCH --time=0:05" in (run_dir / "job.sbatch").read_text()
    _, row = _stored_after(proc, tmp_path)
    doc = run_json(run_dir)
    assert doc["status"] == row["status"] == "timeout"
    assert "DUE TO TIME LIMIT" in doc["status_detail"]


@needs_cluster
def test_a_job_whose_node_fails_is_failed_in_slurms_words(tmp_path: Path) -> None:
    _trainer_reason(mpi=False) and pytest.skip(_trainer_reason(mpi=False) or "")
    proc, run_dir = _start_long_job(tmp_path, "--hosts", "n2:1")
    try:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=down", "reason=bench-test"], check=True)
        _, row = _stored_after(proc, tmp_path)
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=idle"], check=False)
    doc = run_json(run_dir)
    assert doc["status"] == row["status"] == "failed"
    assert re.search(r"Slurm: job \d+ NODE_FAIL", doc["status_detail"]) and doc["slurm_end"] == "scontrol"
    wait_for(lambda: "idle" in subprocess.run(["sinfo", "-h", "-n", "n2", "-o", "%T"], capture_output=True,
                                              text=True).stdout, 30, "n2 back")


# --- mpirun ---------------------------------------------------------------------------------------------


@needs_mpi
def test_mpirun_runs_horovod_with_two_ranks(tmp_path: Path) -> None:
    needs_horovod_mpi()
    out, store = tmp_path / "logs", tmp_path / "store"
    done = bench("run", "--launcher", "mpirun", "--np", "2", "--variable-update", "horovod", *TINY,
                 "--out", str(out), "--store", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(out)
    log = (run_dir / "output.log").read_text()
    (row,) = runs(store)
    assert (row["status"], row["num_ranks"]) == ("ok", 2)
    assert row["images_per_sec"] == rank0_total(log)
    root = os.geteuid() == 0
    assert ("--allow-run-as-root" in run_json(run_dir)["argv"]) == root
    assert ("bench run: running as root, so mpirun is given --allow-run-as-root" in log) == root


@needs_mpi
def test_mpirun_runs_any_command_per_rank_rank_tagged(tmp_path: Path) -> None:
    out = tmp_path / "logs"
    done = bench("run", "--launcher", "mpirun", "--np", "2", "--no-ingest", "--out", str(out), "--telemetry-interval",
                 "0", "--", sys.executable, "-c", "import os; print('rank', os.environ['OMPI_COMM_WORLD_RANK'])")
    log = (only_run_dir(out) / "output.log").read_text()
    assert "[1,0]<stdout>:rank 0" in log and "[1,1]<stdout>:rank 1" in log
    assert done.returncode == 1 and "no_result" in done.stdout  # ran, and printed no benchmark result


# --- sweeps as job arrays ---------------------------------------------------------------------------------


PLAN = """name = "array-test"
repetitions = 2
[matrix]
model = ["trivial"]
num_gpus = [1]
batch_size = [8]
variable_update = ["replicated"]
data_format = ["NHWC"]
[launcher]
telemetry_interval_s = 0
[trainer]
device = "cpu"
num_batches = {num_batches}
num_warmup_batches = 2
display_every = 5
"""


@needs_cluster
def test_a_cancelled_array_resumes_with_only_the_points_left(tmp_path: Path) -> None:
    _trainer_reason(mpi=False) and pytest.skip(_trainer_reason(mpi=False) or "")
    plan, out, store = tmp_path / "plan.toml", tmp_path / "logs", tmp_path / "store"
    plan.write_text(PLAN.format(num_batches=100000))
    args = ["sweep", str(plan), "--launcher", "slurm", "--sbatch", "--out", str(out), "--store", str(store)]
    proc = subprocess.Popen([BENCH, *args, "--array-limit", "1", "--wait"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: out.exists() and any(out.glob("array-*/array.json")), 30, "the array")
    (array_json,) = out.glob("array-*/array.json")
    wait_for(lambda: "job_id" in json.loads(array_json.read_text()), 30, "the array's job id")
    doc = json.loads(array_json.read_text())
    assert "#SBATCH --array=0-1%1" in (array_json.parent / "job.sbatch").read_text()
    first = Path(doc["run_dirs"][0])
    wait_for(lambda: b"images/sec" in (first / "output.log").read_bytes() if (first / "output.log").exists()
             else False, 120, "the first task's step lines")
    subprocess.run(["scancel", doc["job_id"]], check=True)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, text
    statuses = sorted(r["status"] for r in runs(store))
    assert statuses == ["cancelled", "cancelled"]  # the running task, and the one that never started
    never = run_json(Path(doc["run_dirs"][1]))
    assert "never started" in never["status_detail"]
    # --resume submits only the points without an ok run: both, now with a short run each
    plan.write_text(PLAN.format(num_batches=10).replace('"array-test"', '"array-test"'))
    done = bench(*args, "--resume", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--resume: 0 of 2 points already have an ok run" in done.stdout
    again = bench(*args, "--resume")
    assert again.returncode == 0 and "--resume: 2 of 2 points already have an ok run" in again.stdout
    assert "submitted array job" not in again.stdout
    assert sorted(r["status"] for r in runs(store)) == ["cancelled", "cancelled", "ok", "ok"]


# --- bad input --------------------------------------------------------------------------------------------


def test_no_slurm_installed_is_one_line_and_a_failed_run_json(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    done = bench("run", "--launcher", "slurm", "--sbatch", "--out", str(tmp_path / "logs"), "--", "true", env=env)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "sbatch was not found on PATH" in done.stderr
    doc = run_json(only_run_dir(tmp_path / "logs"))
    assert doc["status"] == "failed" and "sbatch was not found" in doc["status_detail"]
    done = bench("run", "--launcher", "mpirun", "--np", "2", "--out", str(tmp_path / "m"), "--no-ingest", "--",
                 "true", env=env)
    assert done.returncode == 1 and "failed" in done.stdout
    assert run_json(only_run_dir(tmp_path / "m"))["status"] == "failed"


@needs_cluster
@pytest.mark.parametrize(("case", "args", "words"), [
    ("partition", ["--sbatch", "--partition", "nosuch"], "Invalid partition name specified"),
    ("node name", ["--hosts", "nosuch:1"], "Invalid node name specified"),
    ("lost rank", ["--np", "2", "--", "bash", "-c", "[ $SLURM_PROCID = 1 ] && kill -9 $$; sleep 5"],
     "task 1: Killed"),
])
def test_slurm_bad_input_is_exit_1_and_never_ok(tmp_path: Path, case: str, args: list[str], words: str) -> None:
    out, store = tmp_path / "logs", tmp_path / "store"
    argv = ["run", "--launcher", "slurm", "--out", str(out), "--store", str(store), "--telemetry-interval", "0", *args]
    if "--" not in args:
        argv += ["--", "true"]
    done = bench(*argv)
    assert done.returncode == 1, done.stdout + done.stderr
    assert words in done.stdout + done.stderr
    doc = run_json(only_run_dir(out))
    assert doc["status"] == "failed" and words in doc["status_detail"]
    assert all(r["status"] != "ok" for r in runs(store)) if (store / "STORE.json").exists() else True


@needs_cluster
def test_more_tasks_than_the_allocation_and_a_controller_down(tmp_path: Path) -> None:
    done = subprocess.run(["salloc", "-n", "1", BENCH, "run", "--launcher", "slurm", "--np", "4", "--no-ingest",
                           "--out", str(tmp_path / "a"), "--telemetry-interval", "0", "--", "true"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "More processors requested than permitted" in run_json(only_run_dir(tmp_path / "a"))["status_detail"]
    conf = Path("/etc/slurm/slurm.conf").read_text()
    (tmp_path / "down.conf").write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=6999", conf))
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "down.conf")}
    done = bench("run", "--launcher", "slurm", "--sbatch", "--out", str(tmp_path / "b"), "--", "true", env=env)
    assert done.returncode == 1 and "Unable to contact slurm controller" in done.stderr
    assert run_json(only_run_dir(tmp_path / "b"))["status"] == "failed"
