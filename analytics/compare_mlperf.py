"""``bench compare --metric mlperf_score | time_to_train``: MLPerf result sets that differ in one factor,
as a speedup.

A score is a time to train, lower is better, so the ratio of a pair is the speedup of A over B:
score(B) / score(A) ("A100 trains 2.0x faster than V100"). ``mlperf_score`` compares the official score
(``score_min``: the round's olympic mean; sets without one are unmatched with their verdict),
``time_to_train`` the plain mean of the ok runs' times (``time_to_train_min``), which a set with too few
runs for a score still has. Rows of the view ``mlperf_scores`` pair when
they agree on every column of ``SAME`` but the compared factor (benchmark, framework family, devices,
nodes, division; ``ignore`` takes some out: ``--ignore framework`` compares an A100 on PyTorch with a TPU on
JAX); the other columns (submitter, system, ...) may differ, and each pair lists how they differ between
its two sets (``Pair.differs``: both sides' systems). A side with two rows for one such key is
a user error: narrow it with --where (e.g. ``tags['submitter'] = 'NVIDIA'``) or use ``best``. Rows without a score (a verdict
other than ``scored``) are listed as unmatched with their verdict. Statistics are those of
``bench.analytics.compare`` (median, geometric mean with its t CI, TOST).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics.compare import CompareResult, Pair, Unmatched, resolve_value, summarize
from bench.analytics.query import view_error
from bench.analytics.ratio_stats import suspect_pairs
from bench.sql.errors import BenchError, UsageError

if TYPE_CHECKING:
    import duckdb

#: --metric -> the column of ``mlperf_scores`` it compares (minutes, lower is better).
METRICS = {"mlperf_score": "score_min", "time_to_train": "time_to_train_min"}
VIEW = "mlperf_scores"
#: What a pair must agree on (the compared factor excepted).
SAME = ("benchmark", "framework", "num_devices", "num_nodes", "division")
#: The factors one may compare.
FACTORS = ("device_model", "device_type", "submitter", "system", "framework", "num_devices", "num_nodes",
           "division", "round", "availability", "host_processor_model")
#: What a pair shows of both sides when they differ.
_SYSTEM = ("submitter", "system", "framework", "device_model", "host_processor_model")
_COLUMNS = ("round", "division", "submitter", "system", "benchmark", "framework", "num_nodes", "num_devices",
            "device_type", "device_model", "host_processor_model", "availability", "score_min",
            "time_to_train_min", "n_ok", "verdict")


def compare_scores(con: duckdb.DuckDBPyConnection, factor: str, a: str, b: str, where: str | None = None,
                   equivalence: float | None = None, metric: str = "mlperf_score", best: bool = False,
                   ignore: tuple[str, ...] = (), keep_suspects: bool = False) -> CompareResult:
    """Pairs of result sets whose ``factor`` is A and B; ratio = speedup of A over B (see the docstring).
    ``best``: where a side has several sets for one pair key (two systems of 8 GPUs), keep its fastest
    instead of refusing. Raises UsageError for an unknown factor or a bad --where, BenchError for an A / B
    that matches no value or several, or (without ``best``) a side with two rows for one pair key."""
    if factor not in FACTORS:
        raise UsageError(f"unknown factor {factor!r} for --metric {metric}; choose one of: {', '.join(FACTORS)}")
    col = METRICS[metric]
    if equivalence is not None and not 0 < equivalence < 1:
        raise UsageError(f"--equivalence is a fraction such as 0.05 (for ±5%), got {equivalence}")
    rows = _rows(con, where)
    values = list({r[factor] for r in rows})
    set_a, set_b = (_values(values, factor, text) for text in (a, b))
    if set_a & set_b:
        raise UsageError(f"--a {a!r} and --b {b!r} both select {factor} = {sorted(set_a & set_b)!r}; "
                         "give texts that tell the two apart")
    sides: tuple[dict[tuple[Any, ...], dict[str, Any]], dict[tuple[Any, ...], dict[str, Any]]] = ({}, {})
    for r in rows:
        if r[factor] not in set_a and r[factor] not in set_b:
            continue
        side, key = sides[0 if r[factor] in set_a else 1], _key(r, factor, ignore)
        if best and key in side:
            if r[col] and (not side[key][col] or r[col] < side[key][col]):
                side[key] = r
            continue
        if key in side:
            raise BenchError(f"two result sets with {factor} = {r[factor]!r} have the same "
                             f"{', '.join(c for c in SAME if c != factor)} {key}: {side[key]['system']} and "
                             f"{r['system']}; narrow the selection with --where (e.g. \"tags['submitter'] = 'NVIDIA'\") "
                             "or take each side's fastest with --best")
        side[key] = r
    pairs, unmatched = [], []
    for key in sorted(sides[0].keys() | sides[1].keys(), key=repr):
        ra, rb = sides[0].get(key), sides[1].get(key)
        if ra is not None and rb is not None and ra[col] and rb[col]:
            differs = {c: (ra[c], rb[c]) for c in _SYSTEM if c != factor and ra[c] != rb[c]}
            pairs.append(Pair(_config(ra, factor), ra["num_devices"], ra[col], rb[col], rb[col] / ra[col],
                              differs=differs))
            continue
        for which, row, other in (("a", ra, rb), ("b", rb, ra)):
            if row is not None:
                reason = ("no partner" if other is None else _why_none(row) if not row[col]
                          else f"partner: {_why_none(other)}")
                unmatched.append(Unmatched(which, _config(row, None), row["num_devices"], row[col], reason))
    va, vb = (_shown(s) for s in (set_a, set_b))
    odd = () if keep_suspects else suspect_pairs(pairs)  # as bench.analytics.compare does
    return CompareResult(factor, va, vb, metric, tuple(pairs), tuple(unmatched),
                         summarize([p.ratio for p in pairs if all(p is not o for o in odd)], equivalence), odd)


def _why_none(row: dict[str, Any]) -> str:
    """Why a set has no value: its verdict, or, for time_to_train, that no run ended ok."""
    return row["verdict"] if row["verdict"] != "scored" or not row["n_ok"] else "no ok run"


def _values(values: list[Any], factor: str, text: str) -> set[Any]:
    """The values of ``factor`` that ``text`` selects: an exact value (a number for a count); else, for a
    text factor, every value that holds it, case-insensitively (``A100`` selects each A100 variant's
    name, as systems spell it); raises UsageError when none does."""
    if factor in ("num_devices", "num_nodes"):
        return {resolve_value(values, factor, text, numeric=True)}
    present = [v for v in values if isinstance(v, str)]
    hits = {v for v in present if v == text} or {v for v in present if text.lower() in v.lower()}
    if not hits:
        shown = ", ".join(sorted(repr(v) for v in present)[:30])
        raise UsageError(f"{text!r} matches no value of {factor}; candidates: {shown}")
    return hits


def _shown(selected: set[Any]) -> Any:
    """One value as itself; several as their sorted list."""
    return next(iter(selected)) if len(selected) == 1 else sorted(selected, key=str)


def _key(row: dict[str, Any], factor: str, ignore: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """What a partner must share; the framework by its family, the first word of how logs and systems name
    it ("PyTorch NVIDIA Release 21.05" and "PyTorch 1.9.0" are both pytorch)."""
    return tuple(_family(row[c]) if c == "framework" else row[c] for c in SAME if c != factor and c not in ignore)


def _family(framework: Any) -> Any:
    return framework.split()[0].lower() if isinstance(framework, str) and framework.split() else framework


def _rows(con: duckdb.DuckDBPyConnection, where: str | None) -> list[dict[str, Any]]:
    import duckdb

    sql = f"SELECT {', '.join(_COLUMNS)} FROM {VIEW}" + (f" WHERE ({where})" if where else "")
    try:
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error as e:
        raise view_error(e, VIEW, where) from e
    return list(table.to_pylist())


def _config(row: dict[str, Any], drop: str | None) -> dict[str, Any]:
    return {c: row[c] for c in _COLUMNS if c not in (drop, "score_min", "time_to_train_min", "n_ok", "verdict")}
