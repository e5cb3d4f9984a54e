"""Telemetry parser: Lambda thermal lines, nvidia-smi query CSV, strict sniffing, and every Lambda thermal file."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logtools import lambda_members

from bench.ingest.formats import telemetry, tf_cnn_scan
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult


def _parse(text: str) -> ParseResult:
    return telemetry.parse_lines(text.split("\n"), source="test")


def test_thermal_line_gives_one_row_per_gpu_with_trailing_comma() -> None:
    res = _parse("1599331669, 1729.8, 40, 38, 37, \n1599331671, 1730.5, 41, 38, 37, \n")
    assert len(res.telemetry) == 6
    first, last = res.telemetry[0], res.telemetry[-1]
    assert (first.sample_index, first.gpu_index, first.temperature_c, first.images_per_sec) == (0, 0, 40.0, 1729.8)
    assert (last.sample_index, last.gpu_index, last.temperature_c, last.elapsed_s) == (1, 2, 37.0, 2.0)
    assert not res.runs and not res.problems


def test_thermal_empty_rate_is_none_not_zero() -> None:
    res = _parse("1593533076, , 76, 44, \n")
    assert [s.images_per_sec for s in res.telemetry] == [None, None]
    assert [s.temperature_c for s in res.telemetry] == [76.0, 44.0]


def test_thermal_cut_line_is_a_bad_line() -> None:
    res = _parse("1600000000, 10.0, 35, \n1600000002, 11.0")
    assert len(res.telemetry) == 1
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 2)]


def test_smi_csv_units_na_and_sample_grouping() -> None:
    text = (
        "timestamp, index, temperature.gpu, power.draw [W], clocks.current.sm [MHz]\n"
        "2021/01/04 10:00:00.000, 0, 60, 100.00 W, 1500 MHz\n"
        "2021/01/04 10:00:00.000, 1, 61, [Not Supported], 1500 MHz\n"
        "2021/01/04 10:00:02.500, 0, 62, 101.00 W, 1500 MHz\n"
    )
    res = _parse(text)
    assert [(s.sample_index, s.gpu_index) for s in res.telemetry] == [(0, 0), (0, 1), (1, 0)]
    assert res.telemetry[1].power_w is None
    assert res.telemetry[2].elapsed_s == pytest.approx(2.5)
    assert res.telemetry[0].sm_clock_mhz == 1500.0
    assert res.telemetry[0].timestamp == pytest.approx(1609754400.0)


def test_smi_nounits_values() -> None:
    res = _parse("timestamp, index, utilization.gpu [%], memory.used [MiB]\n2021/01/04 10:00:00.000, 3, 88, 1024\n")
    s = res.telemetry[0]
    assert (s.gpu_index, s.utilization_pct, s.memory_used_mib) == (3, 88.0, 1024.0)


def test_empty_input_is_a_problem_not_a_crash() -> None:
    res = _parse("")
    assert not res.telemetry
    assert [p.kind for p in res.problems] == ["missing_field"]


def _independent_count(data: bytes) -> tuple[int, int]:
    """(lines, GPU rows) counted without the parser: temperature fields = non-empty fields after the first two."""
    lines = [ln for ln in data.decode().split("\n") if ln.strip()]
    rows = sum(len([f for f in ln.split(",")[2:] if f.strip()]) for ln in lines)
    return len(lines), rows


def test_every_lambda_thermal_file(corpus: Path) -> None:
    """Every ``thermal/1`` member of the Lambda archive is detected as telemetry and fully read."""
    checked = 0
    for name, data in lambda_members(corpus, "/thermal/1"):
        parsed = parse_bytes(data, source=name)
        assert parsed.format == "telemetry", name
        res = parsed.result
        n_lines, n_rows = _independent_count(data)
        assert len(res.telemetry) == n_rows, name
        assert res.telemetry[-1].sample_index == n_lines - 1, name
        assert not res.problems and not res.runs, name
        checked += 1
    assert checked == 3680  # corpus PROVENANCE.md: 3,680 thermal/1 files in the archive


def test_lambda_thermal_values(corpus: Path) -> None:
    """Values read by eye from the first archive member (lines 1 and 5)."""
    archive = corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
    name = "3960X-GeForce_RTX_3080_XLA.logs/syn-replicated-fp16-1gpus-inference/alexnet-960/thermal/1"
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            if member.name == name:
                fh = tar.extractfile(member)
                assert fh is not None
                res = parse_bytes(fh.read(), source=name).result
                break
        else:
            pytest.fail(f"{name} not in the archive")
    # 1604275796, 3342.3, 42, 31,  ...  1604275804, 19752.5, 56, 31,
    assert (res.telemetry[0].timestamp, res.telemetry[0].images_per_sec, res.telemetry[0].temperature_c) == (
        1604275796.0, 3342.3, 42.0)
    assert (res.telemetry[1].gpu_index, res.telemetry[1].temperature_c) == (1, 31.0)
    fifth = res.telemetry[8]
    assert (fifth.sample_index, fifth.elapsed_s, fifth.images_per_sec, fifth.temperature_c) == (4, 8.0, 19752.5, 56.0)


def test_bench_run_cpu_telemetry_csv() -> None:
    """bench run without GPUs samples the host: timestamp, cpu_percent, memory_used_mib (runner/launch.py)."""
    text = ("timestamp, cpu_percent, memory_used_mib\n"
            "2026/11/21 23:19:57.965, 99.9, 2473\n"
            "2026/11/21 23:20:02.965, 50.0, 2480\n"
            "2026/11/21 23:20:07.965, 12.5\n")
    assert telemetry.sniff(text)
    res = telemetry.parse_lines(text.split("\n"), source="test")
    rows = [(s.sample_index, s.gpu_index, s.utilization_pct, s.memory_used_mib, s.elapsed_s) for s in res.telemetry]
    assert rows == [(0, None, 99.9, 2473.0, 0.0), (1, None, 50.0, 2480.0, 5.0)]
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 4)]


def _both_paths(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[ParseResult, ParseResult]:
    """The thermal text parsed as usual and with the numpy block path switched off (line by line)."""
    usual = _parse(text)
    with monkeypatch.context() as m:
        m.setattr(telemetry, "_thermal_block", lambda lines, state, result: False)
        by_line = _parse(text)
    return usual, by_line


def _same_rows(a: ParseResult, b: ParseResult) -> None:
    ca, cb = a.telemetry.columns(), b.telemetry.columns()
    for name in ca:
        assert bytes(memoryview(ca[name]).cast("B")) == bytes(memoryview(cb[name]).cast("B")), name
    assert repr(a.problems) == repr(b.problems)


_GOOD = "".join(f"{1600000000 + 2 * i}, {'' if i % 7 == 0 else 1000.5 + i}, {40 + i % 9}, {30.5 + i % 4}, \n"
                for i in range(25))


@pytest.mark.parametrize("text", [
    _GOOD,
    _GOOD.replace(", \n", "\n"),  # no trailing comma
    _GOOD + "1600000100, 5.0, 41, \n",  # a line with fewer GPUs: line by line
    _GOOD + "\n  \n" + _GOOD,  # blank lines
    _GOOD + "1600000100, 5.0, inf, 3, \n",  # a non-finite temperature is a bad line
    _GOOD + "99, 5.0, 41, 3, \n",  # an implausible time
    _GOOD + "1600000100, nan, 41, 3, \n",  # a non-finite rate
    _GOOD + "1600000100, 1_0, 4_1, 3, \n",  # what float() accepts, both paths accept
    "1600000000, 1.0, \n1600000002, 2.0, \n",  # no temperature at all
    _GOOD.replace(", \n", ", 7\n", 3),  # some lines without the trailing comma
])
def test_thermal_block_path_equals_line_path(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    usual, by_line = _both_paths(text, monkeypatch)
    _same_rows(usual, by_line)
    _same_in_c(text, usual)


def _same_in_c(text: str, usual: ParseResult) -> bool:
    """When the C whole-file path takes ``text``, its rows are exactly the Python parser's, which found
    nothing wrong with it. Returns whether C took it."""
    if not tf_cnn_scan.AVAILABLE:
        return False
    fast = ParseResult()
    if not telemetry.parse_thermal_bytes(text.encode(), fast):
        assert len(fast.telemetry) == 0  # nothing added when C leaves the file to Python
        return False
    assert usual.problems == []
    _same_rows(usual, fast)
    return True


@pytest.mark.skipif(not tf_cnn_scan.AVAILABLE, reason="bench.ingest._native is not built (no C compiler)")
@pytest.mark.parametrize(("text", "taken"), [
    (_GOOD, True),
    (_GOOD.replace(", \n", "\n"), True),  # no trailing comma
    (_GOOD.replace("\n", "\r\n"), True),  # CRLF
    ("\n \t\n" + _GOOD + "\n\n", True),  # blank lines around
    (_GOOD.replace(", 4", ", -4").replace(", 3", ",3").replace("-40,", "-40.,"), True),  # a sign, no space, a bare point
    (_GOOD.replace(", \n", "\n") + "1600000100, 5.0, 41, 3", True),  # no final newline: the same row
    (_GOOD + "1600000100, 5.0, 41, \n", False),  # fewer GPUs on one line
    (_GOOD + "1600000100, 5.0, 41, 3, 4\n", False),  # a last field on one line only
    (_GOOD + "99, 5.0, 41, 3, \n", False),  # an implausible time
    (_GOOD + "1600000100, 1e3, 41, 3, \n", False),  # a number shape C leaves to float()
    (_GOOD + "1600000100, 5.0, , 3, \n", False),  # a blank temperature
    (_GOOD.replace(", \n", "\r\r\n", 1), False),  # a CR that split_lines keeps
    ("1600000000, 1.0, \n1600000002, 2.0, \n", False),  # no temperature at all
    ("timestamp, index, temperature.gpu\n", False),  # nvidia-smi CSV
    ("\n  \n", False),
])
def test_thermal_c_path_takes_only_what_python_reads_the_same(text: str, taken: bool) -> None:
    """The C path takes the usual thermal files (and gives the Python parser's rows for them, with elapsed
    time, NULL rates and GPU order); anything it is not sure about is left to Python, unchanged."""
    usual = telemetry.parse_lines(text.split("\n"), source="test")
    assert _same_in_c(text, usual) == taken
    if taken:
        cols = usual.telemetry.columns()
        assert len(usual.telemetry) == 2 * (25 + text.count("1600000100"))
        assert list(cols["gpu_index"][:4]) == [0, 1, 0, 1]
        assert list(cols["elapsed_s"][:4]) == [0.0, 0.0, 2.0, 2.0]
        assert all(x != x for x in cols["images_per_sec"][:2])  # sample 0 has no rate: NULL, not 0
        assert list(cols["images_per_sec"][2:4]) == [1001.5, 1001.5]


def test_thermal_block_path_runs_and_numbers_samples_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_THERMAL_BATCH", 10)
    calls: list[int] = []
    block = telemetry._thermal_block

    def counting(lines: list[str], state: object, result: ParseResult) -> bool:
        ok = block(lines, state, result)  # type: ignore[arg-type]
        calls.append(ok)
        return ok

    monkeypatch.setattr(telemetry, "_thermal_block", counting)
    res = _parse(_GOOD)
    assert calls == [True, True, True]  # 25 lines (and the final empty one) in batches of 10
    assert [s.sample_index for s in res.telemetry][-2:] == [24, 24]
    assert res.telemetry[-1].elapsed_s == 48.0 and res.telemetry[-1].timestamp == 1600000048.0
    monkeypatch.setattr(telemetry, "_thermal_block", block)
    usual, by_line = _both_paths(_GOOD, monkeypatch)
    _same_rows(usual, by_line)


def test_every_lambda_thermal_file_same_on_both_paths(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Identical rows either way on every Lambda thermal file, and the block path really taken for them."""
    archive = corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
    block, taken = telemetry._thermal_block, []

    def counting(lines: list[str], state: object, result: ParseResult) -> bool:
        ok = block(lines, state, result)  # type: ignore[arg-type]
        taken.append(ok)
        return ok

    checked = in_c = 0
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith("/thermal/1"):
                fh = tar.extractfile(member)
                assert fh is not None
                text = fh.read().decode()
                monkeypatch.setattr(telemetry, "_thermal_block", counting)
                usual, by_line = _both_paths(text, monkeypatch)
                _same_rows(usual, by_line)
                in_c += _same_in_c(text, usual)
                checked += 1
    assert checked == 3680
    assert len(taken) == 3680 and all(taken)  # one batch per file (none has 10,000 lines), all well-formed
    assert in_c == (3680 if tf_cnn_scan.AVAILABLE else 0)  # and the C whole-file path takes every one


