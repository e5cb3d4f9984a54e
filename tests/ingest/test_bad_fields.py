"""One bad field never loses a run: every fixture log, with one of its numbers replaced by
text that looks like a number and is not (``1.2.3``, ``--1``, ``1e``, ``.``), parses without a
``parser_error``; the line a parser could not convert is an ``invalid_value`` or ``bad_line`` problem
naming it, and the file keeps every run unless a problem says why (a header that no longer reads as one
makes its file unrecognized). Numbers inside a glog line's prefix (its date and time) are left alone:
without them the line is not a glog line, which is the format's structure, not a field."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from bench.ingest.parse import parse_bytes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
GLOG_PREFIX = re.compile(rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")
NOT_NUMBERS = (b"1.2.3", b"--1", b"1e", b".", b"1..0", b"0x1G")
PER_FILE = 25
LOGS = sorted(p for d in ("logs", "mlperf") for p in (FIXTURES / d).rglob("*")
              if p.is_file() and p.suffix not in (".md", ".json"))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_field_that_is_not_a_number_costs_at_most_its_line(log: Path) -> None:
    data = log.read_bytes()
    base = parse_bytes(data, source=str(log)).result
    if any(p.kind == "parser_error" for p in base.problems):
        pytest.fail(f"{log} raises in its parser unmutated: {base.problems}")
    rng = random.Random(str(log.relative_to(FIXTURES)))
    starts = [0, *(m.end() for m in re.finditer(rb"\n", data))]
    hits = []
    for start in starts:
        end = data.find(b"\n", start)
        line = data[start: len(data) if end < 0 else end]
        skip = m.end() if (m := GLOG_PREFIX.match(line)) else 0
        hits += [(start + h.start(), start + h.end()) for h in NUMBER.finditer(line, skip)]
    for a, b in rng.sample(hits, min(PER_FILE, len(hits))):
        bad = rng.choice(NOT_NUMBERS)
        got = parse_bytes(data[:a] + bad + data[b:], source=str(log)).result
        line_no = data.count(b"\n", 0, a) + 1
        case = f"{log.name} line {line_no}: {data[a:b].decode()!r} -> {bad.decode()!r}"
        assert not [p for p in got.problems if p.kind == "parser_error"], case
        named = [p for p in got.problems if p.kind in ("invalid_value", "bad_line") and p.line_no == line_no]
        unrecognized = any(p.kind == "unrecognized_format" for p in got.problems)
        assert len(got.runs) >= len(base.runs) or named or unrecognized, case
