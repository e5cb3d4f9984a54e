"""The runs ``bench fleet`` judges (bench.analytics.fleet), read in bounded memory: each host's values come
from the database as one list per host and workload, and only its ``RECENT`` newest runs are read whole
(their ``details``: the facts and per-GPU telemetry summaries that explain a finding). A store of a year of
a thousand hosts is 1.46 M runs; their details maps, read into Python, took 10 GB.

A workload is the configuration columns (``WORKLOAD_COLUMNS``) with the run's tags less those that say where
it ran (``selection.SYSTEM_TAGS``) and those that hold one value per host (``host_tags``: a rack, a site),
which are facts of the host. A run over several nodes belongs to its host set (``host_set``: ``n1+n2``).
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from bench.analytics.changes import FACT_EXCLUDED, SERIES_COLUMNS
from bench.analytics.fleet_model import FleetRun, HostRuns
from bench.analytics.results import first, rows
from bench.analytics.selection import SYSTEM_TAGS
from bench.sql.columns import GPU_LOAD_DETAILS

if TYPE_CHECKING:
    import duckdb

WORKLOAD_COLUMNS = tuple(c for c in SERIES_COLUMNS if c != "system")
#: the temporary table of the selection's runs by configuration (``load_runs``), which the flagged hosts'
#: histories read too (bench.analytics.fleet_history)
RUNS_TABLE = "_fleet_runs"
_HOSTS_TABLE = "_fleet_hosts"
#: how many of a host's newest runs of a workload are read whole: its facts are the most common over them, its
#: GPUs' telemetry the median (what explains its level now, not a driver it ran a year ago)
RECENT = 10

#: the most memory DuckDB may hold while bench fleet reads (it spills to a temporary folder beyond): the
#: whole-history fleet of a year of a thousand hosts held 1.9 GB without it, 1.5 GB with it, in the same time
#: (benchmarks/fleet_scale.py)
MEMORY_LIMIT_MB = 1500
_UNITS = {"": 1, "B": 1, "KB": 1e3, "KIB": 1024, "MB": 1e6, "MIB": 1024 ** 2, "GB": 1e9, "GIB": 1024 ** 3,
          "TB": 1e12, "TIB": 1024 ** 4}

def _default_limit() -> str:
    import duckdb

    return str(duckdb.connect(":memory:").execute("SELECT current_setting('memory_limit')").fetchall()[0][0])


Workloads = dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, HostRuns]]]


@contextmanager
def bounded_memory(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """``con`` with its memory limit lowered to ``MEMORY_LIMIT_MB`` (where it was higher) and a temporary folder
    of its own to spill to, both as they were afterwards (the report shares its connection)."""
    import duckdb

    limit, folder = first(con, "SELECT current_setting('memory_limit'), current_setting('temp_directory')") or ("", "")
    m = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", str(limit))
    current = float(m.group(1)) * _UNITS.get(m.group(2).upper(), 0) if m else 0.0
    spill = tempfile.mkdtemp(prefix="bench-fleet-")
    lowered = 0 < MEMORY_LIMIT_MB * 1e6 < current
    try:
        if lowered:
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT_MB}MB'")
        try:
            con.execute("SET temp_directory = ?", [spill])  # not the working folder DuckDB would use
        except duckdb.Error:  # it has spilled already: it keeps its folder
            folder = None
        yield
    finally:
        if lowered:  # its default again (a limit set by hand, as DuckDB prints it: to 0.1 GiB)
            con.execute("RESET memory_limit" if limit == _default_limit() else f"SET memory_limit = '{limit}'")
        if folder is not None:
            try:
                con.execute("SET temp_directory = ?", [folder])
            except duckdb.Error:
                pass
        shutil.rmtree(spill, ignore_errors=True)


def load_runs(con: duckdb.DuckDBPyConnection, metric: str, days: int | None) -> tuple[Workloads, set[str], int, int]:
    """The runs of ``con`` by workload: key -> (its description, host -> its runs); the host tags (``host_tags``);
    how many runs were older than the window (runs started more than ``days`` days before their workload's
    newest; None or 0: none); and how many had no host (or, over several nodes, no names of their nodes),
    which are left out."""
    from bench.sql.views import register_views

    register_views(con, ["run_configs"])
    cols = ", ".join(WORKLOAD_COLUMNS)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {RUNS_TABLE} AS
        SELECT {cols}, series_tags, run_id, status, host, num_nodes, started_at, {metric},
               max(started_at) OVER (PARTITION BY {cols}) AS newest
        FROM run_configs""")
    recent = "started_at IS NULL OR started_at >= newest - to_days(CAST(? AS INTEGER))" if days else "true"
    params = [days] if days else []
    hosted = "(host IS NOT NULL OR coalesce(num_nodes, 1) > 1)"
    counted = first(con, f"SELECT count(*) FILTER (WHERE {hosted} AND NOT ({recent})), count(*) FILTER (WHERE NOT {hosted}) "
                         f"FROM {RUNS_TABLE}", params)
    older, hostless = (int(counted[0]), int(counted[1])) if counted else (0, 0)
    ok = f"(status = 'ok' AND {metric} > 0 AND isfinite({metric}))"
    # one row per workload, host (or the nodes a multi-node run names) and tags: its ok values, the statuses of
    # its other runs, and its newest runs' ids
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {_HOSTS_TABLE} AS
        WITH c AS (
            SELECT c.*, CASE WHEN coalesce(c.num_nodes, 1) > 1 THEN coalesce(r.details['hosts'], r.details['node_names'])
                        END AS names
            FROM {RUNS_TABLE} c LEFT JOIN (SELECT run_id, details FROM runs WHERE coalesce(num_nodes, 1) > 1) r
                 USING (run_id)
            WHERE {hosted} AND ({recent}))
        SELECT {cols}, any_value(series_tags) AS series_tags, host, coalesce(num_nodes, 1) AS nodes, names,
               list({metric}) FILTER (WHERE {ok}) AS ok_values,
               list(status) FILTER (WHERE NOT coalesce({ok}, false)) AS other_statuses,
               list(run_id ORDER BY started_at DESC NULLS LAST)[1:{RECENT}] AS newest_runs
        FROM c GROUP BY {cols}, CAST(series_tags AS VARCHAR), host, coalesce(num_nodes, 1), names""", params)
    names = [*WORKLOAD_COLUMNS, "series_tags", "host", "nodes", "names", "ok_values", "other_statuses", "newest_runs"]
    groups = []
    for row in rows(con, f"SELECT {', '.join(names)} FROM {_HOSTS_TABLE}"):
        g = dict(zip(names, row, strict=True))
        if g["nodes"] > 1:
            g["host"] = host_set({"hosts": g["names"]})
        if g["host"] is None:
            hostless += len(g["ok_values"] or []) + len(g["other_statuses"] or [])
            continue
        g["tags"] = {k: v for k, v in (g["series_tags"] or {}).items() if k not in SYSTEM_TAGS}
        groups.append(g)
    seen: dict[tuple[Any, ...], dict[str, dict[str, set[Any]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
    for g in groups:
        for k, v in g["tags"].items():
            seen[tuple(g[c] for c in WORKLOAD_COLUMNS)][k][g["host"]].add(v)
    by_base = {base: host_tags(values) for base, values in seen.items()}
    said = set().union(*by_base.values()) if by_base else set()
    details = _newest_details(con, metric)
    out: Workloads = {}
    for g in groups:
        mine = by_base.get(tuple(g[c] for c in WORKLOAD_COLUMNS), set())
        tags = {k: v for k, v in g["tags"].items() if k not in mine}
        key = (*(g[c] for c in WORKLOAD_COLUMNS), tuple(sorted(tags.items())))
        if key not in out:
            out[key] = ({**{c: g[c] for c in WORKLOAD_COLUMNS if g[c] is not None}, "tags": tags}, {})
        runs = out[key][1].setdefault(g["host"], HostRuns())
        runs.values += [float(v) for v in g["ok_values"] or []]
        runs.other_statuses += list(g["other_statuses"] or [])
        for run_id in g["newest_runs"] or []:
            status, value, version, d = details.get(run_id, (None, None, None, None))
            facts = {k: v for k, v in (d or {}).items() if k not in FACT_EXCLUDED}
            facts |= {k: v for k, v in g["tags"].items() if k in mine and k not in facts}
            if version is not None:
                facts["framework_version"] = version
            measured = float(value) if isinstance(value, (int, float)) and status == "ok" and value > 0 and math.isfinite(value) \
                else None
            runs.newest.append(FleetRun(run_id, g["host"], str(status), measured, facts,
                                        (d or {}).get(GPU_LOAD_DETAILS), (d or {}).get("gpus")))
    return out, said, older, hostless


def _newest_details(con: duckdb.DuckDBPyConnection, metric: str) -> dict[str, tuple[Any, Any, Any, dict[str, Any]]]:
    """run_id -> (status, value, framework version, details) of the runs ``_HOSTS_TABLE`` names as newest."""
    found = rows(con, f"""
        SELECT c.run_id, c.status, c.{metric}, r.framework_version, r.details
        FROM (SELECT DISTINCT unnest(newest_runs) AS run_id FROM {_HOSTS_TABLE}) n
             JOIN {RUNS_TABLE} c USING (run_id) JOIN runs r USING (run_id)""")
    return {run_id: (status, value, version, d or {}) for run_id, status, value, version, d in found}


def host_tags(values: dict[str, dict[str, set[Any]]]) -> set[str]:
    """The tags of one workload's runs (``values``: tag -> host -> the values its runs hold) that are facts of
    their hosts (``rack=r07``, ``site=dc2``): each host's runs hold one value of it, and its hosts two values or
    more. They never split the hosts into peer groups (a rack of 4 hosts has no majority to be compared with);
    they can explain why a host is slower."""
    return {k for k, hosts in values.items()
            if all(len(v) == 1 for v in hosts.values()) and len(set().union(*hosts.values())) >= 2}


def host_set(details: dict[str, Any]) -> str | None:
    """A multi-node run's nodes as one name, ``n1+n2`` (sorted), from its nccl-tests rank lines (``hosts``) or
    its run.json (``node_names``); None when neither names them."""
    names = details.get("hosts") or details.get("node_names")
    nodes = sorted({n.strip() for n in str(names).split(",") if n.strip() and n.strip() != "None"}) if names else []
    return "+".join(nodes) if len(nodes) > 1 else None
