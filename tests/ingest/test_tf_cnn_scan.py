"""The C tf_cnn scanner (ingest/_native.c + formats/tf_cnn_scan.py) against the pure-Python parser.

The fast path must be invisible: for every input, the same runs, the same step rows bit for bit (NaN
payloads included, so NULL stays NULL and a printed nan stays NaN) and the same problems as
``tf_cnn.parse_lines``. Checked on every tf_cnn fixture, on generated logs long enough for the numpy
stretch path, on every tf_cnn log of the Lambda corpus, on fuzzed lines, and under any chunking.
"""

from __future__ import annotations

import itertools
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logtools import assert_same_parse, tf_cnn_log
from synth_logs import tf_cnn_lines

from bench.ingest.column_buffers import NULL_BITS
from bench.ingest.formats import tf_cnn, tf_cnn_scan
from bench.ingest.native import ext as _native
from bench.ingest.records import ParseResult
from bench.ingest.text import decode, split_lines

pytestmark = pytest.mark.skipif(not tf_cnn_scan.AVAILABLE, reason="bench.ingest._native is not built (no C compiler)")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "tf_cnn"


def _python(data: bytes) -> ParseResult:
    return tf_cnn.parse_lines(split_lines(decode(data)[0]), source="x")


def _check(data: bytes, chunk_lines: int | None = None) -> ParseResult:
    chunks = [data]
    if chunk_lines:
        lines = [piece + b"\n" for piece in data.split(b"\n")]  # LF only: a lone CR is inside a line
        lines[-1] = lines[-1][:-1]
        chunks = [b"".join(lines[i:i + chunk_lines]) for i in range(0, len(lines), chunk_lines)]
    fast = tf_cnn_scan.parse_chunks(chunks, source="x")
    assert_same_parse(_python(data), fast)
    before = 0
    for chunk in chunks:  # the lines handed back to Python: in file order, each at most once
        n, _, others, _ = _native.scan(chunk, before, NULL_BITS, tf_cnn_scan._LABEL_BYTES, tf_cnn_scan._RARE_BYTES)
        numbers = [no for no, _ in others]
        assert numbers == sorted(set(numbers))
        before += n
    return fast


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name)
def test_every_fixture_parses_identically(path: Path) -> None:
    _check(path.read_bytes())
    _check(path.read_bytes(), chunk_lines=7)


def _interleaved(stretch: int) -> bytes:
    a = list(tf_cnn_lines(300, display_every=1, prefix="[0]<stdout>:"))
    b = list(tf_cnn_lines(300, display_every=1, prefix="[1]<stdout>:", seed=5))
    lines = [x for i in range(0, 300, stretch) for x in a[i:i + stretch] + b[i:i + stretch]]
    return ("\n".join(lines) + "\n").encode()


GENERATED = {
    "long": lambda: tf_cnn_log(3000, display_every=1, seed=3).encode(),
    "mpi-accuracy-stamps": lambda: ("\n".join(itertools.islice(tf_cnn_lines(
        5000, display_every=1, prefix="[1,0]<stdout>:", accuracy=True, epoch_start=1_600_000_000,
        jitter_every=50), 6000)) + "\n").encode(),
    "appended-runs": lambda: (tf_cnn_log(500, display_every=1, seed=3) + tf_cnn_log(700, display_every=1)).encode(),
    "ranks-every-line": lambda: _interleaved(1),
    "ranks-in-stretches": lambda: _interleaved(40),
}


@pytest.mark.parametrize("name", GENERATED)
def test_generated_logs_parse_identically_in_any_chunking(name: str) -> None:
    data = GENERATED[name]()
    fast = _check(data)
    assert len(fast.steps) > tf_cnn_scan.VECTOR_MIN  # long enough for the numpy stretch path
    for n in (1, 5, 97, 4096):
        _check(data, chunk_lines=n)


