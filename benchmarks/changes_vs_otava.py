"""``make bench`` (changes half): bench changes' method against Apache Otava on the same labelled series.

The series are generated here, seeded (numpy's PCG64), 200 runs each with 1% run-to-run noise, in six
kinds with known answers:

- ``step``: one change of level at a random run (3-10% either way);
- ``outlier``: no change, one or two lone runs 20-40% slow (a throttled night): a change reported here is
  false;
- ``noise``: no change at all;
- ``drift``: the level slides 6-10% over 40 runs. One change counts, anywhere within the slide (or 5
  runs from it); further ones inside it count neither way;
- ``two steps``: two changes of 3-10% either way, at least 30 runs apart;
- ``bimodal``: no change; two clock states 8% apart, each run in one of them at random (30-70% slow).

A found change within ``TOLERANCE`` runs of a true step is a true positive (each truth matched once);
every other one is false. Otava runs in its own virtual environment (``make bench`` builds .venv-otava:
apache-otava pins numpy 2.2, which TensorFlow 2.15 here cannot share), with its defaults
(``compute_change_points``: window 50, p < 0.001). The same process checks that bench's binary
segmentation finds exactly the breakpoints of ``ruptures.Binseg(model="l2")`` at the same penalty. Timing:
``TIMED`` series of 200 runs, each tool in its own process, the loop only (imports and I/O left out).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.analytics.changepoints import binary_segmentation, detect_states, find_outliers, noise

N_PER_KIND = 100
LENGTH = 200
TOLERANCE = 3
TIMED = 1000
KINDS = ("step", "two steps", "outlier", "noise", "drift", "bimodal")
REFERENCE = Path(".venv-otava/bin/python")

# Run by the reference venv's Python: reads {"series": [...], "pens": [...], "timed": [...]}; writes Otava's
# change points, its time, and ruptures' Binseg breakpoints.
_REFERENCE_SCRIPT = r"""
import json, sys, time
import numpy as np
import ruptures
from otava.analysis import compute_change_points
data = json.load(open(sys.argv[1]))
otava = [[int(c.index) for c in compute_change_points(s)[0]] for s in data["series"]]
t = time.perf_counter()
for s in data["timed"]:
    compute_change_points(s)
seconds = time.perf_counter() - t
binseg = [ruptures.Binseg(model="l2", min_size=3, jump=1).fit(np.array(x)).predict(pen=p)[:-1]
          for x, p in zip(data["kept_logs"], data["pens"])]
t = time.perf_counter()
for x, p in zip(data["kept_logs"], data["pens"]):
    ruptures.Binseg(model="l2", min_size=3, jump=1).fit(np.array(x)).predict(pen=p)
binseg_seconds = (time.perf_counter() - t) / len(data["pens"])
json.dump({"otava": otava, "seconds": seconds, "binseg": binseg, "binseg_seconds": binseg_seconds},
          open(sys.argv[2], "w"))
