"""``make bench``: the store's Parquet write options (``bench.sql.schema.write_options``) against pyarrow's
defaults and against zstd for every column, on one million steps rows like a long tf_cnn_benchmarks log
prints them (whole-number steps, rates with 2 decimals, losses with 3, accuracies with 4, stamps).

Each way writes the same table ``BENCH_ROUNDS`` times (default 5), taking turns; prints the median seconds
and the file size of each, on this machine, in this run. Run: ``python benchmarks/parquet_options.py``.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.sql.schema import STEPS, write_options

ROWS = 1_000_000


def steps_table(rows: int = ROWS, seed: int = 7) -> pa.Table:
    """``rows`` steps of 100-step runs: rates, losses and accuracies rounded as logs print them."""
    rng = np.random.default_rng(seed)
    step = np.arange(rows, dtype=np.int64) % 100 + 1
    rate = np.round(rng.normal(1500.0, 40.0, rows), 2)
    columns: dict[str, Any] = {
        "run_id": pa.array([f"{i // 100:016x}-0" for i in range(rows)]),
        "run_index": np.zeros(rows, dtype=np.int64),
        "rank": np.zeros(rows, dtype=np.int64),
        "step": step,
        "images_per_sec": rate,
        "interval_images_per_sec": np.round(rate * rng.normal(1.0, 0.01, rows), 2),
        "loss": np.round(rng.uniform(5.0, 8.0, rows), 3),
        "top1_accuracy": np.round(rng.uniform(0.0, 1.0, rows), 4),
        "top5_accuracy": np.round(rng.uniform(0.0, 1.0, rows), 4),
        "timestamp": 1.7e9 + np.arange(rows) * 0.25,
        "line_no": np.arange(rows, dtype=np.int64) * 2 + 40,
    }
    fields = [f for f in STEPS if f.name in columns]
    return pa.table({f.name: pa.array(columns[f.name], type=f.type) for f in fields})


def main() -> None:
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    table = steps_table()
    ways: dict[str, dict[str, Any]] = {
        "pyarrow defaults": {},
        "zstd, every column": {"compression": "zstd"},
        "bench (write_options)": write_options(table.schema),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = list(ways)
            for name in order[r % len(order):] + order[: r % len(order)]:
                path = Path(tmp) / f"{len(times[name])}-{name.split()[0]}.parquet"
                t0 = time.perf_counter()
                pq.write_table(table, path, **ways[name])
                times[name].append(time.perf_counter() - t0)
                sizes[name] = path.stat().st_size
                path.unlink()
    print(f"Parquet write options, {table.num_rows:,} steps rows, median of {rounds} ({platform.node()}, "
          f"{os.cpu_count()} CPUs, pyarrow {pa.__version__})")
    base = statistics.median(times["pyarrow defaults"])
    for name in ways:
        t = statistics.median(times[name])
        print(f"  {name:24s} {t:6.3f} s ({t / base:4.2f}x the defaults)  {sizes[name] / 1e6:6.1f} MB")


if __name__ == "__main__":
    main()
