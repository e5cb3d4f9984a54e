"""bench check's rule, morning by morning, on the kinds of series a nightly gate meets (a step, a slow
slide, two clock states, a lone outlier: written here, seeded): each morning judges that night's run against
the series before it, as a nightly CI job does.
The expected verdicts follow from the rule in bench.analytics.check's docstring and the series' own numbers
(a step's size against its noise), not from a run of the code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from logtools import tf_cnn_log

from bench.analytics.changes import Point, Series
from bench.analytics.check import judge
from bench.analytics.decisions import Decision

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def series(values: list[float] | np.ndarray) -> Series:
    points = [Point(f"n{i}", T0 + timedelta(days=i), T0 + timedelta(days=i), float(v), {}) for i, v in enumerate(values)]
    return Series("s", {"model": "resnet50"}, points, label="resnet50")


def mornings(values: np.ndarray, first: int, last: int, accepted: dict[str, Decision] | None = None) -> dict[int, str]:
    """night -> the verdict on the morning after it (the series as it stood then, that night the candidate)."""
    out = {}
    for night in range(first, last + 1):
        v = judge(series(values[:night + 1]), {f"n{night}"}, None, 0.05, lower=False, accepted=accepted)
        assert v is not None
        out[night] = v.status
    return out


def noisy(n: int, sigma: float, seed: int) -> np.ndarray:
    return 1000 * np.exp(np.random.default_rng(seed).normal(0, sigma, n))


def test_a_10_percent_step_fails_every_morning_until_accepted_then_never() -> None:
    """Was: 96% of first mornings, 7% of fifth, 0% of tenth (the reference followed the slow runs)."""
    values = noisy(90, 0.01, 1)
    values[60:] *= 0.90
    assert set(mornings(values, 60, 89).values()) == {"regression"}
    decision = Decision("accept", "n60", "s", "resnet50", "ana", "2026-03-02T09:00:00+00:00", "new driver")
    after = mornings(values, 61, 89, {"n60": decision})
    assert "regression" not in after.values()


def test_a_slow_slide_fails_from_the_morning_its_total_passes_the_threshold() -> None:
    """-17.9% over 30 nights at 0.39% noise passed all 48 mornings (bench changes saw four steps in it)."""
    nights = np.arange(100)
    slide = np.clip((nights - 50) / 30, 0, 1) * np.log(1 - 0.179)
    values = noisy(100, 0.0039, 2) * np.exp(slide)
    verdicts = mornings(values, 30, 99)
    total = {n: 1 - float(np.exp(slide[n])) for n in verdicts}
    assert all(v != "regression" for n, v in verdicts.items() if total[n] < 0.03)  # not before it is near 5%
    assert all(v == "regression" for n, v in verdicts.items() if total[n] >= 0.065)  # and always past it


@pytest.mark.parametrize("seed", range(10))
def test_a_5_percent_step_fails_by_the_second_morning_and_every_morning_after(seed: int) -> None:
    """Was caught by the third morning in 13% of series; one at 0.47% noise passed all 10 mornings."""
    sigma = 0.0047 if seed == 0 else float(np.random.default_rng(100 + seed).uniform(0.003, 0.01))
    values = noisy(70, sigma, seed)
    values[50:] *= 0.95
    verdicts = mornings(values, 50, 69)
    assert "regression" in (verdicts[50], verdicts[51])
    assert all(v == "regression" for n, v in verdicts.items() if n >= 52)


#: A -3% step at night 60 at 1.2% noise whose first three nights read 2% high by chance (benchmarks/gate_nights.py's
#: step3 series 38 of seed 11, as percent log deviations from its first 60 nights' mean, rounded to 0.1).
FIRST_LEVEL_HIGH = np.array([
    2.1, 1.8, 2.4, 0.4, 0.3, 0.6, 1, -1, 0.4, -0.8, 1, 0.3, 2.4, -0, -1.1, 1, -1.9, 0.7, -2.1, 0.2, 0.6, -0.7, 0.1,
    -0.3, 0.7, -0.8, -0.6, -0.1, -1.1, 0.4, -0.5, 0.3, -0.4, -2.1, 0.3, 2.7, 0.4, 1, -1, 0.7, 0.2, -0.2, -0.7, -0.3,
    -0.3, -0.7, -1.4, 1, 0.8, -1.6, -1.3, -0.7, -2.5, 0.3, 0.4, -0.7, -2.2, 0.8, 1.4, 0.7, -1.5, -2.8, -2.2, -1.8, -2,
    -2.2, -1.8, -3.4, -1.5, -2.7, -4.6, -2.7, -3.3, -2.9, -2.5, -2.9, -1.5, -5.3, -4.9, -1.5, -3.6, -3.7, -3.1, -2.7,
    -3.4, -0.6, -2.9, 0.6, -4.1, -4.1, -2.2, -4.2, -2.8, -3.5, -2.6, -1.8, -3.4, -2.6, -2.1, -2.9])


def test_a_step_after_a_short_first_level_never_goes_from_fail_back_to_pass() -> None:
    """bench changes ends the first level at night 3 (2.2% above the next 57 nights), so the reference is those
    three nights and the -3% step reads about -5% from them, a slide measured from where it began. Its levels were
    judged with the noise of the three runs before the first slower level (two neighbour differences): morning 17
    failed alone (`.................F......`); with the recent runs' noise it fails from morning 3 and stays."""
    verdicts = list(mornings(1000 * np.exp(FIRST_LEVEL_HIGH / 100), 60, 99).values())
    failing = [v == "regression" for v in verdicts]
    assert True in failing
    assert all(failing[failing.index(True):])


