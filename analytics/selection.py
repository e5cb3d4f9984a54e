"""What every analysis command looks at: the runs a ``--where`` selects, seen with the identity a
``--ignore`` changes. One function, :func:`narrow`, used by compare, fit, effects, plot and report.

- ``--where`` is a SQL boolean expression over the columns of ``runs`` (tags included:
  ``tags['system'] = 'x'``), applied to runs before anything is aggregated. The selected runs are
  materialised once as the table ``runs`` on the connection (the store's view renamed), so every curated
  view (configs, scaling, mlperf_scores, ...) reads only them, and ``steps`` / ``telemetry`` are narrowed to
  them (telemetry without a run_id, joined to its run by tags, stays).
- ``--ignore NAME`` takes NAME out of what makes a configuration, for this one question: a factor
  column of ``configs`` (NULLed in the selected runs; ``framework`` takes ``framework_version`` with it, so
  that a comparison across frameworks is ``--ignore framework``), or a tag key (removed from the runs'
  tags; ``--ignore system`` lets runs of two systems form one configuration, XLA kept apart: a run whose
  system's name says XLA gets the tag ``xla`` = on, as ``bench run --xla`` gives it).

What a configuration is, is said once, in ``sql/run_configs.sql``: the workload and system factor columns and
the tags, less the bookkeeping tags (sweep, cell, repeat, ...), which never split one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.analytics.query import view_error
from bench.analytics.results import first
from bench.analytics.software import XLA_SQL
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

#: The factor columns of ``configs`` (sql/run_configs.sql hashes them into config_id), workload and system:
#: a configuration is all of them plus its tags (FACTORS, in the order the views and tables list them).
WORKLOAD = ("model", "dataset", "data", "mode", "precision", "data_format", "variable_update", "all_reduce",
            "batch_size_per_device", "throughput_unit")
SYSTEM = ("framework", "framework_version", "device_type", "device_model")
FACTORS = (*SYSTEM[:2], *WORKLOAD, *SYSTEM[2:])
#: Tags that say where a run sits in a system, not what it ran: a comparison of devices lets them differ.
SYSTEM_TAGS = ("system", "host", "hostname", "node", "cluster", "driver", "cuda", "cuda_version", "submitter",
               "division")
#: Tags that say how the framework ran a step, as the framework version says which framework: ``xla`` ("on" where
#: ``bench run --xla`` compiled it, or where a system's name says XLA and ``--ignore system`` joins systems). They
#: split configurations, and a comparison of systems lets them differ and names them, as it does the version.
SOFTWARE_TAGS = ("xla",)
#: Ignoring one of these ignores the others with it.
_TOGETHER = {"framework": ("framework", "framework_version")}


def narrow(con: duckdb.DuckDBPyConnection, where: str | None = None, ignore: Sequence[str] = ()) -> None:
    """Replace the ``runs`` view of ``con`` by the runs ``where`` selects, with ``ignore`` applied (see the
    module docstring); without either, ``con`` is left as it is. Raises UsageError for a bad ``where`` or
    ``ignore``."""
    import duckdb

    if not where and not ignore:
        return
    columns = set(FACTORS)
    nulls, tags = [], []
    for name in dict.fromkeys(n.strip() for item in ignore for n in item.split(",") if n.strip()):
        if name in columns:
            nulls += [c for c in _TOGETHER.get(name, (name,)) if c not in nulls]
        elif name.isidentifier() or name.replace("-", "_").isidentifier():
            tags.append(name)
        else:
            raise UsageError(f"--ignore {name!r}: name a factor ({', '.join(FACTORS)}) or a tag key")
    replace = [f"NULL::{_type(con, c)} AS {c}" for c in nulls]
    if tags:
        keys = ", ".join("'" + t.replace("'", "''") + "'" for t in tags)
        kept = f"[e FOR e IN map_entries(tags) IF e.key NOT IN ({keys})]"
        if "system" in tags and "xla" not in tags:  # systems joined, XLA kept apart: a name's word becomes a tag
            kept += (f" || CASE WHEN tags['xla'] IS NULL AND {XLA_SQL} "
                     "THEN [struct_pack(key := 'xla', value := 'on')] ELSE [] END")
        replace.append(f"map_from_entries({kept}) AS tags")
    projection = f"* REPLACE ({', '.join(replace)})" if replace else "*"
    kind = "VIEW" if first(con, "SELECT 1 FROM duckdb_views() WHERE view_name = 'runs' AND NOT temporary") else "TABLE"
    con.execute(f"ALTER {kind} runs RENAME TO _store_runs")
    try:
        con.execute(f"CREATE TEMP TABLE runs AS SELECT {projection} FROM _store_runs WHERE ({where or 'true'})")
    except duckdb.Error as e:
        raise view_error(e, "runs", where) from e
    for table, keep in (("steps", "false"), ("telemetry", "run_id IS NULL")):
        if first(con, "SELECT 1 FROM duckdb_views() WHERE view_name = ?", [table]) is None:
            continue  # a connection with runs alone
        con.execute(f"ALTER VIEW {table} RENAME TO _store_{table}")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM _store_{table} "
                    f"WHERE {keep} OR run_id IN (SELECT run_id FROM runs)")


def _type(con: duckdb.DuckDBPyConnection, column: str) -> str:
    """The SQL type of a column of the store's ``runs`` view (read before it is renamed)."""
    found = first(con, "SELECT data_type FROM information_schema.columns WHERE table_name = 'runs' "
                       "AND column_name = ?", [column])
    return str(found[0]) if found else "VARCHAR"
