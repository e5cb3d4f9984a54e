"""Multiplicative factor effects on throughput: OLS of log(images_per_sec) on the factors that vary.

Model: log(images_per_sec) = b0 + sum over factors of b[factor, level] (treatment coding: the reference
level of each factor has b = 0), fitted by OLS (statsmodels formula API) on the ok runs of the selection,
one observation per run. exp(b[factor, level]) is the throughput of ``level`` relative to the reference
level, other factors held equal: a geometric-mean ratio. The 95% CI and the p-value (two-sided t test of
b = 0) come from the OLS standard errors and are mapped through exp. The model has main effects only: it
assumes factors multiply (a P100 speeds every model up by the same factor); interactions are not fitted.

Factors: model, device_model, data, mode (train / inference), batch_size_per_device, variable_update,
precision, num_devices; only those with at least two distinct values among the runs used enter the model.
A factor confounded with earlier ones (every fp16 run is a P100 run, every NULL-precision run an
inference run) cannot be estimated apart from them: it is left out of the model and named in
``confounded`` with what it is aliased with, never given an effect that belongs to another factor. All are categorical. num_devices is
categorical too, not log2(num_devices): scaling is rarely a power law, and a level per device count reads
directly as a (geometric-mean) speedup over the reference count, with no shape assumed.

A NULL factor value is not a level: "num_devices NULL is 17x 1" would compare runs that did not say with
runs that did. Where a factor is NULL in some runs and known in others, those runs are left out and counted
per factor (``unstated``, said in the output); a factor NULL in every run does not vary. Model names are
one model however they are spelled (``ResNet-50``, ``ResNet50`` and ``resnet50``: case and punctuation
aside), under the spelling most runs use, the others kept in ``spellings``. The reference level is, unless
given, the smallest value (numbers numerically, strings alphabetically). Runs with status != 'ok' or without
a positive images_per_sec are left out and counted in ``n_excluded``: a failed run is never a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.analytics.query import view_error
from bench.sql.errors import BenchError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

FACTORS = ("model", "device_model", "data", "mode", "batch_size_per_device", "variable_update", "precision", "num_devices")


@dataclass(frozen=True)
class Effect:
    """Throughput at ``level`` of ``factor`` relative to ``reference`` (ratio = exp(coef), unitless)."""

    factor: str
    level: Any
    reference: Any
    ratio: float
    ci95_low: float | None  # None when the model has no residual degrees of freedom
    ci95_high: float | None
    p_value: float | None
    n_runs: int  # ok runs at this level


@dataclass(frozen=True)
class EffectsResult:
    """The fitted model: one Effect per non-reference level of each factor that varies."""

    n_runs: int  # ok runs in the model
    n_excluded: int  # runs of the selection left out (status != 'ok' or no positive images_per_sec)
    factors: tuple[str, ...]  # the factors that vary, in FACTORS order
    fixed: dict[str, Any]  # the factors that do not vary, with their single value
    reference: dict[str, Any]  # the reference level of each varying factor
    reference_images_per_sec: float  # exp(intercept): fitted geometric mean at the reference levels
    r2: float | None  # on the log scale; None when every run has the same rate
    df_resid: int
    effects: tuple[Effect, ...]
    #: Factors that vary but were left out of the model, each with what it is confounded with.
    confounded: dict[str, str]
    #: Runs left out because a factor that others state is NULL in them: factor -> how many.
    unstated: dict[str, int] = field(default_factory=dict)
    #: Model names merged: the name used -> the other spellings of it in the selection.
    spellings: dict[str, list[str]] = field(default_factory=dict)


def effects(con: duckdb.DuckDBPyConnection, where: str | None = None,
            reference: Mapping[str, Any] | None = None) -> EffectsResult:
    """Fit the model over the ``runs`` view on ``con`` (filtered by the SQL ``where``).

    ``reference`` maps a factor to its reference level. Raises BenchError when the query fails, when no ok
    run or no varying factor is left, or when a reference level is not present. Confounded factors are
    left out and listed (see the module docstring).
    """
    import numpy as np

    frame, n_excluded = _read(con, where)
    frame, spellings = _one_name_per_model(frame)
    n_ok = len(frame)
    frame, unstated, unknown = _stated(frame)
    varying = [f for f in FACTORS if f not in unknown and frame[f].nunique(dropna=False) > 1]
    if not varying:
        gaps = "".join(f"; {f} is not stated in {n} of them" for f, n in unknown.items())
        raise _error(f"no factor varies among the {len(frame)} ok runs selected{gaps}: nothing to compare")
    fixed = {f: _py(frame[f].iloc[0]) for f in FACTORS if f not in varying and f not in unknown}
    confounded_by_gaps = {f: f"not stated in {n} of the {n_ok} ok runs (an unstated value is not a level), so "
                             "its effect is not separated from the others'" for f, n in unknown.items()}
    reference = dict(reference or {})
    if isinstance(reference.get("model"), str):  # any spelling of a model names it
        key = model_key(reference["model"])
        reference["model"] = next((m for m in frame["model"].dropna().unique() if model_key(m) == key), reference["model"])
    levels = {f: _levels(frame[f], f, reference.get(f, _FIRST)) for f in varying}
    data = frame.assign(log_ips=np.log(frame["images_per_sec"].to_numpy(dtype=float)))
    for f in varying:
        data[f] = _categorical(frame[f], levels[f])
    res, confounded = _fit(data, varying)
    confounded = {**confounded_by_gaps, **confounded}
    varying = [f for f in varying if f not in confounded]
    out: list[Effect] = []
    for f in varying:
        counts = data[f].value_counts()
        out.extend(_effect(res, f, level, levels[f][0], int(counts[_label(level)])) for level in levels[f][1:])
    r2 = float(res.rsquared) if float(res.centered_tss) > 0 else None
    return EffectsResult(len(frame), n_excluded, tuple(varying), fixed, {f: levels[f][0] for f in varying},
                         math.exp(float(res.params["Intercept"])), r2, round(float(res.df_resid)), tuple(out),
                         confounded, unstated, spellings)


def model_key(name: str) -> str:
    """What two spellings of one model share: lower case, letters and digits only (``ResNet-50`` -> ``resnet50``)."""
    return "".join(c for c in name.lower() if c.isalnum())


def _one_name_per_model(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """``frame`` with each model under one name per ``model_key`` (the spelling most runs use; ties: the first
    in sort order), and the merged spellings."""
    from collections import Counter

    counts = Counter(v for v in frame["model"] if isinstance(v, str))
    groups: dict[str, list[str]] = {}
    for name in sorted(counts):
        groups.setdefault(model_key(name), []).append(name)
    chosen = {k: max(names, key=lambda n: (counts[n], -names.index(n))) for k, names in groups.items()}
    spellings = {chosen[k]: [n for n in names if n != chosen[k]] for k, names in groups.items() if len(names) > 1}
    if not spellings:
        return frame, {}
    return frame.assign(model=frame["model"].map(lambda v: chosen[model_key(v)] if isinstance(v, str) else v)), spellings


#: Where a factor is NULL in at most this share of the ok runs, those runs are left out; in more, the factor is.
UNSTATED_SHARE = 0.1


def _stated(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int], dict[str, int]]:
    """Where a factor is NULL in some runs and stated in others: in at most ``UNSTATED_SHARE`` of the ok runs,
    ``frame`` without those runs (``unstated``: factor -> runs left out); in more, the factor is left out of
    the model instead (``unknown``: factor -> runs that do not state it), so that sparse columns do not
    empty it."""
    unstated: dict[str, int] = {}
    unknown: dict[str, int] = {}
    nulls = {f: int(frame[f].isna().sum()) for f in FACTORS}
    for f, n in nulls.items():
        if 0 < n < len(frame):
            (unstated if n <= UNSTATED_SHARE * len(frame) else unknown)[f] = n
    keep = ~frame[list(unstated)].isna().any(axis=1) if unstated else None
    return (frame if keep is None else frame[keep]).reset_index(drop=True), unstated, unknown


_FIRST = object()  # no reference given: the first level in sort order


def _read(con: duckdb.DuckDBPyConnection, where: str | None) -> tuple[pd.DataFrame, int]:
    """Ok runs with a positive finite rate (factors and images_per_sec), and how many others were selected."""
    import duckdb
    import numpy as np

    sql = f"SELECT status, images_per_sec, {', '.join(FACTORS)} FROM runs WHERE ({where or 'true'})"
    try:
        # Arrow -> pandas keeping integer factors with NULLs as Python ints/None (not floats: 32.0).
        frame = con.sql(sql).to_arrow_table().to_pandas(integer_object_nulls=True)
    except duckdb.Error as e:
        raise view_error(e, "runs", where) from e
    rate = frame["images_per_sec"].to_numpy(dtype=float, na_value=np.nan)
    used = (frame["status"] == "ok").to_numpy() & np.isfinite(rate) & (rate > 0)
    if not used.any():
        raise _error(f"no ok run with a throughput among the {len(frame)} runs selected")
    return frame[used].reset_index(drop=True), int((~used).sum())


def _py(v: Any) -> Any:
    """A pandas/numpy scalar as a plain Python value; NaN/NA -> None."""
    import pandas as pd

    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def _levels(col: pd.Series, factor: str, ref: Any) -> list[Any]:
    """Distinct values (plain Python, None for NULL) in sort order, the reference moved first."""
    values = {_py(v) for v in col.unique()}
    ordered = sorted(v for v in values if v is not None) + ([None] if None in values else [])
    if ref is _FIRST:
        return ordered
    if ref not in ordered:
        raise _error(f"reference {factor}={ref!r} is not among the runs selected; levels: {ordered}")
    return [ref] + [v for v in ordered if v != ref]


def _label(v: Any) -> str:
    return "NULL" if v is None else str(v)


def _categorical(col: pd.Series, levels: list[Any]) -> pd.Categorical:
    """String labels with the levels as categories, reference first (treatment coding uses the first)."""
    import pandas as pd

    return pd.Categorical(col.map(lambda v: _label(_py(v))), categories=[_label(v) for v in levels])


def _fit(data: pd.DataFrame, varying: list[str]) -> tuple[Any, dict[str, str]]:
    """OLS of log_ips on the categorical factors, leaving out each factor confounded with earlier ones
    (returned as factor -> what it is confounded with)."""
    import statsmodels.formula.api as smf

    confounded: dict[str, str] = {}
    kept = list(varying)
    while True:
        model = smf.ols("log_ips ~ " + " + ".join(kept), data)
        clash = _confounded(model.exog, list(model.exog_names), kept)
        if clash is None:
            return model.fit(), confounded
        factor, partner = clash
        confounded[factor] = partner
        kept.remove(factor)


def _confounded(exog: Any, names: list[str], varying: list[str]) -> tuple[str, str] | None:
    """None when the design has full column rank, else (the first factor aliased with earlier ones, what it
    is aliased with)."""
    import numpy as np

    def full_rank(factors: list[str]) -> bool:
        cols = [i for i, n in enumerate(names) if n == "Intercept" or n.split("[")[0] in factors]
        return bool(np.linalg.matrix_rank(exog[:, cols]) == len(cols))

    if full_rank(varying):
        return None
    k = next(k for k in range(len(varying)) if not full_rank(varying[: k + 1]))
    f, earlier = varying[k], varying[:k]
    partner = next((g for g in earlier if not full_rank([g, f])), None)
    if partner is not None or not earlier:
        return f, partner or "the intercept"
    return f, f"a combination of {', '.join(earlier)}"


def _effect(res: Any, factor: str, level: Any, ref: Any, n_runs: int) -> Effect:
    """exp of one coefficient, with its CI and p-value (None when df_resid is 0: no error estimate)."""
    import numpy as np

    name = f"{factor}[T.{_label(level)}]"
    coef = float(res.params[name])
    if res.df_resid < 1:
        return Effect(factor, level, ref, math.exp(coef), None, None, None, n_runs)
    low, high = (float(v) for v in res.conf_int(0.05).loc[name])
    with np.errstate(divide="ignore", invalid="ignore"):  # an exact fit: t = coef / 0
        p = float(res.pvalues[name])
    return Effect(factor, level, ref, math.exp(coef), math.exp(low), math.exp(high),
                  None if math.isnan(p) else p, n_runs)


def _error(message: str) -> Exception:

    return BenchError(message)


def effect_lines(r: EffectsResult) -> list[str]:
    """'model: resnet50 is 1.61× inception3 (+61%, 95% CI +55%..+67%, p < 0.001)', one per level."""
    r2 = "" if r.r2 is None else f", R² {r.r2:.3f} on the log scale"
    lines = [f"OLS of log(images/sec) over {r.n_runs} ok runs ({r.n_excluded} excluded){r2}."]
    if r.fixed:
        lines.append("Same in every run: " + ", ".join(f"{k}={_fmt_level(v)}" for k, v in r.fixed.items()))
    for factor, n in r.unstated.items():
        lines.append(f"{n} ok run(s) left out: their logs do not say their {factor}, which the others do "
                     "(an unstated value is not a level)")
    for name, others in r.spellings.items():
        lines.append(f"model {name} also spelled {', '.join(others)} in this selection: one model")
    for factor, partner in r.confounded.items():
        lines.append(f"{factor}: not estimated, {partner}" if partner.startswith("not stated") else
                     f"{factor}: not estimated, confounded with {partner} in this selection (every level of one "
                     "goes with one level of the other); narrow it with --where to compare them")
    for e in r.effects:
        if e.ci95_low is None or e.ci95_high is None or e.p_value is None:
            ci = "no CI: no residual degrees of freedom"
        else:
            p = "p < 0.001" if e.p_value < 0.001 else f"p = {e.p_value:.2g}"
            ci = f"95% CI {_fmt_pct(e.ci95_low)}..{_fmt_pct(e.ci95_high)}, {p}"
        lines.append(f"{e.factor}: {_fmt_level(e.level)} is {fmt_ratio(e.ratio)}× {_fmt_level(e.reference)} "
                     f"({_fmt_pct(e.ratio)}, {ci}; {e.n_runs} runs)")
    return lines


def _fmt_level(v: object) -> str:
    return "NULL" if v is None else str(v)


def fmt_ratio(ratio: float) -> str:
    """A ratio with about three significant digits and never a dangling point: 364, 36.4, 3.64, 0.364."""
    if ratio >= 100:
        return f"{ratio:,.0f}"
    if ratio >= 10:
        return f"{ratio:.1f}"
    return f"{ratio:.2f}" if ratio >= 1 else f"{ratio:.3g}"


def _fmt_pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"
