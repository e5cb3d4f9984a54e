"""``bench changes``: every series' change points, each with what changed on the machine.

A series is one workload on one system followed through time (``series_id`` of sql/run_configs.sql, the
one place that says what it is). Its points are its ok runs with a positive value of the metric, ordered
by ``started_at`` or by the user's ``--order-by`` expression (ties by started_at, then run_id; the count of
tied runs is reported). The method is bench.analytics.changepoints'.

Rules for what does not fit:

- Runs without a value (failed, invalid, or not ok) are not points; they are listed beside their series
  (``left_out``), as are runs whose ``--order-by`` value is NULL. A failed run whose log left a column
  unknown (its node count) is listed beside the one series that agrees with everything it does say.
- A series with fewer than ``2 * min_runs`` points is ``too_short``, with its count.
- A series whose runs came from several hosts under one ``system`` tag gets a note naming them: the tag
  says they are one system, and the note says so rather than merging them silently.
- What changed at a step: every system fact (``framework_version`` and the ``details`` map, less the
  run's own bookkeeping: ``FACT_EXCLUDED``) whose value differs between the last point before the step
  and the first point on the new level; a fact present on one side only counts (old or new is None).
- A series in two clock states (its values alternate between two separated levels:
  bench.analytics.changepoints.modes) is listed with both levels and how often each occurs, and each state
  is followed as a series of its own: a switch is neither a change nor an outlier.
- Steps in a row one way whose levels between them slope that way are one change, a slide, reported over
  its span (changepoints.slides); flat levels between steps (a staircase) stay several changes.
- A run far off its series among its last ``min_runs - 1`` runs is a *suspect*, reported at once: the
  nights after it make it an outlier (they come back) or the first run of a change (they stay).
- Lower-is-better metrics (times) are handled with their direction: ``slower`` says which way a step went.
"""

from __future__ import annotations

import gc
import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from itertools import accumulate, compress, pairwise
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from bench.analytics.changepoints import ALPHA, MIN_RUNS, Detection, Level, detect_states
from bench.analytics.query import view_error
from bench.sql.columns import GPU_LOAD_DETAILS
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.decisions import Decision

#: metric -> True when lower is better
METRICS = {"images_per_sec": False, "throughput": False, "time_to_train_s": True, "wall_time_s": True}
#: details keys that are a run's own bookkeeping, not a fact of its machine, or its telemetry; and ``gpus``, every
#: GPU's settings as one JSON text (the first GPU's are facts of their own: gpu_driver, gpu_power_limit_w, ...)
FACT_EXCLUDED = frozenset({"run_id", "launcher_status", "exit_code", "argv", "env", "spec", "slurm_job_id", "slurm_end",
                           GPU_LOAD_DETAILS, "gpus",
                           # what today's trainers and nccl-tests measured (ingest/formats): a run's own figures
                           "avg_busbw", "in_place_busbw", "peak_busbw", "peak_busbw_bytes", "tflops_per_device",
                           "mfu_pct", "deepspeed_running_avg_samples_per_sec", "last_mean_batch_time_s",
                           "nan_loss_steps", "nccl_warnings", "restarts", "skipped_iterations", "skipped_steps",
                           "throughput_note", "throughput_source", "train_iters", "warmup_excluded"})
#: how many runs before a change an acceptance of its series may lie and still cover it
ACCEPT_SLACK = 2
#: the series' columns shown to a person, in this order (NULL ones are left out)
SERIES_COLUMNS = ("model", "batch_size_per_device", "precision", "num_devices", "device_model", "system",
                  "framework", "dataset", "data", "mode", "data_format", "variable_update", "all_reduce",
                  "num_nodes", "device_type", "throughput_unit")


# one object per run (2 M at 10,000 series: slots, no dict each), compared by identity (by value, finding one in
# 200 costs 200 dict compares)
@dataclass(eq=False, slots=True)
class Point:
    run_id: str
    started_at: datetime | None
    order: Any
    value: float
    facts: Mapping[str, str]  # read-only: points may share one


@dataclass
class Series:
    series_id: str
    describe: dict[str, Any]  # SERIES_COLUMNS and tags
    points: list[Point] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)  # run_id, status, reason
    hosts: set[str] = field(default_factory=set)
    ties: int = 0
    label: str = ""


#: always in a series' label; the other columns and tags only where series differ in them
LABELLED = ("model", "batch_size_per_device", "precision")


