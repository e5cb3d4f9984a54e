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
- **Undecided nights**: the newest ``min_runs - 1`` runs before tonight may start a level bench changes cannot
  confirm yet; the reference and the noise are taken from the runs before them.
- **Noise**: sigma of one run as the noise is now, from the neighbour differences of the last RECENT (60) runs
  before the candidates, trimmed (bench.analytics.gate_noise.recent_noise: neither a step nor a night of
  20% inflates it); where the history is shorter than 3 runs, the reference's standard deviation.
- **Looks**: each morning judges, on log values, tonight's runs and tonight's with the night before (LOOKS = 2);
  once tonight is on a level after a slower change nobody accepted (bench changes has confirmed it), the level
  instead, with every run it holds. For each, d = mean(look) - mean(reference), se = sigma * sqrt(1/n_look
  + 1/n_ref), Student's t with the noise's degrees of freedom.
- **Rule**: a look fails when (1) it is slower with significance, one-sided p below the morning's alpha
  shared out (below), and (2) its slowdown reaches the threshold: where its standard error resolves the
  threshold (at most RESOLVE, 0.18, of it), its BOUND (90%) one-sided bound is at or beyond it; where it does
  not (too few runs for their noise), the slowdown must be shown beyond the threshold (its 95% lower bound).
  So a sustained slowdown of the threshold fails by the second morning at noise of about 1% or less, and a
  slowdown well below the threshold is not judged on a night or two of noise too wide to tell it from one
  beyond.
- **One morning, many series**: ``alpha`` (default 0.01) is the chance that a morning on which no series
  changed fails at all, however many series it judges: each look of each of the ``family`` series judged is
  tested at alpha / (family x LOOKS) (Bonferroni: family-wise, with no assumption about how series depend on
  each other; a false discovery rate would let a red morning in a hundred become several as the fleet grows,
  and a CI job is red or green as a whole). With 1,000 series the per-look level is 5e-6.
- **Memory**: a regression nobody accepted goes on failing, and the verdict does not flap: a morning fails
  when the morning before failed, as judged then, and tonight is not back from it, whatever bench changes now
  makes of its levels (they move from one morning to the next: a -3% step read one morning as five nights of
  -5.6%, the next as no step at all). Back: less than BACK, a third, of the regression's slowdown, and faster
  than it beyond its noise: a level of runs by 3.09 standard errors (p < 0.001), tonight, or tonight with the
  night before, by 4.5 (one night of 2% noise on a 3% level is often below a third of what its first nights
  read). Within a level, it fails from the first of its mornings on which it failed with the runs it had
  then (its first run alone, its first two, ... all of them). So that a false failure does not stay red, the
  runs the morning remembered failed on and tonight's must be min_runs or more, or tonight and the night
  before must be slower together at the corrected alpha, or tonight be on or after a slower level bench
  changes confirmed; the runs since the regression began, tonight's with them, must still be slower than the
  reference at that alpha; and the runs after those it failed on, once two or more, must be slower at all.
  Rule for a step below the threshold (a -3% step at up to 2% noise, threshold 5%): it passes until a
  morning's looks fail it (its runs read beyond the threshold), and fails on until accepted or back: nights
  after it that read as back, or as no slowdown, let it go as a false one (7 of 400 such steps; failing later).
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
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.analytics.changepoints import MIN_RUNS, OUTLIER_Z, detect, find_outliers, noise, states_of
from bench.analytics.changes import METRICS, Point, Series, facts_diff, load_facts, load_series, what_changed
from bench.analytics.gate_back import back, noise_of, returned, slower, still
from bench.analytics.gate_noise import RECENT
from bench.analytics.intervals import t95
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb

    from bench.analytics.decisions import Decision

ALPHA = 0.01
#: the tests of each series each morning: tonight's runs, and tonight's with the night before
LOOKS = 2
#: the one-sided confidence of the slowdown's bound against the threshold, for a look that resolves it
BOUND = 0.9
#: a look resolves the threshold when its standard error is at most this share of it; one that does not (too few
#: runs for their noise) fails only when the slowdown is shown beyond the threshold (its BOUND_SHOWN bound)
RESOLVE = 0.18
BOUND_SHOWN = 0.95
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
    alpha: float | None = None  # what each of its looks was tested at: the morning's alpha / (family x LOOKS)
    what_changed: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    compared: tuple[str, str] | None = None  # the runs what_changed compares (the reference's last, the first slower)


