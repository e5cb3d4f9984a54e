"""``bench compare``: the ratio A/B of paired configurations that differ in one factor only.

A configuration row (of the view ``configs``, or ``scaling`` for the metrics speedup and efficiency)
whose factor F is A is paired with the row whose F is B and that agrees on every other factor, on
``tags``, on ``num_devices`` and on ``num_nodes``. F is a factor column or a tag (``--factor
system``). Each pair gives ratio = a_value / b_value (dimensionless).

When F is a system factor (device_model, device_type, framework_version, or a system tag such as
``system``: bench.analytics.selection.SYSTEM_TAGS, or a software tag, ``xla``: SOFTWARE_TAGS) and the metric is
images/sec, the two sides are systems and pair on the *workload* only (bench.analytics.selection.WORKLOAD, the
framework, the other tags, the device count and nodes): the other system facts may differ, and each pair lists
those that do (``differs``). Where both sides ran a workload at one batch size, they pair at equal batch sizes; where they
share none, each side's best batch size is paired with the other's, marked ``own_batch`` with both batch
sizes (as Lambda's tables compare GPUs, each at the batch it fits). Where a side has several rows for one
pair (two systems with the same GPU), its fastest is taken. A different framework never pairs: ``--ignore
framework`` lets it (bench.analytics.selection). The summary gives n, median, geometric mean (the mean for ratios), min, max and a
t-interval 95% CI of the geometric mean (bench.analytics.ratio_stats); ``equivalence`` adds a paired TOST on the log ratios.

Choices it makes:
- A value is usable when it is a finite number > 0. A configuration without one (only failed runs,
  so ``images_per_sec`` is NULL) is never a ratio: it and its partner are listed as unmatched.
- speedup / efficiency: the two speedups must be measured from the same baseline device count, else the
  ratio compares different things ("different baseline"). Pairs at the baseline point have speedup
  1 / 1 by construction (a tautology, not evidence): they are left out of the pairs and the summary,
  and counted in ``Summary.n_baseline_excluded``. A row at the baseline device count on more nodes has a
  measured speedup (not exactly 1) and stays a pair.
- The CI: a t-interval on the log ratios, exponentiated (bench.analytics.ratio_stats). No CI for one pair.
- Equivalence within ±m: the bounds are ±log(1 + m) on the log ratio (symmetric, so swapping A and B
  gives the same verdict), tested with statsmodels ``ttost_paired(log a, log b)``: one-sample TOST on
  the paired log differences. Pairing matters: between configurations the speed varies 50-fold, an
  unpaired test (``ttost_ind``) would drown the A/B effect in that spread. "yes" when the TOST p-value
  < 0.05; "no" means equivalence was not shown (a real difference, or too much noise); fewer than 3
  pairs is "not enough data".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.analytics.query import view_error
from bench.analytics.ratio_stats import Summary, summarize, suspect_pairs
from bench.analytics.selection import FACTORS, SOFTWARE_TAGS, SYSTEM, SYSTEM_TAGS, WORKLOAD
from bench.sql.errors import BenchError, UsageError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


#: A device's type follows from its model, so a compare over either lets both differ: P100 against a CPU
#: server (``--factor device_model --a P100 --b NULL``) or gpu against tpu.
DEVICE_FACTORS = ("device_type", "device_model")
#: Older factor names, still accepted: the GPU-only columns are the device columns of GPU runs.
ALIASES = {"gpu_model": "device_model"}
#: Factor columns that belong to the system a run ran on (bench.analytics.selection.SYSTEM; the framework
#: itself is not one of them: a different framework never pairs unless --ignore framework).
SYSTEM_FACTORS = tuple(f for f in SYSTEM if f != "framework")
#: Tags two systems' rows may differ in and still pair (each pair names them in ``differs``).
SIDE_TAGS = (*SYSTEM_TAGS, *SOFTWARE_TAGS)
#: Which view holds each metric.
METRICS = {"images_per_sec": "configs", "throughput": "configs", "speedup": "scaling", "efficiency": "scaling"}
#: The metrics that are a configuration's rate (not a ratio to a baseline). ``throughput`` is in the
#: configuration's throughput_unit, a workload factor: two sides of a pair count the same thing (tokens/sec
#: against tokens/sec), so a ratio never divides one unit by another.
RATES = ("images_per_sec", "throughput")
#: The columns compare reads from its view, besides a tag it compares.
_COLUMNS = {*FACTORS, "tags", "num_devices", "num_nodes", "baseline_devices", *METRICS}
_NULL_WORD = "null"  # --a NULL selects configurations where the factor is NULL (e.g. device_model of a CPU run that does not name its CPU)


@dataclass(frozen=True)
class Pair:
    """One matched pair. ``config``: every other factor, ``tags`` (dict) and ``num_nodes``. A pair of
    systems also says each side's batch size, whether they are each side's own best (``own_batch``), and
    the system facts that differ between the two rows (``differs``: name -> (a, b))."""

    config: dict[str, Any]
    num_devices: int | None
    a_value: float
    b_value: float
    ratio: float
    a_batch: int | None = None
    b_batch: int | None = None
    own_batch: bool = False
    differs: dict[str, tuple[Any, Any]] | None = None


@dataclass(frozen=True)
class Unmatched:
    """A configuration row without a usable partner. ``side`` is "a" or "b"; ``config`` holds every
    factor (the compared one included), ``tags`` and ``num_nodes``."""

    side: str
    config: dict[str, Any]
    num_devices: int | None
    value: float | None
    reason: str  # "no partner" | "no value" | "partner has no value" | "different baseline"


@dataclass(frozen=True)
class CompareResult:
    """The outcome of :func:`compare`; ``a`` and ``b`` are the resolved factor values."""

    factor: str
    a: Any
    b: Any
    metric: str
    pairs: tuple[Pair, ...]
    unmatched: tuple[Unmatched, ...]
    summary: Summary
    #: Pairs left out of ``summary`` by ratio_stats.SUSPECT_RULE (still among ``pairs``); none with keep_suspects.
    suspects: tuple[Pair, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: factor, a, b, metric, pairs, unmatched, summary."""
        s, eq = self.summary, self.summary.equivalence
        return {
            "factor": self.factor, "a": self.a, "b": self.b, "metric": self.metric,
            "pairs": [{**p.config, "num_devices": p.num_devices, "a_value": p.a_value, "b_value": p.b_value,
                       "ratio": p.ratio, "a_batch": p.a_batch, "b_batch": p.b_batch, "own_batch": p.own_batch,
                       "differs": {k: list(v) for k, v in (p.differs or {}).items()}} for p in self.pairs],
            "unmatched": [{"side": u.side, **u.config, "num_devices": u.num_devices, "value": u.value,
                           "reason": u.reason} for u in self.unmatched],
            "summary": {
                "n": s.n, "median": s.median, "geomean": s.geomean, "min": s.min, "max": s.max,
                "ci95": [s.ci95_low, s.ci95_high], "n_baseline_excluded": s.n_baseline_excluded,
                "equivalence": None if eq is None else
                {"margin": eq.margin, "verdict": eq.verdict, "p_value": eq.p_value, "n": eq.n},
            },
            "suspects": [{**p.config, "num_devices": p.num_devices, "ratio": p.ratio} for p in self.suspects],
        }


