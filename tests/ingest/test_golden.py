"""Golden-file parser tests: fixtures/logs/<format>/<case>.<ext> next to <case>.expected.json.

An expected file lists, by hand from reading the log, the values the parser must produce:
    {"format": "tf_cnn",
     "runs": [{"status": "ok", "images_per_sec": 19658.37, ...}],      exact number of runs; listed fields only
     "steps": {"count": 11, "rows": {"0": {...}, "-1": {...}}},        optional; rows by index
     "telemetry": {"count": 3, "rows": {"0": {...}}},                  optional
     "problems": [{"kind": "truncated", "line_no": 7}]}                optional; exact list, listed fields only
Floats compare with a relative tolerance of 1e-6 (the expected values are hand arithmetic); JSON NaN
means the log printed "nan" and the value must stay NaN (not NULL).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.ingest.parse import parse_bytes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _cases() -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.glob("*/*")
        if p.is_file() and not p.name.endswith(".expected.json") and p.suffix not in (".md", ".py")
    )


def expected_path(case: Path) -> Path:
    return case.with_name(case.stem + ".expected.json")


def _check(actual: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    for key, want in expected.items():
        assert key in actual, f"{where}: no field {key!r}"
        got = actual[key]
        if isinstance(want, float) and math.isnan(want):  # a NaN where one is stored (a run's printed nan)
            assert isinstance(got, float) and math.isnan(got), f"{where}.{key}: {got!r} is not NaN"
        elif isinstance(want, float) and got is not None:
            assert got == pytest.approx(want, rel=1e-6), f"{where}.{key}"
        elif isinstance(want, dict) and isinstance(got, dict):
            _check(got, want, f"{where}.{key}")
        elif isinstance(want, list) and isinstance(got, (list, tuple)):
            assert len(got) == len(want), f"{where}.{key}: {got!r} != {want!r}"
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                if isinstance(w, float) and g is not None:
                    assert g == pytest.approx(w, rel=1e-6), f"{where}.{key}[{i}]"
                else:
                    assert g == w, f"{where}.{key}[{i}]"
        else:
            assert got == want, f"{where}.{key}: {got!r} != {want!r}"


def _run_dict(run: Any) -> dict[str, Any]:
    return {name: getattr(run, name) for name in run.__dataclass_fields__}


def test_every_fixture_has_an_expected_file() -> None:
    missing = [str(c.relative_to(FIXTURES)) for c in _cases() if not expected_path(c).exists()]
    assert not missing, f"fixtures without .expected.json: {missing}"


@pytest.mark.parametrize("case", _cases(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_golden(case: Path) -> None:
    exp_file = expected_path(case)
    if not exp_file.exists():
        pytest.fail(f"{exp_file.name} missing")
    expected = json.loads(exp_file.read_text())
    parsed = parse_bytes(case.read_bytes(), source=str(case), fmt=expected.get("force_format"))
    assert parsed.format == expected["format"]
    res = parsed.result
    if "runs" in expected:
        assert len(res.runs) == len(expected["runs"]), [r.status for r in res.runs]
        for i, (run, want) in enumerate(zip(res.runs, expected["runs"], strict=True)):
            _check(_run_dict(run), want, f"runs[{i}]")
    for table in ("steps", "telemetry"):
        if table not in expected:
            continue
        rows = res.steps.rows() if table == "steps" else [_run_dict(t) for t in res.telemetry]
        assert len(rows) == expected[table]["count"]
        for idx, want in expected[table].get("rows", {}).items():
            _check(rows[int(idx)], want, f"{table}[{idx}]")
    if "problems" in expected:
        got = [{"kind": p.kind, "line_no": p.line_no, "message": p.message, "text": p.text} for p in res.problems]
        assert len(got) == len(expected["problems"]), got
        for i, (g, w) in enumerate(zip(got, expected["problems"], strict=True)):
            _check(g, w, f"problems[{i}]")
