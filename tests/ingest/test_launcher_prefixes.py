"""A log whose every line carries a launcher's prefix reads as the same log without it, in every format.

Each fixture log (one per format folder, and the real modern logs when ../shared is here) is wrapped three
ways, as Kubeflow's TFJob launcher, a container log shipper and ``kubectl logs --timestamps`` write it; its
runs, step rows and problems must equal those of the bare log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes
from bench.ingest.text import launcher_prefix

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
MODERN = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "modern"
PREFIXES = {
    "kubeflow": "INFO|2019-03-01T10:00:00|/opt/launcher.py|27| ",
    "shipper": "stdout: ",
    "kubectl": "2026-11-29T06:42:31.123456789Z ",
}


def logs() -> list[Path]:
    picked = [sorted(d.glob("*.log"))[0] for d in sorted(FIXTURES.iterdir()) if d.is_dir() and list(d.glob("*.log"))]
    if MODERN.is_dir():
        picked += [sorted(d.glob("*.log"))[0] for d in sorted(MODERN.iterdir()) if d.is_dir()]
    return picked


def wrap(data: bytes, prefix: str) -> bytes:
    return b"".join(prefix.encode() + line for line in data.splitlines(keepends=True))


def view(data: bytes, name: str) -> tuple[str | None, list, list, list]:
    got = parse_bytes(data, source=name)
    res = got.result
    return got.format, res.runs, res.steps.rows(), [(p.kind, p.line_no, p.text) for p in res.problems]


@pytest.mark.parametrize("how", sorted(PREFIXES))
@pytest.mark.parametrize("log", logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_prefixed_log_reads_as_the_bare_one(log: Path, how: str) -> None:
    data = log.read_bytes()
    bare = view(data, log.name)
    assert bare[0] is not None and bare[1], f"{log}: the bare log gives no run"
    assert view(wrap(data, PREFIXES[how]), log.name) == bare


def test_a_tf_cnn_log_behind_kubeflows_launcher_keeps_its_two_runs() -> None:
    """Every line behind ``INFO|...|/opt/launcher.py|27| `` gave 0 runs (missing_field)."""
    from logtools import tf_cnn_log, total_of

    slow, fast = tf_cnn_log(20, step_time_s=0.78), tf_cnn_log(20, step_time_s=0.38)
    got = parse_bytes(wrap((slow + fast).encode(), PREFIXES["kubeflow"]), source="tfjob.log")
    assert got.format == "tf_cnn"
    assert [(r.status, r.images_per_sec) for r in got.result.runs] == [("ok", total_of(slow)), ("ok", total_of(fast))]


def test_a_prefix_on_only_some_lines_is_left_alone() -> None:
    """Fewer than 90% of the lines prefixed: that is the program's own text, not a launcher's."""
    lines = [b"stdout: a", b"stdout: b", b"c", b"d"]
    assert launcher_prefix(b"\n".join(lines)) is None
    assert launcher_prefix(b"\n".join(lines[:2] * 10 + lines[2:3])) is not None