@pytest.mark.parametrize("length", [3, 11, tf_cnn_scan.VECTOR_MIN + 5])
@pytest.mark.parametrize("at", [1, 2])
@pytest.mark.parametrize("back", [0, 1, 5])
def test_a_repeated_or_falling_step_inside_a_stretch_opens_a_run(length: int, at: int, back: int) -> None:
    """A stretch of step lines whose counter repeats (back=0) or falls at row ``at``: the short (Python)
    and the long (numpy) stretch paths must end the stretch there, so that the row opens a new run, as
    in the Python parser. Hand-checked: 100, 110, ... with the counter set back after row ``at``."""
    steps = [100 + 10 * i for i in range(length)]
    steps[at:] = [steps[at - 1] - 10 * back + 10 * i for i in range(length - at)]
    lines = [b"Batch size: 64 global", b"Variables: replicated"]
    lines += [b"%d\timages/sec: %d.0 +/- 0.5 (jitter = 1.0)\t7.0" % (s, 100 + i) for i, s in enumerate(steps)]
    fast = _check(b"\n".join(lines) + b"\n")
    assert [r.run_index for r in fast.runs] == [0, 1]
    assert [row["step"] for row in fast.steps.rows()] == steps
    assert fast.steps.columns()["run_index"].tolist() == [0] * at + [1] * (length - at)


def test_lines_the_regex_reads_in_surprising_ways() -> None:
    """Hand-checked values: two trailing floats are the loss and top-1, by position (tf_cnn prints the loss,
    or the loss and both accuracies: a field never shifts), a signed -nan loss is NaN (the checks after the
    parse make it NULL), decimals past the fast path go through CPython."""
    text = (
        b"Batch size: 64 global\n"
        b"Variables: replicated\n"
        b"10\timages/sec: 100.0 +/- 1.5 (jitter = 2.0)\t0.250\t0.750\n"
        b"20\timages/sec: 200.0 +/- nan (jitter = nan)\t-nan\n"
        b"30\timages/sec: 300.12345678901234567890 +/- 0.1 (jitter = 0.2)\t+inf 1600000000\n"
        b" 3: 40\timages/sec: 400.0\n"
        b"40\timages/sec: 1.0 junk\n"
        b"total images/sec: 299.5\n"
    )
    fast = _check(text)
    rows = fast.steps.rows()
    assert (rows[0]["loss"], rows[0]["top1_accuracy"], rows[0]["top5_accuracy"]) == (0.25, 0.75, None)
    assert rows[1]["loss"] != rows[1]["loss"] and rows[1]["images_per_sec_stderr"] != rows[1]["images_per_sec_stderr"]
    assert rows[2]["images_per_sec"] == float("300.12345678901234567890")
    assert (rows[2]["loss"], rows[2]["timestamp"]) == (float("inf"), 1600000000.0)
    assert (rows[3]["rank"], rows[3]["step"]) == (3, 40)
    assert [p.line_no for p in fast.problems] == [7]  # "junk": a bad step line, as in the Python parser


_TAIL_TOKENS = ["7.000", "-1.25", "+3.5", "-0.0", "nan", "+nan", "-inf", "1nan", ".5", "5.", "1.5e3", "-", "+", "5.x",
                "999999999", "99999999", "1600000000", "16000000001", "123456789012", "+1600000000", "-1600000000",
                "1600000000.5", "0.1234567890123456789", "9" * 25 + ".5"]


@pytest.mark.parametrize("last", _TAIL_TOKENS)
@pytest.mark.parametrize("before", ["", "\t7.000", "\t0.250\t0.750", "\t7.000\t0.250\t0.750", "\t1600000000"])
def test_every_tail_token_shape_reads_as_in_python(before: str, last: str) -> None:
    """Each shape of a trailing token (signed, stamp-like, too long, not a number) after each run of
    valid tokens: the scanner takes the line exactly when the regex does, with the same values."""
    line = f"1\timages/sec: 5.0 +/- 0.0 (jitter = 0.0){before}\t{last}\n".encode()
    _check(b"Step\tImg/sec\ttotal_loss\n" + line + line.replace(b"1\t", b"2\t", 1))


_PREFIX = st.sampled_from(["", "[1,0]<stdout>:", "[0]<stderr>:", " 1: ", "12: ", "[3] ", "Mon Jan  4 10:00:00 2021[0]<stdout>:"])
_NUM = st.one_of(st.integers(0, 10**6).map(str), st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.3f}"),
                 st.sampled_from(["nan", "-nan", "inf", "1.", "0.1234567890123456789", "9" * 25 + ".5", "١٠",
                                  "-1.25", "+3.5", "-0.0", "+nan", "-inf", "1nan", ".5", "1.5e3", "-", "+", "5.x",
                                  "999999999", "1600000000", "16000000001", "123456789012", "+1600000000"]))
_SEP = st.sampled_from(["\t", " ", "  ", "\t ", "\x0b", ""])


