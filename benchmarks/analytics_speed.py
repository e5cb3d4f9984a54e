"""``make bench`` (analytics half): a generated store of 1 million runs and 50 million steps, and the
time each analytics query takes on it, next to the same speedup table computed the way DLBS does it
(a JSON list of runs loaded in Python and grouped with pandas), measured in the same run.

The store is written straight to Parquet in the store layout (ingesting a million logs would measure
the ingest, not the analytics). Values come from numpy's Generator(PCG64(42)), so runs are reproducible.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.analytics.compare import compare
from bench.analytics.report.build import Options, make_report
from bench.analytics.scaling_laws import fit
from bench.sql.read import connect
from bench.sql.schema import METADATA, TABLES
from bench.sql.store import StoreWriter

N_RUNS = 1_000_000
STEPS_PER_RUN = 50
MODELS = ["resnet50", "inception3", "vgg16", "resnet152", "alexnet"]
GPUS = ["Tesla P100-SXM2-16GB", "Tesla V100-SXM2-16GB", "Tesla K80", "A100-SXM4-40GB"]
GPU_SPEED = [1.0, 1.6, 0.23, 2.6]
MODEL_SPEED = [220.0, 140.0, 130.0, 90.0, 2000.0]
GPU_COUNTS = [1, 2, 4, 8]
BATCHES = [32, 64, 128]
DATA = ["synthetic", "real"]
UPDATES = ["parameter_server", "replicated"]


def make_store(root: Path, n_runs: int = N_RUNS, steps_per_run: int = STEPS_PER_RUN) -> None:
    """Write a store of ``n_runs`` runs (about 1% failed, with NULL metrics) and their steps."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.Generator(np.random.PCG64(42))
    model, gpu = rng.integers(0, len(MODELS), n_runs), rng.integers(0, len(GPUS), n_runs)
    gpus_i, batch_i = rng.integers(0, len(GPU_COUNTS), n_runs), rng.integers(0, len(BATCHES), n_runs)
    data_i, upd_i = rng.integers(0, 2, n_runs), rng.integers(0, 2, n_runs)
    n_gpus = np.array(GPU_COUNTS)[gpus_i]
    per_gpu = np.array(MODEL_SPEED)[model] * np.array(GPU_SPEED)[gpu] * (1 - 0.02 * data_i)
    rate = per_gpu * n_gpus * (0.97 ** np.log2(n_gpus)) * rng.normal(1, 0.01, n_runs)
    ok = rng.random(n_runs) > 0.01
    ids = np.char.add("gen-", np.arange(n_runs).astype(str))
    cols: dict[str, Any] = {
        "run_id": ids, "source": np.char.add("generated/", ids), "source_sha256": ids, "run_index": np.zeros(n_runs, np.int32),
        "format": np.full(n_runs, "tf_cnn"), "framework": np.full(n_runs, "tensorflow"),
        "framework_version": np.full(n_runs, "1.15"), "model": np.array(MODELS)[model], "dataset": np.full(n_runs, "imagenet"),
        "data": np.array(DATA)[data_i], "mode": np.full(n_runs, "train"), "precision": np.full(n_runs, "fp32"),
        "data_format": np.full(n_runs, "NCHW"), "variable_update": np.array(UPDATES)[upd_i],
        "batch_size_per_device": np.array(BATCHES)[batch_i], "global_batch_size": np.array(BATCHES)[batch_i] * n_gpus,
        "num_gpus": n_gpus, "num_nodes": np.ones(n_runs, np.int64), "gpu_model": np.array(GPUS)[gpu],
        "num_devices": n_gpus, "device_type": np.full(n_runs, "gpu"), "device_model": np.array(GPUS)[gpu],
        "status": np.where(ok, "ok", "failed"), "num_steps": np.full(n_runs, 100),
    }
    arrays = {k: pa.array(v) for k, v in cols.items()}
    arrays["images_per_sec"] = pa.array(rate, mask=~ok)
    arrays["wall_time_s"] = pa.array(100 * np.array(BATCHES)[batch_i] * n_gpus / rate, mask=~ok)
    runs = pa.table({f.name: arrays[f.name].cast(f.type) if f.name in arrays else pa.nulls(n_runs, f.type)
                     for f in TABLES["runs"]}, schema=TABLES["runs"])
    with StoreWriter(root) as writer:  # committed as an ingest commits its files (bench.sql.store)
        scratch = writer.scratch()
        pq.write_table(runs.replace_schema_metadata(METADATA), scratch / "runs-generated.parquet")
        writer.add("runs", [scratch / "runs-generated.parquet"])
        writer.add("steps", _write_steps(scratch, ids, rate, steps_per_run, rng))
        writer.publish("generated")


