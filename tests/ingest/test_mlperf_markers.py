"""The MLPerf parser's markers (``mlperf.MARKERS``) and the C scan that uses them (``_native.marked_lines``).

Two promises make the fast path invisible, and each is checked on its own:
1. ``marked_lines`` gives exactly ``text.split_lines``'s lines, with those that hold no marker as "".
2. A line without a marker does nothing in ``mlperf.parse_lines``: parsing a log with such lines blanked
   (here in pure Python) gives the same runs, problems and step rows as parsing it whole. Checked on every
   MLPerf fixture, the corpus's MLPerf logs, result files of MLPerf Training v1.0, and each kind of framework
   line the parser reads (a new kind without a marker fails here).
"""

from __future__ import annotations

import random
import tarfile
from pathlib import Path

import pytest
from conftest import CORPUS, FIXTURE_LOGS
from logtools import assert_same_parse

from bench.ingest import registry
from bench.ingest.formats import mlperf
from bench.ingest.native import ext as native
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult
from bench.ingest.text import decode, split_lines

V10 = CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz"
needs_native = pytest.mark.skipif(native is None, reason="bench.ingest._native is not built (no C compiler)")


def _blanked(lines: list[str]) -> list[str]:
    return [line if any(m.decode() in line for m in mlperf.MARKERS) else "" for line in lines]


def _promise_holds(data: bytes) -> ParseResult:
    lines = split_lines(decode(data)[0])
    whole = mlperf.parse_lines(lines, source="x")
    assert_same_parse(whole, mlperf.parse_lines(_blanked(lines), source="x"))
    return whole


def _v10_results(limit: int) -> list[bytes]:
    """Up to ``limit`` result files of v1.0 under 2 MB, in archive order (every submitter comes early)."""
    if not V10.exists():
        pytest.skip(f"{V10} is not present (tests read the third-party corpus from ../shared)")
    found: list[bytes] = []
    with tarfile.open(V10) as tar:
        for member in tar:
            if member.isfile() and "/results/" in member.name and member.name.endswith(".txt") and member.size < 2e6:
                fh = tar.extractfile(member)
                assert fh is not None
                found.append(fh.read())
                if len(found) == limit:
                    break
    return found


@needs_native
def test_marked_lines_are_split_lines_with_unmarked_lines_blank() -> None:
    marks = (b":::ML", b"Speed", b"Error")
    cases = ["", "\n", "a", "a\n", "\n\n", ":::ML x\r\nfoo\nSpeed\n", "x\n\nError", "Erro\nr:::M\nL" * 50,
             ("abc " * 20 + "Speed\n") * 5 + "zz", "\r\n", "Error\r", "a\rError\rb\n"]
    rng = random.Random(7)
    pieces = ["a", "\n", "\r", ":::ML", "Speed", "Error", "Sp", "eed", ":::M", "L", "E", "rror", "x" * 20, " " * 17]
    cases += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 80))) for _ in range(5000)]
    for text in cases:
        expected = [line if any(m.decode() in line for m in marks) else "" for line in split_lines(text)]
        assert native.marked_lines(text.encode(), marks) == expected, text


@needs_native
def test_marked_lines_refuses_markers_it_cannot_match() -> None:
    for marks in [(), (b"",), (b"a\nb",), (b"a\r",), ("text",), tuple(b"m%d" % i for i in range(17))]:
        with pytest.raises((ValueError, TypeError)):
            native.marked_lines(b"a\n", marks)


def test_every_mlperf_fixture_parses_the_same_with_unmarked_lines_blank() -> None:
    logs = sorted((FIXTURE_LOGS / "mlperf").glob("*.log"))
    assert len(logs) >= 7
    runs = sum(len(_promise_holds(p.read_bytes()).runs) for p in logs)
    assert runs >= 7


def test_the_corpus_mlperf_logs_parse_the_same_with_unmarked_lines_blank(corpus: Path) -> None:
    logs = sorted((corpus / "mlperf").glob("*.txt"))
    assert logs
    for path in logs:
        assert _promise_holds(path.read_bytes()).runs, path.name


def test_v1_0_result_files_parse_the_same_with_unmarked_lines_blank() -> None:
    files = _v10_results(120)
    steps = 0
    for data in files:
        steps += len(_promise_holds(data).steps)
    assert len(files) == 120 and steps > 1000


#: One line of each kind of framework output the parser reads besides compliance lines.
FRAMEWORK_LINES = [
    "INFO:root:Epoch[0] Batch [20-40]\tSpeed: 2954.28 samples/sec\taccuracy=0.001",
    "[1,0]<stdout>:Node[1] Epoch[0] Batch [0-20]\tSpeed: 1000.00 samples/sec",
    "0: TRAIN [0][10/1000]\tTime 0.250 (0.300)\tData 0.01 (0.02)\tTok/s 150000 (140000)\tLoss/tok 8.1 (9.0)",
    "0: Performance: Epoch: 0\tTraining: 1234567 Tok/s",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "ValueError",
    "Exception: the data loader stopped",
]


@pytest.mark.parametrize("line", FRAMEWORK_LINES)
def test_every_framework_line_the_parser_reads_holds_a_marker(line: str) -> None:
    head = ':::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START", "key": "run_start", ' \
           '"value": null, "metadata": {"file": "a.py", "lineno": 1}}'
    stop = ':::MLLOG {"namespace": "", "time_ms": 9000, "event_type": "INTERVAL_END", "key": "run_stop", ' \
           '"value": null, "metadata": {"file": "a.py", "lineno": 2, "status": "aborted"}}'
    with_line = mlperf.parse_lines([head, line, stop], source="x")
    without = mlperf.parse_lines([head, "", stop], source="x")
    assert repr(with_line.runs) != repr(without.runs) or len(with_line.steps) != len(without.steps), \
        "the parser ignores this line: drop it from FRAMEWORK_LINES"
    assert any(m.decode() in line for m in mlperf.MARKERS)
    _promise_holds("\n".join([head, line, stop]).encode())


@needs_native
def test_parse_bytes_takes_the_marked_lines_path_and_gives_the_pure_python_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (FIXTURE_LOGS / "mlperf" / "mllog_mxnet_speedometer.log").read_bytes()
    data = data.replace(b"\n", b"\r\n", 3) + b"noise without a final newline"
    calls: list[int] = []
    original = native.marked_lines

    def counted(buf: bytes, marks: tuple[bytes, ...]) -> list[str]:
        calls.append(1)
        return original(buf, marks)

    monkeypatch.setattr(native, "marked_lines", counted)
    fast = parse_bytes(data, source="x").result
    assert calls == [1]
    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    assert registry.marked_lines(mlperf, data) is None
    slow = parse_bytes(data, source="x").result
    assert calls == [1]
    assert_same_parse(fast, slow)
    assert fast.runs and fast.problems[-1].kind == "truncated"