_MARKERS = ["OOM", "ResourceExhausted", "name: ", "device (", "/sec", "rror", "xception", "Traceback (", " --",
            "OO", "Resource", "name:", "device", "/se", "rro", "xceptio", "Traceback", " -", "é", "\r"]
_MARKED = st.builds(lambda base, mark, at: base[:at] + mark + base[at:],
                    st.sampled_from(["2020-09-05 18:47:50.152480: I tensorflow/core/x.cc:1] some text",
                                     "WARNING:tensorflow:From /x.py:1: a (from b) is deprecated",
                                     "Instructions for updating:", "W0905 14:13:02.882990 1 x.py:3] From y"]),
                    st.sampled_from(_MARKERS), st.integers(0, 80))


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 11))
    if kind >= 10:  # a stderr or inert-looking line with a marker (or part of one) anywhere, even at its end
        return draw(_MARKED)
    if kind <= 5:
        tail = "".join(draw(_SEP) + draw(_NUM) for _ in range(draw(st.integers(0, 5))))
        pm = draw(st.sampled_from(["", f" +/- {draw(_NUM)} (jitter = {draw(_NUM)})"]))
        return (f"{draw(_PREFIX)}{draw(st.integers(0, 60))}{draw(_SEP)}images/sec: {draw(_NUM)}{pm}{tail}"
                + draw(st.sampled_from(["", "\r", " ", "x"])))
    return draw(st.sampled_from([
        "2020-09-05 18:47:50.152480: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1] done",
        "2020-09-05 18:47:51.0: I name: Tesla V100 major: 7", "2020-09-05 18:47:52.0: W OOM when allocating",
        "Model:       resnet50", "TensorFlow:  2.15", "total images/sec: 12.5", "Traceback (most recent call last):",
        "Instructions for updating:", "name: GeForce RTX 2080 Ti major: 7", "", "Running warm up",
        "             64 per device", "Done with training", "I0000 00:00:1600000000.5 123 x.cc:1] hi", "é ünïcode",
    ]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=60), st.integers(1, 8))
def test_fuzzed_lines_parse_identically(lines: list[str], chunk_lines: int) -> None:
    data = ("\n".join(lines) + "\n").encode()
    _check(data)
    _check(data, chunk_lines=chunk_lines)


def test_invalid_utf8_and_crlf_lines_come_back_replaced() -> None:
    data = b"Model:       resnet\xff50\r\n10\timages/sec: 5.0\r\ntotal images/sec: 5.0\r\n"
    fast = _check(data)
    assert fast.runs[0].model == "resnet\ufffd50"
    assert fast.steps.rows()[0]["images_per_sec"] == 5.0


def test_every_lambda_tf_cnn_log_parses_identically(corpus: Path) -> None:
    tarball = corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
    n = 0
    with tarfile.open(tarball) as tf:
        for member in tf:
            fh = tf.extractfile(member) if member.isfile() else None
            data = fh.read() if fh is not None else b""
            if data and tf_cnn.sniff(data[:262144].decode("utf-8", errors="replace")):
                _check(data)
                n += 1
    assert n == 3949  # the tarball's tf_cnn logs (its other members are thermal and metadata files)


def test_pure_python_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.ingest import registry

    module = tf_cnn
    assert registry.chunk_parser(module) is tf_cnn_scan.parse_chunks
    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    assert registry.chunk_parser(module) is None


