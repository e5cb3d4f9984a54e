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
from typing import Any

import format_speed
import pytest
from logtools import assert_same_parse

from bench.ingest import registry
from bench.ingest.formats.line_scan import Rows
from bench.ingest.formats.lines import Driver, LineFormat
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
C_PATH = ("deepspeed", "megatron", "nccl_tests", "pytorch_imagenet", "torchtitan")  # a line program and fast_rows


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


@pytest.mark.parametrize(("change", "taken"), [
    (lambda fields: fields[::-1], True),  # another order
    (lambda fields: [f for f in fields if "TFLOP" not in f], True),  # a version without throughput
    (lambda fields: [*fields[:3], " num zeros: 57219176.0 ", " params norm: 315.023 ", *fields[3:]], True),
    (lambda fields: [f.replace(": ", "=", 1) for f in fields], True),
    (lambda fields: [*fields, " lr: 1.0E-05 "], False),  # learning rate printed twice under two names
    (lambda fields: [*fields, " an unknown field: 7 "], False),
    (lambda fields: [*fields, " grad norm:  "], False),  # an empty value
    (lambda fields: [*fields, " no separator here "], True),
    (lambda fields: [f.replace("lm loss: ", "lm loss: nan") if "lm loss" in f else f for f in fields], False),
])
def test_megatron_lines_of_every_layout_parse_identically(change: Any, taken: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Megatron's line program reads the fields by name in any order and layout; a field it does not know, a
    name printed twice or a value that is no figure sends the line the slow way."""
    lines = []
    for line in _generated("megatron", 200):
        head, bar, rest = line.partition(" |")
        lines.append(head + bar + "|".join(change(rest.split("|")[:-1])) + "|" if bar else line)
    parser, rows_at_once, fast = _parser("megatron"), [], _parser("megatron").fast_rows  # type: ignore[attr-defined]

    def counted(self: LineFormat, rows: Rows, lo: int, hi: int) -> int:
        k: int = fast(self, rows, lo, hi)
        rows_at_once.append(k)
        return k

    monkeypatch.setattr(parser, "fast_rows", counted)
    assert len(_both(("\n".join(lines) + "\n").encode(), "megatron", monkeypatch).steps) > 150
    assert (sum(rows_at_once) > 150) == taken


@pytest.mark.parametrize(("tail", "taken"), [("", True), (" | elapsed note: 3", False)])
def test_nemo_lines_without_a_closing_bar_parse_identically(tail: str, taken: bool,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """NeMo's line ends without a bar: its last field is read to the line's end, unless the line says
    ``elapsed`` (megatron.py then drops the text after the last bar, which may be cut): that line goes slow."""
    rng = random.Random(3)
    lines = [f"Training epoch 0, iteration {i}/1000 | lr: 3e-05 | consumed_samples: {i * 8} | global_batch_size: 8 | "
             f"global_step: {i} | reduced_train_loss: {rng.uniform(1, 2):.3f} | train_step_timing in s: "
             f"{rng.uniform(0.02, 0.04):.5f} | val_loss: 4.106{tail}" for i in range(1, 201)]
    parser, seen = _parser("megatron"), []
    fast = parser.fast_rows  # type: ignore[attr-defined]

    def counted(self: LineFormat, rows: Rows, lo: int, hi: int) -> int:
        k: int = fast(self, rows, lo, hi)
        seen.append(k)
        return k

    monkeypatch.setattr(parser, "fast_rows", counted)
    res = _both(("\n".join(lines) + "\n").encode(), "megatron", monkeypatch)
    assert len(res.steps) == 200 and res.runs[0].status == "ok"
    assert (sum(seen) == 199) == taken


def _nccl_runs(n: int) -> list[str]:
    """The first ``n`` runs of the generated nccl-tests log."""
    lines = _generated("nccl_tests", 55 * n)
    assert sum(line.startswith("# nThread") for line in lines) == n
    return lines


_NCCL_FORMS: dict[str, Any] = {
    # the 2019 rank line (no Group), device names with spaces and trailing blanks, CRLF line ends
    "2019 ranks": lambda line: line.replace(" Group  0", "") if "Rank" in line else line,
    "spaces": lambda line: line.replace("NVIDIA H100", "NVIDIA  H100 \t") + "  " if "Rank" in line else line,
    "crlf": lambda line: line + "\r",
    # rank lines that are not quite rank lines: no closing bracket, nothing after it, a second Rank word
    "no bracket": lambda line: line.replace("]", "") if "Rank  3" in line else line,
    "no device": lambda line: line.split("]")[0] + "]" if "Rank  4" in line else line,
    "rank twice": lambda line: line.replace("node0", "Rank 2") if "Rank  5" in line else line,
    "same rank": lambda line: line.replace("Rank  6", "Rank  1") if "Rank  6" in line else line,
    "huge pid": lambda line: line.replace("Pid 1007", "Pid 12345678901234567890") if "Rank  7" in line else line,
    # tables of other eras: no root (before 2.13), a float error column, N/A where validation was off,
    # alltoall's blank redop, a size beyond int64, a row that names a test starting
    "no root": lambda line: re.sub(r"     sum      -1", "     sum", line),
    "error floats": lambda line: re.sub(r" {5}0(?= |$)", " 0e+00", line),
    "n/a": lambda line: re.sub(r" {5}0(?= |$)", "   N/A", line),
    "blank redop": lambda line: line.replace("     sum  ", "          "),
    "huge size": lambda line: line.replace("        1024  ", " 99999999999999999999  ", 1),
    "starting row": lambda line: line.replace(" sum ", " Collective test starting: sum ") if "  2048 " in line
    else line,
    "wrong": lambda line: re.sub(r"      0$", "      3", line) if "  4096 " in line else line,
    # the closing lines: failed checks, an average that is no rate or will not read
    "out of bounds": lambda line: line.replace("values : 0 OK", "values : 2 FAILED"),
    "avg 0": lambda line: line.replace(": 150.12", ": 0"),
    "avg nan": lambda line: line.replace(": 150.12", ": nan"),
    "avg bad": lambda line: line.replace(": 150.12", ": 1.2.3"),
    "avg -1": lambda line: line.replace(": 150.12", ": -1"),
    # headers: without the iterations, with nothing after maxBytes, spaced otherwise, a figure beyond int64
    "header no iters": lambda line: line.split(" step:")[0] + " step: 2(factor)" if line.startswith("# nThread") else line,
    "header ends": lambda line: line.split(" step:")[0] if line.startswith("# nThread") else line,
    "header spacing": lambda line: line.replace("# nThread", "#  nThread"),
    "header huge": lambda line: line.replace("maxBytes 17179869184", "maxBytes 171798691840000000000"),
    # comments that are not plain: a word the general path looks for, a test's start and end
    "comment words": lambda line: "# Ranks: 16 nThreads" if line == "# Using devices" else line,
    "tests": lambda line: (f"# Collective test starting: all_reduce_perf\n{line}" if line.startswith("# nThread")
                           else "# Collective test concluded: all_reduce_perf" if line == "#" else line),
}


@pytest.mark.parametrize("form", sorted(_NCCL_FORMS))
def test_nccl_lines_of_every_form_parse_identically(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """nccl-tests' rank lines, table rows and closing lines in the forms real logs print them (and ones a
    line program could misread): both paths give the same runs, rows and problems, as one log and streamed."""
    log = ("\n".join(_NCCL_FORMS[form](line) for line in _nccl_runs(3)) + "\n").encode()
    res = _both(log, "nccl_tests", monkeypatch)
    assert len(res.runs) >= 3 and len(res.steps) >= 90
    _streamed(log * 40, "nccl_tests", monkeypatch)


def test_nccl_c_path_leaves_only_the_first_header_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clean log every line but the first run's header line is read by the C path (rank lines, the table,
    the closing lines and the next runs' headers included): the equivalence tests would pass as well if it read
    none. The first header opens the first run, which no row can (``fast_rows`` reads into an open run)."""
    fed: list[str] = []
    feed = Driver.feed

    def counted(self: Driver, no: int, raw: str) -> None:
        fed.append(raw)
        feed(self, no, raw)

    monkeypatch.setattr(Driver, "feed", counted)
    res = parse_bytes(("\n".join(_nccl_runs(20)) + "\n").encode(), source="x", fmt="nccl_tests").result
    assert [r.status for r in res.runs] == ["ok"] * 20 and len(res.steps) == 20 * 32
    assert len(fed) == 1 and fed[0].startswith("# nThread")
    assert res.runs[0].num_nodes == 2 and res.runs[0].gpu_model == "NVIDIA H100 80GB HBM3"


