"""Arrow schemas of the store's tables, and conversion of records to Arrow.

Table grain:
- runs: one row per run (``run_id`` = first 16 hex digits of the source's SHA-256, '-', run index);
- steps: one row per printed step or interval, per rank;
- telemetry: one row per sample per GPU;
- problems: one row per problem found in a source;
- sources: one row per distinct source file content (SHA-256) ever ingested.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from bench.ingest.records import _INT_NULL, _NULL_BITS, SCHEMA_VERSION, STEP_COLUMNS, Run, TelemetrySample

TAGS = pa.map_(pa.string(), pa.string())
TS = pa.timestamp("us", tz="UTC")

_RUN_TYPES: dict[str, pa.DataType] = {
    "run_id": pa.string(),
    "source": pa.string(),
    "source_sha256": pa.string(),
    "run_index": pa.int32(),
    "format": pa.string(),
    "framework": pa.string(),
    "framework_version": pa.string(),
    "model": pa.string(),
    "dataset": pa.string(),
    "data": pa.string(),
    "mode": pa.string(),
    "precision": pa.string(),
    "data_format": pa.string(),
    "variable_update": pa.string(),
    "all_reduce": pa.string(),
    "batch_size_per_device": pa.int64(),
    "global_batch_size": pa.int64(),
    "num_gpus": pa.int64(),
    "num_nodes": pa.int64(),
    "num_ranks": pa.int64(),
    "gpu_model": pa.string(),
    "host": pa.string(),
    "started_at": TS,
    "ended_at": TS,
    "wall_time_s": pa.float64(),
    "num_steps": pa.int64(),
    "warmup_steps": pa.int64(),
    "images_per_sec": pa.float64(),
    "images_per_sec_mean": pa.float64(),
    "images_per_sec_stderr": pa.float64(),
    "images_per_sec_jitter": pa.float64(),
    "images_per_sec_ranks": pa.list_(pa.float64()),
    "forward_ms": pa.float64(),
    "backward_ms": pa.float64(),
    "forward_backward_ms": pa.float64(),
    "time_to_train_s": pa.float64(),
    "status": pa.string(),
    "status_detail": pa.string(),
    "first_line": pa.int64(),
    "last_line": pa.int64(),
    "tags": TAGS,
    "ingested_at": TS,
}
RUNS = pa.schema(list(_RUN_TYPES.items()))

_STEP_ARROW = {"i": pa.int64(), "d": pa.float64(), "m": pa.map_(pa.string(), pa.float64())}
STEPS = pa.schema(
    [("run_id", pa.string())]
    + [(name, _STEP_ARROW[kind]) for name, kind in STEP_COLUMNS.items() if name != "run_index"]
)

TELEMETRY = pa.schema(
    [
        ("source", pa.string()),
        ("source_sha256", pa.string()),
        ("run_id", pa.string()),
        ("sample_index", pa.int64()),
        ("timestamp", TS),
        ("elapsed_s", pa.float64()),
        ("gpu_index", pa.int64()),
        ("images_per_sec", pa.float64()),
        ("temperature_c", pa.float64()),
        ("utilization_pct", pa.float64()),
        ("memory_used_mib", pa.float64()),
        ("power_w", pa.float64()),
        ("sm_clock_mhz", pa.float64()),
        ("tags", TAGS),
    ]
)

PROBLEMS = pa.schema(
    [
        ("source", pa.string()),
        ("source_sha256", pa.string()),
        ("format", pa.string()),
        ("kind", pa.string()),
        ("line_no", pa.int64()),
        ("text", pa.string()),
        ("message", pa.string()),
        ("ingested_at", TS),
    ]
)

SOURCES = pa.schema(
    [
        ("source", pa.string()),
        ("source_sha256", pa.string()),
        ("size_bytes", pa.int64()),
        ("archive", pa.string()),  # the archive path for a member, else NULL
        ("member", pa.string()),  # the member path inside the archive, else NULL
        ("resolved_path", pa.string()),  # absolute path of the file or archive, for --rebuild
        ("format", pa.string()),  # NULL when not parsed (binary, empty, unrecognized, unreadable)
        ("forced_format", pa.bool_()),
        ("path_patterns", pa.list_(pa.string())),
        ("n_runs", pa.int64()),
        ("n_steps", pa.int64()),
        ("n_problems", pa.int64()),
        ("ingested_at", TS),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "steps": STEPS,
    "telemetry": TELEMETRY,
    "problems": PROBLEMS,
    "sources": SOURCES,
}

METADATA = {b"bench.schema_version": str(SCHEMA_VERSION).encode()}


def _ts(x: float | None) -> int | None:
    return None if x is None else round(x * 1_000_000)


def run_row(run: Run, *, source: str, sha: str, ingested_at: float) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(run, name) for name in Run.__dataclass_fields__}
    row["run_id"] = run_id(sha, run.run_index)
    row["source"], row["source_sha256"] = source, sha
    row["started_at"], row["ended_at"] = _ts(run.started_at), _ts(run.ended_at)
    row["ingested_at"] = _ts(ingested_at)
    row["tags"] = list(run.tags.items())
    if run.images_per_sec_ranks is not None:
        row["images_per_sec_ranks"] = list(run.images_per_sec_ranks)
    return row


def run_id(sha: str, run_index: int) -> str:
    return f"{sha[:16]}-{run_index}"


def telemetry_row(t: TelemetrySample, *, source: str, sha: str, tags: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(t, name) for name in TelemetrySample.__dataclass_fields__}
    row.pop("run_index")
    row["run_id"] = None if t.run_index is None else run_id(sha, t.run_index)
    row["timestamp"] = _ts(t.timestamp)
    row["source"], row["source_sha256"], row["tags"] = source, sha, list(tags.items())
    return row


def steps_table(parts: list[tuple[dict[str, Any], str]]) -> pa.Table:
    """Step buffers of several files -> one Arrow table of STEPS.

    ``parts`` holds (StepTable columns with sentinels/NaN for NULL, source SHA-256) per file; the run
    index of each row becomes its run_id. Converting many files at once keeps Arrow's per-call
    overhead out of the per-file path.
    """
    import numpy as np

    parts = [(cols, sha) for cols, sha in parts if len(cols["run_index"])]
    if not parts:
        return STEPS.empty_table()
    ids: list[str] = []
    codes = []
    for cols, sha in parts:
        run_index = np.frombuffer(cols["run_index"], dtype=np.int64)
        codes.append(run_index + len(ids))
        ids.extend(f"{sha[:16]}-{i}" for i in range(int(run_index.max()) + 1))
    dictionary = pa.DictionaryArray.from_arrays(pa.array(np.concatenate(codes), pa.int32()), pa.array(ids, pa.string()))
    arrays: list[pa.Array] = [dictionary.cast(pa.string())]
    for name, kind in STEP_COLUMNS.items():
        if name == "run_index":
            continue
        if kind == "m":
            maps = [None if m is None else list(m.items()) for cols, _ in parts for m in cols[name]]
            arrays.append(pa.array(maps, _STEP_ARROW["m"]))
            continue
        dtype = np.int64 if kind == "i" else np.float64
        values = np.concatenate([np.frombuffer(cols[name], dtype=dtype) for cols, _ in parts])
        mask = values == _INT_NULL if kind == "i" else values.view(np.uint64) == _NULL_BITS
        arrays.append(pa.array(values, type=_STEP_ARROW[kind], mask=mask))
    return pa.Table.from_arrays(arrays, schema=STEPS)
