"""``make bench`` (gate half): bench check morning by morning on labelled nightly series, against the gate's
goals (printed beside), and optionally against another version of bench.analytics.check in the same run
(``--against PATH/check.py``, e.g. one from ``git show``).

The series are generated here, seeded (numpy's PCG64), ``NIGHTS`` nights each, ``N`` per kind, noise per night
drawn from 0.3-1% (``noisy``: 1-3%); every change starts at night ``AT``:

- ``noise``, ``noisy``: no change;
- ``throttled``: no change, and one or two lone nights 20-40% slow (their own mornings are not counted);
- ``bimodal``: two clock states 8% apart, each night in one of them at random (30-70% in the slow one);
- ``step5``, ``step10``: a sustained -5% / -10% step; ``bimodal step10``: a -10% step of the slow state only;
- ``ramp``: a slide of -10% to -20% over 10-30 nights; ``small ramp``: -5% to -10%.

Each morning judges that night's run alone (``--where`` tonight) against the nights before it. Reported: the
gate's false alarms per night on the kinds without a change, the share of steps failing on morning 1, by
morning 2 and on morning 10, the share failing every morning from 3 to 30 (until accepted), the share of
steps whose acceptance (at morning 5) stops the failures, the ramps failing every morning once their total is
past 1.3x the threshold (of those whose total goes past it), the median nights from a step until bench changes names it, and the time of one
morning of 1,000 series. Its goals are printed beside.

At a fleet's size (``at_scale``): SERIES (1,000) quiet series at 1% noise judged together each morning for
``--mornings`` (100) mornings after HISTORY (60) nights (red mornings per 100, false failures); a -5% step at 1%
noise judged as one of them, and at 2% noise on its own (mornings 1, 2, every morning 3-30, and every morning
from its first failure on); noise that grows from 0.5% to 2% over 200 nights (5 x N series); Student-t noise
(3 degrees of freedom, SD 1%) with 2% of nights 20% slow (false failures per ordinary night); a -3% step at
0.6-2% noise (5 x N series, 40 mornings: the share of series whose verdict never goes from fail back to pass, and
the share of mornings failing); two -6% steps 4-6 nights apart (named as two by bench changes, each within a night).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import numpy as np

from bench.analytics import check as current
from bench.analytics.changepoints import detect
from bench.analytics.changes import Point, Series
from bench.analytics.decisions import Decision

N = 40
NIGHTS = 100
AT = 60
FIRST_MORNING = 30
THRESHOLD = 0.05
SERIES = 1000  # a fleet's nightly suite (at_scale)
HISTORY = 60  # nights before at_scale's first judged morning
KINDS = ("noise", "noisy", "throttled", "bimodal", "step5", "step10", "bimodal step10", "ramp", "small ramp")
_T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def generate(seed: int = 43) -> list[dict[str, Any]]:
    """``N`` series of every kind: {"kind", "values", "skip": nights not judged, "total": slide per night}."""
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for kind in KINDS:
        for _ in range(N):
            sigma = rng.uniform(0.01, 0.03) if kind == "noisy" else rng.uniform(0.003, 0.01)
            logs = rng.normal(0, sigma, NIGHTS)
            total = np.zeros(NIGHTS)
            skip: set[int] = set()
            if kind == "throttled":
                skip = {int(i) for i in rng.choice(np.arange(FIRST_MORNING, NIGHTS), int(rng.integers(1, 3)), replace=False)}
                for i in skip:
                    logs[i] += np.log(1 - rng.uniform(0.2, 0.4))
            slow = np.zeros(NIGHTS, dtype=bool)
            if kind.startswith("bimodal"):
                slow = rng.random(NIGHTS) < rng.uniform(0.3, 0.7)
                logs += np.where(slow, np.log(0.92), 0.0)
            if kind == "bimodal step10":  # the slow state only
                logs += np.where(slow & (np.arange(NIGHTS) >= AT), np.log(0.90), 0.0)
            elif "step" in kind:
                total[AT:] = 0.05 if kind == "step5" else 0.10
            elif kind.endswith("ramp"):
                size = rng.uniform(0.10, 0.20) if kind == "ramp" else rng.uniform(0.05, 0.10)
                span = int(rng.integers(10, 31))
                total = np.clip((np.arange(NIGHTS) - AT + 1) / span, 0, 1) * size
            logs += np.log1p(-total)
            out.append({"kind": kind, "values": 1000 * np.exp(logs), "skip": skip, "total": total, "slow": slow})
    return out


def _series(values: np.ndarray) -> Series:
    points = [Point(f"n{i}", _T0 + timedelta(days=i), i, float(v), {}) for i, v in enumerate(values)]
    return Series("s", {}, points, label="s")


def mornings(module: ModuleType, values: np.ndarray, first: int, last: int, accept_at: int | None = None) -> list[bool]:
    """Whether each morning from ``first`` to ``last`` fails (regression or failed)."""
    out = []
    for night in range(first, last + 1):
        kwargs: dict[str, Any] = {}
        if accept_at is not None and night > accept_at:
            kwargs["accepted"] = {f"n{AT}": Decision("accept", f"n{AT}", "s", "s", "bench", "", "benchmark")}
        v = module.judge(_series(values[:night + 1]), {f"n{night}"}, None, THRESHOLD, False, **kwargs)
        out.append(v is not None and v.status in ("regression", "failed"))
    return out


def measure(module: ModuleType, data: list[dict[str, Any]]) -> dict[str, float]:
    rows: dict[str, float] = {}
    for kind in ("noise", "noisy", "throttled", "bimodal"):
        fails = nights = 0
        for s in (d for d in data if d["kind"] == kind):
            for night, failed in zip(range(FIRST_MORNING, NIGHTS), mornings(module, s["values"], FIRST_MORNING, NIGHTS - 1),
                                     strict=True):
                if night not in s["skip"]:
                    fails, nights = fails + failed, nights + 1
        rows[f"{kind}: false alarms per night"] = fails / nights
    changed = [(mornings(module, s["values"], AT, AT + 29), s["slow"][AT:AT + 30]) for s in data
               if s["kind"] == "bimodal step10"]
    rows["bimodal step10: fails every slow-state morning 3-30"] = float(np.mean(
        [all(f for f, slow in zip(m[2:], states[2:], strict=True) if slow) for m, states in changed]))
    fast = [f for m, states in changed for f, slow in zip(m, states, strict=True) if not slow]
    rows["bimodal step10: false alarms per fast-state night"] = float(np.mean(fast))
    for kind in ("step5", "step10"):
        runs = [mornings(module, s["values"], AT, AT + 29) for s in data if s["kind"] == kind]
        rows[f"{kind}: fails morning 1"] = float(np.mean([m[0] for m in runs]))
        rows[f"{kind}: fails by morning 2"] = float(np.mean([m[0] or m[1] for m in runs]))
        rows[f"{kind}: fails morning 10"] = float(np.mean([m[9] for m in runs]))
        rows[f"{kind}: fails every morning 3-30"] = float(np.mean([all(m[2:]) for m in runs]))
    for kind in ("step5", "step10"):  # bench changes of this checkout (the other check.py uses it too)
        rows[f"{kind}: median nights to a confirmed change"] = float(np.median(
            [_confirmed(s["values"]) for s in data if s["kind"] == kind])) if module is current else float("nan")
    if "accepted" in module.judge.__code__.co_varnames:
        after = [mornings(module, s["values"], AT + 5, AT + 29, accept_at=AT + 4) for s in data if s["kind"] == "step10"]
        rows["step10: accepted at morning 5, no failure after"] = float(np.mean([not any(m) for m in after]))
    for kind in ("ramp", "small ramp"):
        slides = [(mornings(module, s["values"], AT, NIGHTS - 1), s["total"][AT:]) for s in data if s["kind"] == kind]
        for factor in (1.0, 1.3):
            # of the slides whose total goes past factor x the threshold: failing every morning from then on
            ok = [all(past) for verdicts, total in slides
                  if (past := [f for f, t in zip(verdicts, total, strict=True) if t >= factor * THRESHOLD])]
            rows[f"{kind}: fails every morning past {factor:g}x threshold ({len(ok)})"] = (
                float(np.mean(ok)) if ok else float("nan"))
    return rows


def _confirmed(values: np.ndarray) -> float:
    """Nights from the step (its first night is 1) until bench changes names it (within 3 runs of it)."""
    for night in range(AT, NIGHTS):
        if any(abs(st.index - AT) <= 3 for st in detect(values[:night + 1]).steps):
            return night - AT + 1
    return float("inf")


GOALS = {"noise: false alarms per night": "<= 0.002", "bimodal: false alarms per night": "<= 0.002",
         "bimodal step10: fails every slow-state morning 3-30": "1",
         "bimodal step10: false alarms per fast-state night": "<= 0.002",
         "step5: fails by morning 2": ">= 0.90", "step5: fails every morning 3-30": "1 (until accepted)",
         "step10: fails every morning 3-30": "1 (until accepted)", "step10: accepted at morning 5, no failure after": "1",
         "step5: median nights to a confirmed change": "<= 3", "step10: median nights to a confirmed change": "<= 3",
         "ramp: fails every morning past 1x threshold (40)": "1",
         "small ramp: fails every morning past 1x threshold (40)": "1", "one morning of 1,000 series (s)": "< 2",
         f"{SERIES} quiet series at 1%: false red mornings per 100": "<= 1",
         f"step5 at 1% noise, one of {SERIES} series: fails by morning 2": ">= 0.90",
         f"step5 at 1% noise, one of {SERIES} series: fails every morning 3-30": "1 (until accepted)",
         f"step5 at 1% noise, one of {SERIES} series: once failing, fails every morning to 30": "1 (until accepted)",
         f"step5 at 1% noise, one of {SERIES} series: failing by morning 2, fails every morning after to 30":
             "1 (until accepted)",
         "growing noise (0.5% to 2%): false failures per night": "<= 0.002",
         "heavy tails (t3, 2% of nights 20% slow): false failures per ordinary night": "<= 0.002",
         "step3 at 0.6-2% noise: same verdict every morning (or passes, then fails on)": "1",
         "two -6% steps 4-6 nights apart: bench changes names both": "1"}


def timed(module: ModuleType, rng: np.random.Generator) -> float:
    """Seconds to judge one night of 1,000 series of 200 runs (the loop only), each as one of the 1,000 (as bench
    check judges them: the family correction, where the module has it)."""
    series = [_series(1000 * np.exp(rng.normal(0, 0.01, 200))) for _ in range(1000)]
    kwargs = {"family": len(series)} if "family" in module.judge.__code__.co_varnames else {}
    t = time.perf_counter()
    for s in series:
        module.judge(s, {"n199"}, None, THRESHOLD, False, **kwargs)
    return time.perf_counter() - t


def _fails(module: ModuleType, values: np.ndarray, night: int, family: int = 1) -> bool:
    """Whether the morning after ``night`` fails the series ``values`` (as it stood then), judged as one of
    ``family`` series that morning (a module without the family correction judges each on its own)."""
    kwargs = {"family": family} if "family" in module.judge.__code__.co_varnames else {}
    v = module.judge(_series(values[:night + 1]), {f"n{night}"}, None, THRESHOLD, False, **kwargs)
    return v is not None and v.status in ("regression", "failed")


def at_scale(module: ModuleType, mornings_: int, seed: int = 11) -> dict[str, float]:
    """The gate as a fleet's CI meets it (module docstring of bench.analytics.check): SERIES quiet series judged
    together each morning; steps judged as one of SERIES; noise that grows, heavy tails, a step below the
    threshold, 2% noise (each judged on its own, a morning of one series)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    rows: dict[str, float] = {}
    quiet = [1000 * np.exp(rng.normal(0, 0.01, HISTORY + mornings_)) for _ in range(SERIES)]
    fails = [sum(_fails(module, v, night, SERIES) for v in quiet) for night in range(HISTORY, HISTORY + mornings_)]
    rows[f"{SERIES} quiet series at 1%: false red mornings per 100"] = 100 * float(np.mean(
        [f > 0 for f in fails]))
    rows[f"{SERIES} quiet series at 1%: false failures per morning"] = float(np.mean(fails))
    for sigma, family in ((0.01, SERIES), (0.02, 1)):
        runs = []
        for _ in range(N * 5 if family > 1 else N):
            v = 1000 * np.exp(rng.normal(0, sigma, HISTORY + 30))
            v[HISTORY:] *= 0.95
            runs.append([_fails(module, v, n, family) for n in range(HISTORY, HISTORY + 30)])
        name = f"step5 at {sigma:.0%} noise" + (f", one of {family} series" if family > 1 else "")
        rows[f"{name}: fails morning 1"] = float(np.mean([m[0] for m in runs]))
        rows[f"{name}: fails by morning 2"] = float(np.mean([m[0] or m[1] for m in runs]))
        rows[f"{name}: fails every morning 3-30"] = float(np.mean([all(m[2:]) for m in runs]))
        # what keeps the row above below 1: a first failure after morning 3 (a step read below the threshold on its
        # first nights), or a failure that lets go (a flap); this row is the second alone
        rows[f"{name}: once failing, fails every morning to 30"] = float(np.mean(
            [all(m[m.index(True):]) for m in runs if True in m]))
        # the words: the series that fail by morning 2 (>= 0.9 of them) fail every morning after
        rows[f"{name}: failing by morning 2, fails every morning after to 30"] = float(np.mean(
            [all(m[m.index(True):]) for m in runs if m[0] or m[1]]))
    nights = 200
    # N * 5 series: at N, the goal of 0.002 is 11 failures in 5,600 nights, and one series' episode moves it by half
    growing = [1000 * np.exp(rng.normal(0, np.linspace(0.005, 0.02, nights))) for _ in range(N * 5)]
    rows["growing noise (0.5% to 2%): false failures per night"] = float(np.mean(
        [_fails(module, v, n) for v in growing for n in range(HISTORY, nights)]))
    bad, count = 0, 0
    for _ in range(N):
        logs = rng.standard_t(3, HISTORY + 100) * 0.01 / np.sqrt(3)  # Student-t, 3 degrees of freedom, SD 1%
        slow = rng.random(HISTORY + 100) < 0.02
        logs[slow] += np.log(0.8)
        v = 1000 * np.exp(logs)
        for n in range(HISTORY, HISTORY + 100):
            if not slow[n]:  # a 20% night's own morning fails, as it should
                bad, count = bad + _fails(module, v, n), count + 1
    rows["heavy tails (t3, 2% of nights 20% slow): false failures per ordinary night"] = bad / count
    same, failing = [], []
    # N * 5 series: at N, one flap moves the row by 0.025 (seeds 100-109 of this draw flap 7 of 400: 0.9825)
    for _ in range(N * 5):
        v = 1000 * np.exp(rng.normal(0, rng.uniform(0.006, 0.02), HISTORY + 40))
        v[HISTORY:] *= 0.97
        m = [_fails(module, v, n) for n in range(HISTORY, HISTORY + 40)]
        first = m.index(True) if True in m else len(m)
        same.append(all(m[first:]))  # all pass, or pass until it fails and fail from then on
        failing.append(float(np.mean(m)))
    rows["step3 at 0.6-2% noise: same verdict every morning (or passes, then fails on)"] = float(np.mean(same))
    rows["step3 at 0.6-2% noise: mornings failing"] = float(np.mean(failing))
    named = []
    for _ in range(N):
        gap = int(rng.integers(4, 7))
        v = 1000 * np.exp(rng.normal(0, 0.01, 100))
        v[60:] *= 0.94
        v[60 + gap:] *= 0.94
        steps = [st.index for st in detect(v).steps]
        named.append(any(abs(i - 60) <= 1 for i in steps) and any(abs(i - 60 - gap) <= 1 for i in steps))
    rows["two -6% steps 4-6 nights apart: bench changes names both"] = float(np.mean(named))
    return rows


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_check_against", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="another bench/analytics/check.py, measured in the same run")
    parser.add_argument("--mornings", type=int, default=100, help=f"mornings of {SERIES} quiet series (default 100)")
    args = parser.parse_args()
    data = generate()
    columns = {"this": current} | ({"against": _load(args.against)} if args.against else {})
    results = {name: measure(m, data) | at_scale(m, args.mornings) for name, m in columns.items()}
    for name, m in columns.items():
        results[name]["one morning of 1,000 series (s)"] = timed(m, np.random.Generator(np.random.PCG64(7)))
    print(f"bench check, morning by morning: {N} series per kind, {NIGHTS} nights, threshold {THRESHOLD:.0%}; "
          f"{SERIES} quiet series over {args.mornings} mornings; "
          f"{platform.node()}, {os.cpu_count()} CPUs, {platform.python_version()}")
    width = max(map(len, results["this"])) + 2
    head = " " * width + "".join(f"{n:>10}" for n in columns) + "  goal"
    print(head)
    for key in results["this"]:
        cells = "".join(f"{results[n].get(key, float('nan')):>10.4f}" for n in columns)
        print(f"{key:{width}}{cells}  {GOALS.get(key, '')}")


if __name__ == "__main__":
    main()