def series_label(d: dict[str, Any], varying: set[str]) -> str:
    """"resnet50 b256 fp16 on host h1": model, batch size and precision, the columns and tags in
    ``varying`` (those the series differ in), and the system."""
    parts = [str(d.get("model") or "?")]
    if d.get("batch_size_per_device") is not None:
        parts.append(f"b{d['batch_size_per_device']}")
    if d.get("precision"):
        parts.append(str(d["precision"]))
    for k in SERIES_COLUMNS:
        if k in varying and k not in LABELLED and k != "system" and d.get(k) is not None:
            parts.append(f"x{d[k]}" if k == "num_devices" else f"{d[k]} nodes" if k == "num_nodes" else str(d[k]))
    parts += [f"{k}={v}" for k, v in sorted((d.get("tags") or {}).items()) if f"tags.{k}" in varying and k != "system"]
    return " ".join(parts) + (f" on {d['system_kind']} {d['system']}" if d.get("system") else "")


def _label_all(series: list[Series]) -> None:
    """Give every series its label, naming what tells it apart from the others."""
    seen: dict[str, set[str]] = defaultdict(set)
    keys = {k for s in series for k in s.describe.get("tags", {})}
    for s in series:
        for k in SERIES_COLUMNS:
            seen[k].add(str(s.describe.get(k)))
        for k in keys:
            seen[f"tags.{k}"].add(str(s.describe.get("tags", {}).get(k)))
    varying = {k for k, values in seen.items() if len(values) > 1}
    for s in series:
        s.label = series_label(s.describe, varying)


def load_series(con: duckdb.DuckDBPyConnection, metric: str, order_by: str | None = None, facts: bool = True
                ) -> list[Series]:
    """Every series of the runs of ``con`` (a store connection, narrowed or not), its points in order. With
    ``facts=False`` the points' facts hold the framework version only (reading every run's details is most of
    the time on a big store): :func:`load_facts` reads those of the runs a caller compares."""
    import duckdb

    from bench.sql.views import register_views

    if metric not in METRICS:
        raise UsageError(f"--metric {metric!r}: one of {', '.join(METRICS)}")
    register_views(con, ["run_configs"])
    order = order_by or "started_at"
    # what describes a series is read from its first run only (NULL on the others: a MAP per run is slow to fetch)
    described = (*(c for c in SERIES_COLUMNS if c != "system"), "series_system", "series_tags")
    desc = ", ".join(f"CASE WHEN j._first THEN j.{c} END AS {c}" for c in described)
    within = "order_key NULLS LAST, started_at NULLS LAST, run_id"  # a series' runs in order
    # by start time and without facts, run_configs alone: each read of the view runs scans every run's details, and
    # the order is then started_at itself (not fetched twice: a time is the costliest value to fetch)
    plain = order_by is None and not facts
    if plain:
        j = "SELECT c.*, started_at AS order_key, NULL AS details FROM run_configs c"
    else:
        j = f"""SELECT c.*, o.order_key, o.details FROM run_configs c JOIN (
                    SELECT run_id, ({order}) AS order_key, {_FACTS_SQL if facts else 'NULL'} AS details FROM runs
                ) o USING (run_id)"""
    query = f"""
        WITH j AS ({j})
        SELECT j.series_id, j.run_id, j.status, j.host, j.started_at, j.{metric} AS value, {'NULL' if plain else 'j.order_key'},
               j.framework_version, j.details, {desc}
        FROM (SELECT *, row_number() OVER (PARTITION BY series_id ORDER BY {within}) = 1 AS _first FROM j) j
        ORDER BY series_id, {within}"""
    zone = con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0] if plain else None
    try:
        cur = con.execute(query)
    except duckdb.Error as e:
        if order_by:
            raise UsageError(f"--order-by {order_by!r}: {e}") from e
        raise view_error(e, "run_configs", None) from e
    with cycles_uncollected():
        columns = _columns(cur, zone) if zone else [list(c) for c in zip(*cur.fetchall(), strict=True)]
        found = _series(columns or [[] for _ in range(9 + len(described))], described, plain, metric, order)
    _adopt_pointless(found)
    _label_all(list(found.values()))
    return list(found.values())