@dataclass(frozen=True)
class ViewRows:
    """Every row of one view as compare reads it (Arrow schema and Python dicts)."""

    schema: pa.Schema
    rows: list[dict[str, Any]]


@dataclass
class CompareCache:
    """What a caller of many compares on one selection keeps between them (bench report's findings and
    ratio tables): each view's rows, converted to Python once, by (view, where); and each result, by its
    arguments (the leaderboard and the ratio tables ask for some of the same comparisons)."""

    views: dict[tuple[str, str | None], ViewRows] = field(default_factory=dict)
    results: dict[tuple[Any, ...], CompareResult] = field(default_factory=dict)


def compare(
    con: duckdb.DuckDBPyConnection, factor: str, a: str, b: str, metric: str = "images_per_sec",
    where: str | None = None, equivalence: float | None = None, cache: CompareCache | None = None,
    keep_suspects: bool = False,
) -> CompareResult:
    """Pair the configurations whose ``factor`` is A with those whose factor is B; ratio = A / B.

    ``con`` must have the view ``configs`` (metric images_per_sec) or ``scaling`` (speedup, efficiency).
    ``where`` is a SQL boolean expression over that view's columns, applied before matching A and B.
    ``equivalence`` is the margin m of "A and B within ±m" (0.05 = 5%). Raises BenchError for an
    unknown factor or metric, a bad --where, or an A / B that matches no value or several. ``cache``: kept
    by a caller that compares many times on one selection (:class:`CompareCache`); filled here. A pair far
    below the others (ratio_stats.SUSPECT_RULE) stays among the pairs but is left out of the summary and
    named in ``suspects``, unless ``keep_suspects``.
    """
    factor = ALIASES.get(factor, factor)
    tag = factor not in FACTORS
    if tag and not factor.replace("-", "_").isidentifier():
        raise UsageError(f"unknown factor {factor!r}; choose one of: {', '.join(FACTORS)}, or a tag such as system")
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}; choose one of: {', '.join(METRICS)}")
    if equivalence is not None and not 0 < equivalence < 1:
        raise UsageError(f"--equivalence is a fraction such as 0.05 (for ±5%), got {equivalence}")
    view = METRICS[metric]
    asked = (factor, a, b, metric, where, equivalence, keep_suspects)
    if cache is not None and asked in cache.results:
        return cache.results[asked]
    read = None if cache is None else cache.views.get((view, where))
    if read is None:
        read = _read(con, view, where)
        if cache is not None:
            cache.views[(view, where)] = read
    if metric not in read.schema.names:
        raise BenchError(f"the {view} view has no {metric} column (a store written before it was added: "
                         "bench ingest --rebuild)")
    of = (lambda r: _tags(r["tags"]).get(factor)) if tag else (lambda r: r[factor])
    values = list(dict.fromkeys(of(r) for r in read.rows))
    if tag and all(v is None for v in values) and values:
        raise UsageError(f"unknown factor {factor!r}: neither a factor ({', '.join(FACTORS)}) nor a tag of "
                         "the selected runs")
    numeric = not tag and _is_numeric(read.schema.field(factor).type)
    va, vb = (resolve_value(values, factor, text, numeric=numeric) for text in (a, b))
    if va == vb:
        raise UsageError(f"--a and --b both select {factor} = {va!r}; compare two different values")
    rows = [dict(r) | ({factor: v} if tag else {}) for r in read.rows if (v := of(r)) == va or v == vb]
    if metric in RATES and (factor in SYSTEM_FACTORS or factor in SIDE_TAGS):
        pairs, unmatched, n_base = (*pair_systems(rows, factor, va, metric), 0)
    else:
        pairs, unmatched, n_base = pair_rows(rows, factor, va, metric)
    odd = () if keep_suspects else suspect_pairs(pairs)
    summary = summarize([p.ratio for p in pairs if all(p is not o for o in odd)], equivalence, n_baseline_excluded=n_base)
    result = CompareResult(factor, va, vb, metric, tuple(pairs), tuple(unmatched), summary, odd)
    if cache is not None:
        cache.results[asked] = result
    return result


