"""``bench report``: the selection (``--where`` over ``runs``), what is in it, the flagged runs and the
provenance table. Pure functions of a DuckDB connection; they return report.model Tables.

Choices it makes:
- ``--where`` is a SQL boolean expression over the columns of ``runs`` (so ``tags['system']``, ``host``,
  ``source`` work). The selected runs are materialised once as the table ``runs`` on the connection, the
  store's view renamed; every curated view (configs, scaling, ...) reads ``runs`` and so sees only the
  selection, and ``steps`` / ``telemetry`` are narrowed to the selected runs.
- A run is flagged *unstable* when its per-interval CV after the MSER-5 warm-up cut exceeds 2%
  (``run_stats``), *superlinear* when its configuration point has efficiency > 1 (``scaling``), and
  *no result* when its status is not ok or it has neither a throughput (in any unit) nor a time to train. A run can carry several flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.analytics.report.model import Table
from bench.analytics.results import first
from bench.analytics.run_stats import STABLE_CV, compute_run_stats
from bench.analytics.selection import narrow
from bench.sql.errors import BenchError

if TYPE_CHECKING:
    import duckdb

SHA_PREFIX = 12  #: characters of source_sha256 shown in the provenance table


def select_runs(con: duckdb.DuckDBPyConnection, where: str | None, ignore: Sequence[str] = ()) -> int:
    """Narrow ``con`` to the runs matching ``where`` (bench.analytics.selection); returns how many were selected.

    Raises BenchError for a bad ``where`` or when it selects no run.
    """
    narrow(con, where, ignore)
    n = int(first(con, "SELECT count(*) FROM runs")[0])  # type: ignore[index]
    if n == 0:
        raise BenchError("no run matches" + (f" --where {where!r}" if where else " (the store is empty)"))
    # computed once: every section reads them, and the views of these names now read them too (a temporary
    # view shadows the store's), so compare, fit and effects do not recompute configs per call
    for view in ("run_configs", "configs", "scaling", "report_runs"):
        con.execute(f"CREATE TEMP TABLE _{view} AS SELECT * FROM {view}")
        con.execute(f"CREATE TEMP VIEW {view} AS SELECT * FROM _{view}")
    return n


_SUMMARY_SQL = """
WITH described AS (  -- the frameworks MLPerf system descriptions give for the runs whose logs name none (most
                     -- MLPerf logs do not): "by their systems' descriptions: MXNet NVIDIA Release 21.05 (448), ..."
    SELECT 'by their systems'' descriptions: ' || string_agg(framework || ' (' || n || ')', ', '
                                                             ORDER BY n DESC, framework) AS described
    FROM (SELECT regexp_replace(trim(s.framework), '\\s+,', ',', 'g') AS framework, count(*) AS n
          FROM runs r JOIN (SELECT round, submitter, system, any_value(framework) AS framework FROM systems
                            WHERE framework IS NOT NULL GROUP BY ALL) s
            ON r.framework IS NULL AND r.format = 'mlperf' AND s.submitter = r.tags['submitter']
           AND s.system = r.tags['system'] AND s.round IS NOT DISTINCT FROM r.tags['round']
          GROUP BY ALL)
)
SELECT count(*) AS runs, count(*) FILTER (WHERE status = 'ok') AS ok,
       count(*) FILTER (WHERE status <> 'ok' OR status IS NULL) AS not_ok,
       (SELECT count(DISTINCT config_id) FROM _report_runs) AS configurations,
       count(DISTINCT source_sha256) AS sources,
       string_agg(DISTINCT device_model, ', ' ORDER BY device_model) AS device_models,
       string_agg(DISTINCT framework || coalesce(' ' || framework_version, ''), ', '
                  ORDER BY framework || coalesce(' ' || framework_version, ''))
           || CASE WHEN count(framework) < count(*)
                   THEN ' (' || count(framework) || ' of ' || count(*) || ' runs name their framework'
                        || coalesce('; ' || (SELECT described FROM described) || ')', ')') ELSE '' END
           AS frameworks,
       string_agg(DISTINCT model, ', ' ORDER BY model) AS models,
       min(started_at)::VARCHAR AS first_started, max(coalesce(ended_at, started_at))::VARCHAR AS last_ended