@dataclass
class CheckResult:
    metric: str
    threshold: float
    alpha: float
    verdicts: list[Verdict]
    fail_on: str = "regression"
    n_candidates: int = 0
    family: int = 0  # series with a candidate: the morning's alpha is shared among them

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status in FAILING[self.fail_on]]

    @property
    def missing(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "missing"]

    @property
    def judged(self) -> int:  # series judged (a verdict other than missing)
        return len(self.verdicts) - len(self.missing)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 3 if self.missing or not self.n_candidates or not self.judged else 0

    def to_json(self) -> str:  # asdict's dicts without its deep copy (0.2 s for 1,000 verdicts; none holds a dataclass)
        d = {f.name: getattr(self, f.name) for f in fields(self)} | {"verdicts": [vars(v) for v in self.verdicts]}
        return json.dumps({**d, "passed": self.exit_code == 0, "exit_code": self.exit_code}, indent=2, default=str)


def _selected(con: duckdb.DuckDBPyConnection, where: str, option: str) -> set[str]:
    import duckdb

    try:
        return {r[0] for r in con.execute(f"SELECT run_id FROM runs WHERE ({where})").fetchall()}
    except duckdb.Error as e:
        raise UsageError(f"{option} {where!r}: {e}") from e


def reference(history: list[Point], lower: bool, min_runs: int) -> tuple[list[Point], list[list[Point]]]:
    """The reference level of ``history`` (the runs since the latest acceptance; module docstring), and the
    levels from its earliest slower change on, each a list of runs (none when there is no slower change);
    outliers left out."""
    if len(history) >= 2 * min_runs:
        det = detect([p.value for p in history], min_runs=min_runs)
        out = {o.index for o in det.outliers}
        slower = [i for i, st in enumerate(det.steps) if (st.change > 0 if lower else st.change < 0)]
        levels = [[p for i, p in enumerate(history[lv.start:lv.end], lv.start) if i not in out] for lv in det.levels]
        return (levels[slower[0]], levels[slower[0] + 1:]) if slower else (levels[-1], [])
    logs = np.log([p.value for p in history])
    out = set(find_outliers(logs, noise(logs), min_runs)) if len(history) >= 3 else set()
    return [p for i, p in enumerate(history) if i not in out], []


