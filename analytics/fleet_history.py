"""When a flagged host turned slow (bench.analytics.fleet): its own series over the whole selection, the
workload's runs on that host in time order, read by bench changes' detection (bench.analytics.changepoints).
A host whose newest level follows a slower step is "slower since" that step's first run; one whose newest
steps slope down in a row (a slide) is "degrading" since the slide's first step, by the slide's total.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.analytics.changepoints import MIN_RUNS, detect

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.fleet_model import Outlier


def histories(con: duckdb.DuckDBPyConnection, table: str, metric: str, hosts: set[str], columns: tuple[str, ...],
              not_split: frozenset[str] | set[str] = frozenset()) -> dict[tuple[Any, ...], list[tuple[Any, float]]]:
    """(host, *workload columns, its other tags) -> (started_at, value) of each ok run of ``hosts`` in ``table``
    (rows of the view run_configs), in time order (runs without a time left out): one read for every flagged
    host. The tags are the run's series tags less ``not_split`` (those that say where it ran, and those that
    hold one value per host), as ``workload_tags`` gives a workload's: a tag that splits workloads splits
    histories too."""
    if not hosts:
        return {}
    out: dict[tuple[Any, ...], list[tuple[Any, float]]] = {}
    marks = ", ".join("?" for _ in hosts)
    rows = con.execute(
        f"SELECT host, {', '.join(columns)}, series_tags, started_at, {metric} FROM {table} WHERE host IN ({marks}) "
        f"AND status = 'ok' AND {metric} > 0 AND started_at IS NOT NULL ORDER BY started_at", sorted(hosts)).fetchall()
    for *key, tags, t, v in rows:
        if v is not None and math.isfinite(v):
            out.setdefault((*key, workload_tags(tags or {}, not_split)), []).append((t, float(v)))
    return out


def workload_tags(tags: dict[str, Any], not_split: frozenset[str] | set[str]) -> tuple[tuple[str, Any], ...]:
    """The tags of ``tags`` that split workloads (not in ``not_split``), sorted: part of a history's key."""
    return tuple(sorted((k, v) for k, v in tags.items() if k not in not_split))


def since(points: list[tuple[Any, float]], lower_is_better: bool) -> dict[str, Any] | None:
    """How the newest level came about, where a slower step (or a slide of them) led to it: ``kind`` (slower,
    degrading), ``from`` (the first run's start), ``change`` (relative, before to now), ``steps``; None where
    the host's series has no such step (it was always this slow, or too short to tell)."""
    if len(points) < 2 * MIN_RUNS:
        return None
    found = detect([v for _, v in points])
    if not found.steps:
        return None
    last = len(found.steps) - 1
    step = found.steps[last]
    if (step.change > 0) != lower_is_better:  # the newest step was faster: the host recovered
        return None
    for (first, end), test in zip(found.slides, found.slide_tests, strict=True):
        if end == last:
            return {"kind": "degrading", "from": points[found.steps[first].index][0], "change": test[0],
                    "steps": end - first + 1}
    return {"kind": "slower", "from": points[step.index][0], "change": step.change, "steps": 1}


def said(s: dict[str, Any]) -> str:
    day = s["from"].strftime("%Y-%m-%d") if hasattr(s["from"], "strftime") else str(s["from"])
    if s["kind"] == "degrading":
        return f"degrading: slower in {s['steps']} steps in a row since {day}, {s['change']:+.1%} in all"
    return f"slower since {day}: {s['change']:+.1%}"


def annotate(con: duckdb.DuckDBPyConnection, table: str, metric: str, lower_is_better: bool,
             flagged: list[tuple[dict[str, Any], Outlier]], columns: tuple[str, ...],
             not_split: frozenset[str] | set[str] = frozenset()) -> None:
    """Put when each flagged host (with its workload's columns and tags) turned slow in front of its reason
    (``since``), from the runs of ``table``; ``not_split``: the tags that do not split a workload."""
    found = histories(con, table, metric, {o.host for _, o in flagged}, columns, not_split)
    for workload, out in flagged:
        key = (out.host, *(workload.get(c) for c in columns), workload_tags(workload.get("tags") or {}, not_split))
        s = since(found.get(key, []), lower_is_better)
        if s is not None:
            out.since = {**s, "from": str(s["from"])}
            out.reason = f"{said(s)}; {out.reason}"