def test_ordinary_noise_fails_no_night() -> None:
    """At 1% noise, 270 mornings: the rule's false-alarm rate is about 1 in 1,000 nights (module docstring)."""
    verdicts = mornings(noisy(300, 0.01, 3), 30, 299)
    assert sum(v == "regression" for v in verdicts.values()) == 0


@pytest.mark.parametrize(("values", "status"), [
    ([1000.0], "no baseline"),
    ([1000.0, 990.0], "no baseline"),  # one reference run
    ([1000.0, 1010.0, 900.0], "suspect"),  # two: their own spread, with 1 degree of freedom: not significant
    ([1000.0] * 10 + [999.0], "ok"),  # no noise at all: -0.1% is exactly what it is
    ([1000.0] * 10 + [900.0], "regression"),
])
def test_short_and_noiseless_series_get_an_answer(values: list[float], status: str) -> None:
    v = judge(series(values), {f"n{len(values) - 1}"}, None, 0.05, lower=False)
    assert v is not None and v.status == status


def test_a_gap_of_months_and_a_tie_are_just_runs() -> None:
    s = series(noisy(20, 0.01, 4))
    s.points[10].started_at = s.points[10].order = s.points[9].started_at  # two runs at one time
    for p in s.points[12:]:
        p.started_at = p.order = p.started_at + timedelta(days=120)  # a gap of four months
    s.points[-1].value *= 0.8
    v = judge(s, {"n19"}, None, 0.05, lower=False)
    assert v is not None and v.status == "regression" and v.n_baseline >= 10


def test_a_damaged_decisions_file_only_makes_the_gate_stricter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torn or hand-edited line is left out with a warning naming it: its acceptance is lost (the gate fails
    again), never invented; the lines around it still count, and the latest decision on a run wins."""
    from bench.analytics import decisions

    decisions.record(tmp_path, "accept", "n60", "s", "resnet50", "new driver", by="ana")
    with (tmp_path / decisions.FILE).open("a") as f:
        f.write('{"action": "accept", "run_id": "n70", "by": "bo"\n')  # torn: no closing brace, fields missing
    decisions.record(tmp_path, "accept", "n80", "s", "resnet50", "new kernel", by="ana")
    decisions.record(tmp_path, "unaccept", "n80", "s", "resnet50", "rolled back", by="bo")
    assert sorted(decisions.accepted(tmp_path)) == ["n60"]
    assert "decisions.jsonl line 2 does not read" in capsys.readouterr().err
    assert decisions.accepted(tmp_path / "nowhere") == {}


def test_decisions_are_data_a_deleted_cut_or_changed_one_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each line's hash and chain, and STORE.json's count, find a changed line (2026 made
    2036), a deleted middle line, lines cut from the end and a deleted file; each is a warning and a finding
    of bench ingest --check, and the gate then treats the change as not accepted."""
    import json

    from typer.testing import CliRunner

    from bench.analytics import decisions
    from bench.ingest.pipeline import ingest
    from bench.runner.cli import app

    log = tmp_path / "a.log"
    log.write_text(tf_cnn_log(20))
    ingest([str(log)], tmp_path / "st", workers=0)
    root = tmp_path / "st"
    for run in ("n60", "n70", "n80"):
        decisions.record(root, "accept", run, "s", "resnet50", "new driver", by="ana")
    assert json.loads((root / "STORE.json").read_text())["decisions"]["count"] == 3
    assert sorted(decisions.accepted(root)) == ["n60", "n70", "n80"] and capsys.readouterr().err == ""
    good = (root / decisions.FILE).read_text()

    def findings() -> list[str]:
        result = CliRunner().invoke(app, ["ingest", "--check", "--store", str(root)])
        assert result.exit_code == 1, result.output
        return [line for line in result.stderr.splitlines() if decisions.FILE in line]

    (root / decisions.FILE).write_text(good.replace("2026", "2036", 1) if "2026" in good else good.replace('"ana"', '"eve"', 1))
    assert sorted(decisions.accepted(root)) == ["n70", "n80"]  # the changed acceptance is lost, never invented
    assert "line 1 was changed after it was written" in capsys.readouterr().err
    assert any("line 1 was changed" in f for f in findings())
    lines = good.splitlines(keepends=True)
    (root / decisions.FILE).write_text(lines[0] + lines[2])  # the middle one deleted
    assert sorted(decisions.accepted(root)) == ["n60", "n80"]
    err = capsys.readouterr().err
    assert "line 2: a decision before it is missing or was changed" in err and "could not be read" in err
    (root / decisions.FILE).write_text(lines[0])  # cut after the first
    decisions.accepted(root)
    assert "STORE.json records 3 decisions, the file holds 1 that read whole: 2 could not be read" in capsys.readouterr().err
    (root / decisions.FILE).unlink()
    assert decisions.accepted(root) == {}
    assert "the file holds 0 that read whole: 3 could not be read" in capsys.readouterr().err
    assert any("3 could not be read" in f for f in findings())
