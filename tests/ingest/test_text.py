"""bench.ingest.text and the streaming line reader: the line splitting every parser relies on."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.ingest.parse import iter_stream_lines
from bench.ingest.records import Problem
from bench.ingest.text import GlogClock, contains, iter_lines, parse_glog, split_lines, split_rank

TEXT = st.text(alphabet=st.sampled_from(["a", "é", "\n", "\r", " ", "\t", "\x0b", "\u2028"]), max_size=60)


@given(TEXT)
def test_split_lines_equals_iter_lines(text: str) -> None:
    assert split_lines(text) == list(iter_lines(text))


@given(TEXT, st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20))
def test_streamed_lines_equal_whole_lines_for_any_chunking(text: str, cuts: list[int]) -> None:
    data = text.encode()
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(data[pos : pos + c])
        pos += c
    chunks.append(data[pos:])
    problems: list[Problem] = []
    assert list(iter_stream_lines(iter(chunks), problems)) == list(iter_lines(text))
    assert problems == []


def test_only_lf_splits_lines() -> None:
    # \x0b, \x0c and U+2028 split lines for str.splitlines(), never for a log
    assert split_lines("a\x0bb\u2028c\r\nd") == ["a\x0bb\u2028c", "d"]


def test_invalid_utf8_in_a_stream_is_reported_with_its_line() -> None:
    problems: list[Problem] = []
    lines = list(iter_stream_lines(iter([b"ok\nsecond \xff line\nthird\n"]), problems))
    assert lines == ["ok", "second \ufffd line", "third"]
    assert [(p.kind, p.line_no) for p in problems] == [("encoding", 2)]


def test_split_rank_prefixes() -> None:
    assert split_rank("[1,3]<stdout>:10\timages/sec: 1.0") == (3, "10\timages/sec: 1.0")
    assert split_rank("[2]<stderr>:Traceback") == (2, "Traceback")
    assert split_rank("Mon Jan  4 10:00:00 2021[1]<stdout>:x") == (1, "x")
    assert split_rank(" 0: :::MLLOG {}") == (0, ":::MLLOG {}")
    assert split_rank("10\timages/sec: 1.0") == (None, "10\timages/sec: 1.0")


def test_glog_clock_crosses_midnight_and_new_year() -> None:
    clock = GlogClock()
    a = parse_glog("I1231 23:59:58.500000  1234 solver.cpp:242] Iteration 10")
    b = parse_glog("I0101 00:00:01.000000  1234 solver.cpp:242] Iteration 20")
    assert a is not None and b is not None and b.message == "Iteration 20"
    t_a, t_b = clock.seconds(a), clock.seconds(b)
    assert t_b - t_a == 2.5


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab :/\u00e9\u0100\U0001f600"), max_size=40),
       st.text(alphabet=st.sampled_from("ab :/\u00e9\u0100\U0001f600"), max_size=4))
def test_contains_is_in(text: str, needle: str) -> None:
    """Over ASCII, Latin-1, two-byte and four-byte characters (so every pairing of string kinds) and
    empty strings: ``contains`` answers exactly as ``in``."""
    assert contains(text, needle) == (needle in text)
    assert contains(text + needle + text, needle)


def test_contains_is_the_c_one_when_built() -> None:
    from bench.ingest.formats import tf_cnn_scan

    assert (contains is not operator.contains) == tf_cnn_scan.AVAILABLE
    assert contains("x" * 300_000 + "total images/sec: 1", "total images/sec: ")
    assert not contains("\u00e9" * 1000, "DLL")


@pytest.mark.parametrize("data", [b"", b" ", b"\n", b" \t\r\n\x0b\x0c", b"\xa0", b"\x1c", b"\n x", b"x"])
def test_whitespace_only_files_are_empty_exactly_when_strip_leaves_nothing(data: bytes) -> None:
    """parse_bytes's empty test (no copy of the file) is bytes.strip()'s: ASCII blanks only. \\xa0 and
    \\x1c are not ASCII blanks for bytes (they are for str), so those files are not empty."""
    from bench.ingest.parse import parse_bytes

    kinds = [p.kind for p in parse_bytes(data, source="x").result.problems]
    assert ("empty" in kinds) == (not data.strip())
    assert ("empty" in kinds) == (data in (b"", b" ", b"\n", b" \t\r\n\x0b\x0c"))