_NUMBER = st.one_of(st.integers(0, 120).map(str), st.floats(0, 5000, allow_nan=False).map(lambda x: f"{x:.1f}"))
_ODD = st.sampled_from(["", " ", "nan", "inf", "-1", "1_0", "x", " 42 ", "1e3"])
_FIELD = st.one_of(_NUMBER, _NUMBER, _NUMBER, _ODD)  # mostly numbers, so whole batches are often valid
_TIME = st.one_of(st.integers(1_500_000_000, 1_700_000_000).map(str), st.sampled_from(["99", "", "1600000000.5", "t"]))


@st.composite
def _thermal_line(draw: st.DrawFn, gpus: int, tail: str, odd: bool) -> str:
    field = _FIELD if odd else _NUMBER
    fields = [draw(_TIME) if odd else str(draw(st.integers(1_500_000_000, 1_700_000_000))), draw(field),
              *[draw(field) for _ in range(gpus)]]
    return ", ".join(fields) + tail


@st.composite
def _thermal_lines(draw: st.DrawFn) -> list[str]:
    """Lines of one GPU count and one trailing style; now and then an odd field, another GPU count, another
    trailing style or a blank line (so the batch must go line by line)."""
    gpus, tail = draw(st.integers(1, 4)), draw(st.sampled_from([", ", ",", ""]))
    usual = _thermal_line(gpus, tail, odd=False)
    rare = st.one_of(_thermal_line(gpus, tail, odd=True), _thermal_line(gpus + 1, tail, odd=False),
                     _thermal_line(gpus, ", " if tail == "" else "", odd=False), st.sampled_from(["", "  "]))
    return draw(st.lists(st.one_of(usual, usual, usual, usual, usual, usual, rare), min_size=1, max_size=30))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_thermal_lines())