def _series(columns: list[list[Any]], described: tuple[str, ...], plain: bool, metric: str, order: str
            ) -> dict[str, Series]:
    """load_series' series from its query's columns (rows in series order, each series' runs in its order): a
    run with a value and an order is a point, any other left out with why. Built by column, not row by row (2 M
    runs at 10,000 series): the points in one pass, then each series takes its slice."""
    run_ids, statuses, hosts, started, values, orders, versions, details = columns[1:9]
    sids, n = columns[0], len(columns[0])
    if plain:  # ordered by start; facts of the framework version alone, one read-only mapping per version, shared
        orders = started
        one = {fv: MappingProxyType({} if fv is None else {"framework_version": fv}) for fv in set(versions)}
        facts: list[Mapping[str, str]] = [one[fv] for fv in versions]
    else:
        facts = [_facts(d, fv) for d, fv in zip(details, versions, strict=True)]
    keep = [st == "ok" and v is not None and v > 0 and o is not None
            for st, v, o in zip(statuses, values, orders, strict=True)]
    points = list(map(Point, compress(run_ids, keep), compress(started, keep), compress(orders, keep),
                      map(float, compress(values, keep)), compress(facts, keep)))
    kept = list(accumulate(keep, initial=0))  # kept[i]: points before row i
    tied = [p.order == q.order for p, q in pairwise(points)]  # tied[k]: point k + 1 has point k's order
    firsts = [0, *(i for i in range(1, n) if sids[i] != sids[i - 1])] if n else []
    found: dict[str, Series] = {}
    for a, b in zip(firsts, [*firsts[1:], n], strict=True):
        r = {c: columns[9 + k][a] for k, c in enumerate(described)}  # the series' first run holds its description
        d = {c: r[c] for c in SERIES_COLUMNS if c != "system" and r[c] is not None}
        tags = dict(r["series_tags"] or {})
        d.update(system=r["series_system"], system_kind="system" if tags.get("system") else "host", tags=tags)
        s = found[sids[a]] = Series(sids[a], d, points[kept[a]:kept[b]], ties=sum(tied[kept[a]:max(kept[b] - 1, 0)]))
        s.hosts.update(filter(None, hosts[a:b]))
        for i in (i for i in range(a, b) if not keep[i]):
            status = statuses[i]
            reason = (f"status {status}" if status != "ok" else f"no {metric}" if values[i] is None or not values[i] > 0
                      else f"no value of {order}")
            s.left_out.append({"run_id": run_ids[i], "status": status, "reason": reason, "started_at": started[i]})
    return found


@contextmanager
def cycles_uncollected() -> Iterator[None]:
    """Python's cycle collector off while millions of objects that hold no cycle are made (a fleet's points and
    verdicts, freed by reference counting as any): each full collection walks every object alive, and 2 M points
    set off 14 of them (a third of load_series' time at 10,000 series). Back as it was when the block ends, and
    any cycle made meanwhile is collected then."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _columns(cur: duckdb.DuckDBPyConnection, name: str) -> list[list[Any]]:
    """``cur``'s columns, each a list of the values fetchall() gives, fetched by column (a third of fetchall's
    time on 200,000 runs): each column as numpy gives it, made Python values, its times made aware in the
    connection's time zone ``name`` as DuckDB makes them. Only for columns whose numpy type is exact (text, whole
    numbers, doubles, MAPs, times in microseconds)."""
    from datetime import UTC
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(name)

    def aware(values: list[Any]) -> list[Any]:
        if name in ("UTC", "Etc/UTC"):  # numpy's times are UTC: only the zone to add
            return [t if t is None else t.replace(tzinfo=zone) for t in values]
        return [t if t is None else t.replace(tzinfo=UTC).astimezone(zone) for t in values]

    return [aware(c.tolist()) if c.dtype.kind == "M" else c.tolist() for c in cur.fetchnumpy().values()]


def _adopt_pointless(found: dict[str, Series]) -> None:
    """A series without a point (only failed runs) joins the one series with points that agrees with every
    column and tag it knows: a failed run's log may not say its node count, and its runs belong beside the
    series it was meant to extend. With none or several such series, it stays on its own."""
    full = [s for s in found.values() if s.points]
    for sid, s in list(found.items()):
        if s.points:
            continue
        known = {k: v for k, v in s.describe.items() if k not in ("tags", "system_kind") and v is not None}
        match = [t for t in full if all(t.describe.get(k) == v for k, v in known.items())
                 and s.describe["tags"].items() <= t.describe["tags"].items()]
        if len(match) == 1:
            match[0].left_out.extend(s.left_out)
            match[0].hosts |= s.hosts
            del found[sid]


#: SQL: a run's facts from its details (its bookkeeping and long per-GPU JSON left in the store)
_FACTS_SQL = ("map_from_entries([e FOR e IN map_entries(details) IF NOT list_contains(["
              + ", ".join(f"'{k}'" for k in sorted(FACT_EXCLUDED)) + "], e.key)])")


def _facts(details: Any, framework_version: str | None) -> dict[str, str]:
    if details is None:  # load_series(facts=False): 200,000 points on a fleet's store
        return {} if framework_version is None else {"framework_version": framework_version}
    facts = dict(details)
    if framework_version is not None:
        facts["framework_version"] = framework_version
    return facts


def load_facts(con: duckdb.DuckDBPyConnection, run_ids: set[str]) -> dict[str, dict[str, str]]:
    """run_id -> its facts (as a point of load_series(facts=True) holds them), for ``run_ids``."""
    if not run_ids:
        return {}
    rows = con.execute(f"SELECT run_id, {_FACTS_SQL}, framework_version FROM runs "  # one list: no row-by-row inserts
                       "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [sorted(run_ids)]).fetchall()
    return {r: _facts(d, fv) for r, d, fv in rows}


def facts_diff(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """Every fact whose value differs between two runs' facts: name -> (old, new)."""
    keys = sorted(before.keys() | after.keys())
    return {k: (before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)}


