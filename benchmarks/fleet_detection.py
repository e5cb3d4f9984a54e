"""How small a fault `bench fleet` finds, and how fast (run by `make bench`).

1. Detection: simulated fleets (benchmarks/fleet_sim.py: 64 hosts x 8 GPUs x 3 runs, 8 faulty hosts, the four
   fault kinds in turn) at several noise levels (the SD of a healthy host's level) and fault sizes, BENCH_FLEETS
   seeds each (default 3: 24 faulty hosts per cell). Each fleet is generated, ingested and judged by `bench
   fleet --json` at its default threshold (3%). A cell's recall counts faulty hosts flagged with the right fact
   or GPU; false flags count healthy hosts flagged. The table ends with the smallest fault found at 95% recall
   or more with no false flag, per noise level.
2. A bad rollout: 19 of the 56 healthy hosts on a new driver 4% or 6% slower, beside the 8 faulty hosts: whether
   the group is found whole, with its driver, and the faulty hosts still explained.
3. Speed: `bench fleet` on one 64-host fleet (wall time of the command, median of 5), against the issue's goal
   of 1 s, beside `bench changes` on the same store as the baseline of a command that reads the same runs.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet_sim

BENCH = str(Path(sys.executable).parent / "bench")
NOISES = (0.005, 0.01, 0.02)
SIZES = (0.03, 0.04, 0.05, 0.06, 0.08, 0.10, 0.15)


def bench(*args: str) -> str:
    done = subprocess.run([BENCH, *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def cell(work: Path, noise: float, size: float, seeds: int) -> tuple[int, int, int, int]:
    """(faulty hosts, explained, found, false flags) over ``seeds`` fleets."""
    faulty = explained = found = false = 0
    for seed in range(1, seeds + 1):
        root = Path(tempfile.mkdtemp(dir=work))
        truth = fleet_sim.generate(root / "runs", noise=noise, fault_size=size, seed=seed)
        bench("ingest", str(root / "runs"), "--store", str(root / "store"))
        score = fleet_sim.score(json.loads(bench("fleet", "--store", str(root / "store"), "--json"))["outliers"], truth)
        faulty, explained = faulty + len(truth), explained + len(score["explained"])
        found, false = found + len(score["found"]), false + len(score["false"])
    return faulty, explained, found, false


def group_cell(work: Path, noise: float, size: float, seeds: int) -> tuple[int, int, int, int, int]:
    """A bad rollout: 19 of the 56 healthy hosts on a new driver ``size`` slower, beside the 8 faulty hosts (10%):
    (fleets, the group found whole with its driver and nothing more, faulty hosts, explained, false flags) over
    ``seeds`` fleets. A false flag is a healthy host flagged on its own, or a group of other hosts."""
    whole = faulty = explained = false = 0
    for seed in range(1, seeds + 1):
        root = Path(tempfile.mkdtemp(dir=work))
        truth = fleet_sim.generate(root / "runs", noise=noise, seed=seed, group=19, group_size=size)
        rollout = json.loads(fleet_sim.truth_path(root / "runs").read_text())["group"]
        bench("ingest", str(root / "runs"), "--store", str(root / "store"))
        found = json.loads(bench("fleet", "--store", str(root / "store"), "--json"))
        right = [g for g in found.get("groups", []) if g["hosts"] == rollout
                 and ["gpu_driver", fleet_sim.NEW_DRIVER] in g["facts"]]
        whole += len(right) == 1
        false += len(found.get("groups", [])) - len(right)
        score = fleet_sim.score(found["outliers"], truth)
        faulty, explained = faulty + len(truth), explained + len(score["explained"])
        false += len(score["false"])
    return seeds, whole, faulty, explained, false


def main() -> None:
    seeds = int(os.environ.get("BENCH_FLEETS", "3"))
    print(f"bench fleet on simulated fleets (64 hosts x 8 GPUs x 3 runs, 8 faulty, {seeds} seeds per cell; "
          f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()})")
    print(f"{'noise':>6} {'fault':>6} {'recall (right reason)':>22} {'flagged':>8} {'false flags':>12}")
    smallest: dict[float, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for noise in NOISES:
            smallest[noise] = None
            for size in SIZES:
                faulty, explained, found, false = cell(work, noise, size, seeds)
                recall = explained / faulty
                print(f"{noise:>6.1%} {size:>6.0%} {f'{explained}/{faulty} = {recall:.0%}':>22} {found:>8} {false:>12}")
                if smallest[noise] is None and recall >= 0.95 and false == 0:
                    smallest[noise] = size
        for noise, size in smallest.items():
            print(f"noise {noise:.1%}: smallest fault found at >= 95% recall with no false flag: "
                  + (f"{size:.0%}" if size is not None else f"none up to {SIZES[-1]:.0%}"))
        print(f"\na bad rollout: 19 of 64 hosts on a new driver, beside the 8 faulty hosts (10%); {seeds} fleets a cell")
        print(f"{'noise':>6} {'group':>6} {'group found whole':>18} {'faulty explained':>17} {'false flags':>12}")
        for noise in NOISES:
            for size in (0.04, 0.06):
                n, whole, faulty, explained, false = group_cell(work, noise, size, seeds)
                print(f"{noise:>6.1%} {size:>6.0%} {f'{whole}/{n}':>18} {f'{explained}/{faulty}':>17} {false:>12}")
        root = work / "speed"
        fleet_sim.generate(root / "runs", seed=1)
        bench("ingest", str(root / "runs"), "--store", str(root / "store"))
        times: dict[str, list[float]] = {"fleet": [], "changes": []}
        for _ in range(5):
            for command in times:
                t0 = time.perf_counter()
                bench(command, "--store", str(root / "store"), "--json")
                times[command].append(time.perf_counter() - t0)
        f, c = statistics.median(times["fleet"]), statistics.median(times["changes"])
        print(f"bench fleet on 64 hosts (192 runs): {f:.2f} s median of 5 (goal < 1 s: {'met' if f < 1 else 'NOT met'}); "
              f"bench changes on the same store: {c:.2f} s")


if __name__ == "__main__":
    main()
