"""Open the Parquet store as DuckDB views: ``runs``, ``steps``, ``telemetry``, ``problems``, ``sources``,
and the curated views of ``sql/`` (see bench.sql.views).

``runs`` fills an MLPerf run's devices from its system description. ``telemetry`` gives the samples of a
file joined to its run at ingest (bench.sql.links) that run's id. ``runs``, ``steps``, ``telemetry`` and
``problems`` leave out the rows of a file's version that a later,
longer version of the same file supersedes (a log ingested while its job ran, then again once it was done;
see bench.ingest.versions): those runs would count twice, or as unfinished. ``all_runs``, ``all_steps``,
``all_telemetry`` and ``all_problems`` hold every row. ``duplicates`` lists the files an ingest skipped
because their bytes were stored from another place.

The one place where table names meet file paths; every query reads the logical view names.
"""

from __future__ import annotations

import errno
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.sql import delta, deltalog, health
from bench.sql.errors import BenchError, one_line
from bench.sql.layout import SCHEMA_VERSION, TABLE_NAMES
from bench.sql.objstore import url_of
from bench.sql.store import StoreWriter, check_store
from bench.sql.views import curated_names, register_views

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


def connect(root: Path, *, reads: str | None = None, confined: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per store table (empty views for empty tables) and the
    curated views; ``reads``: the one query it will run, and then only the curated views that query names
    (and those they read) are made (each costs a few ms to bind: a tenth of a second for all of them).

    ``confined``: once the views are made, the connection may read only the files they read (the store's
    files, or their local copies for a store on object storage) and never write one: DuckDB's
    ``allowed_directories`` with external access off, and its configuration locked so that no statement can
    turn it back on (``bench sql``, which runs what a user types).

    Raises BenchError when ``root`` is not a store of this schema version (a schema-5 store is converted
    first, or read in place where it cannot be written: bench.sql.migrate). Every table is read in one
    committed state (bench.sql.store); a damaged file is left out with a one-line warning on stderr naming
    it and the fix (bench.sql.health).
    """
    import duckdb

    if url := url_of(root):
        from bench.sql.remote import readable

        state = readable(url)
    else:
        state = health.readable(root) if check_store(root, old_ok=True) == SCHEMA_VERSION else _converted(root)
    for line in state.messages(url or root):  # the rest of the store still answers
        print(f"warning: {line}", file=sys.stderr)
    con = duckdb.connect(":memory:")
    for table in TABLE_NAMES:
        name = f"all_{table}" if table in (*_CURRENT, "telemetry_links") else table
        files = state.files.get(table, [])
        if files:
            listing = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listing}])")
        else:  # typed NULLs, no rows (registering an empty Arrow table would import pandas in every command)
            columns = ", ".join(f"CAST(NULL AS {t}) AS \"{n}\"" for n, t in _empty_columns(root, table))
            con.execute(f"CREATE VIEW {name} AS SELECT {columns} WHERE false")
    (count,), = con.execute("SELECT count(*) FROM sources WHERE supersedes IS NOT NULL").fetchall()
    superseded = bool(count)
    curated = None if reads is None else [n for n in curated_names() if re.search(rf"\b{n}\b", reads, re.I)]
    # run_names scans every run's details (1 s at 2 M runs): a table once where the queries will read runs (a
    # view reads it again at every mention), a view where they will not (a query of the problems alone)
    reads_runs = reads is None or bool(curated) or bool(re.search(r"\b(runs|steps|telemetry\w*)\b", reads, re.I))
    kind = "TEMP TABLE" if reads_runs else "VIEW"
    con.execute(_RUN_NAMES.format(kind=kind, where=f" WHERE {_CURRENT['runs']}" if superseded else ""))
    for table, current in _CURRENT.items():
        where = f" WHERE {current}" if superseded else ""
        if table == "runs":
            con.execute(f"CREATE VIEW runs AS {_named(_RUNS_WITH_DEVICES + where)}")
        elif table == "telemetry":  # a file's samples take the run its link names (bench.sql.links)
            linked = f"""SELECT * FROM (
                SELECT t.* REPLACE (coalesce(t.run_id, l.run_id) AS run_id) FROM all_telemetry t
                LEFT JOIN (SELECT source_sha256, min(run_id) AS run_id FROM all_telemetry_links
                           WHERE run_id IS NOT NULL GROUP BY ALL) l
                       ON t.run_id IS NULL AND l.source_sha256 = t.source_sha256){where}"""
            con.execute(f"CREATE VIEW telemetry AS {_named(linked)}")
        else:
            select = f"SELECT * FROM all_{table}{where}"
            con.execute(f"CREATE VIEW {table} AS {_named(select) if table == 'steps' else select}")
    con.execute(f"CREATE VIEW telemetry_links AS {_named('SELECT * FROM all_telemetry_links')}")

    # what an ingest skipped as a copy of a file stored from another place (bench.ingest.pipeline)
    con.execute("CREATE VIEW duplicates AS SELECT source, message, ingested_at "
                "FROM all_problems WHERE kind = 'duplicate'")
    register_views(con, curated)
    if confined:
        folders = sorted({str(Path(f).parent) + "/" for files in state.files.values() for f in files})
        con.execute("SET allowed_directories = $1", [folders])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


def _converted(root: Path) -> health.Health:
    """A schema-5 store converted (under the writer's lock), and then read; where it cannot be written
    (read-only media), its batches read in place, with a warning (bench.sql.migrate)."""
    try:
        with StoreWriter(root):
            pass
    except (BenchError, OSError) as e:
        cause = e if isinstance(e, OSError) else e.__cause__
        if not isinstance(cause, OSError) or cause.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        from bench.sql.migrate import in_place

        files, damaged = in_place(root)
        print(f"warning: store {root} is of schema 5 and cannot be converted here ({one_line(cause)}); read in place, "
              "its telemetry joined to runs only where a log named the run; a writer converts it", file=sys.stderr)
        return health.Health(files=files, damaged=damaged)
    return health.readable(root)


def _empty_columns(root: Path, table: str) -> list[tuple[str, str]]:
    """(name, DuckDB type) of each column of a table with no file: from its Delta log's schema (no pyarrow
    import), else from bench.sql.schema's Arrow schema."""
    fields = deltalog.log_schema(delta.table_path(root, table))
    try:
        if fields:
            return [(str(f["name"]), _delta_type(f["type"])) for f in fields]
    except (KeyError, TypeError, ValueError):
        pass
    from bench.sql.schema import TABLES

    return [(f.name, _sql_type(f.type)) for f in TABLES[table]]


#: Delta Lake's primitive types as DuckDB writes them (the Delta protocol's schema serialization).
_DELTA_TYPES = {"string": "VARCHAR", "long": "BIGINT", "integer": "INTEGER", "short": "SMALLINT", "byte": "TINYINT",
                "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN", "binary": "BLOB", "date": "DATE",
                "timestamp": "TIMESTAMPTZ", "timestamp_ntz": "TIMESTAMP"}


def _delta_type(t: Any) -> str:
    """The DuckDB type of a Delta schema type (a name, or a map / array / struct object)."""
    if isinstance(t, str):
        if t.startswith("decimal("):
            return t.upper()
        return _DELTA_TYPES[t]
    kind = t["type"]
    if kind == "map":
        return f"MAP({_delta_type(t['keyType'])}, {_delta_type(t['valueType'])})"
    if kind == "array":
        return f"{_delta_type(t['elementType'])}[]"
    if kind == "struct":
        return "STRUCT(" + ", ".join(f'"{f["name"]}" {_delta_type(f["type"])}' for f in t["fields"]) + ")"
    raise ValueError(f"Delta type {kind!r}")


def _sql_type(t: pa.DataType) -> str:
    """The DuckDB type of a store column's Arrow type (those of bench.sql.schema)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _sql_type(t.value_type)
    if pa.types.is_map(t):
        return f"MAP({_sql_type(t.key_type)}, {_sql_type(t.item_type)})"
    if pa.types.is_list(t):
        return f"{_sql_type(t.value_type)}[]"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    return {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE",
            pa.bool_(): "BOOLEAN"}[t]


#: ``runs`` with the devices of an MLPerf run filled from its system description (the ``systems`` row of its
#: round, submitter and system, as sql/mlperf_runs.sql finds it), where its log does not say them: every
#: generic view and the report then see an MLPerf run's device count, type and model. Any other run takes
#: the facts of the machine metadata file (formats/host_metadata) deepest among the folders above it: its
#: GPU model where the log names none (a GPU run), its TensorFlow version where the log's is missing or a
#: prefix of it (1.15 -> 1.15.4), and its details (CUDA, driver, ...) under the run's own.
_RUNS_WITH_DEVICES = r"""
SELECT r.* REPLACE (
           coalesce(r.num_devices, d.num_devices) AS num_devices,
           coalesce(r.device_type, d.device_type, CASE WHEN m.f.device_model IS NOT NULL AND r.num_gpus > 0 THEN 'gpu' END)
               AS device_type,
           coalesce(r.device_model, d.device_model, CASE WHEN coalesce(r.device_type, 'gpu') = 'gpu' THEN m.f.device_model END)
               AS device_model,
           coalesce(r.num_nodes, d.num_nodes) AS num_nodes,
           coalesce(r.num_gpus, CASE WHEN d.device_type = 'gpu' THEN d.num_devices END) AS num_gpus,
           coalesce(r.gpu_model, CASE WHEN d.device_type = 'gpu' THEN d.device_model END,
                    CASE WHEN coalesce(r.device_type, 'gpu') = 'gpu' THEN m.f.device_model END) AS gpu_model,
           CASE WHEN m.f.tf <> '' AND coalesce(r.framework, 'tensorflow') = 'tensorflow'
                     AND (r.framework_version IS NULL OR starts_with(m.f.tf, r.framework_version || '.'))
                THEN m.f.tf ELSE r.framework_version END AS framework_version,
           CASE WHEN m.f.details IS NULL AND d.details IS NULL THEN r.details
                ELSE map_concat(coalesce(d.details, MAP {}::MAP(VARCHAR, VARCHAR)),
                                coalesce(m.f.details, MAP {}::MAP(VARCHAR, VARCHAR)),
                                coalesce(r.details, MAP {}::MAP(VARCHAR, VARCHAR))) END AS details)
FROM all_runs r
LEFT JOIN (SELECT round, submitter, system, any_value(num_devices) AS num_devices, any_value(device_type) AS device_type,
                  any_value(device_model) AS device_model, any_value(num_nodes) AS num_nodes,
                  any_value(details) FILTER (WHERE cardinality(details) > 0) AS details
           FROM systems WHERE submitter IS NOT NULL GROUP BY round, submitter, system) d
       ON r.format = 'mlperf' AND d.submitter = r.tags['submitter'] AND d.system = r.tags['system']
      AND d.round IS NOT DISTINCT FROM coalesce(r.tags['round'],
                                                nullif(regexp_extract(r.tags['mlperf_version'], '^(\d+\.\d+)', 1), ''))
LEFT JOIN (SELECT s.source, arg_max(h, length(h.folder)) AS f
           FROM (SELECT DISTINCT source FROM all_runs WHERE format IS DISTINCT FROM 'mlperf') s
           JOIN (SELECT regexp_replace(source, '[^/:]*$', '') AS folder, device_model, details,
                        regexp_extract(framework, '^TensorFlow (\S+)$', 1) AS tf
                 FROM systems WHERE round IS NULL AND submitter IS NULL) h
             ON h.folder <> '' AND starts_with(s.source, h.folder)
           GROUP BY s.source) m
       ON m.source = r.source"""
#: A ``bench run`` directory's run goes by run.json's ``run_id`` (details['run_id']: the id `bench run` printed)
#: in every view, where that id names one current run. The tables key a run by its log's SHA-256 prefix and
#: run index (bench.ingest.table_rows.run_id), which is what every other run goes by.
_RUN_NAMES = """CREATE {kind} run_names AS SELECT any_value(run_id) AS key, name FROM (
    SELECT run_id, details['run_id'] AS name FROM all_runs{where})
    WHERE name IS NOT NULL GROUP BY name HAVING count(*) = 1"""  # a name one run has (grouped: a window is slower)


def _named(select: str) -> str:
    """``select`` with its run_id replaced by the run's name where it has one (see _RUN_NAMES)."""
    return (f"SELECT x.* REPLACE (coalesce(n.name, x.run_id) AS run_id) FROM ({select}) x "
            "LEFT JOIN run_names n ON n.key = x.run_id")


_GONE = "(SELECT supersedes FROM sources WHERE supersedes IS NOT NULL)"
_GONE_IDS = "(SELECT left(supersedes, 16) FROM sources WHERE supersedes IS NOT NULL)"  # a run id's first 16 hex
#: Which rows of a table belong to a version no later version supersedes.
_CURRENT = {
    "runs": f"source_sha256 NOT IN {_GONE}",
    "steps": f"run_id IS NULL OR left(run_id, 16) NOT IN {_GONE_IDS}",
    "telemetry": f"source_sha256 NOT IN {_GONE}",
    "problems": f"source_sha256 IS NULL OR source_sha256 NOT IN {_GONE}",
}
