"""``bench check``: the CI gate. Are the new runs of each series slower than the level its users accepted?

- **Candidates**: the runs ``--where`` selects. Each series (bench.analytics.changes) with a candidate is
  judged once, on all its candidates together.
- **Reference**: with ``--baseline-where``, the runs it selects in the same series. Without it, a level
  the user controls, never one bench moved by itself: of the series' runs before its first candidate,
  those since the latest accepted change (``bench changes --accept``: bench.analytics.decisions), and of
  those the level before the earliest slower change found there (bench.analytics.changepoints), else the
  last level; outliers left out. A regression therefore fails every morning until someone accepts it, and a
  slide that bench changes sees as several steps is measured from where it began. A faster level needs no
  acceptance: losing it is a regression.
- **Two clock states**: where the runs since the latest acceptance alternate between two separated levels
  (bench.analytics.changepoints.states_of), tonight is judged against the runs in its own state only.
- **Noise**: sigma of one run, from the differences of neighbouring runs of the whole history before the
  candidates (bench.analytics.changepoints.noise: a step does not inflate it); where the history is
  shorter than 3 runs, the reference's standard deviation.
- **Rule**: on log values, d = mean(candidates) - mean(reference), with se = sigma * sqrt(1/n_c + 1/n_r) and
  Student's t with the history's degrees of freedom. A series is a ``regression`` when (1) it is slower
  with significance, one-sided p < ``alpha`` (default 0.002), and (2) its slowdown may reach ``threshold``:
  the 95% one-sided bound of the slowdown is at or beyond it. So a sustained slowdown of exactly the
  threshold fails 95% of the mornings where the noise lets (1) show, and a slowdown is let through only
  where it is shown to be smaller than the threshold or not shown at all.
- **Memory**: a regression nobody accepted goes on failing. When the level after the earliest slower change
  (tonight's runs among its points) is a regression by the rule with its bound taken at 99%
  (``LEVEL_BOUND``), or its first run failed its own morning and the level may still be ``CLEAR`` (0.8) x
  the threshold slower (hysteresis: a level at the threshold does not flap), tonight fails too, unless it is
  back to less than a third of that level's slowdown (``BACK``). Before a new level can be confirmed (its
  first nights), the same holds against the morning before, as judged then.
- **Other verdicts**: ``failed`` when every candidate failed (a benchmark that stopped running is a
  regression too); ``suspect`` when fewer than ``min_runs`` candidates (not yet a level) are more than
  OUTLIER_Z sigma off the reference either way without being a regression (it fails with
  ``fail_on="suspect"``); ``accepted`` when a candidate itself starts an accepted level; ``no baseline``
  with fewer than 2 reference runs; ``missing`` for a series that ran in the EXPECT_DAYS before the
  candidates (before the store's newest run, when there are none) and has no candidate.
- Measured, morning by morning, by ``make bench`` (benchmarks/gate_nights.py).
- Exit codes (bench.runner.commands.check_cmd): 1 when a series fails, 3 when there is nothing to judge (no run
  matches, or none that does is a point of a series) or a series is missing (and nothing fails), 0 otherwise, 2
  for a bad argument.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.analytics.changepoints import MIN_RUNS, OUTLIER_Z, detect, find_outliers, noise, states_of
from bench.analytics.changes import METRICS, Point, Series, load_series, what_changed
from bench.analytics.intervals import t95
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.decisions import Decision

ALPHA = 0.002
#: the one-sided confidence of the slowdown's bound against the threshold
BOUND = 0.95
#: the same for a level nobody accepted: a level at the threshold, measured a little short of it, still fails
LEVEL_BOUND = 0.99
#: a level that failed its first morning goes on failing until it is shown smaller than this share of the
#: threshold (hysteresis: a level at the threshold does not flap between failing and passing)
CLEAR = 0.8
#: tonight is back from a regression nobody accepted when its slowdown is less than this share of it
BACK = 1 / 3
#: a series with a run this many days before the candidates is expected among them
EXPECT_DAYS = 7
FAILING = {"regression": ("regression", "failed"), "suspect": ("regression", "failed", "suspect")}


@dataclass
class Verdict:
    series: dict[str, Any]
    label: str
    status: str  # regression, failed, suspect, accepted, ok, no baseline, missing
    n_candidates: int
    n_baseline: int
    candidates_mean: float | None = None
    baseline_mean: float | None = None
    change: float | None = None  # candidates / reference - 1 (geometric means)
    ci95: tuple[float | None, float | None] = (None, None)
    p_value: float | None = None  # one-sided: slower at all
    bound: float | None = None  # the slow end of the change's one-sided 95% interval
    first_candidate: str | None = None
    baseline_runs: tuple[str | None, str | None] = (None, None)  # first and last reference run_id
    accepted: dict[str, str] | None = None  # the acceptance the reference starts at
    last_run: str | None = None  # (missing) when the series last ran
    states: dict[str, Any] | None = None  # two clock states (changepoints.states_of): means, shares, tonight's
    since: dict[str, Any] | None = None  # the unaccepted slower level tonight is still on (run_id, change, n, from)
    what_changed: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)


@dataclass
class CheckResult:
    metric: str
    threshold: float
    alpha: float
    verdicts: list[Verdict]
    fail_on: str = "regression"
    n_candidates: int = 0

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status in FAILING[self.fail_on]]

    @property
    def missing(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "missing"]

    @property
    def judged(self) -> int:
        """Series judged (a verdict other than missing)."""
        return len(self.verdicts) - len(self.missing)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 3 if self.missing or not self.n_candidates or not self.judged else 0

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "passed": self.exit_code == 0, "exit_code": self.exit_code},
                          indent=2, default=str)


def _selected(con: duckdb.DuckDBPyConnection, where: str, option: str) -> set[str]:
    import duckdb

    try:
        return {r[0] for r in con.execute(f"SELECT run_id FROM runs WHERE ({where})").fetchall()}
    except duckdb.Error as e:
        raise UsageError(f"{option} {where!r}: {e}") from e


def reference(history: list[Point], lower: bool, min_runs: int) -> tuple[list[Point], list[Point]]:
    """The reference level of ``history`` (the runs since the latest acceptance; module docstring), and the
    runs of the level after its earliest slower change (empty when there is none); outliers left out."""
    if len(history) >= 2 * min_runs:
        det = detect([p.value for p in history], min_runs=min_runs)
        out = {o.index for o in det.outliers}
        slower = [i for i, st in enumerate(det.steps) if (st.change > 0 if lower else st.change < 0)]
        levels = [[p for i, p in enumerate(history[lv.start:lv.end], lv.start) if i not in out] for lv in det.levels]
        return (levels[slower[0]], levels[slower[0] + 1]) if slower else (levels[-1], [])
    logs = np.log([p.value for p in history])
    out = set(find_outliers(logs, noise(logs), min_runs)) if len(history) >= 3 else set()
    return [p for i, p in enumerate(history) if i not in out], []


def judge(s: Series, cand: set[str], base_ids: set[str] | None, threshold: float, lower: bool,
          alpha: float = ALPHA, min_runs: int = MIN_RUNS, accepted: dict[str, Decision] | None = None,
          memory: int = 2 * MIN_RUNS) -> Verdict | None:
    """The verdict on one series (None when it has no candidate). ``memory``: how many mornings back the
    gate looks for a regression that tonight's runs still show (module docstring)."""
    picked = [p for p in s.points if p.run_id in cand]
    failed = [r for r in s.left_out if r["run_id"] in cand and not r["reason"].startswith("no value of")]
    if not picked:
        return Verdict(s.describe, s.label, "failed", len(failed), 0) if failed else None
    first = s.points.index(picked[0])
    earlier = [p for p in s.points[:first] if p.run_id not in cand]
    v = Verdict(s.describe, s.label, "no baseline", len(picked), 0, first_candidate=picked[0].run_id)
    v.candidates_mean = float(np.exp(np.mean(np.log([p.value for p in picked]))))
    taken = [i for i, p in enumerate(s.points) if accepted and p.run_id in accepted]
    if any(i >= first for i in taken):  # tonight's runs start the level someone accepted
        d = accepted[s.points[max(taken)].run_id]  # type: ignore[index]
        v.status, v.accepted = "accepted", {"run_id": d.run_id, "by": d.by, "at": d.at, "why": d.why}
        return v
    if base_ids is not None:
        base = [p for p in s.points if p.run_id in base_ids and p.run_id not in cand]
    else:
        since = max(taken, default=0)
        if taken:
            d = accepted[s.points[since].run_id]  # type: ignore[index]
            v.accepted = {"run_id": d.run_id, "by": d.by, "at": d.at, "why": d.why}
        history = [p for p in s.points[since:first] if p.run_id not in cand]
        states = states_of(np.log([p.value for p in history]))
        if states:  # two clock states: tonight is judged against the runs in its own state
            state = states.state(float(np.mean(np.log([p.value for p in picked]))))
            history, earlier = ([p for p in ps if states.state(math.log(p.value)) == state] for ps in (history, earlier))
            v.states = {"means": states.means, "shares": states.shares, "switches": states.switches,
                        "tonight": ("slower", "faster")[state]}
        base, _ = reference(history, lower, min_runs)
        _, slow_level = reference(history + picked, lower, min_runs)  # tonight is evidence of a level too
    v.n_baseline = len(base)
    if len(base) < 2:
        return v
    c, b, h = (np.log([p.value for p in ps]) for ps in (picked, base, earlier))
    _rule(v, c, b, h, threshold, lower, alpha, min_runs)
    v.baseline_runs = (base[0].run_id, base[-1].run_id)
    v.what_changed = what_changed(base[-1], picked[0])
    if v.status != "regression" and base_ids is None and len(slow_level) >= min_runs:
        _persists(v, slow_level, c, b, h, threshold, lower, alpha, min_runs)
        if v.since:
            v.what_changed = what_changed(base[-1], slow_level[0])
    if v.status != "regression" and base_ids is None and memory and v.p_value is not None and v.p_value < 0.05 \
            and first > 0 and s.points[first - 1].run_id not in cand:
        _remembers(v, s, first, threshold, lower, alpha, min_runs, accepted, memory)
    return v


