"""RunSpec and the pure command builders; commands compared with tests/runner/golden/<name>.txt.

Regenerate the golden files only with BENCH_REGEN_GOLDEN=1 (then read the diff before committing).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from bench.runner.spec import (
    RunSpec,
    build_command,
    build_sbatch_script,
    num_processes,
    parse_hosts,
    parse_tags,
    trainer_argv,
)
from bench.sql.errors import BenchError

GOLDEN = Path(__file__).parent / "golden"
TRAINER = ("python", "-m", "bench.runner.train.trainer")
BASE = {"model": "resnet50", "batch_size": 64, "num_batches": 100, "variable_update": "horovod",
        "data_format": "NCHW", "precision": "fp16"}

CASES = {
    "local": (RunSpec(model="resnet50", batch_size=64, num_gpus=2, variable_update="replicated",
                      all_reduce="nccl", xla=True, extra_args=("--decode-threads", "auto")), "local"),
    "horovodrun": (RunSpec(**BASE, launcher="horovodrun", hosts="h1:4,h2:4"), None),
    "horovodrun_gloo": (RunSpec(**BASE, launcher="horovodrun", np=2, gloo=True, device="cpu"), None),
    "mpirun": (RunSpec(**BASE, launcher="mpirun", hosts="h1:4,h2:4"), None),
    "srun": (RunSpec(**BASE, launcher="slurm", hosts="n1:4,n2:4"), None),
}


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("BENCH_REGEN_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("name", sorted(CASES))
def test_command_matches_golden(name: str) -> None:
    spec, launcher = CASES[name]
    argv = build_command(spec, launcher, trainer=TRAINER, export_env=["NCCL_DEBUG", "CUDA_VISIBLE_DEVICES"])
    _check_golden(name, shlex.join(argv) + "\n")


def test_sbatch_script_matches_golden() -> None:
    spec = RunSpec(**BASE, launcher="slurm", hosts="n1:4,n2:4", timeout_s=3601)
    script = build_sbatch_script(spec, run_dir="/logs/r1", job_name="bench-resnet50", trainer=TRAINER,
                                 python="/venv/bin/python")
    _check_golden("sbatch", script)
    assert "#SBATCH --time=60:01" in script  # 3601 s: Slurm's minutes:seconds
    assert "#SBATCH --no-requeue" in script  # a node failure is a failed run, never a silent second start
    assert script.rstrip().endswith("exec /venv/bin/python -m bench.runner.commands.job_driver /logs/r1")


def test_mpirun_exports_are_sorted_and_unique() -> None:
    argv = build_command(RunSpec(launcher="mpirun", np=2), trainer=("t",), export_env=["TF_X", "PATH", "TF_X"])
    exported = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert exported == ["LD_LIBRARY_PATH", "PATH", "TF_X"]
    assert argv[:5] == ["mpirun", "-np", "2", "-H", "localhost:2"]
    assert argv[-1] == "t"
    as_root = build_command(RunSpec(launcher="mpirun", np=2), trainer=("t",), as_root=True)
    assert as_root[:6] == ["mpirun", "--allow-run-as-root", "-np", "2", "-H", "localhost:2"]  # root only


def test_srun_options_for_partition_and_mpi() -> None:
    hvd = build_command(RunSpec(launcher="slurm", np=2, variable_update="horovod", partition="gpu"), trainer=("t",))
    assert hvd[:6] == ["srun", "--ntasks=2", "--label", "--kill-on-bad-exit=1", "--partition=gpu", "--mpi=pmix"]
    assert "--mpi=pmi2" in build_command(RunSpec(launcher="slurm", np=2, variable_update="horovod", mpi="pmi2"),
                                         trainer=("t",))
    assert not any(a.startswith("--mpi") for a in build_command(RunSpec(launcher="slurm", np=2), trainer=("t",)))


def test_trainer_argv_leaves_out_unset_options() -> None:
    assert trainer_argv(RunSpec(), ("t",)) == ["t"]
    assert trainer_argv(RunSpec(num_epochs=1.5, batch_size=8), ("t",)) == ["t", "--batch-size", "8",
                                                                           "--num-epochs", "1.5"]


@pytest.mark.parametrize(("spec", "n"), [
    (RunSpec(), 1), (RunSpec(num_gpus=4), 4), (RunSpec(hosts="a:4,b:2", num_gpus=1), 6),
    (RunSpec(hosts="a:4", np=3), 3), (RunSpec(hosts="a,b"), 2),
])
def test_num_processes(spec: RunSpec, n: int) -> None:
    assert num_processes(spec) == n


def test_srun_without_uniform_slots_has_no_tasks_per_node() -> None:
    argv = build_command(RunSpec(launcher="slurm", hosts="a:4,b:2"), trainer=("t",))
    assert argv == ["srun", "--ntasks=6", "--label", "--kill-on-bad-exit=1", "--nodelist=a,b", "t"]


def test_parse_hosts_and_tags() -> None:
    assert parse_hosts("h1:4, h2:2,h3") == [("h1", 4), ("h2", 2), ("h3", 1)]
    assert parse_tags(["b=2", "a=x=y", "b=3"]) == (("a", "x=y"), ("b", "3"))


@pytest.mark.parametrize("bad", ["h1:0", "h1:x", "", "h1:4,,h2:4"])
def test_bad_hosts_are_user_errors(bad: str) -> None:
    with pytest.raises(BenchError, match="--hosts"):
        RunSpec(launcher="mpirun", hosts=bad)


def test_bad_launcher_tag_and_np_are_user_errors() -> None:
    with pytest.raises(BenchError, match="unknown launcher"):
        RunSpec(launcher="ssh")
    with pytest.raises(BenchError, match="key=value"):
        parse_tags(["novalue"])
    with pytest.raises(BenchError, match="--np"):
        RunSpec(np=0)


def test_spec_to_json_is_plain() -> None:
    doc = RunSpec(model="m", tags=(("k", "v"),), extra_args=("--a",)).to_json()
    assert doc["tags"] == {"k": "v"}
    assert doc["extra_args"] == ["--a"]
    assert doc["model"] == "m"
    assert doc["launcher"] == "local"


@pytest.mark.parametrize(("spec", "expected"), [
    # --hosts alone: its slots are every task, the chief and the ps take two of them (6 workers)
    (RunSpec(variable_update="distributed_ps", launcher="slurm", hosts="n1:4,n2:4"),
     ["srun", "--ntasks=8", "--label", "--kill-on-bad-exit=1", "--nodelist=n1,n2", "--ntasks-per-node=4", "t",
      "--variable-update", "distributed_ps"]),
    # --np counts the workers: 6 workers + chief + ps fill the same 8 slots
    (RunSpec(variable_update="distributed_ps", launcher="slurm", hosts="n1:4,n2:4", np=6),
     ["srun", "--ntasks=8", "--label", "--kill-on-bad-exit=1", "--nodelist=n1,n2", "--ntasks-per-node=4", "t",
      "--variable-update", "distributed_ps"]),
    # fewer tasks than slots: Slurm places them, no --ntasks-per-node that would contradict --ntasks
    (RunSpec(variable_update="multi_worker", launcher="slurm", hosts="a:2,b:2", np=3),
     ["srun", "--ntasks=3", "--label", "--kill-on-bad-exit=1", "--nodelist=a,b", "t",
      "--variable-update", "multi_worker"]),
])
def test_srun_tasks_agree_with_the_hosts_slots(spec: RunSpec, expected: list[str]) -> None:
    assert build_command(spec, trainer=("t",)) == expected
    script = build_sbatch_script(spec, run_dir="r", job_name="j", trainer=("t",))
    assert expected[1].replace("--", "#SBATCH --") in script  # the batch script asks for the same tasks


@pytest.mark.parametrize(("spec", "message"), [
    (RunSpec(variable_update="distributed_ps", launcher="slurm", hosts="n1:4,n2:4", np=8),
     "needs 10 tasks but --hosts n1:4,n2:4 has 8 slots"),
    (RunSpec(variable_update="distributed_ps", launcher="slurm", hosts="n1:2"), "3 slots, but --hosts n1:2 has 2"),
    (RunSpec(launcher="slurm", hosts="n1:4", np=5), "needs 5 tasks but --hosts n1:4 has 4 slots"),
])
def test_more_tasks_than_slots_is_a_user_error(spec: RunSpec, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        build_command(spec, trainer=("t",))


def test_distributed_ps_workers_from_slots_locally() -> None:
    """Locally --hosts localhost:4 gives 4 tasks: the workers launcher starts chief, ps and 2 workers."""
    argv = build_command(RunSpec(variable_update="distributed_ps", hosts="localhost:4"), "local", trainer=("t",))
    assert argv[argv.index("--np") + 1] == "2"