def _read(con: duckdb.DuckDBPyConnection, view: str, where: str | None) -> ViewRows:
    """The columns compare reads of every row of ``view`` that ``where`` selects (one query; the pairing
    is done in Python); a failure names the view and the --where."""
    import duckdb

    metrics = [m for m, v in METRICS.items() if v == view] + (["baseline_devices"] if view == "scaling" else [])
    try:
        have = set(con.sql(f"SELECT * FROM {view} LIMIT 0").columns)  # a table made by hand may lack a metric
        cols = ", ".join([*FACTORS, "tags", "num_devices", "num_nodes", *(m for m in metrics if m in have)])
        table = con.sql(f"SELECT {cols} FROM {view} WHERE ({where or 'true'})").to_arrow_table()
    except duckdb.Error as e:
        raise view_error(e, view, where) from e
    return ViewRows(table.schema, table.to_pylist())


def _is_numeric(t: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def resolve_value(values: Sequence[Any], factor: str, text: str, *, numeric: bool = False) -> Any:
    """The one distinct value of ``factor`` that ``text`` names.

    Order: an exact match; the word NULL for a NULL value; then (text factors only) a case-insensitive
    substring that picks out exactly one value. Numeric factors take a number and match it exactly.
    Raises UsageError (exit 2), listing the candidates, when nothing or more than one value matches.
    """
    present = [v for v in values if v is not None]
    if numeric:
        try:
            wanted: Any = float(text)
        except ValueError:
            wanted = None
        hits = [v for v in present if wanted is not None and v == wanted]
    else:
        hits = [v for v in present if v == text]
    if not hits and text.strip().lower() == _NULL_WORD and None in values:
        return None
    if not hits and not numeric:
        hits = [v for v in present if text.lower() in v.lower()]
    if len(hits) == 1:
        return hits[0]
    if not values:
        raise UsageError(f"{text!r} matches no value of {factor}: the selected runs have none (an empty store, "
                         "or a --where that selects nothing)")
    shown = ", ".join(sorted("NULL" if v is None else repr(v) for v in (hits or values))[:30])
    problem = "matches several values" if hits else "matches no value"
    raise UsageError(f"{text!r} {problem} of {factor}; candidates: {shown}")


def _key(row: dict[str, Any], factor: str) -> tuple[Any, ...]:
    """What a partner must agree on: every other factor, the tags, num_devices and num_nodes.

    Over a device factor both device_type and device_model may differ, so one CPU server (1 cpu device)
    pairs with the 1-GPU run of the same configuration ("1 P100 is ~5.3x a two-socket server").
    """
    free = DEVICE_FACTORS if factor in DEVICE_FACTORS else (factor,)
    others = tuple(row[f] for f in FACTORS if f not in free)
    tags = tuple(sorted((k, v) for k, v in _tags(row["tags"]).items() if k != factor))
    return (*others, tags, row["num_devices"], row["num_nodes"])


def _tags(v: Any) -> dict[str, Any]:
    """A MAP value as a dict (Arrow gives a list of (key, value) pairs; NULL is no tags)."""
    return {} if v is None else dict(v)


def _config(row: dict[str, Any], drop: str | None) -> dict[str, Any]:
    cfg = {f: row[f] for f in FACTORS if f != drop}
    cfg |= {k: v for k, v in row.items() if k not in _COLUMNS and k != drop}  # a tag factor, as its own column
    tags = {k: v for k, v in _tags(row["tags"]).items() if k not in cfg and k != drop}
    return {**cfg, "tags": tags, "num_nodes": row["num_nodes"]}


def pair_systems(rows: list[dict[str, Any]], factor: str, va: Any, metric: str) -> tuple[list[Pair], list[Unmatched]]:
    """Pairs of two systems on the workload (see the module docstring): at equal batch sizes where the
    sides share one, else each side at its own best batch size."""
    groups: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for r in rows:
        groups.setdefault(_workload_key(r, factor), ([], []))[0 if r[factor] == va else 1].append(r)
    pairs, unmatched = [], []
    for key in sorted(groups, key=_sort_key):
        a_rows, b_rows = groups[key]
        ok_a, ok_b = [r for r in a_rows if _usable(r[metric])], [r for r in b_rows if _usable(r[metric])]
        unmatched += [_unmatched(side, r, metric, "no value") for side, rs in (("a", a_rows), ("b", b_rows))
                      for r in rs if not _usable(r[metric])]
        common = {r["batch_size_per_device"] for r in ok_a} & {r["batch_size_per_device"] for r in ok_b}
        used: list[dict[str, Any]] = []
        if common:
            for batch in sorted(common, key=lambda v: (v is not None, v or 0)):
                ra, rb = _best(ok_a, metric, batch), _best(ok_b, metric, batch)
                used += [ra, rb]
                pairs.append(_system_pair(ra, rb, factor, metric, False))
            unmatched += [_unmatched(side, r, metric, "no partner at this batch size")
                          for side, rs in (("a", ok_a), ("b", ok_b)) for r in rs if r["batch_size_per_device"] not in common]
        elif ok_a and ok_b:
            ra, rb = _best(ok_a, metric), _best(ok_b, metric)
            used += [ra, rb]
            pairs.append(_system_pair(ra, rb, factor, metric, True))
        if used:
            unmatched += [_unmatched(side, r, metric, "slower than its side's row of the pair")
                          for side, rs in (("a", ok_a), ("b", ok_b)) for r in rs
                          if all(r is not u for u in used) and (r["batch_size_per_device"] in common or not common)]
        else:  # one side has no row, or only rows without a value
            why = "partner has no value" if a_rows and b_rows else "no partner"
            unmatched += [_unmatched(side, r, metric, why) for side, rs in (("a", ok_a), ("b", ok_b)) for r in rs]
    return pairs, unmatched


def _workload_key(row: dict[str, Any], factor: str) -> tuple[Any, ...]:
    """What two systems' rows must share to pair: the workload less the batch size, the framework, the tags
    that are not system tags, the device count and nodes."""
    tags = tuple(sorted((k, v) for k, v in _tags(row["tags"]).items() if k != factor and k not in SIDE_TAGS))
    workload = tuple(row[f] for f in WORKLOAD if f != "batch_size_per_device")
    return (*workload, row["framework"], tags, row["num_devices"], row["num_nodes"])


def _best(rows: list[dict[str, Any]], metric: str, batch: Any = ...) -> dict[str, Any]:
    """The fastest row (at ``batch`` when given): a side's best system, or its best batch size."""
    return max((r for r in rows if batch is ... or r["batch_size_per_device"] == batch), key=lambda r: float(r[metric]))


def _system_pair(ra: dict[str, Any], rb: dict[str, Any], factor: str, metric: str, own: bool) -> Pair:
    """A pair of two systems' rows, with what differs between them besides ``factor``."""
    config = {f: ra[f] for f in (*WORKLOAD, "framework")}
    config["batch_size_per_device"] = None if own else ra["batch_size_per_device"]
    ta, tb = _tags(ra["tags"]), _tags(rb["tags"])
    config["tags"] = {k: v for k, v in ta.items()  # what the sides share (a software tag too, where it is the same)
                      if k != factor and (k not in SIDE_TAGS or (k in SOFTWARE_TAGS and tb.get(k) == v))}
    config["num_nodes"] = ra["num_nodes"]
    config |= {f: ra[f] for f in SYSTEM_FACTORS if f != factor and ra[f] == rb[f]}
    facts = [(f, ra[f], rb[f]) for f in FACTORS if f not in (factor, *WORKLOAD, "framework")]
    facts += [(k, ta.get(k), tb.get(k)) for k in sorted(set(ta) | set(tb)) if k in SIDE_TAGS and k != factor]
    differs = {name: (x, y) for name, x, y in facts if x != y
               and not (factor in DEVICE_FACTORS and name in DEVICE_FACTORS)}
    x, y = float(ra[metric]), float(rb[metric])
    return Pair(config, ra["num_devices"], x, y, x / y, ra["batch_size_per_device"], rb["batch_size_per_device"],
                own, differs)


def _usable(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v) and v > 0


def pair_rows(
    rows: list[dict[str, Any]], factor: str, va: Any, metric: str,
) -> tuple[list[Pair], list[Unmatched], int]:
    """Split rows (each with factor va or the other value) into pairs, unmatched rows and the number of
    pairs left out at the baseline device count. Pairs come sorted by configuration and device count."""
    sides: tuple[dict[tuple[Any, ...], dict[str, Any]], dict[tuple[Any, ...], dict[str, Any]]] = ({}, {})
    for r in rows:
        side = sides[0 if r[factor] == va else 1]
        k = _key(r, factor)
        if k in side:
            raise BenchError(f"the {METRICS[metric]} view has two rows for one configuration: {_config(r, None)}")
        side[k] = r
    pairs, unmatched, n_base = [], [], 0
    for k in sorted(sides[0].keys() | sides[1].keys(), key=_sort_key):
        ra, rb = sides[0].get(k), sides[1].get(k)
        if ra is None or rb is None:
            unmatched += [_unmatched(s, r, metric, "no partner") for s, r in zip("ab", (ra, rb), strict=True) if r]
            continue
        reasons = _why_unpaired(ra, rb, metric)
        if reasons:
            unmatched += [_unmatched("a", ra, metric, reasons[0]), _unmatched("b", rb, metric, reasons[1])]
        elif _at_baseline(ra, rb, metric):
            n_base += 1
        else:
            x, y = float(ra[metric]), float(rb[metric])
            pairs.append(Pair(_config(ra, factor), ra["num_devices"], x, y, x / y))
    return pairs, unmatched, n_base


def _why_unpaired(ra: dict[str, Any], rb: dict[str, Any], metric: str) -> tuple[str, str] | None:
    """(reason for a, reason for b) when two rows with the same key do not make a pair, else None."""
    ok_a, ok_b = _usable(ra[metric]), _usable(rb[metric])
    if not (ok_a and ok_b):
        return ("partner has no value" if ok_a else "no value", "partner has no value" if ok_b else "no value")
    if metric not in RATES and ra["baseline_devices"] != rb["baseline_devices"]:
        return ("different baseline", "different baseline")
    return None


def _at_baseline(ra: dict[str, Any], rb: dict[str, Any], metric: str) -> bool:
    """Both rows are their configuration's baseline point: speedup x / x, exactly 1 (so is efficiency).
    At the baseline device count on more nodes the speedup is a measurement, not 1, and stays a pair."""
    return (metric not in RATES and ra["num_devices"] == ra["baseline_devices"]
            and ra[metric] == 1.0 and rb[metric] == 1.0)


def _unmatched(side: str, row: dict[str, Any], metric: str, reason: str) -> Unmatched:
    v = row[metric]
    return Unmatched(side, _config(row, None), row["num_devices"], None if v is None else float(v), reason)


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sort keys with NULLs first and without comparing None to a value."""
    return tuple((v is not None, v if v is not None else 0) for v in key)
