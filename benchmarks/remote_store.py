"""Ingest into a store on object storage against the same ingest into a local store (run by `make bench`).

The simulated fleet's run directories (benchmarks/fleet_sim.py: 64 hosts x 3 runs, each an output.log, a
run.json and a telemetry.csv) are ingested by `bench ingest` into a new local store and into a new store
on a local S3-compatible server (moto in server mode, on 127.0.0.1, in a process of its own), interleaved,
REPEATS times each; a second ingest of one more night into each store shows the cost of an ingest into a
store that already holds data (it downloads what it needs to know what is new, once per machine). The
goal: the S3 ingest within 3x of the local one. ``--against DIR`` also times another version of bench into
S3 in the same rounds (``DIR/bench`` its checkout, its C scanner built in place, e.g. a ``git worktree``).
"""

from __future__ import annotations

import argparse
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
from moto_server import moto_server

BENCH = [sys.executable, "-m", "bench.runner"]
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))


def _timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([*BENCH, *args], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main() -> None:
    import boto3

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a folder whose bench/ is another checkout, timed into S3 as well")
    against = parser.parse_args().against
    kinds = ("local", "s3") + (("s3 against",) if against else ())

    with moto_server() as endpoint, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench",
               "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="bench",
                     aws_secret_access_key="bench", region_name="us-east-1").create_bucket(Bucket="bench")
        nights = [Path(tmp) / f"night{i}" for i in range(2)]
        for i, night in enumerate(nights):
            fleet_sim.generate(night, hosts=64, runs=3, faults=0, seed=i + 1)
        files = sum(1 for _ in nights[0].rglob("*") if _.is_file())
        times: dict[tuple[str, int], list[float]] = {}
        for r in range(REPEATS):
            for k, kind in enumerate(kinds):
                store = str(Path(tmp) / f"local-{r}") if kind == "local" else f"s3://bench/store-{r}-{k}"
                run_env = {**env, "BENCH_CACHE": str(Path(tmp) / f"cache-{r}-{k}")}
                if kind == "s3 against":
                    run_env["PYTHONPATH"] = str(Path(against).resolve())
                for i, night in enumerate(nights):
                    times.setdefault((kind, i), []).append(_timed(["ingest", str(night), "--store", store], run_env))
    print(f"\nbench ingest into S3 (moto on 127.0.0.1) against a local store: {platform.node()}, "
          f"{os.cpu_count()} CPUs, {files} files a night (64 hosts x 3 runs), median of {REPEATS}")
    for i, what in enumerate(("first night, new store", "second night, store holding the first")):
        local, s3 = statistics.median(times[("local", i)]), statistics.median(times[("s3", i)])
        print(f"  {what:40s} local {local:6.2f} s   s3 {s3:6.2f} s   ratio {s3 / local:4.2f}x (goal <= 3x: "
              f"{'met' if s3 / local <= 3 else 'NOT met'})")
        if against:
            old = statistics.median(times[("s3 against", i)])
            print(f"  {'':40s} s3 with {against}: {old:6.2f} s (this one {s3 / old:4.2f}x its time)")


if __name__ == "__main__":
    main()