def _remembers(v: Verdict, s: Series, first: int, threshold: float, lower: bool, alpha: float, min_runs: int,
               accepted: dict[str, Decision] | None, memory: int) -> None:
    """Before bench changes can confirm a new level (its first ``min_runs`` nights), a slower night is still a
    regression when the morning before failed, as judged then, and tonight is not back (less than BACK of that
    morning's slowdown)."""
    prev = s.points[first - 1]
    before = judge(Series(s.series_id, s.describe, s.points[:first], label=s.label), {prev.run_id}, None, threshold,
                   lower, alpha, min_runs, accepted, memory - 1)
    if before is None or before.status != "regression" or not before.change or v.change is None:
        return
    if math.log1p(v.change) / math.log1p(before.change) >= BACK:
        v.status = "regression"
        v.since = before.since or {"run_id": prev.run_id, "change": before.change, "n": 1,
                                   "from": prev.started_at.isoformat() if prev.started_at else None}
        v.what_changed = before.what_changed


def _persists(v: Verdict, level: list[Point], c: np.ndarray, b: np.ndarray, h: np.ndarray, threshold: float,
              lower: bool, alpha: float, min_runs: int) -> None:
    """A regression nobody accepted goes on failing (module docstring): tonight fails when the level after
    the earliest slower change is a regression by the rule at LEVEL_BOUND, or when that level's first run
    failed its own morning and the level may still reach CLEAR x the threshold; unless tonight is back (less
    than BACK of that level's slowdown)."""
    logs = np.log([p.value for p in level])
    found = Verdict(v.series, v.label, "", len(level), len(b))
    _rule(found, logs, b, h, threshold, lower, alpha, min_runs, LEVEL_BOUND)
    if found.status != "regression":
        first, held = Verdict(v.series, v.label, "", 1, len(b)), Verdict(v.series, v.label, "", len(level), len(b))
        _rule(first, logs[:1], b, h, threshold, lower, alpha, min_runs)
        _rule(held, logs, b, h, CLEAR * threshold, lower, alpha, min_runs, LEVEL_BOUND)
        if first.status != "regression" or held.status != "regression":
            return
    tonight, level_change = float(c.mean() - b.mean()), math.log1p(found.change or 0.0)
    if level_change and tonight / level_change >= BACK:
        v.status = "regression"
        v.since = {"run_id": level[0].run_id, "change": found.change, "n": len(level),
                   "from": level[0].started_at.isoformat() if level[0].started_at else None}


