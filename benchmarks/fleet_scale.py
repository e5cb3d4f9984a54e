"""`bench fleet` and `bench changes` on a fleet's year, by simulation (run by `make bench`).

A synthetic store of HOSTS hosts x NIGHTS nights x 4 workloads (default 1,000 x 365 x 4 = 1.46 M runs) is
written straight into the store's tables through its writer (bench.sql.store.StoreWriter: the same files,
Delta commits and commits row an ingest makes; parsing 1.46 M logs would take hours here and measure the
parsers, which `make bench` measures elsewhere). Each run row carries what a `bench run` directory gives:
host, GPU model, driver, clocks and power limit, every GPU's settings and its per-GPU telemetry summaries in
``details``. Host levels differ by 1%, runs by 0.3%; 1 host in 100 is 10% slower with a low application
clock from night 200 on.

Measured, each the wall time of the command as a user runs it (start-up included), median of 3:
`bench fleet` for one night (HOSTS x 4 runs), `bench changes` for one host's series (4 x NIGHTS runs), `bench
fleet` on the whole store (its default: each workload's last 7 days) and with `--days 0` (every run), and a
whole-store query (`SELECT count(*) FROM runs`) as the baseline, each with its peak memory; and the store's size
on disk. The goals: under 10 s for each command, 60 s and 2 GB for `--days 0`.

    python benchmarks/fleet_scale.py [--hosts 1000] [--nights 365] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

WORKLOADS = (("resnet50", 256, "fp16", 2950.0), ("resnet50", 128, "fp32", 1010.0), ("vgg16", 128, "fp16", 1620.0),
             ("inception3", 128, "fp16", 1980.0))
FIRST = datetime(2025, 11, 1, 2, 0, tzinfo=UTC)


def _gpus_json(clock: float) -> str:
    return json.dumps([{"name": "NVIDIA H100 80GB HBM3", "driver_version": "550.90.07", "enforced_power_limit_w": 700.0,
                        "applications_clock_sm_mhz": clock, "ecc_mode": "Enabled", "vbios_version": "96.00.99.00.01"}
                       for _ in range(8)], sort_keys=True)


def _load_json(rng: random.Random, clock: float) -> str:
    return json.dumps([{"gpu": i, "samples": 118, "sm_clock_mean_mhz": round(clock - abs(rng.gauss(0, 6)), 1),
                        "sm_clock_min_mhz": clock - 30, "temperature_max_c": round(rng.gauss(68, 3)),
                        "temperature_mean_c": 64.0, "power_mean_w": round(rng.gauss(610, 15), 1), "power_limit_w": 700.0,
                        "at_power_limit_share": 0.0} for i in range(8)], sort_keys=True)


def build(root: Path, hosts: int, nights: int, nights_per_file: int = 30) -> float:
    """Write the synthetic store at ``root``; returns the seconds it took."""
    import pyarrow as pa

    from bench.sql.schema import RUNS
    from bench.sql.store import StoreWriter

    t0 = time.perf_counter()
    rng = random.Random(7)
    level = {h: math.exp(rng.gauss(0, 0.01)) for h in range(hosts)}
    slow = set(range(0, hosts, 100))
    healthy_gpus, slow_gpus = _gpus_json(1980.0), _gpus_json(1410.0)
    loads = {c: [_load_json(rng, c) for _ in range(16)] for c in (1980.0, 1410.0)}
    with StoreWriter(root) as writer:
        for first in range(0, nights, nights_per_file):
            cols: dict[str, list] = {name: [] for name in RUNS.names}
            for night in range(first, min(first + nights_per_file, nights)):
                for h in range(hosts):
                    faulty = h in slow and night >= 200
                    clock = 1410.0 if faulty else 1980.0
                    for w, (model, batch, precision, rate) in enumerate(WORKLOADS):
                        value = rate * level[h] * math.exp(rng.gauss(0, 0.003)) / (1.1 if faulty else 1.0)
                        at = FIRST + timedelta(days=night, minutes=w * 10, seconds=h % 600)
                        sha = f"{night:04d}{h:06d}{w:02d}".ljust(64, "0")
                        row = {"run_id": f"{sha[:16]}-0", "source": f"/fleet/node{h:04d}/{night:03d}-{model}-{w}/output.log",
                               "source_sha256": sha, "run_index": 0, "format": "tf_cnn", "framework": "tensorflow",
                               "framework_version": "2.15.1", "model": model, "dataset": "imagenet", "data": "synthetic",
                               "mode": "training", "precision": precision, "data_format": "NCHW",
                               "variable_update": "replicated", "all_reduce": "nccl", "batch_size_per_device": batch,
                               "global_batch_size": batch * 8, "num_gpus": 8, "num_nodes": 1,
                               "gpu_model": "NVIDIA H100 80GB HBM3", "num_devices": 8, "device_type": "gpu",
                               "device_model": "NVIDIA H100 80GB HBM3", "host": f"node{h:04d}", "started_at": at,
                               "ended_at": at + timedelta(seconds=120), "wall_time_s": 120.0, "num_steps": 100,
                               "images_per_sec": value, "status": "ok", "tags": [],
                               "details": [("run_id", f"{at:%Y%m%dT%H%M%SZ}-{model}-{h:04d}-{w}"),
                                           ("gpu_driver", "550.90.07"), ("kernel", "6.8.0-45-generic"),
                                           ("gpu_power_limit_w", "700.0"),
                                           ("gpu_clocks_applications_sm_mhz", str(clock)),
                                           ("gpus", slow_gpus if faulty else healthy_gpus),
                                           ("gpu_load", loads[clock][(h + night) % 16])],
                               "ingested_at": at + timedelta(seconds=130)}
                        for name in RUNS.names:
                            cols[name].append(row.get(name))
            writer.add_rows("runs", pa.Table.from_pydict(cols, schema=RUNS))
        writer.publish("ingest")
    return time.perf_counter() - t0


def timed(*args: str) -> tuple[float, float]:
    """``bench ARGS`` as a user runs it: its wall time (s) and its peak resident memory (MB): the high-water
    mark of its own address space (/proc/PID/status VmHWM, read every 20 ms; wait4's ru_maxrss would carry
    this builder's own memory, inherited across fork and exec)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "bench.runner", *args], stdout=subprocess.DEVNULL, stderr=err)
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, _hwm_mb(proc.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - t0
        if proc.returncode not in (0, 1):
            err.seek(0)
            raise SystemExit(f"bench {' '.join(args)}: exit {proc.returncode}\n{err.read()[-2000:].decode()}")
    return seconds, peak


def _hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def size_mb(root: Path) -> float:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--nights", type=int, default=365)
    p.add_argument("--keep", type=Path, help="build the store here and keep it")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = a.keep or Path(tmp) / "store"
        if not (root / "STORE.json").exists():
            built = build(root, a.hosts, a.nights)
            print(f"built {a.hosts} hosts x {a.nights} nights x {len(WORKLOADS)} workloads = "
                  f"{a.hosts * a.nights * len(WORKLOADS):,} runs in {built:.0f} s")
        night = FIRST + timedelta(days=a.nights - 1)
        where = f"started_at >= '{night:%Y-%m-%d}' AND started_at < '{night + timedelta(days=1):%Y-%m-%d}'"
        cases = {"bench sql 'SELECT count(*) FROM runs' (baseline)": (["sql", "SELECT count(*) FROM runs"], None),
                 f"bench fleet, one night ({a.hosts * len(WORKLOADS):,} runs)": (["fleet", "--where", where, "--json"], 10),
                 f"bench changes, one host ({a.nights * len(WORKLOADS):,} runs)": (
                     ["changes", "--where", "host = 'node0000'", "--json"], 10),
                 "bench fleet, the whole store (each workload's last 7 days, the default)": (["fleet", "--json"], 10),
                 f"bench fleet --days 0, the whole store ({a.hosts * a.nights * len(WORKLOADS):,} runs)": (
                     ["fleet", "--json", "--days", "0"], 60)}
        measure(root, cases)


def measure(root: Path, cases: dict[str, tuple[list[str], float | None]]) -> None:
    """Print the machine and the store's size, then each case's bench command on ``root`` (args, goal in s or
    None for a baseline): the median of 3 wall times, start-up included, and whether it met its goal."""
    print(f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; store {size_mb(root):.0f} MB "
          "on disk")
    for name, (args, goal) in cases.items():
        runs = [timed(*args, "--store", str(root)) for _ in range(3)]
        times = [t for t, _ in runs]
        mark = "" if goal is None else f" (goal < {goal:g} s: {'met' if statistics.median(times) < goal else 'NOT met'})"
        print(f"{name}: {statistics.median(times):.2f} s median of 3 {[round(t, 2) for t in times]}{mark}; "
              f"peak memory {max(m for _, m in runs):.0f} MB")

if __name__ == "__main__":
    main()