def _write_steps(batch_dir: Path, ids: Any, rate: Any, per_run: int, rng: Any) -> list[Path]:
    """Steps in parts of 100,000 runs: per-interval rates around each run's rate, with a warm-up ramp."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = TABLES["steps"]
    ramp = np.minimum(1.0, 0.6 + 0.1 * np.arange(per_run))  # the first intervals are slower
    paths = []
    for part, start in enumerate(range(0, len(ids), 100_000)):
        chunk = slice(start, min(start + 100_000, len(ids)))
        n = len(ids[chunk])
        interval = (np.nan_to_num(rate[chunk])[:, None] * ramp[None, :] * rng.normal(1, 0.01, (n, per_run))).ravel()
        steps = np.tile(np.arange(1, per_run + 1) * 10, n)
        run_id = pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(n, dtype=np.int32), per_run)),
                                                pa.array(ids[chunk]))
        cols = {"run_id": run_id, "step": pa.array(steps), "images_per_sec": pa.array(interval),
                "interval_images_per_sec": pa.array(interval)}
        total = n * per_run
        table = pa.table({f.name: cols.get(f.name, pa.nulls(total, f.type)) for f in schema}, schema=schema)
        paths.append(batch_dir / f"steps-generated-{part:05d}.parquet")
        pq.write_table(table.replace_schema_metadata(METADATA), paths[-1])
    return paths


def _timed(label: str, fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    secs = time.perf_counter() - t0
    print(f"  {label:<48s} {secs:7.2f} s")
    return secs


def dlbs_style_speedup(runs_json: Path) -> Any:
    """Speedup per configuration the way DLBS builds it: a JSON list of run dicts loaded in Python,
    then pandas groupby (mean per GPU count, divided by the first column)."""
    import pandas as pd

    runs = json.loads(runs_json.read_text())
    df = pd.DataFrame(runs)
    df = df[df["status"] == "ok"]
    keys = ["model", "gpu_model", "data", "batch_size_per_device", "variable_update"]
    table = df.groupby([*keys, "num_gpus"])["images_per_sec"].mean().unstack("num_gpus")
    return table.div(table.iloc[:, 0], axis=0)


def main() -> None:

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_CACHE")) as tmp:
        root = Path(tmp) / "store"
        print(f"\n== analytics on a generated store of {N_RUNS:,} runs and {N_RUNS * STEPS_PER_RUN:,} steps")
        _timed("generate the store (not a goal)", lambda: make_store(root))
        con = connect(root)
        times = {}
        for view in ("configs", "scaling"):
            times[view] = _timed(f"SELECT * FROM {view}", _query(con, f"SELECT * FROM {view}"))
        _optional(times, "compare --factor device_model", lambda: _compare(con))
        _optional(times, "fit", lambda: _fit(con))
        runs_json = Path(tmp) / "runs.json"
        con.execute("SELECT model, gpu_model, data, batch_size_per_device, variable_update, num_gpus, status, "
                    "images_per_sec FROM runs").df().to_json(runs_json, orient="records")
        dlbs = _timed("DLBS-style speedup (JSON list + pandas)", lambda: dlbs_style_speedup(runs_json))
        print(f"  DLBS-style / bench scaling: {dlbs / times['scaling']:.1f}x")
        slow = [k for k, v in times.items() if v > 2]
        _report_timing(Path(tmp))
        print(f"  goal < 2 s each: {'met' if not slow else 'NOT met for ' + ', '.join(slow)}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS: {peak:.0f} MB (goal < 4096 MB: {'met' if peak < 4096 else 'NOT met'})")


REPORT_RUNS = 10_000
REPORT_GOAL_S = 30.0


def _report_timing(tmp: Path) -> None:
    """``bench report`` (every table, figures once per family) on a store of 10,000 runs."""

    root = tmp / "store-10k"
    make_store(root, REPORT_RUNS)
    secs = _timed(f"bench report on {REPORT_RUNS:,} runs", lambda: make_report(root, tmp / "report", Options()))
    print(f"  goal < {REPORT_GOAL_S:.0f} s: {'met' if secs < REPORT_GOAL_S else 'NOT met'}")


def _query(con: Any, sql: str) -> Callable[[], Any]:
    return lambda: con.sql(sql).to_arrow_table()


def _optional(times: dict[str, float], label: str, fn: Callable[[], Any]) -> None:
    try:
        times[label] = _timed(label, fn)
    except ImportError as e:
        print(f"  {label:<48s} not available ({e})")


def _compare(con: Any) -> Any:

    return compare(con, "device_model", "P100", "K80")


def _fit(con: Any) -> Any:

    return fit(con)


if __name__ == "__main__":
    main()