def _rule(v: Verdict, c: np.ndarray, b: np.ndarray, history: np.ndarray, threshold: float, lower: bool,
          alpha: float, min_runs: int, bound: float = BOUND) -> None:
    """Fill ``v``'s numbers and status by the module docstring's rule."""
    from scipy.special import stdtr, stdtrit

    if len(history) >= 3:
        sigma, df = noise(history), float(max(len(history) - 2, 1))
    else:
        sigma, df = float(np.std(b, ddof=1)), float(len(b) - 1)
    d = float(c.mean() - b.mean())
    slow = d if lower else -d  # > 0: slower
    margin = math.log1p(threshold) if lower else -math.log1p(-threshold)
    se = sigma * math.sqrt(1 / len(c) + 1 / len(b))
    if se == 0:
        p, reach = (0.0 if slow > 0 else 1.0), slow
    else:
        p = float(stdtr(df, -slow / se))
        reach = slow + float(stdtrit(df, bound)) * se
    half = t95(df) * se
    v.baseline_mean = float(np.exp(b.mean()))
    v.change, v.ci95, v.p_value = math.expm1(d), (math.expm1(d - half), math.expm1(d + half)), p
    v.bound = math.expm1(reach if lower else -reach)
    if p < alpha and reach >= margin:
        v.status = "regression"
    elif len(c) < min_runs and sigma > 0 and abs(d) > OUTLIER_Z * sigma:
        v.status = "suspect"
    else:
        v.status = "ok"