def judge(s: Series, cand: set[str], base_ids: set[str] | None, threshold: float, lower: bool,
          alpha: float = ALPHA, min_runs: int = MIN_RUNS, accepted: dict[str, Decision] | None = None,
          memory: int = RECENT, family: int = 1) -> Verdict | None:
    """The verdict on one series (None when it has no candidate). ``alpha`` is the morning's: each of its
    LOOKS is tested at alpha / (``family`` x LOOKS), ``family`` being the number of series judged that morning
    (module docstring). ``memory``: how many mornings back the gate looks for a regression that tonight's runs
    still show."""
    a = alpha / (max(family, 1) * LOOKS)
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
    undecided = 0
    before_level: list[Point] = []
    after: list[list[Point]] = []  # the levels from the earliest slower change nobody accepted on
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
        # the newest min_runs - 1 nights before tonight may be the start of a level not yet confirmed: the
        # reference and the noise are those before them (tonight and the night before are judged against them)
        undecided = min_runs - 1 if len(history) - (min_runs - 1) >= 2 * min_runs else 0
        base, _ = reference(history[:len(history) - undecided], lower, min_runs)
        before_level, after = reference(history + picked, lower, min_runs)  # tonight is evidence of a level too
    v.n_baseline = len(base)
    if len(base) < 2:
        return v
    c, b, h = (np.log([p.value for p in ps]) for ps in (picked, base, earlier[:len(earlier) - undecided]))
    noise = noise_of(h, b)
    _rule(v, c, b, h, threshold, lower, a, min_runs, noise=noise)
    v.alpha = a
    v.baseline_runs = (base[0].run_id, base[-1].run_id)
    _compare(v, base[-1], picked[0])
    if base_ids is not None:
        return v
    on = next((k for k, level in enumerate(after) if picked[-1] in level), None)
    # paired: evidence enough to remember a short failure, from either path below: tonight on or after a slower
    # level bench changes confirmed, or tonight and the night before slower together at the corrected alpha
    paired = False
    if on is not None and len(after[0]) >= min_runs:  # tonight is on, or after, a slower level nobody accepted
        ahead = {p.run_id for p in s.points[:s.points.index(after[0][0])]}  # its noise: of the runs before it
        if len(ahead_h := np.log([p.value for p in earlier if p.run_id in ahead])) >= 2 * min_runs:  # (else the
            h, noise = ahead_h, noise_of(ahead_h, b)  # recent runs': 3 runs, two differences, tell no noise)
        failing = _level(v, after[:on + 1], c, np.log([p.value for p in before_level]), h, threshold, lower, a,
                         min_runs, picked, earlier[-1] if earlier else None)  # the night before, in tonight's state
        if failing:
            _compare(v, base[-1], failing[0])
            return v
        paired = True  # a slower level bench changes confirmed: evidence enough to remember a short failure
    elif v.status != "regression" and v.p_value is not None and v.p_value < 0.05 and first > 0 \
            and s.points[first - 1].run_id not in cand:
        prev = s.points[first - 1]
        pair = Verdict(v.series, v.label, "", len(picked) + 1, 0)
        b2 = np.log([p.value for p in base if p is not prev])
        if len(b2) >= 2:
            _rule(pair, np.concatenate(([math.log(prev.value)], c)), b2, h, threshold, lower, a, min_runs)
        paired = pair.p_value is not None and pair.p_value < a and still(v.change, pair.change)
        if paired and pair.status == "regression":
            v.status = "regression"  # tonight and the night before, together
            v.since = {"run_id": prev.run_id, "change": pair.change, "n": pair.n_candidates,
                       "from": prev.started_at.isoformat() if prev.started_at else None}
            _compare(v, base[-1], prev)
            return v
    if v.status != "regression" and memory and first > 0 and s.points[first - 1].run_id not in cand:
        recent = earlier[-RECENT:]  # not only those after the reference: it holds a level bench changes lost
        # a failure remembered (_remembers) needs runs ending tonight slower at the corrected alpha: tonight's and
        # min_runs before them, or tonight's alone where paired (with the night before, or on a confirmed level)
        shortest = len(c) + (0 if paired else min_runs)
        if slower(np.concatenate((np.log([p.value for p in recent]), c)), shortest, b, noise, lower, a):
            _remembers(v, s, first, threshold, lower, alpha, min_runs, accepted, memory, family, earlier, c, b, noise,
                       paired)
    elif v.status == "regression" and v.since is None and memory and first > 0 \
            and s.points[first - 1].run_id not in cand:  # tonight's looks failed: of a regression still going on?
        before = _morning_before(v, s, first, threshold, lower, alpha, min_runs, accepted, memory, family)
        if before is not None and before.since:
            v.since = before.since  # so that the morning after remembers the regression, not one night of it
    return v


def _compare(v: Verdict, before: Point, after: Point) -> None:
    """What changed on the machine between the reference's last run and the first slower one."""
    v.what_changed, v.compared = what_changed(before, after), (before.run_id, after.run_id)


def _morning_before(v: Verdict, s: Series, first: int, threshold: float, lower: bool, alpha: float, min_runs: int,
                    accepted: dict[str, Decision] | None, memory: int, family: int) -> Verdict | None:
    """The morning before's verdict as judged then, when it was a regression in tonight's clock state; else None."""
    prev = s.points[first - 1]
    before = judge(Series(s.series_id, s.describe, s.points[:first], label=s.label), {prev.run_id}, None, threshold,
                   lower, alpha, min_runs, accepted, memory - 1, family)
    if before is None or before.status != "regression" or (before.states or {}).get("tonight") != (v.states or {}).get(
            "tonight"):
        return None
    return before