"""


def steps_of(values: list[float] | np.ndarray) -> list[int]:
    """Where bench changes finds a step in one series: its positions, a series in two clock states followed
    state by state (bench.analytics.changepoints.detect_states, as find_changes does)."""
    _, parts = detect_states(values)
    return sorted(int(idx[st.index]) for idx, det in parts for st in det.steps)


def labelled(rng: np.random.Generator) -> list[dict[str, Any]]:
    """The labelled series (module docstring): kind, values, true steps, drift span."""
    out = []
    for kind in KINDS:
        for _ in range(N_PER_KIND):
            level = np.zeros(LENGTH)
            truth: list[int] = []
            span = None
            if kind == "step":
                at = int(rng.integers(20, LENGTH - 20))
                level[at:] = math.log1p(rng.choice([-1, 1]) * rng.uniform(0.03, 0.10))
                truth = [at]
            elif kind == "two steps":
                a = int(rng.integers(20, LENGTH - 60))
                b = int(rng.integers(a + 30, LENGTH - 20))
                level[a:] += math.log1p(rng.choice([-1, 1]) * rng.uniform(0.03, 0.10))
                level[b:] += math.log1p(rng.choice([-1, 1]) * rng.uniform(0.03, 0.10))
                truth = [a, b]
            elif kind == "bimodal":
                level += np.where(rng.random(LENGTH) < rng.uniform(0.3, 0.7), math.log(0.92), 0.0)
            elif kind == "drift":
                a = int(rng.integers(40, LENGTH - 80))
                level[a:a + 40] = np.linspace(0, math.log1p(-rng.uniform(0.06, 0.10)), 40)
                level[a + 40:] = level[a + 39]
                span = (a, a + 40)
            values = 1000 * np.exp(level + rng.normal(0, 0.01, LENGTH))
            if kind == "outlier":
                for at in rng.choice(np.arange(5, LENGTH - 5), size=int(rng.integers(1, 3)), replace=False):
                    values[at] *= 1 - rng.uniform(0.2, 0.4)
            out.append({"kind": kind, "values": values.tolist(), "truth": truth, "span": span})
    return out


def score(series: list[dict[str, Any]], found: list[list[int]]) -> dict[str, dict[str, float]]:
    """Per kind and overall: true and false positives, true changes, precision and recall."""
    tallies: dict[str, list[int]] = {}
    for s, cps in zip(series, found, strict=True):
        tp = fp = 0
        truth = list(s["truth"])
        n_true = len(truth) + (1 if s["span"] else 0)
        drift_hit = False
        for c in cps:
            near = [t for t in truth if abs(c - t) <= TOLERANCE]
            if near:
                truth.remove(near[0])
                tp += 1
            elif s["span"] and s["span"][0] - 5 <= c <= s["span"][1] + 5:
                tp += not drift_hit
                drift_hit = True
            else:
                fp += 1
        for key in (s["kind"], "all"):
            t = tallies.setdefault(key, [0, 0, 0])
            t[0] += tp
            t[1] += fp
            t[2] += n_true
    return {k: {"tp": tp, "fp": fp, "true": n, "precision": tp / (tp + fp) if tp + fp else float("nan"),
                "recall": tp / n if n else float("nan")} for k, (tp, fp, n) in tallies.items()}


def main() -> None:
    rng = np.random.default_rng(np.random.PCG64(32))
    series = labelled(rng)
    timed = [1000 * np.exp(rng.normal(0, 0.01, LENGTH)) for _ in range(TIMED)]
    for x in timed[::2]:
        x[int(rng.integers(20, LENGTH - 20)):] *= 0.93
    ours = [steps_of(s["values"]) for s in series]
    t = time.perf_counter()
    for x in timed:
        steps_of(x)
    our_seconds = time.perf_counter() - t
    # bench's candidate step alone, for the ruptures cross-check: the log series less its outliers
    kept, pens = [], []
    for s in series:
        logs = np.log(s["values"])
        sigma = noise(logs)
        keep = np.setdiff1d(np.arange(LENGTH), find_outliers(logs, sigma))
        kept.append(logs[keep].tolist())
        pens.append(2 * sigma ** 2 * math.log(len(keep)))
    print(f"changes benchmark: {len(series)} labelled series of {LENGTH} runs; {TIMED} timed; "
          f"{platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}")
    ref = _reference(series, timed, kept, pens)
    tools = [("bench changes", ours, our_seconds)]
    if ref is not None:
        tools.append(("Apache Otava 0.8.0", ref["otava"], ref["seconds"]))
        same = sum(binary_segmentation(np.array(x), p, 3) == b for x, p, b in zip(kept, pens, ref["binseg"], strict=True))
        t = time.perf_counter()
        for x, p in zip(kept, pens, strict=True):
            binary_segmentation(np.array(x), p, 3)
        ours_binseg = (time.perf_counter() - t) / len(kept)
        print(f"binary segmentation: the same breakpoints as ruptures.Binseg(model='l2') on {same} of {len(kept)} "
              f"series; {1000 * ours_binseg:.2f} ms per series here, {1000 * ref['binseg_seconds']:.2f} ms in ruptures 1.1.10")
    print(f"{'tool':<20} {'kind':<10} {'TP':>4} {'FP':>4} {'true':>5} {'precision':>9} {'recall':>7} {'FP/1000 runs':>12}")
    for name, found, _ in tools:
        scores = score(series, found)
        for kind in (*KINDS, "all"):
            r = scores[kind]
            runs = LENGTH * sum(kind in ("all", s["kind"]) for s in series)
            print(f"{name:<20} {kind:<10} {r['tp']:>4} {r['fp']:>4} {r['true']:>5} {r['precision']:>9.3f} "
                  f"{r['recall']:>7.3f} {1000 * r['fp'] / runs:>12.2f}")
    print("goals: bimodal at most 1.5 false changes per 1,000 runs")
    for name, _, seconds in tools:
        print(f"time, {TIMED} series of {LENGTH} runs: {name}: {seconds:.2f} s ({1000 * seconds / TIMED:.2f} ms per series)")


def _reference(series: list[dict[str, Any]], timed: list[np.ndarray], kept: list[list[float]],
               pens: list[float]) -> dict[str, Any] | None:
    python = Path(os.environ.get("OTAVA_PYTHON", REFERENCE))
    if not python.is_file():
        print(f"no Otava: {python} is missing (make bench builds it: make .venv-otava/.installed)")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        data.write_text(json.dumps({"series": [s["values"] for s in series], "timed": [x.tolist() for x in timed],
                                    "kept_logs": kept, "pens": pens}))
        subprocess.run([str(python), "-c", _REFERENCE_SCRIPT, str(data), str(out)], check=True)
        return dict(json.loads(out.read_text()))


if __name__ == "__main__":
    main()