def what_changed(before: Point, after: Point) -> dict[str, tuple[str | None, str | None]]:
    """Every fact whose value differs between two runs: name -> (old, new)."""
    return facts_diff(before.facts, after.facts)


@dataclass
class Change:
    series: dict[str, Any]
    series_id: str
    label: str
    run_id: str
    at: str | None
    order_value: Any
    before: dict[str, Any]
    after: dict[str, Any]
    change: float
    ci95: tuple[float | None, float | None]
    p_value: float
    slower: bool
    what_changed: dict[str, tuple[str | None, str | None]]
    accepted: dict[str, str] | None = None  # the acceptance that covers it (bench.analytics.decisions)
    slide: dict[str, Any] | None = None  # a slide (changepoints.slides): steps, runs, to, to_run
    compared: tuple[str, str] | None = None  # the runs what_changed compares: the last before it, the first on it


@dataclass
class Changes:
    metric: str
    lower_is_better: bool
    min_runs: int
    changes: list[Change] = field(default_factory=list)
    outliers: list[dict[str, Any]] = field(default_factory=list)
    #: runs far off their series among its last ``min_runs - 1``: an outlier, or the first of a new level
    suspects: list[dict[str, Any]] = field(default_factory=list)
    too_short: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_series: int = 0
    accepted: list[dict[str, Any]] = field(default_factory=list)  # every acceptance in force, with its series
    #: series in two clock states (changepoints.modes): their levels (geometric mean, share) and switches
    states: list[dict[str, Any]] = field(default_factory=list)
    #: series_id -> (series, its detection), for the report's figures
    detections: dict[str, tuple[Series, Detection]] = field(default_factory=dict, repr=False)

    def to_json(self) -> str:
        out = asdict(replace(self, detections={}))  # the series' points are not copied only to be dropped
        out.pop("detections")
        return json.dumps(out, indent=2, default=str)


def _level(level: Level, points: list[Point]) -> dict[str, Any]:
    return {"mean": level.mean, "ci95": [level.ci_low, level.ci_high], "n": level.n,
            "from": _when(points[level.start]), "to": _when(points[level.end - 1])}


def _when(p: Point) -> str | None:
    return p.started_at.isoformat() if p.started_at is not None else None