def _nccl_run_unlike_the_others(i: int, run: list[str]) -> list[str]:
    """Run ``i`` of a log of 13 made different in one way from its neighbours (each way a branch of whole_runs)."""
    def row(size: int, busbw: str, line: str) -> str:  # the out-of-place busbw of the row of ``size`` bytes
        tokens = line.split()
        return "  ".join([*tokens[:7], busbw, *tokens[8:]]) if line.startswith(f"{size:12d} ") else line

    ways: dict[int, Any] = {
        1: lambda line: None if "Rank" in line else line,  # no rank lines
        2: lambda line: line if line.startswith("# nThread") else None,  # a header and nothing else
        3: lambda line: line.replace("node1", "node7"),  # other hosts: another rank listing
        4: lambda line: re.sub(r"      0$", "      3", line) if "  4096 " in line else line,  # wrong values
        5: lambda line: line.replace("values : 0 OK", "values : 2 FAILED"),
        6: lambda line: None if line.startswith(("# Avg", "# Out")) or re.match(r" *\d{10,} ", line)
        else line,  # a table cut short (at 2^29 bytes) with no closing lines
        7: lambda line: row(2**34, "0.00", line),  # a last busbw of 0
        8: lambda line: line.split(" step:")[0] if line.startswith("# nThread") else line,  # no iterations
        9: lambda line: row(1024, "999.5", row(2048, "999.5", line)),  # two equal peaks: the first counts
        10: lambda line: line.replace(" Group  0", ""),  # 2019 rank lines
        11: lambda line: line.replace("float", "half") if "Rank" not in line else line.replace("H100", "A100", 1)
        if "Rank  2 " in line else line,  # another type; the ranks' devices two models
    }
    way = ways.get(i, lambda line: line)
    return [out for line in run if (out := way(line)) is not None]


