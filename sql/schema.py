"""The store's tables on disk: their Arrow schemas, the schema version, how their Parquet files are written,
and how a table of an older schema is read as the current one.

Table grain:
- runs: one row per run (``run_id`` = first 16 hex digits of the source's SHA-256, '-', run index; the
  views call a ``bench run`` directory's run by run.json's id instead: bench.sql.read);
- steps: one row per printed step or interval, per rank;
- telemetry: one row per sample per GPU;
- problems: one row per problem found in a source;
- sources: one row per distinct source file content (SHA-256) ever ingested.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.sql.columns import STEP_COLUMNS
from bench.sql.layout import SCHEMA_VERSION, TABLE_NAMES

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
STEPS = pa.schema(
    [("run_id", DICT)]
    + [(name, _STEP_ARROW[kind]) for name, kind in STEP_COLUMNS.items() if name != "run_index"]
)



def step_types() -> dict[str, pa.DataType]:
    """The Arrow type of each step column as parsers buffer it (``STEP_COLUMNS``)."""
    return {name: _STEP_ARROW[kind] for name, kind in STEP_COLUMNS.items()}


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
#: submitter; system: its folder's name) describes the runs below its folder (bench.sql.read's runs view). num_devices = num_nodes x accelerators_per_node;
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

#: One row per telemetry file joined to runs by its tags (bench.sql.links): a pending row (run_id NULL)
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
assert tuple(TABLES) == TABLE_NAMES, "bench.sql.layout names the tables, in this order"

METADATA = {b"bench.schema_version": str(SCHEMA_VERSION).encode()}


def write_options(schema: pa.Schema) -> dict[str, Any]:
    """``pq.write_table`` options for a table of ``schema``: dictionary pages only for string-like columns;
    DELTA_BINARY_PACKED for int64 columns (step counters and line numbers are runs of small deltas); zstd,
    but LZ4 (Parquet's LZ4_RAW) for float columns. All of these are Parquet 2 features that DuckDB,
    Spark, Polars and pyarrow read.

    Floats get plain pages (a dictionary of millions of distinct rates is work that finds nothing to share)
    and LZ4: printed rates, losses, accuracies and stamps compress poorly, and zstd spends more time on them
    than on everything else a steps part holds. The trade is CPU for size: ``make bench``
    (benchmarks/parquet_options.py) prints both against pyarrow's defaults and against zstd everywhere."""
    dictionary = [f.name for f in schema if not (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]
    delta = {f.name: "DELTA_BINARY_PACKED" for f in schema if pa.types.is_int64(f.type)}
    floats = {f.name for f in schema if pa.types.is_floating(f.type)}
    leaves = leaf_paths(schema)  # per-column options name Parquet's leaf columns (e.g. tags.key_value.key)
    codec = {p: "lz4" if p in floats else "zstd" for p in leaves}
    # CRC32 page checksums: any Parquet reader may verify them (pyarrow's page_checksum_verification); bench's
    # readers check each file's SHA-256 against its commit's record (bench.sql.health), which also covers
    # the footer
    return {"compression": codec, "use_dictionary": dictionary, "column_encoding": delta, "write_page_checksum": True}


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


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema``, in its order and of its types: a column the table's older
    schema lacked is NULL (a store being migrated), and a part written with REQUIRED columns becomes
    nullable again."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def rows_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The table of ``rows`` (dicts; a key a row lacks is NULL), as ``pa.Table.from_pylist`` makes it, built a
    column at a time: pyarrow's from_pylist reads row by row in Python, 3x the time for the runs table of a log
    of 18,571 nccl-tests runs (0.25 s against 0.88 s)."""
    return pa.Table.from_pydict({name: [row.get(name) for row in rows] for name in schema.names}, schema=schema)


def rows_in_order(rows: list[dict[str, Any] | pa.Table], schema: pa.Schema) -> pa.Table:
    """One table of ``rows``: row dicts (``rows_table``) and tables of ``schema`` among them (a file of many runs
    gives its runs as one: bench.ingest.rows.RUNS_AS_TABLE), in their order."""
    pieces: list[pa.Table] = []
    dicts: list[dict[str, Any]] = []
    for row in rows:
        if isinstance(row, pa.Table):
            if dicts:
                pieces.append(rows_table(dicts, schema))
                dicts = []
            pieces.append(row)
        else:
            dicts.append(row)
    if dicts or not pieces:
        pieces.append(rows_table(dicts, schema))
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


def write_part(table: pa.Table, path: Path, *, required: bool = False, sync: bool = False) -> None:
    """One Parquet file of a store table: the schema version in its metadata, the table's write options.

    ``required`` (for the steps and telemetry parts): columns without a NULL in this part are written
    as REQUIRED, which spares the writer a definition level per value (a fifth of the encoding time of
    a steps part). Readers take a glob of parts with differing nullability as one nullable column
    (DuckDB, pyarrow datasets; tests cover both); pyarrow's concat_tables needs promote_options="default".
    ``sync``: fsync the file before returning (a part written off the main thread then costs the commit,
    which fsyncs every file of its batch, almost nothing).
    """
    import pyarrow.parquet as pq

    meta = {**(table.schema.metadata or {}), **METADATA}
    if required and table.num_rows:
        fields = [f.with_nullable(False) if f.nullable and table.column(i).null_count == 0 else f
                  for i, f in enumerate(table.schema)]
        table = pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=meta))
    else:
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, path, **write_options(table.schema))
    if sync:
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