FROM runs
"""
_LABELS = {
    "runs": "runs", "ok": "runs with status ok", "not_ok": "runs without a result (failed, oom, ...)",
    "configurations": "configurations", "sources": "source files", "device_models": "device models",
    "frameworks": "frameworks", "models": "models", "first_started": "first run started (UTC)",
    "last_ended": "last run ended (UTC)",
}


def summary_table(con: duckdb.DuckDBPyConnection) -> Table:
    """What is in the selection: one row per item (runs, ok runs, configurations, device models, frameworks,
    models, date range). Dates are NULL ("—") when no log stamped them."""
    import pandas as pd

    row = con.sql(_SUMMARY_SQL).df().iloc[0]
    frame = pd.DataFrame({"item": list(_LABELS.values()), "value": [row[k] for k in _LABELS]})
    return Table("selection", "What is in the selection", frame)


def status_table(con: duckdb.DuckDBPyConnection) -> Table:
    """Runs by status and status detail (why a run failed), most frequent first; every run is counted.
    Each count links to the runs it counts."""
    df = con.sql("""
        SELECT * FROM (
            SELECT coalesce(status, 'unknown') AS st, status_detail AS why, count(*) AS n,
                   list(run_id ORDER BY run_id) AS _ids
            FROM runs GROUP BY 1, 2)
        ORDER BY st = 'ok' DESC, n DESC, st, why""").df()
    df = df.rename(columns={"st": "status", "why": "why (status detail)", "n": "runs (count)"})
    cell_runs = {(i, "runs (count)"): tuple(ids) for i, ids in enumerate(df.pop("_ids"))}
    return Table("status", "Runs by status, and why", df, cell_runs=cell_runs)


def flags_table(con: duckdb.DuckDBPyConnection, labels: dict[str, str]) -> Table:
    """One row per run and flag: unstable (CV > 2%), superlinear (efficiency > 1), no result (see module
    doc). ``labels``: config_id -> configuration label. Columns: run_id, configuration, devices, flag,
    detail (CV %, efficiency %, or status: detail)."""

    con.register("_run_stats", compute_run_stats(con))
    df = con.sql(f"""
        SELECT r.run_id, r.config_id, r.num_devices AS "devices", 'unstable' AS flag,
               printf('CV %.2f%% after %d warm-up intervals', 100 * s.cv, s.warmup_intervals) AS detail
        FROM _report_runs r JOIN _run_stats s USING (run_id) WHERE s.cv > {STABLE_CV}
        UNION ALL
        SELECT r.run_id, r.config_id, r.num_devices, 'superlinear',
               printf('efficiency %.1f%% of its %d-device baseline', 100 * c.efficiency, c.baseline_devices)
        FROM _report_runs r JOIN _scaling c ON c.config_id = r.config_id
             AND c.num_devices IS NOT DISTINCT FROM r.num_devices AND c.num_nodes IS NOT DISTINCT FROM r.num_nodes
        WHERE c.superlinear AND r.status = 'ok'
        UNION ALL
        SELECT run_id, config_id, num_devices, 'no result',
               coalesce(status, 'unknown') || coalesce(': ' || status_detail, '')
        FROM _report_runs
        WHERE status IS DISTINCT FROM 'ok' OR (throughput IS NULL AND time_to_train_s IS NULL)
        ORDER BY flag, run_id""").df()
    df.insert(1, "configuration", [labels.get(c, c) for c in df.pop("config_id")])
    cell_runs: dict[tuple[int, str], tuple[str, ...]] = {(i, "run_id"): (str(rid),) for i, rid in enumerate(df["run_id"])}
    return Table("flags", "Runs flagged unstable (CV > 2%), superlinear (efficiency > 100%) or without a result",
                 df, cell_runs=cell_runs)


def provenance_table(con: duckdb.DuckDBPyConnection, labels: dict[str, str]) -> Table:
    """Every selected run: run_id, configuration, devices, nodes, status, source, sha256 prefix. Sorted by
    configuration and scale point, so the runs behind one number are adjacent (a number links to the
    first of them)."""
    df = con.sql(f"""
        SELECT run_id, config_id, num_devices AS "devices", num_nodes AS "nodes", status, source,
               left(source_sha256, {SHA_PREFIX}) AS "sha256 (prefix)"
        FROM _report_runs""").df()
    df.insert(1, "configuration", [labels.get(c, c) for c in df.pop("config_id")])
    df = df.sort_values(["configuration", "devices", "nodes", "run_id"], kind="stable").reset_index(drop=True)
    return Table("provenance", "Provenance: every run and its source", df)


def point_runs(con: duckdb.DuckDBPyConnection) -> dict[tuple[Any, ...], tuple[str, ...]]:
    """(config_id, num_devices, num_nodes) -> run_ids of the selection (all statuses), for linking numbers.
    In a stable order: a figure lists the runs of its points in this order, and the same store must give
    the same report bytes (a parallel GROUP BY returns its groups in any order)."""
    rows = con.execute("""
        SELECT config_id, num_devices, num_nodes, list(run_id ORDER BY run_id)
        FROM _report_runs GROUP BY ALL ORDER BY ALL""").fetchall()
    return {(c, g, n): tuple(ids) for c, g, n, ids in rows}


def describe(where: str | None, n_runs: int) -> str:
    """One line naming the selection."""
    return f"{n_runs} runs" + (f" where {where}" if where else " (the whole store)")
