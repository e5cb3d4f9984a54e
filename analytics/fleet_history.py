"""When a flagged host turned slow (bench.analytics.fleet): its own series over the whole selection, the
workload's runs on that host in time order, read by bench changes' detection (bench.analytics.changepoints).
A host whose newest level follows a slower step is "slower since" that step's first run; one whose newest
steps slope down in a row (a slide) is "degrading" since the slide's first step, by the slide's total, with
the telemetry trend that goes with it: each per-GPU summary (fleet_why.CHECKS) that got worse beyond its
practical bound from the first runs of the level before the slide to the newest runs ("GPU 3: mean SM clock under load 1975 ->
1702 MHz").
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from bench.analytics.changepoints import MIN_RUNS, detect
from bench.analytics.fleet_why import CHECKS, quantity
from bench.analytics.results import rows
from bench.sql.columns import GPU_LOAD_DETAILS

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.fleet_model import Outlier


def histories(con: duckdb.DuckDBPyConnection, table: str, metric: str, hosts: set[str], columns: tuple[str, ...],
              not_split: frozenset[str] | set[str] = frozenset()) -> dict[tuple[Any, ...], list[tuple[Any, float, str]]]:
    """(host, *workload columns, its other tags) -> (started_at, value, run_id) of each ok run of ``hosts`` in ``table``
    (rows of the view run_configs), in time order (runs without a time left out): one read for every flagged
    host. The tags are the run's series tags less ``not_split`` (those that say where it ran, and those that
    hold one value per host), as ``workload_tags`` gives a workload's: a tag that splits workloads splits
    histories too."""
    if not hosts:
        return {}
    out: dict[tuple[Any, ...], list[tuple[Any, float, str]]] = {}
    marks = ", ".join("?" for _ in hosts)
    found = rows(con, f"SELECT host, {', '.join(columns)}, series_tags, started_at, {metric}, run_id FROM {table} "
                      f"WHERE host IN ({marks}) AND status = 'ok' AND {metric} > 0 AND started_at IS NOT NULL "
                      "ORDER BY started_at", sorted(hosts))
    for *key, tags, t, v, run_id in found:
        if v is not None and math.isfinite(v):
            out.setdefault((*key, workload_tags(tags or {}, not_split)), []).append((t, float(v), run_id))
    return out


def workload_tags(tags: dict[str, Any], not_split: frozenset[str] | set[str]) -> tuple[tuple[str, Any], ...]:
    """The tags of ``tags`` that split workloads (not in ``not_split``), sorted: part of a history's key."""
    return tuple(sorted((k, v) for k, v in tags.items() if k not in not_split))


def since(points: list[tuple[Any, float, str]], lower_is_better: bool) -> dict[str, Any] | None:
    """How the newest level came about, where a slower step (or a slide of them) led to it: ``kind`` (slower,
    degrading), ``from`` (the first run's start), ``change`` (relative, before to now), ``steps``, ``index``
    (the first run's position in ``points``); None where the host's series has no such step (it was always
    this slow, or too short to tell)."""
    if len(points) < 2 * MIN_RUNS:
        return None
    found = detect([p[1] for p in points])
    if not found.steps:
        return None
    last = len(found.steps) - 1
    step = found.steps[last]
    if (step.change > 0) != lower_is_better:  # the newest step was faster: the host recovered
        return None
    for (first, end), test in zip(found.slides, found.slide_tests, strict=True):
        if end == last:
            at = found.steps[first].index
            level = found.steps[first - 1].index if first else 0  # where the level before the slide began
            return {"kind": "degrading", "from": points[at][0], "change": test[0], "steps": end - first + 1,
                    "index": at, "level_before": level}
    return {"kind": "slower", "from": points[step.index][0], "change": step.change, "steps": 1, "index": step.index}


def said(s: dict[str, Any]) -> str:
    day = s["from"].strftime("%Y-%m-%d") if hasattr(s["from"], "strftime") else str(s["from"])
    if s["kind"] == "degrading":
        trend = f"; {s['trend']}" if s.get("trend") else ""
        return f"degrading: slower in {s['steps']} steps in a row since {day}, {s['change']:+.1%} in all{trend}"
    return f"slower since {day}: {s['change']:+.1%}"


