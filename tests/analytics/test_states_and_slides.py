"""Two clock states, slides and suspects: the series are written here, seeded, with the
shape the issue describes; the expected answers follow from how each was made (its states, its slide's
total, its last night), not from a run of the code."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from bench.analytics.changepoints import detect, detect_states, modes
from bench.runner.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import nightly  # the nightly logs of bench changes' tests

runner = CliRunner()


def _folders(root: Path, values: list[float], host: str) -> None:
    """One bench run folder per night (run_id r-resnet50-HOST-I), night I at 2026-01-01 + I days."""
    t0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
    for i, v in enumerate(values):
        folder = root / f"{host}-{i:03d}"
        folder.mkdir(parents=True)
        meta = {"schema_version": 1, "run_id": f"r-resnet50-{host}-{i}", "status": "ok", "exit_code": 0,
                "started_at": (t0 + timedelta(days=i)).isoformat(), "host": {"hostname": host},
                "spec": {"model": "resnet50", "batch_size": 64, "num_gpus": 8, "precision": "fp16"},
                "gpus": [{"name": "NVIDIA H100 80GB HBM3", "driver_version": "570.86.15"}] * 8}
        (folder / "run.json").write_text(json.dumps(meta))
        (folder / "output.log").write_text(nightly.log_text("resnet50", v))


def clock_states(n: int, seed: int, slow_share: float = 0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 1000 * np.exp(rng.normal(0, 0.005, n) + np.where(rng.random(n) < slow_share, np.log(0.92), 0.0))


def slide(n: int = 100, seed: int = 2) -> np.ndarray:
    """-17.9% over 30 nights from night 50, at 0.39% noise (a slow slide a nightly gate must catch)."""
    nights = np.arange(n)
    return 1000 * np.exp(np.random.default_rng(seed).normal(0, 0.0039, n)
                         + np.clip((nights - 50) / 30, 0, 1) * np.log(1 - 0.179))


def test_two_clock_states_are_recognised_and_a_switch_is_no_change() -> None:
    values = clock_states(120, 1)
    states = modes(np.log(values))
    assert states is not None
    slow_share = float(np.mean(np.log(values) < np.log(1000 * 0.96)))  # the states are 8% apart: split at -4%
    assert abs(states.shares[0] - slow_share) < 1e-9 and abs(states.means[1] / states.means[0] - 1 / 0.92) < 0.01
    found, parts = detect_states(values)
    assert found is not None and [det.steps for _, det in parts] == [[], []]
    assert [det.outliers for _, det in parts] == [[], []]


def test_a_change_of_one_state_is_still_a_change() -> None:
    values = clock_states(120, 3)
    slow = np.log(values) < np.log(1000 * 0.96)
    values[60:] = np.where(slow[60:], values[60:] * 0.90, values[60:])  # the slow state 10% slower from night 60
    states, parts = detect_states(values)
    assert states is not None
    steps = [(int(idx[st.index]), round(st.change, 2)) for idx, det in parts for st in det.steps if abs(st.change) > 0.02]
    assert len(steps) == 1 and 60 <= steps[0][0] <= 63 and steps[0][1] == -0.10


def test_no_states_in_noise_a_step_or_a_flat_series() -> None:
    rng = np.random.default_rng(4)
    step = 1000 * np.exp(rng.normal(0, 0.01, 100) + np.where(np.arange(100) >= 50, np.log(0.9), 0.0))
    for values in (1000 * np.exp(rng.normal(0, 0.01, 100)), step, np.full(100, 1000.0), np.full(5, 1000.0)):
        assert modes(np.log(values)) is None


def test_a_slide_is_one_change_over_its_span_and_a_staircase_stays_three() -> None:
    det = detect(slide())
    assert len(det.steps) >= 2 and det.slides == [(0, len(det.steps) - 1)]
    change, low, high, _ = det.slide_tests[0]
    assert low < change < high and abs(change - (-0.179)) < 0.01  # the total, from level to level
    assert 48 <= det.steps[0].index <= 56 and 74 <= det.steps[-1].index <= 82
    rng = np.random.default_rng(5)
    stairs = np.zeros(120)
    for at in (30, 60, 90):
        stairs[at:] += np.log(0.95)
    det = detect(1000 * np.exp(rng.normal(0, 0.005, 120) + stairs))
    assert [abs(st.index - at) <= 2 for st, at in zip(det.steps, (30, 60, 90), strict=True)] == [True] * 3
    assert det.slides == []


def test_bench_changes_says_states_slides_and_suspects(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _folders(runs, clock_states(60, 6).tolist(), host="h1")
    _folders(runs, slide(84).tolist(), host="h2")
    quiet = 1000 * np.exp(np.random.default_rng(7).normal(0, 0.005, 30))
    quiet[-1] *= 1.25  # a last night far too fast: too new to call an outlier
    _folders(runs, quiet.tolist(), host="h3")
    store = str(tmp_path / "store")
    assert runner.invoke(app, ["ingest", str(runs), "--store", store]).exit_code == 0
    found = json.loads(runner.invoke(app, ["changes", "--store", store, "--json"]).output)
    assert [s["label"] for s in found["states"]] == ["resnet50 b64 fp16 on host h1"]
    assert [c["label"] for c in found["changes"]] == ["resnet50 b64 fp16 on host h2"]  # one slide, no switch
    assert found["changes"][0]["slide"]["steps"] >= 2 and abs(found["changes"][0]["change"] + 0.179) < 0.01
    assert [(o["label"], o["run_id"]) for o in found["suspects"]] == [("resnet50 b64 fp16 on host h3", "r-resnet50-h3-29")]
    assert found["outliers"] == []
    text = runner.invoke(app, ["changes", "--store", store]).output
    assert any(x.startswith("two states resnet50 b64 fp16 on host h1:") and "switches" in x for x in text.splitlines())
    assert any(x.startswith("slower  resnet50 b64 fp16 on host h2: -17.") and "a slide:" in x for x in text.splitlines())
    # the gate: the fast night is a suspect, which fails only when asked
    last = ["check", "--store", store, "--where", "run_id = 'r-resnet50-h3-29'"]
    res = runner.invoke(app, last)
    assert res.exit_code == 0 and res.output.startswith("SUSPECT resnet50 b64 fp16 on host h3: +2"), res.output
    assert runner.invoke(app, [*last, "--fail-on", "suspect"]).exit_code == 1
    # accepting the slide accepts it whole: the gate then passes its last night
    first_run = found["changes"][0]["run_id"]
    res = runner.invoke(app, ["changes", "--store", store, "--accept", first_run, "--why", "new firmware"])
    assert res.exit_code == 0 and "a slide, so at its last step" in res.output, res.output
    assert runner.invoke(app, ["check", "--store", store, "--where", "run_id = 'r-resnet50-h2-83'"]).exit_code == 0