def _remembers(v: Verdict, s: Series, first: int, threshold: float, lower: bool, alpha: float, min_runs: int,
               accepted: dict[str, Decision] | None, memory: int, family: int, earlier: list[Point], c: np.ndarray,
               b: np.ndarray, noise: tuple[float, float], paired: bool) -> None:
    """Tonight is a regression when the morning before was one, as judged then (wherever bench changes placed a
    level then) and in tonight's clock state, its runs from the first slower one through tonight's are still
    slower than the reference together at the morning's corrected alpha, and tonight is not back from it
    (gate_back.returned), nor are the runs after those it failed on (two or more, tonight's with them) not
    slower at all (a short failure at high noise, which returned cannot tell from 2% nights). So that a false
    failure does not stay red, the morning before's runs and tonight's must be min_runs or more (a failure on a
    -3% step's two slow nights stays red on the third), unless tonight and the night before are slower together
    at the corrected alpha, or tonight is on or after a slower level bench changes confirmed (``paired``).
    ``earlier``: the runs before tonight (of tonight's clock state); ``c``, ``b``: tonight's and the reference's
    log values; ``noise``: gate_back.noise_of's (sigma, degrees of freedom)."""
    prev = s.points[first - 1]
    before = _morning_before(v, s, first, threshold, lower, alpha, min_runs, accepted, memory, family)
    if before is None or v.change is None:
        return
    since = before.since or {"run_id": prev.run_id, "change": before.change, "n": 1,
                             "from": prev.started_at.isoformat() if prev.started_at else None}
    start = next((k for k, p in enumerate(s.points[:first]) if p.run_id == since["run_id"]), None)
    if start is None or since["change"] is None or (since["n"] + len(c) < min_runs and not paired):
        return
    ids = {id(p) for p in s.points[start:first]}
    runs = np.log([p.value for p in earlier if id(p) in ids])
    a = alpha / (max(family, 1) * LOOKS)
    if not len(runs) or not slower(np.concatenate((runs, c)), None, b, noise, lower, a):
        return
    later = np.concatenate((runs[since["n"]:], c))  # the runs after those it failed on, tonight's with them
    if returned(runs, c, float(b.mean()), noise[0], lower) \
            or (len(later) >= 2 and (float(later.mean() - b.mean()) > 0) != lower):  # not slower at all since
        return
    v.status, v.since = "regression", since
    v.what_changed, v.compared = before.what_changed, before.compared


def _level(v: Verdict, levels: list[list[Point]], c: np.ndarray, b: np.ndarray, h: np.ndarray, threshold: float,
           lower: bool, alpha: float, min_runs: int, tonight: list[Point], night_before: Point | None
           ) -> list[Point] | None:
    """Tonight is on the last of ``levels``, the levels from the earliest slower change nobody accepted on
    (module docstring): the levels are judged (and, on the first of them, not tonight's looks). A level is a
    regression from the first of its mornings on which it failed the rule with the runs it had then (its first
    run alone, its first two, ..., all of them), and stays one every morning after, until accepted, unless
    tonight is back from it: tonight's level (tonight alone, while tonight is on the failed level itself) less
    than BACK of the failed level's slowdown and faster than it by BACK_Z standard errors, or tonight, or
    tonight with ``night_before``, by gate_back.returned's rule. So a level's verdict does not turn back with
    one morning's noise, nor where bench changes splits it later (a -3% step read as five nights of -5.6% and a
    level of -2.1% after them stays the regression its first five nights showed). ``tonight``: tonight's runs.
    Returns the level that fails, or None."""
    noise = noise_of(h, b)  # one history for every look below
    sign = 1.0 if lower else -1.0
    if len(levels) == 1:  # on the slower level itself, the level is judged instead of tonight's looks
        v.status = "ok" if v.status == "regression" else v.status
    elif v.status == "regression":  # after it, tonight's looks fail on their own (a slide going on)
        return None
    for k, level in enumerate(levels):
        logs = np.log([p.value for p in level])
        whole = Verdict(v.series, v.label, "", len(level), len(b))
        _rule(whole, logs, b, h, threshold, lower, alpha, min_runs, noise=noise)
        failed = whole.status == "regression"
        for j in range(1, len(level)):
            if failed:
                break
            part = Verdict(v.series, v.label, "", j, len(b))
            _rule(part, logs[:j], b, h, threshold, lower, alpha, min_runs, noise=noise)
            failed = part.status == "regression"
        if not failed:
            continue
        now = c if k == len(levels) - 1 else np.log([p.value for p in levels[-1]])
        home = back(sign * float(now.mean() - b.mean()), sign * float(logs.mean() - b.mean()),
                     noise[0] * math.sqrt(1 / len(now) + 1 / len(logs)))
        # tonight's level may begin a night or two before a fix: tonight and the night before may be back too
        runs = np.log([p.value for p in level if p not in tonight and p is not night_before]
                      + ([night_before.value] if night_before else []))
        if not home and not (len(runs) and returned(runs, c, float(b.mean()), noise[0], lower)):
            v.status = "regression"
            v.since = {"run_id": level[0].run_id, "change": whole.change, "n": len(level),
                       "from": level[0].started_at.isoformat() if level[0].started_at else None}
            return level
    return None


