"""``bench check``: the CI gate. Are the new runs of each series slower than the runs before them?

- **Candidates**: the runs ``--where`` selects. Each series (bench.analytics.changes) with a candidate is
  judged once, on all its candidates together.
- **Baseline**: with ``--baseline-where``, the runs it selects in the same series. Without it, the
  series' runs ordered before its first candidate, and of those only the last level (the runs since the
  last change bench.analytics.changepoints finds there) less outliers: a series that got faster a month
  ago is judged against what it does now, and one throttled night does not widen the baseline.
- **Verdict**: on log values, the candidates' mean against the baseline's. A series is a ``regression``
  when its candidates are slower by more than ``threshold`` with significance: the one-sided t-test
  (Welch's; with one candidate, its prediction interval from the baseline's spread) that the ratio is
  below 1 - threshold (above 1 + threshold for a time) has p < ``alpha``. A series whose candidates all
  failed (no value) is ``failed``: a benchmark that stopped running is a regression too. A series with
  fewer than 2 baseline runs is ``no baseline`` and does not fail the gate.
- Exit codes (bench.runner.cli): 1 when a series is a regression or failed, 0 otherwise, 2 for a bad
  argument: a threshold outside (0, 1), or a ``--where`` / ``--baseline-where`` that selects no run.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.analytics.changepoints import MIN_RUNS, detect, find_outliers, noise
from bench.analytics.changes import METRICS, Point, Series, load_series, what_changed
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

ALPHA = 0.05


@dataclass
class Verdict:
    series: dict[str, Any]
    label: str
    status: str  # regression, failed, ok, no baseline
    n_candidates: int
    n_baseline: int
    candidates_mean: float | None = None
    baseline_mean: float | None = None
    change: float | None = None  # candidates / baseline - 1 (geometric means)
    ci95: tuple[float | None, float | None] = (None, None)
    p_value: float | None = None  # one-sided: slower than the threshold allows
    first_candidate: str | None = None
    baseline_runs: tuple[str | None, str | None] = (None, None)  # first and last baseline run_id
    what_changed: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)


@dataclass
class CheckResult:
    metric: str
    threshold: float
    alpha: float
    verdicts: list[Verdict]

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status in ("regression", "failed")]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "passed": not self.failed}, indent=2, default=str)


def _selected(con: duckdb.DuckDBPyConnection, where: str, option: str) -> set[str]:
    import duckdb

    try:
        ids = {r[0] for r in con.execute(f"SELECT run_id FROM runs WHERE ({where})").fetchall()}
    except duckdb.Error as e:
        raise UsageError(f"{option} {where!r}: {e}") from e
    if not ids:
        raise UsageError(f"{option} {where!r} selects no run")
    return ids


def _baseline(earlier: list[Point], min_runs: int) -> list[Point]:
    """The last level of ``earlier`` less its outliers (module docstring)."""
    if len(earlier) >= 2 * min_runs:
        det = detect([p.value for p in earlier], min_runs=min_runs)
        out = {o.index for o in det.outliers}
        last = det.levels[-1]
        return [p for i, p in enumerate(earlier[last.start:last.end], last.start) if i not in out]
    logs = np.log([p.value for p in earlier])
    out = set(find_outliers(logs, noise(logs), min_runs))
    return [p for i, p in enumerate(earlier) if i not in out]


def judge(s: Series, cand: set[str], base_ids: set[str] | None, threshold: float, lower: bool,
          alpha: float = ALPHA, min_runs: int = MIN_RUNS) -> Verdict | None:
    """The verdict on one series (None when it has no candidate)."""
    from scipy.special import stdtr, stdtrit

    picked = [p for p in s.points if p.run_id in cand]
    failed = [r for r in s.left_out if r["run_id"] in cand and not r["reason"].startswith("no value of")]
    if not picked:
        return Verdict(s.describe, s.label, "failed", len(failed), 0) if failed else None
    if base_ids is not None:
        base = [p for p in s.points if p.run_id in base_ids and p.run_id not in cand]
    else:
        first = s.points.index(picked[0])
        base = _baseline([p for p in s.points[:first] if p.run_id not in cand], min_runs)
    v = Verdict(s.describe, s.label, "no baseline", len(picked), len(base), first_candidate=picked[0].run_id)
    v.candidates_mean = float(np.exp(np.mean(np.log([p.value for p in picked]))))
    if len(base) < 2:
        return v
    c, b = np.log([p.value for p in picked]), np.log([p.value for p in base])
    d = float(c.mean() - b.mean())
    vb = float(b.var(ddof=1))
    if len(c) >= 2:
        va, vbn = float(c.var(ddof=1)) / len(c), vb / len(b)
        se = math.sqrt(va + vbn)
        df = (va + vbn) ** 2 / (va ** 2 / (len(c) - 1) + vbn ** 2 / (len(b) - 1)) if se else 1.0
    else:  # one new run: where a run of the baseline's spread falls
        se, df = math.sqrt(vb * (1 / len(b) + 1)), float(len(b) - 1)
    margin = math.log1p(threshold) if lower else math.log1p(-threshold)
    if se == 0:
        p = 0.0 if (d > margin if lower else d < margin) else 1.0
    else:
        t = (d - margin) / se
        p = float(stdtr(df, -t) if lower else stdtr(df, t))
    half = float(stdtrit(df, 0.975)) * se
    v.baseline_mean = float(np.exp(b.mean()))
    v.change, v.ci95, v.p_value = math.expm1(d), (math.expm1(d - half), math.expm1(d + half)), p
    v.baseline_runs = (base[0].run_id, base[-1].run_id)
    v.status = "regression" if p < alpha else "ok"
    v.what_changed = what_changed(base[-1], picked[0])
    return v


def check(con: duckdb.DuckDBPyConnection, where: str, threshold: float = 0.05, baseline_where: str | None = None,
          metric: str = "images_per_sec", order_by: str | None = None, alpha: float = ALPHA,
          min_runs: int = MIN_RUNS) -> CheckResult:
    """Judge every series with a candidate (module docstring). Raises UsageError for a bad argument."""
    if not 0 < threshold < 1:
        raise UsageError(f"--threshold {threshold}: a fraction between 0 and 1 (0.05 = 5% slower)")
    if not where or not where.strip():
        raise UsageError("--where is required: it selects the candidate runs, e.g. \"started_at >= '2026-10-01'\"")
    cand = _selected(con, where, "--where")
    base_ids = _selected(con, baseline_where, "--baseline-where") if baseline_where else None
    lower = METRICS.get(metric, False)
    verdicts = [v for s in load_series(con, metric, order_by)
                if (v := judge(s, cand, base_ids, threshold, lower, alpha, min_runs)) is not None]
    order = {"failed": 0, "regression": 1, "no baseline": 2, "ok": 3}
    verdicts.sort(key=lambda v: (order[v.status], v.label))
    return CheckResult(metric, threshold, alpha, verdicts)