def test_fuzzed_thermal_lines_same_on_both_paths(lines: list[str]) -> None:
    """Any mix of good and bad thermal lines (odd fields, blank lines, other GPU counts, trailing commas
    or not): the block path gives exactly the rows and problems of the line-by-line path."""
    text = "\n".join(lines) + "\n"
    usual = _parse(text)
    original = telemetry._thermal_block
    try:
        telemetry._thermal_block = lambda lines, state, result: False  # type: ignore[assignment]
        by_line = _parse(text)
    finally:
        telemetry._thermal_block = original
    _same_rows(usual, by_line)
    _same_in_c(text, usual)


def test_parse_bytes_reads_a_thermal_file_in_c_unless_pure_python_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _GOOD.encode()
    calls: list[bool] = []
    original = telemetry.parse_thermal_bytes

    def counted(d: bytes, result: ParseResult) -> bool:
        calls.append(taken := original(d, result))
        return taken

    monkeypatch.setattr(telemetry, "parse_thermal_bytes", counted)
    usual = parse_bytes(data, source="t")
    assert calls == [tf_cnn_scan.AVAILABLE]
    monkeypatch.setenv("BENCH_PURE_PYTHON", "1")
    pure = parse_bytes(data, source="t")
    assert calls == [tf_cnn_scan.AVAILABLE]  # not asked again
    assert usual.format == pure.format == "telemetry" and len(usual.result.telemetry) == 50
    _same_rows(usual.result, pure.result)


def test_a_failing_c_thermal_path_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(d: bytes, result: ParseResult) -> bool:
        raise MemoryError

    monkeypatch.setattr(telemetry, "parse_thermal_bytes", broken)
    got = parse_bytes(_GOOD.encode(), source="t")
    assert got.format == "telemetry" and len(got.result.telemetry) == 50 and got.result.problems == []
