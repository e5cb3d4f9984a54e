"""Change points of one series: the levels a metric held over time, the steps between them, and the lone
runs far off their neighbours (outliers). Pure numbers in, pure numbers out; what a series is, and what
changed on the machine, is bench.analytics.changes.

The method, in order:

1. **Log scale.** Values are compared as logarithms, so a step is a relative change and its interval is
   a ratio's (as bench compare's are).
2. **Noise.** sigma, the noise of one run, is estimated from the differences of neighbouring runs:
   1.4826 * MAD(diff) / sqrt(2). A step or an outlier moves one or two differences, so the estimate does
   not see them (a plain standard deviation would grow with every step).
3. **Outliers.** A run is an outlier when it is more than ``OUTLIER_Z`` sigma away, on the same side, from
   both the median of the ``WINDOW`` runs before it and that of the ``WINDOW`` after (one side at either
   end of the series). Up to ``min_runs - 1`` such runs in a row are outliers; ``min_runs`` or more on one
   level (counting the runs beside them within the limit of their median) are a level, which step 4 judges. Outliers are left out of steps 4 and 5.
4. **Candidates: binary segmentation** with the least-squares (l2) cost, as ``ruptures.Binseg(model="l2")``
   computes it (Scott and Knott 1974; Truong, Oudre and Vayatis 2020), with segments of at least
   ``min_runs`` runs and the penalty 2 sigma^2 ln(n): the Schwarz (BIC) criterion for a Gaussian mean
   shift whose noise is known, where each change adds two parameters, its place and its new mean. Written
   here on cumulative sums rather than taken from ruptures, which alone is slower than all of Apache Otava's
   method, while bench may take at most twice Otava's time. ``make bench`` (benchmarks/changes_vs_otava.py)
   times all three and checks that this finds exactly ruptures' breakpoints. Where it finds any, the
   candidates are the exact optimum of the same cost and penalty instead (:func:`optimal_partition`): binary
   segmentation cuts two steps a few runs apart once, between them, and cannot cut either afterwards.
5. **Significance: the merge step of Otava** (Fleming et al., ICPE 2023): each candidate is a Welch
   t-test of the levels on its two sides; the weakest one with p >= ``alpha`` (or a relative change
   under ``min_change``) is dropped and its neighbours are tested again, until every step left passes.
   The newest level while it is short (fewer than ``2 * min_runs`` runs), and a short level between two steps
   the same way (a staircase), are tested with the series' noise sigma rather than their own few runs' spread
   (:func:`_with_noise`): a step is named on its third night, not its fourth or later, and two steps a few
   nights apart stay two. A short bump (up, then down) keeps its own spread's test: noise makes those.

Two clock states (``modes``): a series whose values fall into two separated levels that alternate (a GPU that
lands in one of two clock states) is recognised before step 3, and each state is then a series of its own:
switches between the states are neither steps nor outliers, and a change of either state still is.

A level's interval is the t interval of its mean; a step's is Welch's interval of the difference of the
log means, as a relative change (exp(d) - 1).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from bench.analytics.intervals import t95

OUTLIER_Z = 5.0
WINDOW = 3
ALPHA = 0.001
MIN_RUNS = 3


@dataclass(frozen=True)
class Level:
    """Runs ``start`` to ``end`` (exclusive; positions among the series' points, outliers included) on
    one level: their mean, its 95% interval, and how many runs (outliers left out) it rests on."""

    start: int
    end: int
    n: int
    mean: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Step:
    """A change of level at point ``index`` (the first run on the new level)."""

    index: int
    before: Level
    after: Level
    change: float  # relative: after / before - 1 (of the geometric means)
    ci_low: float | None
    ci_high: float | None
    p_value: float


@dataclass(frozen=True)
class Outlier:
    index: int
    value: float
    expected: float  # the median of its neighbours
    change: float  # value / expected - 1


@dataclass(frozen=True)
class Detection:
    steps: list[Step]
    outliers: list[Outlier]
    levels: list[Level]
    sigma: float  # the noise of one run, on the log scale
    #: (first, last) positions in ``steps`` of each slide: steps in a row one way whose levels between
    #: them slope that way (:func:`slides`); one change, not several
    slides: list[tuple[int, int]] = field(default_factory=list)
    #: per slide: (the change from the level before it to the level after it, 95% CI low, high, p)
    slide_tests: list[tuple[float, float, float, float]] = field(default_factory=list)


#: two states are recognised in at least this many runs, each state with at least MODE_SHARE of them, their
#: means MODE_SEPARATION pooled standard deviations apart, switching at least half as often as random order would
MODE_MIN_RUNS = 12
MODE_SHARE = 0.1
MODE_SEPARATION = 6.0


@dataclass(frozen=True)
class Modes:
    """Two alternating states of a series: the log value that splits them, each state's geometric mean
    and share of runs, and how often the series switched between them."""

    split: float
    means: tuple[float, float]  # slow state first
    shares: tuple[float, float]
    switches: int

    def state(self, log_value: float) -> int:
        """0 for the lower state, 1 for the upper."""
        return int(log_value > self.split)


def modes(x: np.ndarray) -> Modes | None:
    """The two alternating states of log values ``x`` in time order, or None (see MODE_* for the rule): the
    split that leaves the least squared deviation within the two groups (1-D two-means, exact on the sorted
    values), kept when the groups are far apart for their spread and interleave in time as two states do
    (a step between two levels switches once)."""
    n = len(x)
    if n < MODE_MIN_RUNS:
        return None
    xs = np.sort(x)
    least = max(3, math.ceil(MODE_SHARE * n))
    k = np.arange(least, n - least + 1)
    if not len(k):
        return None
    s1, s2 = np.concatenate(([0.0], np.cumsum(xs))), np.concatenate(([0.0], np.cumsum(xs * xs)))
    within = (s2[k] - s1[k] ** 2 / k) + (s2[n] - s2[k] - (s1[n] - s1[k]) ** 2 / (n - k))
    best = int(np.argmin(within))
    cut = int(k[best])
    spread = math.sqrt(max(float(within[best]), 0.0) / (n - 2))
    low, high = s1[cut] / cut, (s1[n] - s1[cut]) / (n - cut)
    if spread == 0 or high - low < MODE_SEPARATION * spread:
        return None
    split = float((xs[cut - 1] + xs[cut]) / 2)
    upper = x > split
    switches = int(np.count_nonzero(upper[1:] != upper[:-1]))
    p = cut / n
    if switches < max(4, p * (1 - p) * n):  # random order switches 2 p (1 - p) n times
        return None
    return Modes(split, (math.exp(low), math.exp(high)), (p, 1 - p), switches)


def states_of(x: np.ndarray) -> Modes | None:
    """The two clock states of log values ``x``: those of the whole series, else those of its first or its
    second half, their split applied to the whole (a change of one state adds a third level, which hides the
    two from :func:`modes` over the whole series)."""
    found = modes(x)
    half = len(x) // 2
    for part in (x[:half], x[half:]):
        if found is not None:
            break
        if (m := modes(part)) is not None:
            upper = x > m.split
            share = float(np.mean(~upper))
            if 0 < share < 1:
                found = Modes(m.split, (math.exp(float(x[~upper].mean())), math.exp(float(x[upper].mean()))),
                              (share, 1 - share), int(np.count_nonzero(upper[1:] != upper[:-1])))
    return found


def noise(x: np.ndarray) -> float:
    """sigma of one run from the differences of neighbours (see the module docstring)."""
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def find_outliers(x: np.ndarray, sigma: float, min_runs: int = MIN_RUNS) -> list[int]:
    """Positions of the outliers of ``x`` (log values; see the module docstring, step 3)."""
    n = len(x)
    if n < 2:
        return []
    before, after = _side_medians(x)
    gap_b, gap_a = x - before, x - after
    limit = OUTLIER_Z * sigma
    far_b, far_a = np.abs(gap_b) > limit, np.abs(gap_a) > limit
    far = np.where(np.isnan(before), far_a, np.where(np.isnan(after), far_b, far_b & far_a & (gap_b * gap_a > 0)))
    out: list[int] = []
    i = 0
    while i < n:
        if far[i]:
            j = i
            while j < n and far[j]:
                j += 1
            # the runs next to the group on its level (within the limit of its median) belong to it
            level, lo, hi = np.median(x[i:j]), i, j
            while lo > 0 and abs(x[lo - 1] - level) <= limit:
                lo -= 1
            while hi < n and abs(x[hi] - level) <= limit:
                hi += 1
            if hi - lo < min_runs:
                out.extend(range(i, j))
            i = j
        else:
            i += 1
    return out


def _side_medians(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each point, the median of the WINDOW points before it and of the WINDOW after it (fewer near
    the ends, NaN where there are none)."""
    n, w = len(x), WINDOW
    before, after = np.full(n, np.nan), np.full(n, np.nan)
    if n > w:
        full = np.median(np.lib.stride_tricks.sliding_window_view(x, w), axis=1)  # full[j]: x[j:j + w]
        before[w:] = full[:n - w]
        after[:n - w] = full[1:]
    # the few-value medians near the ends without numpy's cost per call (same bits: the middle two's (a + b) / 2)
    for i in range(1, min(w, n)):
        before[i] = statistics.median(x[:i].tolist())
    for i in range(max(0, n - w), n - 1):
        after[i] = statistics.median(x[i + 1:].tolist())
    return before, after


def binary_segmentation(x: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Breakpoints (first index of each new segment) of ``x`` by binary segmentation with the l2 cost:
    a segment is split where the split lowers the summed squared deviations from the segment means the
    most, as long as that gain exceeds ``penalty`` and both parts keep ``min_size`` points."""
    s1 = np.concatenate(([0.0], np.cumsum(x)))
    s2 = np.concatenate(([0.0], np.cumsum(x * x)))

    def cost(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        n = np.asarray(b - a, dtype=float)
        return s2[b] - s2[a] - (s1[b] - s1[a]) ** 2 / n

    found: list[int] = []
    todo = [(0, len(x))]
    while todo:
        a, b = todo.pop()
        if b - a < 2 * min_size:
            continue
        taus = np.arange(a + min_size, b - min_size + 1)
        gains = cost(a, b) - cost(a, taus) - cost(taus, b)
        best = int(np.argmax(gains))
        if gains[best] <= penalty:
            continue
        tau = int(taus[best])
        found.append(tau)
        todo += [(a, tau), (tau, b)]
    return sorted(found)


def optimal_partition(x: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """Breakpoints of ``x`` that minimise the summed l2 costs of its segments plus ``penalty`` per breakpoint,
    each segment at least ``min_size`` points: the exact optimum (optimal partitioning, Jackson et al. 2005),
    with PELT's pruning (Killick, Fearnhead and Eckley 2012), as ``ruptures.Pelt(model="l2")`` computes it.
    Binary segmentation splits a segment once, where one split gains most: two steps a few runs apart are cut
    once, between them, each left within ``min_size`` of that cut, where no later split can reach it."""
    n = len(x)
    s1 = np.concatenate(([0.0], np.cumsum(x)))
    s2 = np.concatenate(([0.0], np.cumsum(x * x)))
    best = np.full(n + 1, np.inf)
    best[0] = -penalty
    last = np.zeros(n + 1, dtype=int)
    alive = np.array([], dtype=int)
    for t in range(min_size, n + 1):
        start = t - min_size
        if start == 0 or start >= min_size:
            alive = np.append(alive, start)
        k = t - alive
        costs = best[alive] + s2[t] - s2[alive] - (s1[t] - s1[alive]) ** 2 / k
        i = int(np.argmin(costs))
        best[t], last[t] = costs[i] + penalty, alive[i]
        alive = alive[costs <= best[t]]
    cuts, t = [], n
    while t > 0:
        t = int(last[t])
        if t > 0:
            cuts.append(t)
    return sorted(cuts)


def _level(values: np.ndarray, start: int, end: int) -> Level:
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return Level(start, end, n, mean, None, None)
    half = t95(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return Level(start, end, n, mean, mean - half, mean + half)


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float]:
    """Welch's test of mean(b) - mean(a): (difference, 95% low, 95% high, two-sided p). Two constant
    samples that differ give p = 0 and a zero-width interval."""
    from scipy.special import stdtr

    d = float(np.mean(b) - np.mean(a))
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d, 0.0 if d else 1.0
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1)) + (vb ** 2 / (len(b) - 1)))
    t = d / se
    half = t95(df) * se
    return d, d - half, d + half, float(2 * stdtr(df, -abs(t)))


def _stair(x: np.ndarray, edges: list[int], i: int, short: int) -> bool:
    """Whether step ``i`` (between the levels ``edges[i]:edges[i + 1]`` and the next) has a short level (fewer
    than ``short`` runs) on a side where the level's other step goes the same way: a staircase. A short bump (its
    two steps opposite ways) is what noise makes, and keeps the test of its own spread."""
    means = [float(x[edges[k]:edges[k + 1]].mean()) for k in range(len(edges) - 1)]
    way = means[i + 1] - means[i]
    if edges[i + 1] - edges[i] < short and i > 0 and (means[i] - means[i - 1]) * way > 0:
        return True
    return edges[i + 2] - edges[i + 1] < short and i + 2 < len(means) and (means[i + 2] - means[i + 1]) * way > 0


def _with_noise(a: np.ndarray, b: np.ndarray, sigma: float, df: int) -> tuple[float, float, float, float]:
    """The test of a step between levels of which one is short (fewer than 2 * min_runs runs): a few runs' own
    spread, on a degree of freedom or two, cannot confirm a step for nights; the series' noise (``sigma``, from
    all its runs) can. Student's t with the series' degrees of freedom, and a level's own spread where that is
    larger: (difference, 95% low, 95% high, two-sided p)."""
    from scipy.special import stdtr

    d = float(np.mean(b) - np.mean(a))
    va, vb = (max(sigma ** 2, float(np.var(v, ddof=1)) if len(v) > 1 else 0.0) for v in (a, b))
    se = math.sqrt(va / len(a) + vb / len(b))
    half = t95(df) * se
    return d, d - half, d + half, float(2 * stdtr(df, -abs(d / se)))


def detect(values: list[float] | np.ndarray, *, min_runs: int = MIN_RUNS, alpha: float = ALPHA,
           min_change: float = 0.0) -> Detection:
    """The steps, outliers and levels of a series of positive values in time order (module docstring)."""
    raw = np.asarray(values, dtype=float)
    logs = np.log(raw)
    sigma = noise(logs)
    outliers = find_outliers(logs, sigma, min_runs)
    keep = np.setdiff1d(np.arange(len(raw)), outliers)
    x = logs[keep]
    penalty = 2 * sigma ** 2 * math.log(max(len(x), 2))
    # binary segmentation first (cheap: most series have no change), the exact optimum where it finds one
    cuts = optimal_partition(x, penalty, min_runs) if len(x) >= 2 * min_runs and \
        binary_segmentation(x, penalty, min_runs) else []

    def test(cuts: list[int], i: int) -> tuple[float, float, float, float]:
        edges = [0, *cuts, len(x)]
        a, b = x[edges[i]:edges[i + 1]], x[edges[i + 1]:edges[i + 2]]
        if sigma > 0 and ((i == len(cuts) - 1 and len(b) < 2 * min_runs) or _stair(x, edges, i, 2 * min_runs)):
            return _with_noise(a, b, sigma, len(x) - 2)
        return welch(a, b)

    while cuts:
        tests = [test(cuts, i) for i in range(len(cuts))]
        weakest = max(range(len(cuts)), key=lambda i: (tests[i][3], -abs(tests[i][0])))
        if tests[weakest][3] < alpha:
            weakest = min(range(len(cuts)), key=lambda i: abs(tests[i][0]))
            if abs(math.expm1(tests[weakest][0])) >= min_change:
                break
        del cuts[weakest]

    edges = [0, *cuts, len(x)]
    # a level spans the points (outliers included) from its first kept run to the next level's first
    starts = [0, *(int(keep[c]) for c in cuts), len(raw)]
    levels = [_level(raw[keep[edges[i]:edges[i + 1]]], starts[i], starts[i + 1])
              for i in range(len(edges) - 1)]
    steps = []
    for i, c in enumerate(cuts):
        d, low, high, p = test(cuts, i)
        steps.append(Step(int(keep[c]), levels[i], levels[i + 1], math.expm1(d), math.expm1(low), math.expm1(high), p))
    outs = []
    for i in outliers:
        near = np.concatenate((logs[max(0, i - WINDOW):i], logs[i + 1:i + 1 + WINDOW]))
        expected = float(np.exp(np.median(near))) if len(near) else float(raw[i])
        outs.append(Outlier(int(i), float(raw[i]), expected, float(raw[i] / expected - 1)))
    groups = slides(x, cuts, [st.change for st in steps])
    tests = [welch(x[edges[i]:edges[i + 1]], x[edges[j + 1]:edges[j + 2]]) for i, j in groups]
    return Detection(steps, outs, levels, sigma, groups,
                     [(math.expm1(d), math.expm1(lo), math.expm1(hi), p) for d, lo, hi, p in tests])


#: the within-level slope that makes steps in a row a slide: significant at this level (two-sided)
SLIDE_ALPHA = 0.01


def slides(x: np.ndarray, cuts: list[int], changes: list[float]) -> list[tuple[int, int]]:
    """(first, last) step positions of each slide in ``x`` (log values less outliers, cut at ``cuts``; a step's
    relative ``changes``): two or more steps in a row one way whose levels between them slope that way, by a
    common slope within those levels (each level's own mean taken out; t-test, p < SLIDE_ALPHA). Flat levels
    between steps make a staircase, which stays several changes."""
    from scipy.special import stdtr

    edges = [0, *cuts, len(x)]
    out, i = [], 0
    while i < len(cuts):
        j = i
        while j + 1 < len(cuts) and (changes[j + 1] > 0) == (changes[i] > 0):
            j += 1
        if j > i:
            t, r = [], []
            for m in range(i + 1, j + 1):
                a, b = edges[m], edges[m + 1]
                t.append(np.arange(a, b) - (a + b - 1) / 2)
                r.append(x[a:b] - x[a:b].mean())
            tc, rc = np.concatenate(t), np.concatenate(r)
            sxx, df = float(tc @ tc), len(rc) - (j - i) - 1
            if sxx > 0 and df >= 2:
                slope = float(tc @ rc) / sxx
                resid = rc - slope * tc
                se = math.sqrt(float(resid @ resid) / df / sxx)
                sloped = (se == 0 and slope != 0) or (se > 0 and 2 * float(stdtr(df, -abs(slope / se))) < SLIDE_ALPHA)
                if sloped and (slope > 0) == (changes[i] > 0):
                    out.append((i, j))
        i = j + 1
    return out


def detect_states(values: list[float] | np.ndarray, *, min_runs: int = MIN_RUNS, alpha: float = ALPHA
                  ) -> tuple[Modes | None, list[tuple[np.ndarray, Detection]]]:
    """:func:`detect` on a series, or on each of its two clock states (``modes``; a state with fewer than
    ``2 * min_runs`` runs is not followed): (the states or None, [(positions in ``values``, detection)])."""
    raw = np.asarray(values, dtype=float)
    states = states_of(np.log(raw))
    if states is None:
        return None, [(np.arange(len(raw)), detect(raw, min_runs=min_runs, alpha=alpha))]
    upper = np.log(raw) > states.split
    parts = [np.flatnonzero(upper == state) for state in (False, True)]
    return states, [(idx, detect(raw[idx], min_runs=min_runs, alpha=alpha)) for idx in parts if len(idx) >= 2 * min_runs]
