"""What the scheduler adds to a run (the goal: at most 5 s here): the same 2-rank Horovod training (the trivial
model, CPU) launched locally through Open MPI's mpirun, through srun (which makes its own allocation), and as
an sbatch job waited for (`--sbatch --wait`), each the wall time of the whole `bench run` (start-up, node facts,
training, ingest), in interleaved rounds so that a drifting machine weighs on every way alike.

Run by `make bench` (python benchmarks/scheduler.py; BENCH_ROUNDS rounds, default 3). It needs the one-machine
cluster of tests/cluster/slurm-up.sh and Horovod built with MPI, and says so and exits 0 when they are absent.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = str(Path(sys.executable).parent / "bench")
TRAINING = ["--np", "2", "--variable-update", "horovod", "--model", "trivial", "--device", "cpu", "--batch-size", "4",
            "--num-batches", "20", "--num-warmup-batches", "2", "--data-format", "NHWC", "--telemetry-interval", "0"]
WAYS = {"mpirun (local)": ["--launcher", "mpirun"], "srun": ["--launcher", "slurm"],
        "sbatch --wait": ["--launcher", "slurm", "--sbatch", "--wait"]}


def missing() -> str | None:
    if shutil.which("sinfo") is None or subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        return "no Slurm cluster answers (tests/cluster/slurm-up.sh starts one, as root)"
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return "Horovod is not installed (make test installs it)"
    return None if hvd.mpi_built() else "Horovod was built without MPI"


def once(args: list[str], work: Path) -> float:
    out = Path(tempfile.mkdtemp(dir=work))
    t0 = time.perf_counter()
    done = subprocess.run([BENCH, "run", *args, *TRAINING, "--out", str(out / "logs"), "--store", str(out / "store")],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"bench run {' '.join(args)} failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall


def main(rounds: int) -> None:
    print("\n== scheduler overhead: one 2-rank Horovod training (trivial, CPU, 20 steps), wall time of `bench run`")
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}; load {os.getloadavg()[0]:.2f}")
    why = missing()
    if why is not None:
        print(f"  not measured: {why}")
        return
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        names = list(WAYS)
        for r in range(rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                times[name].append(once(WAYS[name], Path(tmp)))
    base = statistics.median(times["mpirun (local)"])
    for name, values in times.items():
        med = statistics.median(values)
        extra = "" if name.startswith("mpirun") else f"  ({med - base:+.2f} s against mpirun; goal <= 5 s: {'met' if med - base <= 5 else 'NOT met'})"
        print(f"  {name:16} median {med:6.2f} s  [{', '.join(f'{v:.2f}' for v in values)}]{extra}")


if __name__ == "__main__":
    main(int(os.environ.get("BENCH_ROUNDS", "3")))