def find_changes(con: duckdb.DuckDBPyConnection, metric: str = "images_per_sec", order_by: str | None = None,
                 min_runs: int = MIN_RUNS, alpha: float = ALPHA, accepted: dict[str, Decision] | None = None
                 ) -> Changes:
    """The changes, outliers and unusable runs of every series of ``con`` (see the module docstring). A
    change is ``accepted`` when an acceptance of its series lies at or after it, or up to ACCEPT_SLACK runs
    before it (where a later night moved the step by a run or two): bench check's reference starts there."""
    if min_runs < 2:
        raise UsageError(f"--min-runs {min_runs}: at least 2 (a level needs a mean and a spread)")
    lower = METRICS.get(metric, False)
    out = Changes(metric, lower, min_runs)
    for s in load_series(con, metric, order_by, facts=False):
        out.n_series += 1
        for r in s.left_out:
            out.left_out.append({"series": s.describe, "label": s.label, **r})
        if s.describe.get("system_kind") == "system" and len(s.hosts) > 1:
            out.notes.append(f"{s.label}: its runs came from {len(s.hosts)} hosts ({', '.join(sorted(s.hosts)[:5])}"
                             f"{', ...' if len(s.hosts) > 5 else ''}), one series because their system tag is one")
        if s.ties:
            out.notes.append(f"{s.label}: {s.ties} runs share their order value with the run before; "
                             "tied runs are ordered by started_at, then run_id")
        taken = [(i, accepted[p.run_id]) for i, p in enumerate(s.points) if accepted and p.run_id in accepted]
        out.accepted += [{"label": s.label, "run_id": d.run_id, "at_run": _when(s.points[i]), "by": d.by, "on": d.at,
                          "why": d.why} for i, d in taken]
        if len(s.points) < 2 * min_runs:
            if s.points:
                out.too_short.append({"series": s.describe, "label": s.label, "n": len(s.points)})
            continue
        states, parts = detect_states([p.value for p in s.points], min_runs=min_runs, alpha=alpha)
        if states is None:
            out.detections[s.series_id] = (s, parts[0][1])
        else:  # two clock states: each is a series of its own, and a switch is neither a change nor an outlier
            out.states.append({"series": s.describe, "label": s.label, "switches": states.switches,
                               "levels": [{"mean": m, "share": sh} for m, sh in zip(states.means, states.shares, strict=True)]})
        for idx, det in parts:
            state = "" if states is None else f" (in its {('slow', 'fast')[int(states.state(math.log(s.points[idx[0]].value)))]} state)"
            _series_changes(out, s, [s.points[i] for i in idx], det, lower, taken, state)
    facts = load_facts(con, {r for c in out.changes if c.compared for r in c.compared})
    for c in out.changes:  # the facts of the runs compared only: reading every run's is most of the time
        if c.compared:
            c.what_changed = facts_diff(facts.get(c.compared[0], {}), facts.get(c.compared[1], {}))
    return out


def _series_changes(out: Changes, s: Series, points: list[Point], det: Detection, lower: bool,
                    taken: list[tuple[int, Decision]], state: str = "") -> None:
    """Add the changes and outliers ``det`` found in ``points`` (a series, or one of its two states: ``state``
    says which, after the label) to ``out``; an acceptance covers a change as find_changes says."""
    where = {id(p): i for i, p in enumerate(s.points)}
    label = s.label + state
    for o in det.outliers:
        p = points[o.index]
        # among the last nights, too new to tell an outlier from the first runs of a new level
        (out.suspects if o.index > len(points) - out.min_runs else out.outliers).append(
            {"series": s.describe, "label": label, "run_id": p.run_id, "at": _when(p), "value": o.value,
             "expected": o.expected, "change": o.change})
    starts = dict(det.slides)
    inside = {k for i, j in det.slides for k in range(i + 1, j + 1)}
    for n, step in enumerate(det.steps):
        if n in inside:
            continue
        first, last = points[step.index], points[step.index - 1]
        change, low, high, p_value = step.change, step.ci_low, step.ci_high, step.p_value
        after, slide = step.after, None
        if n in starts:  # a slide: one change from the level before its first step to the level after its last
            end = det.steps[starts[n]]
            change, low, high, p_value = det.slide_tests[det.slides.index((n, starts[n]))]
            after = end.after
            slide = {"steps": starts[n] - n + 1, "runs": end.index - step.index + 1, "to": _when(points[end.index]),
                     "to_run": points[end.index].run_id}
        at = where[id(first)]
        out.changes.append(Change(
            s.describe, s.series_id, label, first.run_id, _when(first), first.order,
            _level(step.before, points), _level(after, points), change, (low, high), p_value,
            change > 0 if lower else change < 0, what_changed(last, first),
            next(({"run_id": d.run_id, "by": d.by, "at": d.at, "why": d.why} for i, d in reversed(taken)
                  if i >= at - ACCEPT_SLACK), None), slide, (last.run_id, first.run_id)))
