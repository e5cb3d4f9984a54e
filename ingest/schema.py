"""Arrow schemas of the store's tables, and conversion of records to Arrow.

Table grain:
- runs: one row per run (``run_id`` = first 16 hex digits of the source's SHA-256, '-', run index);
- steps: one row per printed step or interval, per rank;
- telemetry: one row per sample per GPU;
- problems: one row per problem found in a source;
- sources: one row per distinct source file content (SHA-256) ever ingested.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from bench.ingest.columns import INT_NULL, NULL_BITS, Fill, joined_values
from bench.ingest.devices import device_type, devices_to_fill
from bench.ingest.records import SCHEMA_VERSION, Run, ScoreScale, System
from bench.ingest.tables import STEP_COLUMNS, TELEMETRY_COLUMNS

TAGS = pa.map_(pa.string(), pa.string())
#: Per-file constants repeated on every step/telemetry row are dictionary-encoded (as Parquet stores
#: them anyway); readers see strings.
DICT = pa.dictionary(pa.int32(), pa.string())
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
    "num_devices": pa.int64(),
    "device_type": pa.string(),
    "device_model": pa.string(),
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
    "throughput": pa.float64(),
    "throughput_unit": pa.string(),
    "throughput_derived": pa.bool_(),
    "forward_ms": pa.float64(),
    "backward_ms": pa.float64(),
    "forward_backward_ms": pa.float64(),
    "time_to_train_s": pa.float64(),
    "status": pa.string(),
    "status_detail": pa.string(),
    "first_line": pa.int64(),
    "last_line": pa.int64(),
    "tags": TAGS,
    "details": TAGS,
    "ingested_at": TS,
}
RUNS = pa.schema(list(_RUN_TYPES.items()))

_STEP_ARROW = {"i": pa.int64(), "d": pa.float64(), "m": pa.map_(pa.string(), pa.float64())}
_STEP_TYPES = {name: _STEP_ARROW[kind] for name, kind in STEP_COLUMNS.items()}
STEPS = pa.schema(
    [("run_id", DICT)]
    + [(name, _STEP_ARROW[kind]) for name, kind in STEP_COLUMNS.items() if name != "run_index"]
)

TELEMETRY = pa.schema(
    [
        ("source", DICT),
        ("source_sha256", DICT),
        ("run_id", DICT),
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
        # the SHA-256 of the file's bytes alone, when source_sha256 also covers a run directory's run.json or
        # an MLPerf JSON's place; else NULL
        ("content_sha256", pa.string()),
        # the source_sha256 of the earlier version of this file (same place) that this one extends: a log
        # ingested again after it grew (bench.ingest.versions); the analytics views leave that version out
        ("supersedes", pa.string()),
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

#: One row per system description. An MLPerf one says what its results ran on, joined to them by (round,
#: submitter, system), the folder names of the results repository; a machine's metadata file (no round nor
#: submitter; system: its folder's name) describes the runs below its folder (analytics.store's runs view). num_devices = num_nodes x accelerators_per_node;
#: for a system without accelerators (accelerators_per_node 0) the devices are its CPU sockets:
#: num_nodes x host_processors_per_node, device_type cpu, device_model the host processor.
SYSTEMS = pa.schema(
    [
        ("source", pa.string()),
        ("source_sha256", pa.string()),
        ("round", pa.string()),
        ("submitter", pa.string()),  # the submitter folder
        ("system", pa.string()),  # the file name without .json = the system folder under results/
        ("submitter_name", pa.string()),
        ("division", pa.string()),
        ("availability", pa.string()),
        ("system_name", pa.string()),
        ("num_nodes", pa.int64()),
        ("accelerators_per_node", pa.int64()),
        ("num_devices", pa.int64()),
        ("device_type", pa.string()),
        ("device_model", pa.string()),
        ("host_processor_model", pa.string()),
        ("host_processors_per_node", pa.int64()),
        ("framework", pa.string()),
        ("details", TAGS),  # other facts of a machine's metadata (cuda_version, gpu_driver, ...)
        ("ingested_at", TS),
    ]
)

#: One row per MLPerf scaling.json: round, submitter, system and benchmark from its place in the results
#: repository (bench.ingest.patterns.SCALING_TREE), and the factor the summarizer multiplies the score by.
SCORE_SCALES = pa.schema(
    [
        ("source", pa.string()),
        ("source_sha256", pa.string()),
        ("round", pa.string()),
        ("submitter", pa.string()),
        ("system", pa.string()),
        ("benchmark", pa.string()),
        ("scaling_factor", pa.float64()),
        ("ingested_at", TS),
    ]
)

#: One row per telemetry file joined to runs by its tags (bench.ingest.links): a pending row (run_id NULL)
#: with the file's tags and the time of its first and last sample, and, once it matched one run, a row
#: naming that run.
TELEMETRY_LINKS = pa.schema(
    [
        ("source_sha256", pa.string()),
        ("source", pa.string()),
        ("tags", TAGS),
        ("first_at", TS),
        ("last_at", TS),
        ("run_id", pa.string()),
        ("ingested_at", TS),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "steps": STEPS,
    "telemetry": TELEMETRY,
    "problems": PROBLEMS,
    "sources": SOURCES,
    "systems": SYSTEMS,
    "score_scales": SCORE_SCALES,
    "telemetry_links": TELEMETRY_LINKS,
}

METADATA = {b"bench.schema_version": str(SCHEMA_VERSION).encode()}


def write_options(schema: pa.Schema) -> dict[str, Any]:
    """``pq.write_table`` options for a table of ``schema``: dictionary pages only for string-like columns;
    DELTA_BINARY_PACKED for int64 columns (step counters and line numbers are runs of small deltas); zstd,
    but LZ4 (Parquet's LZ4_RAW) for float columns. All of these are Parquet 2 features that DuckDB,
    Spark, Polars and pyarrow read.

    Floats get plain pages: dictionary-encoding millions of distinct rates costs more CPU than zstd
    saves (measured on 1M steps rows: 0.30 s and 5.6 MB with pyarrow's defaults, 0.12 s and 3.5 MB with
    plain pages). Printed rates, losses, accuracies and stamps compress poorly, and zstd spent more time
    on them than on everything else a steps part holds: measured on 1M steps rows with 4-decimal
    accuracies and 3-decimal losses, 152 ms and 20.8 MB with zstd for every column, 107 ms and 26.9 MB
    with LZ4 for the floats; on the 1 GB benchmark log, 0.23 s less CPU. The store is that much larger
    (the Lambda archive's steps: 0.97 MB -> 1.32 MB)."""
    dictionary = [f.name for f in schema if not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]
    delta = {f.name: "DELTA_BINARY_PACKED" for f in schema if pa.types.is_int64(f.type)}
    floats = {f.name for f in schema if pa.types.is_floating(f.type)}
    leaves = leaf_paths(schema)  # per-column options name Parquet's leaf columns (e.g. tags.key_value.key)
    codec = {p: "lz4" if p in floats else "zstd" for p in leaves}
    return {"compression": codec, "use_dictionary": dictionary, "column_encoding": delta}


def leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """The dotted paths of the Parquet leaf columns a table of ``schema`` is written as."""
    return _leaf_paths(pa.schema([f.with_nullable(True) for f in schema]))  # one per table, whatever is REQUIRED


@functools.cache
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.read_metadata(io.BytesIO(sink.getvalue())).schema
    return tuple(parquet_schema.column(i).path for i in range(len(parquet_schema)))


def _ts(x: float | None) -> int | None:
    return None if x is None else round(x * 1_000_000)


def run_row(run: Run, *, source: str, sha: str, ingested_at: float) -> dict[str, Any]:
    row: dict[str, Any] = {name: getattr(run, name) for name in Run.__dataclass_fields__}
    row.update(devices_to_fill(run))
    row["run_id"] = run_id(sha, run.run_index)
    row["source"], row["source_sha256"] = source, sha
    row["started_at"], row["ended_at"] = _ts(run.started_at), _ts(run.ended_at)
    row["ingested_at"] = _ts(ingested_at)
    row["tags"] = list(run.tags.items())
    row["details"] = list(run.details.items())
    if run.images_per_sec_ranks is not None:
        row["images_per_sec_ranks"] = list(run.images_per_sec_ranks)
    return row


def system_row(system: System, *, source: str, sha: str, place: dict[str, str], ingested_at: float
               ) -> dict[str, Any]:
    """A systems row; ``place``: round, submitter and system read off the file's path (may be empty)."""
    row: dict[str, Any] = {name: getattr(system, name) for name in System.__dataclass_fields__}
    nodes, per_node, model = system.num_nodes, system.accelerators_per_node, system.device_model
    kind: str | None
    if per_node == 0:  # no accelerators: the devices that train are the host's CPU sockets
        per_node, model, kind = system.host_processors_per_node, system.host_processor_model, "cpu"
    else:
        kind = device_type(model)
    row.update(source=source, source_sha256=sha, round=place.get("round"), submitter=place.get("submitter"),
               system=place.get("system"),
               details=list(system.details.items()), num_devices=nodes * per_node if nodes and per_node else None,
               device_type=kind, device_model=model, ingested_at=_ts(ingested_at))
    return row


def score_scale_row(scale: ScoreScale, *, source: str, sha: str, place: dict[str, str], ingested_at: float
                    ) -> dict[str, Any]:
    """A score_scales row; ``place``: round, submitter, system and benchmark off the file's path."""
    return {"source": source, "source_sha256": sha, "round": place.get("round"), "submitter": place.get("submitter"),
            "system": place.get("system"), "benchmark": place.get("benchmark"), "scaling_factor": scale.factor,
            "ingested_at": _ts(ingested_at)}


def run_id(sha: str, run_index: int) -> str:
    return f"{sha[:16]}-{run_index}"


def _null_mask(values: Any, kind: str) -> Any:
    import numpy as np

    return values == INT_NULL if kind == "i" else values.view(np.uint64) == NULL_BITS


def _arrays(parts: list[dict[str, Any]], spec: dict[str, str], types: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    """Concatenate the buffered columns of several files into Arrow arrays (sentinels -> NULL)."""
    import numpy as np

    out: dict[str, pa.Array] = {}
    for name, kind in spec.items():
        buffers = [cols[name] for cols in parts]
        n = sum(len(b) for b in buffers)
        arrow_type = types.get(name, pa.int64() if kind == "i" else pa.float64())
        if all(_all_null(b, kind) for b in buffers):  # e.g. the columns a log never prints: no values to scan
            out[name] = pa.nulls(n, arrow_type)
            continue
        if kind == "m":
            maps = [None if m is None else list(m.items()) for b in buffers for m in b]
            out[name] = pa.array(maps, arrow_type)
            continue
        values = joined_values(buffers, np.int64 if kind == "i" else np.float64)
        mask = _null_mask(values, kind)
        out[name] = pa.array(values, type=arrow_type, mask=mask if mask.any() else None)
    return out


def _all_null(buffer: Any, kind: str) -> bool:
    """Whether a buffered column is NULL throughout, when that is known without scanning it: a Fill of
    NULL, or a metrics list of None (counted in C)."""
    if isinstance(buffer, Fill):
        return buffer.is_null()
    return kind == "m" and buffer.count(None) == len(buffer)


def _run_ids(parts: list[tuple[dict[str, Any], str]]) -> pa.Array:
    """run_id per row from each file's run_index column (NULL where the run index is NULL). Every part
    has at least one row. Vectorised over all files at once: a chunk holds thousands of small files."""
    import numpy as np

    counts = [len(cols["run_index"]) for cols, _ in parts]
    run_index = joined_values([cols["run_index"] for cols, _ in parts], np.int64)
    valid = run_index != INT_NULL
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    top = np.maximum.reduceat(np.where(valid, run_index + 1, 0), starts)  # runs per file: its largest index + 1
    first_id = np.concatenate(([0], np.cumsum(top)[:-1]))  # the file's first run's position in the dictionary
    codes = np.where(valid, run_index + np.repeat(first_id, counts), -1)
    ids = [f"{sha[:16]}-{i}" for (_, sha), n in zip(parts, top.tolist(), strict=True) for i in range(n)]
    indices = pa.array(codes, pa.int32(), mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(ids, pa.string()))


def _per_file(values: list[str], counts: list[int]) -> pa.Array:
    """A string column holding ``values[i]`` for the ``counts[i]`` rows of file i."""
    import numpy as np

    codes = np.repeat(np.arange(len(values), dtype=np.int32), counts)
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(values, pa.string()))


def _per_file_tags(tags: list[dict[str, str]], counts: list[int]) -> pa.Array:
    """A tags MAP column holding file i's tags on each of its ``counts[i]`` rows."""
    import numpy as np

    if not any(tags):
        return pa.nulls(sum(counts), TAGS)
    offsets, keys, items, pos = [np.zeros(1, np.int32)], [], [], 0
    for t, n in zip(tags, counts, strict=True):
        k = len(t)
        offsets.append(pos + k * np.arange(1, n + 1, dtype=np.int32))
        pos += k * n
        keys.extend(list(t.keys()) * n)
        items.extend(list(t.values()) * n)
    return pa.MapArray.from_arrays(pa.array(np.concatenate(offsets)), pa.array(keys, pa.string()),
                                   pa.array(items, pa.string()))


def steps_table(parts: list[tuple[dict[str, Any], str]]) -> pa.Table:
    """Step buffers of several files -> one Arrow table of STEPS.

    ``parts`` holds (StepTable columns, source SHA-256) per file; the run index of each row becomes its
    run_id. Converting many files at once keeps Arrow's per-call overhead out of the per-file path.
    """
    parts = [(cols, sha) for cols, sha in parts if len(cols["run_index"])]
    if not parts:
        return STEPS.empty_table()
    spec = {k: v for k, v in STEP_COLUMNS.items() if k != "run_index"}
    arrays = {"run_id": _run_ids(parts), **_arrays([c for c, _ in parts], spec, _STEP_TYPES)}
    return pa.Table.from_arrays([arrays[f.name] for f in STEPS], schema=STEPS)


def telemetry_table(parts: list[tuple[dict[str, Any], str, str, dict[str, str]]],
                    run_ids: list[str | None] | None = None) -> pa.Table:
    """Telemetry buffers of several files -> one Arrow table of TELEMETRY.

    ``parts`` holds (TelemetryTable columns, SHA-256, source, tags) per file. ``run_ids``, when given,
    holds per file the run its samples belong to (a ``bench run`` directory's telemetry.csv), else None.
    """
    import numpy as np

    keep = [i for i, p in enumerate(parts) if len(p[0]["sample_index"])]
    parts = [parts[i] for i in keep]
    owners = [run_ids[i] for i in keep] if run_ids is not None else []
    if not parts:
        return TELEMETRY.empty_table()
    counts = [len(cols["sample_index"]) for cols, *_ in parts]
    spec = {k: v for k, v in TELEMETRY_COLUMNS.items() if k != "run_index"}
    arrays = _arrays([c for c, *_ in parts], spec, {})
    stamps = joined_values([c["timestamp"] for c, *_ in parts], np.float64)
    with np.errstate(invalid="ignore"):  # NULL / NaN stamps cast to garbage, masked below
        micros = np.round(stamps * 1e6).astype(np.int64, copy=False) if len(stamps) else stamps.astype(np.int64)
    arrays["timestamp"] = pa.array(micros, TS, mask=_null_mask(stamps, "d") | np.isnan(stamps))
    arrays["run_id"] = _run_ids([(c, sha) for c, sha, *_ in parts])
    if any(owners):
        pieces, pos = [], 0
        for owner, n in zip(owners, counts, strict=True):
            piece = arrays["run_id"].slice(pos, n).cast(pa.string())
            pieces.append(pa.array([owner] * n, pa.string()) if owner else piece)
            pos += n
        arrays["run_id"] = pa.concat_arrays(pieces).dictionary_encode()
    arrays["source"] = _per_file([src for _, _, src, _ in parts], counts)
    arrays["source_sha256"] = _per_file([sha for _, sha, *_ in parts], counts)
    arrays["tags"] = _per_file_tags([tags for *_, tags in parts], counts)
    return pa.Table.from_arrays([arrays[f.name] for f in TELEMETRY], schema=TELEMETRY)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema``, in its order and of its types: a column the table's older
    schema lacked is NULL (a store being migrated), and a part written with REQUIRED columns becomes
    nullable again."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)