def _rule(v: Verdict, c: np.ndarray, b: np.ndarray, history: np.ndarray, threshold: float, lower: bool,
          alpha: float, min_runs: int, bound: float = BOUND, noise: tuple[float, float] | None = None) -> None:
    """Fill ``v``'s numbers and status by the module docstring's rule. ``noise``: noise_of(history, b), where the
    caller judges several looks against one history."""
    from scipy.special import stdtr, stdtrit

    sigma, df = noise or noise_of(history, b)
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
    resolves = se <= RESOLVE * margin
    shown = slow - (float(stdtrit(df, BOUND_SHOWN)) * se if se else 0.0) >= margin
    if p < alpha and ((resolves and reach >= margin) or shown):
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
    series = load_series(con, metric, order_by, facts=False)
    family = sum(1 for s in series if any(p.run_id in cand for p in s.points)
                 or any(r["run_id"] in cand for r in s.left_out))
    judged = {s.series_id: v for s in series if (v := judge(s, cand, base_ids, threshold, lower, alpha, min_runs,
                                                              accepted, family=family))}
    facts = load_facts(con, {r for v in judged.values() if v.compared for r in v.compared})
    for v in judged.values():
        if v.compared:
            v.what_changed = facts_diff(facts.get(v.compared[0], {}), facts.get(v.compared[1], {}))
    verdicts = [*judged.values(), *_missing([s for s in series if s.series_id not in judged], series, cand)]
    order = {"failed": 0, "regression": 1, "missing": 2, "suspect": 3, "no baseline": 4, "accepted": 5, "ok": 6}
    verdicts.sort(key=lambda v: (order[v.status], v.label))
    return CheckResult(metric, threshold, alpha, verdicts, fail_on, len(cand), family)


def _missing(series: list[Series], every: list[Series], cand: set[str]) -> list[Verdict]:
    """A ``missing`` verdict per series of ``series`` (those without a candidate) that ran within
    EXPECT_DAYS before the candidates' first start (the newest run's of ``every`` series, when no run is a
    candidate)."""
    times = [p.started_at for s in every for p in s.points if p.started_at is not None]
    times += [r["started_at"] for s in every for r in s.left_out if r.get("started_at")]
    starts = [p.started_at for s in every for p in s.points if p.started_at is not None and p.run_id in cand]
    starts += [r["started_at"] for s in every for r in s.left_out if r.get("started_at") and r["run_id"] in cand]
    t = min(starts) if starts else max(times, default=None)
    if t is None:
        return []
    out = []
    for s in series:
        last = max((p.started_at for p in s.points if p.started_at is not None), default=None)
        if last is not None and t - timedelta(days=EXPECT_DAYS) <= last <= t:
            out.append(Verdict(s.describe, s.label, "missing", 0, len(s.points), last_run=last.isoformat()))
    return out
