"""Format detection: the numbers-only shortcut of ``registry.detect`` changes no answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.ingest import registry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _detect_every_format(head: str) -> str | None:
    """Detection without the shortcut: every sniffer, in the registry's order."""
    for name in registry.FORMAT_MODULES:
        if registry.load(name).sniff(head):
            return name
    return None


_NUMERIC_TEXT = st.text(alphabet="0123456789 \t\r\n.,+-", max_size=400)
_THERMALISH = st.lists(
    st.lists(st.integers(0, 2_000_000_000).map(str), min_size=1, max_size=6).map(", ".join), max_size=8
).map(lambda lines: "\n".join(lines) + "\n")


@settings(max_examples=300, deadline=None)
@given(st.one_of(_NUMERIC_TEXT, _THERMALISH))
def test_no_other_sniffer_accepts_a_head_of_numbers_only(head: str) -> None:
    assert registry._NUMERIC.fullmatch(head)
    for name in registry.FORMAT_MODULES:
        if name not in registry.NUMERIC_FORMATS:
            assert not registry.load(name).sniff(head), name
    found = registry.detect(head)
    assert (found.NAME if found else None) == _detect_every_format(head)


@pytest.mark.parametrize("head", [
    "1600000000, 1000.5, 40, 30, \n1600000002, 1001.5, 41, 30, \n",
    "1600000000, , 40, 30, \r\n",
    "12 34\n",
    "",
])
def test_numbers_only_heads_are_detected_as_before(head: str) -> None:
    found = registry.detect(head)
    assert (found.NAME if found else None) == _detect_every_format(head)


def test_every_fixture_is_detected_as_before() -> None:
    paths = [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".md", ".json", ".py", ".csv")]
    assert len(paths) > 40
    thermal = 0
    for path in paths:
        head = path.read_bytes()[: registry.HEAD_CHARS].decode("utf-8", errors="replace")
        found = registry.detect(head)
        assert (found.NAME if found else None) == _detect_every_format(head), path
        thermal += bool(registry._NUMERIC.fullmatch(head)) and found is not None
    assert thermal >= 1  # the shortcut is exercised by a real fixture


def test_a_markdown_document_that_quotes_log_lines_is_not_a_log() -> None:
    """Lines quoted in code spans, fences or tables are no evidence of a log; the same lines bare are."""
    step = "10\timages/sec: 1250.0 +/- 12.5 (jitter = 30.1)\t7.814"
    mll = ':::MLLOG {"key": "run_start", "value": null, "time_ms": 1}'
    doc = (f"# Corpus\n\nThree generations: `{mll}` and `:::MLPv0.5.0 resnet 1.0 (x.py:1) run_start`.\n\n"
           f"| file | line |\n|---|---|\n| a.log | {step} |\n\n```\n{mll}\n{step}\n```\n")
    assert registry.detect(doc) is None
    log = f"# Running resnet50 on 2 GPUs\n{mll}\n{mll}\n"
    module = registry.detect(log)
    assert module is not None and module.NAME == "mlperf"


def test_a_tf_cnn_log_after_pages_of_tensorflow_info_lines_is_still_read(tmp_path) -> None:
    """A tf_cnn log whose first 743 KB are TensorFlow's own info lines was unrecognized_format without a hint."""
    from logtools import tf_cnn_log

    from bench.ingest.parse import parse_bytes

    noise = "".join(f"2026-11-26 10:00:00.{i % 1000:06d}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] "
                    f"Created device /job:localhost/replica:0/task:0/device:GPU:{i % 8} with 78000 MB memory\n"
                    for i in range(5000))
    assert len(noise) > 600_000
    parsed = parse_bytes((noise + tf_cnn_log(20)).encode(), source="x.log")
    assert parsed.format == "tf_cnn" and parsed.result.runs and parsed.result.runs[0].status == "ok"
    unknown = parse_bytes((noise + "nothing bench knows\n").encode(), source="y.log")
    (problem,) = [p for p in unknown.result.problems if p.kind == "unrecognized_format"]
    assert "first 256 KiB" in problem.message and "--format" in problem.message
