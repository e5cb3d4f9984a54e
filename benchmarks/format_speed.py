"""``make bench``: each of today's formats ingested from a generated ~100 MB log, against tf_cnn_benchmarks'
per-MB time in the same run (the goal: within 2x of it).

For each format (tf_cnn, megatron, deepspeed, torchtitan, pytorch_imagenet, nccl_tests) a log of about
``BENCH_FORMAT_MB`` MB (default 100) is written once into the cache folder, in that program's line shape
with numbers that vary (``random.Random(42)``), then ``bench ingest`` of it into an empty store is timed in a
child process, ``BENCH_ROUNDS`` (default 3) rounds taking turns. It prints MB/s and the ratio of each
format's best seconds per MB to tf_cnn's, the runs and step rows stored with the runs' statuses and the
problem count (a generated log gives ok runs and no problem), and the machine.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from synth_logs import tf_cnn_lines

MB = float(os.environ.get("BENCH_FORMAT_MB", "100"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CACHE = Path(os.environ.get("BENCH_CACHE", tempfile.gettempdir())) / "dlbench-bench"
GOAL = 2.0


def megatron(rng: random.Random) -> Iterator[str]:
    yield "using world size: 64, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 8, " \
          "pipeline-model-parallel size: 1"
    for i in range(1, 10**9):
        ms = 5000 + rng.random() * 200
        yield (f" [2026-11-29 06:{i // 60 % 60:02d}:{i % 60:02d}] iteration {i * 10:8d}/ 10000000 | consumed samples: "
               f"{i * 10 * 1024:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): "
               f"{400 * 5000 / ms:.1f} | learning rate: {3e-4:.6E} | global batch size:  1024 | lm loss: "
               f"{2 + rng.random():.6E} | loss scale: 1.0 | grad norm: {rng.random():.3f} | number of skipped "
               f"iterations:   0 | number of nan iterations:   0 |")


def deepspeed(rng: random.Random) -> Iterator[str]:
    yield "[2026-11-29 06:00:00,000] [INFO] [launch.py:156:main] dist_world_size=64"
    avg = 2400.0
    for i in range(1, 10**9):
        cur = 2400 + rng.random() * 100
        avg = (avg * (i - 1) + cur) / i
        yield (f"[2026-11-29 06:{i // 60 % 60:02d}:{i % 60:02d},000] [INFO] [timer.py:264:stop] epoch=0/micro_step={i}/"
               f"global_step={i}, RunningAvgSamplesPerSec={avg!r}, CurrSamplesPerSec={cur!r}, MemAllocated=3.71GB, "
               f"MaxMemAllocated=39.0GB")


def torchtitan(rng: random.Random) -> Iterator[str]:
    yield "[rank0]:[titan] 2026-11-29 06:00:00,000 - root - INFO - Building device mesh with parallelism: pp=1, " \
          "dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1"
    for i in range(1, 10**9):
        tps = 10000 + rng.randrange(500)
        yield (f"[rank0]:[titan] 2026-11-29 06:{i // 60 % 60:02d}:{i % 60:02d},975 - root - INFO - step: {i:2d}  loss: "
               f"{5 + rng.random():8.5f}  grad_norm: {rng.random() * 30:7.4f}  memory: 169.10GiB(94.81%)  tps: {tps:,}  "
               f"tflops: {tps * 0.0843:.2f}  mfu: {tps * 0.00375:.2f}%")


def pytorch_imagenet(rng: random.Random) -> Iterator[str]:
    yield "=> creating model 'resnet50'"
    for i in range(1, 10**9):
        epoch, batch = divmod(i, 5005)
        t = 0.2 + rng.random() * 0.1
        yield (f"Epoch: [{epoch}][{batch:5d}/5005]\tTime {t:6.3f} ({t:6.3f})\tData {t / 10:6.3f} ({t / 10:6.3f})\tLoss "
               f"{6 + rng.random():.4e} ({6.5:.4e})\tAcc@1 {rng.random() * 10:6.2f} (  3.00)\tAcc@5 "
               f"{rng.random() * 30:6.2f} ( 10.00)")


def nccl_tests(rng: random.Random) -> Iterator[str]:
    for _ in range(10**9):
        yield "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 " \
              "agg iters: 1 validation: 1 graph: 0"
        yield "#"
        yield "# Using devices"
        yield from (f"#  Rank {r:2d} Group  0 Pid {1000 + r} on      node{r // 8} device {r % 8:2d} [0x1b] "
                    "NVIDIA H100 80GB HBM3" for r in range(16))
        yield "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   " \
              "algbw   busbw #wrong"
        for k in range(3, 35):
            size = 2**k
            us = 20 + size / 4e5 * (1 + rng.random() / 10)
            alg = size / us / 1e3
            yield (f"{size:12d}  {size // 4:12d}     float     sum      -1  {us:7.1f}  {alg:6.2f}  {alg * 1.875:6.2f}  "
                   f"    0  {us:7.1f}  {alg:6.2f}  {alg * 1.875:6.2f}      0")
        yield "# Out of bounds values : 0 OK"
        yield "# Avg bus bandwidth    : 150.12"
        yield "#"


def tf_cnn(rng: random.Random) -> Iterator[str]:
    """One whole run (its total line included) of about MB megabytes."""
    kw = {"batch_per_device": 256, "num_gpus": 8, "display_every": 1, "jitter_every": 100_000}
    per_line = sum(len(line) + 1 for line in tf_cnn_lines(1000, **kw)) / 1000  # type: ignore[arg-type]
    yield from tf_cnn_lines(int(MB * 1e6 / per_line), **kw)  # type: ignore[arg-type]


FORMATS: dict[str, Callable[[random.Random], Iterator[str]]] = {
    "tf_cnn": tf_cnn, "megatron": megatron, "deepspeed": deepspeed, "torchtitan": torchtitan,
    "pytorch_imagenet": pytorch_imagenet, "nccl_tests": nccl_tests}


def generated(name: str) -> Path:
    """The ~MB log of format ``name``, written once into the cache folder (complete lines only)."""
    path = CACHE / f"{name}_{MB:g}MB.log"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp, limit, written = path.with_suffix(".tmp"), MB * 1e6, 0
        with open(tmp, "w") as fh:
            for line in FORMATS[name](random.Random(42)):
                fh.write(line + "\n")
                written += len(line) + 1
                if name != "tf_cnn" and written >= limit and (name != "nccl_tests" or line.startswith("# Avg bus")):
                    break
        tmp.rename(path)
    return path


def timed_ingest(path: Path, store: Path) -> tuple[float, dict]:
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", str(path), "--store", str(store), "--json"],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(proc.stdout)


def main() -> None:
    print(f"machine: {platform.node()}  {os.cpu_count()} cores  {platform.processor() or platform.machine()}  "
          f"Python {platform.python_version()}")
    paths = {name: generated(name) for name in FORMATS}
    best: dict[str, float] = {}
    summaries: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ROUNDS):
            for name, path in paths.items():
                seconds, summaries[name] = timed_ingest(path, Path(tmp) / name)
                best[name] = min(best.get(name, seconds), seconds)
    base = best["tf_cnn"] / (paths["tf_cnn"].stat().st_size / 1e6)
    print(f"{'format':18} {'MB':>6} {'best s':>7} {'MB/s':>6} {'s/MB vs tf_cnn':>15} {'runs':>6} {'steps':>10}  verdict "
          f"(statuses; problems)")
    for name, path in paths.items():
        mb = path.stat().st_size / 1e6
        ratio = best[name] / mb / base
        s = summaries[name]
        verdict = "baseline" if name == "tf_cnn" else ("goal met" if ratio <= GOAL else f"over the {GOAL:g}x goal")
        statuses = ",".join(f"{k} {v}" for k, v in sorted(s["runs_by_status"].items()))
        print(f"{name:18} {mb:6.1f} {best[name]:7.2f} {mb / best[name]:6.1f} {ratio:14.2f}x {s['runs_added']:>6} "
              f"{s['steps_added']:>10}  {verdict} ({statuses}; {s['problems']} problems)")


if __name__ == "__main__":
    main()
