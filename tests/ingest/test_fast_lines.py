"""The line formats' fast path (``fast_line``, bench.ingest.formats.lines) against their general path.

It must be invisible: for every input, the same runs, the same step rows bit for bit and the same problems as
with ``BENCH_PURE_PYTHON=1``. Checked on every real log of today's formats in the shared corpus, on the
generated logs ``make bench`` times (benchmarks/format_speed.py), and on those logs damaged line by line the ways
real logs are (an unreadable or impossible number, a line cut short, a rank or launcher prefix, colours, a line
printed twice or out of order).
"""

from __future__ import annotations

import importlib
import itertools
import random
import re
from pathlib import Path

import format_speed
import pytest
from logtools import assert_same_parse

from bench.ingest import registry
from bench.ingest.formats.line_scan import Rows
from bench.ingest.formats.lines import LineFormat
from bench.ingest.parse import parse_bytes, parse_stream
from bench.ingest.records import ParseResult

TODAYS = ("megatron", "deepspeed", "torchtitan", "pytorch_imagenet", "nccl_tests")
CORPUS_DIRS = {"megatron": "megatron", "deepspeed": "deepspeed", "torchtitan": "torchtitan",
               "pytorch_imagenet": "imagenet", "nccl_tests": "nccl-tests"}


def _both(data: bytes, fmt: str | None, monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    general = parse_bytes(data, source="x", fmt=fmt).result
    monkeypatch.delenv("BENCH_PURE_PYTHON")
    fast = parse_bytes(data, source="x", fmt=fmt).result
    assert_same_parse(general, fast)
    return fast


def _streamed(data: bytes, fmt: str, monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    """``_both`` for the big-file path: the log streamed in 4 KiB chunks after a 16 KiB head."""
    def parse() -> ParseResult:
        chunks = iter([data[i:i + 4096] for i in range(16384, len(data), 4096)])
        return parse_stream(data[:16384], chunks, source="x", fmt=fmt, result=ParseResult()).result

    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    general = parse()
    monkeypatch.delenv("BENCH_PURE_PYTHON")
    fast = parse()
    assert_same_parse(general, fast)
    return fast


def _generated(name: str, n: int) -> list[str]:
    return list(itertools.islice(format_speed.FORMATS[name](random.Random(7)), n))


def _damaged(lines: list[str], seed: int) -> list[str]:
    """``lines`` with one line in 15 damaged: each way keeps the rest of the log as it was."""
    rng = random.Random(seed)
    out: list[str] = []
    for line in lines:
        if rng.random() > 1 / 15:
            out.append(line)
            continue
        way = rng.randrange(9)
        tokens = line.split(" ")
        k = rng.randrange(len(tokens))
        if way == 0:
            tokens[k] = "1.2.3"
        elif way == 1:
            tokens[k] = rng.choice(["nan", "inf", "0", "-1", "0.0", "1e400"])
        elif way == 2:
            line = line[: rng.randrange(len(line) + 1)]
        elif way == 3:
            line = rng.choice(["[1,0]<stdout>:", " 3: ", "[2] ", "[0]<stderr>:"]) + line
        elif way == 4:
            line = f"\x1b[32m{line}\x1b[0m"
        elif way == 5:
            out.append(line)  # printed twice
        elif way == 6 and out:
            out[-1], line = line, out[-1]  # out of order
        elif way == 7:
            tokens[k] = tokens[k] + "x"
        else:
            line = line.replace(" ", "\t", 1)
        out.append(" ".join(tokens) if way in (0, 1, 7) else line)
    return out


FAST = ("deepspeed", "nccl_tests", "pytorch_imagenet", "torchtitan")  # a fast line
C_PATH = ("deepspeed", "megatron", "pytorch_imagenet", "torchtitan")  # a line program and fast_rows


def _parser(name: str) -> type[LineFormat]:
    return importlib.import_module(f"bench.ingest.formats.{name}")._Parser  # type: ignore[no-any-return]


def test_the_fast_formats_have_a_fast_line() -> None:
    """The formats whose step line has a fast path (the others are checked too: for them both paths are one)."""
    assert {name for name in TODAYS if _parser(name).fast_line is not LineFormat.fast_line} == set(FAST)
    assert {name for name in TODAYS if hasattr(_parser(name), "PROGRAM")} == set(C_PATH)
    assert {name for name in TODAYS if registry.chunk_parser(registry.load(name)) is not None} == set(C_PATH)


@pytest.mark.parametrize("name", sorted({*FAST, *C_PATH}))
def test_the_fast_paths_take_the_step_lines(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clean generated log every step row but the first of each run comes from the fast line or, where
    the format has one, its C path's ``fast_rows`` (the equivalence tests above would pass as well if they
    took none)."""
    parser, taken = _parser(name), []
    fast, rows_at_once = parser.fast_line, getattr(parser, "fast_rows", None)

    def counted(self: LineFormat, no: int, raw: str) -> bool:
        took = fast(self, no, raw)  # type: ignore[misc, call-arg, arg-type]
        taken.extend([no] if took else [])
        return took

    def counted_rows(self: LineFormat, rows: Rows, lo: int, hi: int) -> int:
        k: int = rows_at_once(self, rows, lo, hi)  # type: ignore[misc]
        taken.extend(rows.no[lo:lo + k].tolist())
        return k

    if fast is not None:
        monkeypatch.setattr(parser, "fast_line", counted)
    if rows_at_once is not None:
        monkeypatch.setattr(parser, "fast_rows", counted_rows)
    res = parse_bytes(("\n".join(_generated(name, 3000)) + "\n").encode(), source="x", fmt=name).result
    steps = res.steps.rows()
    firsts = {min(s["line_no"] for s in steps if s["run_index"] == r) for r in range(len(res.runs))}
    rows = [s["line_no"] for s in steps if s["line_no"] not in firsts]
    assert len(rows) > 1000 and sorted(set(taken) & set(rows)) == rows


@pytest.mark.parametrize("name", TODAYS)
def test_real_logs_parse_identically(name: str, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted((corpus / "modern" / CORPUS_DIRS[name]).glob("*.log"))
    assert paths
    for path in paths:
        _both(path.read_bytes(), None, monkeypatch)


@pytest.mark.parametrize("name", TODAYS)
def test_generated_logs_parse_identically(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _generated(name, 3000)
    res = _both(("\n".join(lines) + "\n").encode(), name, monkeypatch)
    assert res.runs[0].status == "ok" and {r.status for r in res.runs[1:]} <= {"ok", "truncated"}  # the last cut
    assert not res.problems
    _both(("\n".join(lines[1:]) + "\n").encode(), name, monkeypatch)  # without its first line (the set-up)
    assert len(res.steps) > 1000


@pytest.mark.parametrize(("name", "seed"), [(n, s) for n in TODAYS for s in range(6)])
def test_damaged_logs_parse_identically(name: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _damaged(_generated(name, 1500), seed)
    res = _both(("\n".join(lines) + "\n").encode(), name, monkeypatch)
    assert res.problems  # the damage was seen, the same way on both paths


@pytest.mark.parametrize(("name", "seed"), [(n, s) for n in TODAYS for s in range(2)])
def test_streamed_logs_parse_identically(name: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log too big to hold is read in chunks: a run, and a stretch of step rows, go on across them."""
    clean = _streamed(("\n".join(_generated(name, 1500)) + "\n").encode(), name, monkeypatch)
    assert len(clean.steps) > 800 and not clean.problems
    assert _streamed(("\n".join(_damaged(_generated(name, 1500), seed)) + "\n").encode(), name, monkeypatch).problems


EDGE = ("0", "-1", "1.5", "2.7", "-0", "1e400", "1e40", "nan", "99999999999999999999", "0x10", "1_0", ".5", "5.")


@pytest.mark.parametrize("name", C_PATH)
def test_every_figure_at_its_edges_parses_identically(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each figure of one step line in turn set to each edge value (0, negative, fractional where an integer
    is printed, too large for an int64 or a float, nan, forms float() reads and the line program does not),
    and the line after it printed again: both paths give the same runs, rows and problems."""
    lines = _generated(name, 40)
    at = 20
    figures = [m.span() for m in re.finditer(r"\d[\d.,eE+-]*", lines[at])]
    assert len(figures) >= 5
    for start, end in figures:
        for value in EDGE:
            damaged = lines[at][:start] + value + lines[at][end:]
            log = [*lines[:at], damaged, *lines[at + 1:at + 3], lines[at + 1], *lines[at + 3:]]
            _both(("\n".join(log) + "\n").encode(), name, monkeypatch)


@pytest.mark.parametrize("name", C_PATH)
def test_lines_that_are_not_ascii_parse_identically(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step line with a non-ASCII character, one with a byte that is not UTF-8 and one with a control byte
    go the slow way; the rest of the log still the C path."""
    lines = [line.encode() for line in _generated(name, 60)]
    lines[20] = lines[20].replace(b" ", " \u00e9 ".encode(), 1)
    lines[30] = lines[30][:10] + b"\xff" + lines[30][10:]
    lines[40] = lines[40][:10] + b"\x0b" + lines[40][10:]
    res = _both(b"\n".join(lines) + b"\n", name, monkeypatch)
    assert [p.kind for p in res.problems][:1] == ["encoding"]