def annotate(con: duckdb.DuckDBPyConnection, table: str, metric: str, lower_is_better: bool,
             flagged: list[tuple[dict[str, Any], Outlier]], columns: tuple[str, ...],
             not_split: frozenset[str] | set[str] = frozenset()) -> None:
    """Put when each flagged host (with its workload's columns and tags) turned slow in front of its reason
    (``since``), from the runs of ``table``; ``not_split``: the tags that do not split a workload."""
    found = histories(con, table, metric, {o.host for _, o in flagged}, columns, not_split)
    dated = []
    for workload, out in flagged:
        key = (out.host, *(workload.get(c) for c in columns), workload_tags(workload.get("tags") or {}, not_split))
        points = found.get(key, [])
        s = since(points, lower_is_better)
        if s is not None:
            dated.append((out, s, points))
    sides = {o.host: (points[s["level_before"]:min(s["level_before"] + TREND_RUNS, s["index"])], points[-TREND_RUNS:])
             for o, s, points in dated if s["kind"] == "degrading"}
    loads = _loads(con, {p[2] for before, now in sides.values() for p in (*before, *now)})
    for out, s, _ in dated:
        if out.host in sides:
            before, now = sides[out.host]
            s["trend"] = trend([loads.get(p[2], []) for p in before], [loads.get(p[2], []) for p in now])
        s.pop("index")
        s.pop("level_before", None)
        out.since = {**s, "from": str(s["from"])}
        out.reason = f"{said(s)}; {out.reason}"


#: the runs on each side of a slide whose telemetry summaries are compared: the first of the level before it (a
#: slide starts before its first step is resolved), and the newest
TREND_RUNS = 5


def _loads(con: duckdb.DuckDBPyConnection, run_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """run_id -> its per-GPU telemetry summaries (bench.ingest.gpu_load), for ``run_ids``."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    out = {}
    for run_id, text in rows(con, f"SELECT run_id, details['{GPU_LOAD_DETAILS}'] FROM runs WHERE run_id IN ({marks})",
                             sorted(run_ids)):
        try:
            summaries = json.loads(text) if text else []
        except ValueError:
            continue
        out[run_id] = [s for s in summaries if isinstance(s, dict) and s.get("samples")] if isinstance(summaries, list) else []
    return out


def trend(before: list[list[dict[str, Any]]], now: list[list[dict[str, Any]]]) -> str:
    """The telemetry that went with a slide: for each check (fleet_why.CHECKS), the GPU (or all of them) whose
    median over the runs ``before`` it and over the newest runs (``now``; each run a list of per-GPU summaries)
    got worse by its practical bound or more, as ``GPU 3: mean SM clock under load 1975 -> 1702 MHz``."""
    def medians(side: list[list[dict[str, Any]]]) -> dict[tuple[Any, str], float]:
        got: dict[tuple[Any, str], list[float]] = defaultdict(list)
        for summaries in side:
            for s in summaries:
                for key, *_ in CHECKS:
                    if isinstance(s.get(key), (int, float)):
                        got[(s.get("gpu"), key)].append(float(s[key]))
        return {k: statistics.median(v) for k, v in got.items()}

    old, new = medians(before), medians(now)
    by_gpu: dict[Any, list[str]] = defaultdict(list)
    for key, words, unit, worse, (kind, bound) in CHECKS:
        moved = {g: (old[(g, k)], new[(g, k)]) for g, k in old if k == key and (g, k) in new}
        practical = {g: bound * abs(a) if kind == "rel" else bound for g, (a, _) in moved.items()}
        off = {g: ab for g, ab in moved.items() if worse * (ab[1] - ab[0]) >= practical[g]}
        if len(off) == len(moved) > 1:  # the whole node: the median GPU's
            a, b = (statistics.median(ab[i] for ab in off.values()) for i in (0, 1))
            by_gpu["all"].append(f"{words} {quantity(a, unit)} -> {quantity(b, unit)}")
            continue
        for g, (a, b) in sorted(off.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            by_gpu[g].append(f"{words} {quantity(a, unit)} -> {quantity(b, unit)}")
    return "; ".join(f"{'all GPUs' if g == 'all' else f'GPU {g}'}: {', '.join(said)}" for g, said in by_gpu.items())
