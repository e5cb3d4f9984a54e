"""`bench run` of today's trainers: the bundled tiny LLM trainer (runner/examples/llm_train.py, torchtitan's step
lines) on the CPU with two Gloo ranks, under torchrun, mpirun and Slurm's srun (the one-machine cluster of
`make test`). Each run must end ok with the job's tokens/s, which the test computes from the log's own ``tps``
lines: per-device tokens/s, the first logged step left out, each line weighted by the steps it covers, times
the two ranks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from logtools import only_run_dir, slurm_cluster_reason, stored_runs

REPO = Path(__file__).resolve().parents[2]
BENCH = str(Path(sys.executable).parent / "bench")
CLUSTER = slurm_cluster_reason()
TRAINER = [sys.executable, str(REPO / "runner" / "examples" / "llm_train.py"), "--steps", "10"]

try:
    import torch  # noqa: F401

    TORCH = None
except ImportError as e:
    TORCH = f"PyTorch is not installed ({e}): make test installs it"
needs_torch = pytest.mark.skipif(TORCH is not None, reason=TORCH or "")


def tokens_per_second(log: str, ranks: int) -> float:
    """The job's tokens/s from rank 0's ``step: N ... tps: T`` lines (a launcher's rank tag allowed)."""
    steps = [(int(s), float(t.replace(",", ""))) for s, t in re.findall(r"step:\s*(\d+)\s.*\btps: ([\d,]+)", log)]
    assert len(steps) >= 3, log
    covered = [(b[0] - a[0], b[1]) for a, b in pairwise(steps)]
    return sum(n for n, _ in covered) / sum(n / tps for n, tps in covered) * ranks


def check(out: Path, store: Path, done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    log = (only_run_dir(out) / "output.log").read_text()
    (row,) = stored_runs(store)
    assert (row["status"], row["throughput_unit"], row["num_devices"], row["model"]) == (
        "ok", "tokens/sec", 2, "tiny-gpt")
    assert row["throughput"] == pytest.approx(tokens_per_second(log, 2))
    assert (row["global_batch_size"], row["batch_size_per_device"]) == (16, 8)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@needs_torch
def test_torchrun_with_two_ranks(tmp_path: Path) -> None:
    out, store = tmp_path / "logs", tmp_path / "st"
    torchrun = str(Path(sys.executable).parent / "torchrun")
    check(out, store, bench("run", "--out", str(out), "--store", str(store), "--telemetry-interval", "0", "--",
                            torchrun, "--nproc-per-node", "2", *TRAINER[1:]))


@needs_torch
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_mpirun_with_two_ranks(tmp_path: Path) -> None:
    out, store = tmp_path / "logs", tmp_path / "st"
    check(out, store, bench("run", "--launcher", "mpirun", "--np", "2", "--out", str(out), "--store", str(store),
                            "--telemetry-interval", "0", "--", *TRAINER))


@needs_torch
@pytest.mark.skipif(CLUSTER is not None, reason=CLUSTER or "")
def test_srun_with_two_ranks(tmp_path: Path) -> None:
    out, store = tmp_path / "logs", tmp_path / "st"
    done = subprocess.run(["salloc", "-n", "2", BENCH, "run", "--launcher", "slurm", "--np", "2", "--out", str(out),
                           "--store", str(store), "--telemetry-interval", "0", "--", *TRAINER],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    check(out, store, done)