def test_nccl_whole_runs_of_a_chunk_parse_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs between a chunk's second header and its last are read at once from its columns (whole_runs):
    13 runs, each unlike its neighbours in one way, give the same runs and rows as read line by line, and
    whole_runs read the 10 between the chunk's second header and its last."""
    from bench.ingest.formats import nccl_tests

    lines = _nccl_runs(13)
    log = [line for i in range(13) for line in _nccl_run_unlike_the_others(i, lines[55 * i:55 * (i + 1)])]
    read, whole = [], nccl_tests.whole_runs

    def counted(*args: Any) -> Any:
        for one in whole(*args):
            read.append(one[0].first_line)
            yield one

    monkeypatch.setattr(nccl_tests, "whole_runs", counted)
    res = _both(("\n".join(log) + "\n").encode(), "nccl_tests", monkeypatch)
    assert read == [res.runs[i].first_line for i in range(2, 12)]  # (the first header, read line by line, opens run 0)
    assert [r.status for r in res.runs] == ["ok", "ok", "no_result", "ok", "failed", "failed", "truncated",
                                            "no_result", "ok", "ok", "ok", "ok", "ok"]
    assert res.runs[1].num_gpus is None and res.runs[3].details["hosts"] == "node0,node7"
    assert res.runs[6].tags == {"message_bytes": str(2**29)} and res.runs[9].details["peak_busbw_bytes"] == "1024"
    assert res.runs[11].precision == "fp16" and res.runs[11].gpu_model == "NVIDIA H100 80GB HBM3"
    assert "warmup_iters" not in res.runs[8].details and res.runs[10].throughput == float(lines[601].split()[7])


@pytest.mark.parametrize("name", ["nccl_tests", "megatron"])
def test_the_line_programs_columns_are_owned_by_their_result_alone(name: str) -> None:
    """_native.fields makes each column at its largest and cuts it to what it wrote: each object it returns is
    held once, by the result (a reference too few frees a column numpy still reads; one too many leaks every
    chunk), and the columns are as long as the rows it took."""
    import sys

    from bench.ingest import _native
    from bench.ingest.nulls import NULL_BITS

    if _native is None:
        pytest.skip("the C extension is not built")
    program = importlib.import_module(f"bench.ingest.formats.{name}").C_PATH.PROGRAM
    data = ("\n".join(_generated(name, 2000)) + "\nnot a line of it\n").encode()
    out = _native.fields(data, 0, NULL_BITS, tuple(program.kinds), len(program.columns), program.int_mask,
                         program.stamp)
    assert [sys.getrefcount(out[i]) for i in range(1, 7)] == [2] * 6
    assert {sys.getrefcount(out[3][i]) for i in range(len(out[3]))} == {2}
    rows = len(out[1]) // 8
    assert out[0] == 2001 and rows + len(out[6]) == 2001 and out[6][-1] == (2001, "not a line of it") and rows > 1900
    assert [len(column) for column in out[3]] == [8 * rows] * len(program.columns)
    assert (len(out[2]), len(out[4]), len(out[5])) == (16 * rows, 8 * rows, rows)