@pytest.mark.parametrize("chunk", [3, 4096])
@pytest.mark.parametrize("bad_line", [1, 6500, 9010])
def test_a_streamed_log_reports_invalid_utf8_on_its_line(chunk: int, bad_line: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The big-file path (parse_stream: chunks re-cut by line_blocks, scanned in C) finds the first invalid
    byte where the whole-file path does, wherever the chunk edges fall, and parses the same steps."""
    from bench.ingest.parse import parse_bytes, parse_stream
    from bench.ingest.registry import HEAD_CHARS

    lines = tf_cnn_log(9000, display_every=1, seed=3).encode().split(b"\n")
    lines[bad_line - 1] += b" \xc3(\xff"  # an invalid two-byte sequence, then a byte never valid in UTF-8
    lines[bad_line + 5] += b" caf\xc3\xa9"  # valid UTF-8 further on must not be reported
    data = b"\n".join(lines)
    head, rest = data[:HEAD_CHARS], data[HEAD_CHARS:]
    assert data.count(b"\n", 0, HEAD_CHARS) < 6500 < 9010 < len(lines)  # bad lines 6500 and 9010 are past the head

    def stream() -> ParseResult:
        chunks = iter([rest[i:i + chunk] for i in range(0, len(rest), chunk)])
        return parse_stream(head, chunks, source="x", result=ParseResult()).result

    streamed, whole = stream(), parse_bytes(data, source="x").result
    assert [(p.kind, p.line_no) for p in streamed.problems if p.kind == "encoding"] == [("encoding", bad_line)]
    assert [(p.kind, p.line_no) for p in whole.problems if p.kind == "encoding"] == [("encoding", bad_line)]
    assert len(streamed.steps) == len(whole.steps) >= 8998  # the two lines with text appended are bad_line problems
    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    assert repr(stream().problems) == repr(streamed.problems)


@pytest.mark.parametrize("chunk", [7, 300, 5000])
@pytest.mark.parametrize("pure", [False, True])
def test_an_overlong_line_is_skipped_and_reported_with_bounded_memory(
        chunk: int, pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than MAX_LINE_BYTES (made small here) is never held: it counts as an empty line, so the
    steps after it keep their line numbers, and a bad_line problem gives its byte range."""
    from bench.ingest import parse

    monkeypatch.setattr(parse, "MAX_LINE_BYTES", 1000)
    if pure:
        monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    lines = tf_cnn_log(60, display_every=1, seed=3).encode().split(b"\n")
    long_at = 30  # inserted as line 31
    start = sum(len(x) + 1 for x in lines[:long_at])
    with_long = [*lines[:long_at], b"x" * 5000, *lines[long_at:]]
    as_empty = [*lines[:long_at], b"", *lines[long_at:]]

    def stream(data: bytes) -> ParseResult:
        head, rest = data[:100], data[100:]
        monkeypatch.setattr("bench.ingest.registry.detect", lambda text, problems=None: tf_cnn)  # the head is too short to sniff
        chunks = iter([rest[i:i + chunk] for i in range(0, len(rest), chunk)])
        return parse.parse_stream(head, chunks, source="x", result=ParseResult()).result

    got, want = stream(b"\n".join(with_long)), stream(b"\n".join(as_empty))
    assert [(p.kind, p.message) for p in got.problems] == [
        ("bad_line", f"a line longer than 0 MiB (stream bytes {start}-{start + 5000}) was skipped")]
    assert repr(got.runs) == repr(want.runs)
    assert got.steps.columns()["line_no"].tolist() == want.steps.columns()["line_no"].tolist()
    assert len(got.steps) == 60

    cut = stream(b"\n".join([*lines[:long_at], b"y" * 5000]))  # the file ends inside the long line
    assert ("bad_line", f"a line longer than 0 MiB (stream bytes {start}-{start + 5000}) was skipped") in [
        (p.kind, p.message) for p in cut.problems]


def test_add_raw_is_add_row_by_row_and_refuses_a_column_of_another_length() -> None:
    from array import array

    from bench.ingest.column_buffers import INT_NULL, NULL_FLOAT
    from bench.ingest.sample_tables import StepTable

    one, bulk = StepTable(), StepTable()
    one.add(0, 5, rank=1, images_per_sec=2.5, loss=float("nan"), line_no=9)
    one.add(0, 6, images_per_sec=3.5, line_no=10)
    bulk.add(0, 5, rank=1, images_per_sec=2.5, loss=float("nan"), line_no=9)  # the row buffer is extended
    bulk.add_raw(1, {"step": array("q", [6]).tobytes(), "images_per_sec": array("d", [3.5]).tobytes(),
                     "line_no": array("q", [10]).tobytes(), "rank": array("q", [INT_NULL]).tobytes(),
                     "loss": array("d", [NULL_FLOAT]).tobytes()}, 0)
    for name, col in one.columns().items():
        other = bulk.columns()[name]
        assert (col == other) if name == "metrics" else (col.tobytes() == other.tobytes()), name
    assert bulk.rows()[1] == one.rows()[1] and bulk.rows()[1]["rank"] is None and len(bulk) == 2
    with pytest.raises(ValueError):
        bulk.add_raw(2, {"step": array("q", [7]).tobytes()}, 0)
    with pytest.raises(ValueError):
        bulk.add_raw(1, {"metrics": array("q", [7]).tobytes()}, 0)
    assert len(bulk) == 2 and all(len(c) == 2 for c in bulk.columns().values())


_STAMP = "2020-09-05 18:47:50.152480: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1640] "


@pytest.mark.parametrize(("gpu_lines", "gpu"), [
    (["name: Tesla V100-SXM2-16GB major: 7 minor: 0"], "Tesla V100-SXM2-16GB"),
    ([_STAMP + "name: Tesla P100 major: 6 minor: 0"], "Tesla P100"),
    (["name:  major: 7", "name: Tesla K80 major: 3"], "Tesla K80"),  # .+? needs a character: no name
    (["name: Tesla V100 major: x", "name: Tesla K80 major: 3"], "Tesla K80"),  # major needs a digit
    (["pciBusID: 0000:01:00.0 name: GeForce RTX 3090 computeCapability: 8.6"], "GeForce RTX 3090"),
    ([_STAMP + "OOM name: Tesla P4 major: 6", "name: Tesla T4 major: 7"], "Tesla T4"),  # OOM: no GPU look-up
])
def test_gpu_name_lines_before_and_after_the_gpu_is_known(gpu_lines: list[str], gpu: str) -> None:
    """The scanner drops GPU-name lines once a returned line certainly gave the reader its GPU; an OOM
    line after that must still reach it. Hand-checked: the GPU is the first name _GPU reads; the run that
    then runs out of memory before its total is ``oom``."""
    lines = [_STAMP + "Found device 0 with properties:", *gpu_lines, _STAMP + "Adding visible gpu devices: 0",
             "name: Tesla M60 major: 5", _STAMP + "name: Tesla M40 major: 5", "Model:       resnet50",
             "Batch size:  64 global", "10\timages/sec: 100.0 +/- 0.5 (jitter = 1.0)\t7.0", _STAMP + "Step 11",
             _STAMP.replace(": I ", ": W ") + "OOM when allocating tensor with shape[64] name: x major: 1",
             _STAMP + "Waiting for the threads to stop"]  # the OOM line is inside a stretch of stamped lines
    fast = _check(("\n".join(lines) + "\n").encode())
    assert [(r.gpu_model, r.status) for r in fast.runs] == [(gpu, "oom")]


@pytest.mark.parametrize("pos", [0, 7, 8, 31, 32, 33, 4095, 4096, 4097, 8191, 8999])
def test_the_ascii_flag_sees_a_non_ascii_byte_anywhere(pos: int) -> None:
    """scan() says whether a buffer is pure ASCII (else the caller checks its UTF-8); it reads 32 bytes a
    step and stops at the first 4 KiB holding a byte >= 0x80, so a byte at each edge of those steps, in
    a buffer that ends there or goes on, must be seen, and a pure-ASCII buffer of any length passes."""
    for n in (pos + 1, 9000):
        buf = bytearray(b"x" * n)
        buf[pos] = 0xC3
        assert _native.scan(bytes(buf), 0, NULL_BITS, tf_cnn_scan._LABEL_BYTES, tf_cnn_scan._RARE_BYTES)[3] is False
    assert _native.scan(b"x" * (pos + 1), 0, NULL_BITS, tf_cnn_scan._LABEL_BYTES, tf_cnn_scan._RARE_BYTES)[3] is True


def test_tensorflows_xla_line_is_read_on_both_paths_after_the_gpu_is_known() -> None:
    """TensorFlow logs "Compiled cluster using XLA!" once when XLA compiled (every Lambda log of an ``_XLA``
    system has it, no other: test_answers_lambda). The scanner passed a stamped stderr line on only for an
    OOM or, before the GPU was known, a GPU name: this line, after the GPU line, never reached the reader."""
    stamp = "2020-07-02 20:10:{:02d}.300117: I "
    lines = [stamp.format(6) + "tensorflow/core/common_runtime/gpu/gpu_device.cc:1561] Found device 0 with properties:",
             "pciBusID: 0000:1a:00.0 name: GeForce RTX 2080 Ti computeCapability: 7.5",
             *tf_cnn_log(20).splitlines()[:12],
             stamp.format(11) + "tensorflow/compiler/jit/xla_compilation_cache.cc:241] Compiled cluster using XLA!  "
                                "This line is logged at most once for the lifetime of the process.",
             *tf_cnn_log(20).splitlines()[12:]]
    data = ("\n".join(lines) + "\n").encode()
    (run,) = _check(data).runs  # the fast path, after checking it equals the pure-Python reader
    assert run.details["xla"] == "compiled"
    (plain,) = _check(data.replace(b"Compiled cluster using XLA!", b"Compiled cluster.")).runs
    assert "xla" not in plain.details