def check(con: duckdb.DuckDBPyConnection, where: str, threshold: float = 0.05, baseline_where: str | None = None,
          metric: str = "images_per_sec", order_by: str | None = None, alpha: float = ALPHA,
          min_runs: int = MIN_RUNS, accepted: dict[str, Decision] | None = None, fail_on: str = "regression"
          ) -> CheckResult:
    """Judge every series with a candidate (module docstring). Raises UsageError for a bad argument."""
    if not 0 < threshold < 1:
        raise UsageError(f"--threshold {threshold}: a fraction between 0 and 1 (0.05 = 5% slower)")
    if not where or not where.strip():
        raise UsageError("--where is required: it selects the candidate runs, e.g. \"started_at >= '2026-10-01'\"")
    if fail_on not in FAILING:
        raise UsageError(f"--fail-on {fail_on!r}: one of {', '.join(FAILING)}")
    cand = _selected(con, where, "--where")
    base_ids = _selected(con, baseline_where, "--baseline-where") if baseline_where else None
    if base_ids is not None and not base_ids:
        raise UsageError(f"--baseline-where {baseline_where!r} selects no run")
    lower = METRICS.get(metric, False)
    series = load_series(con, metric, order_by)
    judged = {s.series_id: v for s in series if (v := judge(s, cand, base_ids, threshold, lower, alpha, min_runs,
                                                              accepted))}
    verdicts = [*judged.values(), *_missing(con, [s for s in series if s.series_id not in judged], cand)]
    order = {"failed": 0, "regression": 1, "missing": 2, "suspect": 3, "no baseline": 4, "accepted": 5, "ok": 6}
    verdicts.sort(key=lambda v: (order[v.status], v.label))
    return CheckResult(metric, threshold, alpha, verdicts, fail_on, len(cand))


def _missing(con: duckdb.DuckDBPyConnection, series: list[Series], cand: set[str]) -> list[Verdict]:
    """A ``missing`` verdict per series of ``series`` (those without a candidate) that ran within
    EXPECT_DAYS before the candidates' first start (the store's newest run's, when no run is a candidate)."""
    ids = ", ".join("'" + r.replace("'", "''") + "'" for r in cand) or "NULL"
    (t,), = con.execute(f"SELECT coalesce(min(started_at) FILTER (run_id IN ({ids})), max(started_at)) FROM runs"
                        ).fetchall()
    if t is None:
        return []
    out = []
    for s in series:
        times = [p.started_at for p in s.points if p.started_at is not None]
        last = max(times, default=None)
        if last is not None and t - timedelta(days=EXPECT_DAYS) <= last <= t:
            out.append(Verdict(s.describe, s.label, "missing", 0, len(s.points), last_run=last.isoformat()))
    return out
