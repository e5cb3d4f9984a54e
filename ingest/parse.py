"""One file's bytes -> (format, ParseResult): decoding, detection and the never-crash guarantee."""

from __future__ import annotations

import dataclasses
import re
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.ingest import patterns as pat
from bench.ingest import registry
from bench.ingest.checks import check_result, collapse_repeats
from bench.ingest.records import ParseResult, Problem, Run
from bench.ingest.text import (
    as_utf8,
    decode,
    is_binary,
    iter_lines,
    launcher_prefix,
    split_lines,
    unicode_bom,
    utf8_problem,
)
from bench.ingest.units import with_throughput


@dataclass
class FileParse:
    """The outcome for one file. ``format`` is None when the file was not parsed (binary, empty,
    unrecognized); the reason is then in ``result.problems``."""

    format: str | None
    result: ParseResult


def parse_bytes(
    data: bytes, *, source: str, fmt: str | None = None, result: ParseResult | None = None
) -> FileParse:
    """Detect the format of ``data`` (unless ``fmt`` forces one) and parse it.

    Never raises for bad input: binary, empty, non-UTF-8 and unknown content become problems; an
    exception inside a parser becomes a ``parser_error`` problem (with the runs parsed so far kept).
    Raises KeyError only for an unknown forced ``fmt`` name (a usage error).
    """
    result = result if result is not None else ParseResult()
    forced = registry.load(fmt) if fmt is not None else None
    if unicode_bom(data[:4]) is None and is_binary(data[:8192]):
        result.problems.append(Problem("binary", "control bytes in the first 8 KiB: not a text log"))
        return FileParse(None, result)
    if b"\x00" in data or not data[:1].isascii():
        data, problems = as_utf8(data)
        result.problems.extend(problems)
    if not data or data.isspace():  # == not data.strip(), without copying the file
        result.problems.append(Problem("empty", "the file is empty or only whitespace"))
        return FileParse(None, result)
    if (prefix := launcher_prefix(data[:PREFIX_HEAD])) is not None:
        data = prefix.sub(b"", data)  # a launcher's prefix on every line: the log is read without it
    ascii_only = data.isascii()  # then bytes are characters: no need to decode the whole file up front
    text, problems = (data[: registry.HEAD_CHARS].decode("ascii"), []) if ascii_only else decode(data)
    result.problems.extend(problems)
    module = detect(text, source=source, forced=forced, problems=result.problems, whole=data)
    if module is None or (forced is not None and not _holds(forced, text, data, ascii_only, result)):
        return FileParse(None, result)
    fast = registry.chunk_parser(module)
    if fast is not None:
        run_parser(module, lambda: fast([data], source=source, result=result), result)
    elif ascii_only and _whole_fast(module, data, result):
        pass
    elif ascii_only and (marked := registry.marked_lines(module, data)) is not None:
        run_lines(module, marked, source=source, result=result)
    else:
        run_lines(module, split_lines(data.decode("ascii") if ascii_only else text), source=source, result=result)
    _forced_found_nothing(forced, result)
    if not ascii_only and (digit := _FOREIGN_DIGIT.search(text)) is not None:
        no = text.count("\n", 0, digit.start()) + 1
        line = text[text.rfind("\n", 0, digit.start()) + 1:].split("\n", 1)[0]
        result.problems.append(Problem("warning", "the file writes numbers in digits that are not ASCII (full-width, "
                                                  "Arabic-Indic, ...); they were read as the numbers they write "
                                                  "(first here)", no, line))
    if not data.endswith(b"\n") and getattr(module, "LINE_ORIENTED", True):
        n_lines = data.count(b"\n")
        last = data[data.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")
        result.problems.append(
            Problem("truncated", "the file ends without a final newline (cut mid-line?)", n_lines + 1, last)
        )
    return FileParse(module.NAME, result)


def detect(head: str, *, source: str, forced: registry.FormatModule | None, problems: list[Problem],
           whole: bytes | None = None) -> registry.FormatModule | None:
    """The detect stage, for a held file and a streamed one alike: the forced ``--format``, else the first
    format whose ``sniff`` accepts the first ``HEAD_CHARS`` of ``head``, else (a held file, ``whole``) one
    whose marker is further in, else what the file's place in an MLPerf results tree says it is. None, with
    an ``unrecognized_format`` problem, when nothing matched."""
    module = forced or registry.detect(head[: registry.HEAD_CHARS], problems)
    if module is None and whole is not None and len(whole) > registry.HEAD_CHARS:
        module = registry.detect_beyond_head(whole)
    if module is None and pat.match_first(pat.SYSTEMS_TREE, source):
        module = registry.load("mlperf_system")  # a results repository's systems/<name>.json, however broken
    elif module is None and pat.match_first(pat.SCALING_TREE, source):
        module = registry.load("mlperf_scaling")  # and a result set's scaling.json
    if module is None:
        problems.append(Problem("unrecognized_format", UNRECOGNIZED))
    return module


def _whole_fast(module: registry.FormatModule, data: bytes, result: ParseResult) -> bool:
    """The format's whole-file fast path, when it has one and reads ``data``. Should it raise, the lines
    are parsed instead (it adds its rows in one block at its very end)."""
    fast = registry.whole_parser(module)
    try:
        return fast is not None and fast(data, result)
    except Exception:  # parse_bytes never raises for bad input; the plain path decides what the file holds
        return False


#: A decimal digit that is not 0-9 (``１``, ``١``): Python reads it as the digit it writes (float("１２３.４") is
#: 123.4), and so do the parsers' ``\d``. No program bench reads prints them; a file that does is said to.
_FOREIGN_DIGIT = re.compile(r"(?![0-9])\d")

#: The bytes of a file's start in which a launcher's line prefix is looked for (text.launcher_prefix).
PREFIX_HEAD = 64 * 1024

#: Run metrics that only a run that ended ok has. A failed, out-of-memory, truncated or result-less run
#: keeps its status, its wall time and its step rows (what it printed before it stopped), but these are
#: NULL: a partial measurement is not the run's throughput.
RESULT_METRICS = (
    "images_per_sec", "images_per_sec_mean", "images_per_sec_stderr", "images_per_sec_jitter",
    "images_per_sec_ranks", "forward_ms", "backward_ms", "forward_backward_ms", "time_to_train_s", "throughput",
)


def run_lines(module: registry.FormatModule, lines: Iterable[str], *, source: str, result: ParseResult) -> None:
    """Run one parser over lines (see :func:`run_parser`)."""
    run_parser(module, lambda: module.parse_lines(lines, source=source, result=result), result)


def run_parser(module: registry.FormatModule, parse: Callable[[], object], result: ParseResult) -> None:
    """Run ``parse`` (which fills ``result``), turning a parser exception into a ``parser_error``
    problem, then apply the rules every format shares: runs that did not end ok have NULL result
    metrics, an images rate is the run's throughput in images/sec (``units.with_throughput``), and every
    value is checked (``bench.ingest.checks``)."""
    try:
        parse()
    except Exception as e:  # a parser bug must not abort the ingest of other files
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        result.problems.append(Problem("parser_error", f"{module.NAME} parser raised {tb}"))
        unfinished_runs(module.NAME, result, tb)
    cleared: dict[str, Any] = dict.fromkeys(RESULT_METRICS)
    result.runs[:] = [with_throughput(r) if r.status == "ok" else dataclasses.replace(r, **cleared)
                      for r in result.runs]
    check_result(result, RESULT_METRICS)
    collapse_repeats(result)


def unfinished_runs(fmt: str, result: ParseResult, error: str) -> None:
    """After a parser raised: a run whose step or telemetry rows were added but that the parser never
    finished gets a row of its own, status ``invalid`` (its result is unknown), so that no step is left
    without its run. Rows already spilled (a big file) belong to the run in progress."""
    known = {r.run_index for r in result.runs}
    rows = result.steps.run_indices() | result.telemetry.run_indices()
    if result.steps.spilled() or result.telemetry.spilled():
        rows.add(max(known) + 1 if known else 0)
    for index in sorted(rows - known):
        result.runs.append(Run(run_index=index, format=fmt, status="invalid",
                               status_detail=f"the {fmt} parser stopped ({error}) before this run ended"))
    result.runs.sort(key=lambda r: r.run_index)


#: The problem of a file no format recognised: how far detection looked, and what to do.
UNRECOGNIZED = ("no known log format matched its content (detection reads its first 256 KiB, and a file of up "
                "to 64 MiB also for a format's marker after them); if it is a log bench reads, name its format with "
                "--format (bench ingest --list-formats)")

#: A line longer than this is not held in memory: it is skipped (as if it were empty) and reported.
MAX_LINE_BYTES = 16 * 1024 * 1024


def line_blocks(chunks: Iterable[bytes], problems: list[Problem], *, check_utf8: bool = True
                ) -> Iterator[bytes | memoryview]:
    """A byte stream re-cut into blocks that end at a line end (the last block may not). Only the partial
    lines at chunk edges are copied; the rest of a chunk is passed on as a memoryview. With ``check_utf8``,
    invalid UTF-8 is reported once, with its line number (the C scanner checks its own blocks).

    A line that spans chunks and is longer than ``MAX_LINE_BYTES`` is replaced by an empty line (so later
    line numbers stay right) and reported as a ``bad_line`` problem with its byte range: memory stays
    bounded whatever the input (a line inside one chunk is at most a chunk long)."""
    rest = b""  # the partial last line of the previous chunk
    pending: list[bytes] = []  # later pieces of that line, from chunks without a line end
    pending_bytes = 0
    line_start = 0  # where that line starts in the stream
    offset = 0  # stream bytes before the current chunk
    skipping = False  # inside a line longer than MAX_LINE_BYTES
    line_base = 0
    reported = not check_utf8

    def too_long(end: int) -> Problem:
        return Problem("bad_line", f"a line longer than {MAX_LINE_BYTES >> 20} MiB (stream bytes {line_start}-{end}) "
                                   "was skipped")

    for chunk in chunks:
        first = chunk.find(b"\n")
        if first < 0:
            if not skipping:
                pending.append(chunk)
                pending_bytes += len(chunk)
                if len(rest) + pending_bytes > MAX_LINE_BYTES:
                    skipping, rest, pending, pending_bytes = True, b"", [], 0
            offset += len(chunk)
            continue
        if not skipping and len(rest) + pending_bytes + first > MAX_LINE_BYTES:
            skipping, rest, pending, pending_bytes = True, b"", [], 0  # it ends here, still too long
        if skipping:
            problems.append(too_long(offset + first))
            skipping, head = False, b"\n"  # an empty line in its place keeps later line numbers right
        elif rest or pending:
            head = b"".join([rest, *pending, chunk[: first + 1]])
            pending, pending_bytes = [], 0
        else:
            head = b""
        start, last = (first + 1 if head else 0), chunk.rfind(b"\n") + 1
        blocks: list[bytes | memoryview] = [head] if head else []
        if last > start:
            blocks.append(memoryview(chunk)[start:last])
        rest, line_start = chunk[last:], offset + last
        offset += len(chunk)
        if not reported:
            ascii_chunk = chunk.isascii()
            for block in blocks:
                if isinstance(block, bytes):  # the line completed from earlier chunks
                    ascii_block, newlines = block.isascii(), block.count(b"\n")
                else:  # a view of this chunk
                    ascii_block, newlines = ascii_chunk, chunk.count(b"\n", start, last)
                if not reported and not ascii_block and (p := utf8_problem(block, line_base)):
                    problems.append(p)
                    reported = True
                line_base += newlines
        yield from blocks
    if skipping:
        problems.append(too_long(offset))
        return
    tail = b"".join([rest, *pending])
    if tail:
        if not reported and (p := utf8_problem(tail, line_base)) is not None:
            problems.append(p)
        yield tail


def iter_stream_lines(chunks: Iterable[bytes], problems: list[Problem]) -> Iterator[str]:
    """Lines of a byte stream, decoded block by block (bounded memory). Invalid UTF-8 is replaced and
    reported once, with its line number."""
    for block in line_blocks(chunks, problems):
        yield from iter_lines(str(block, "utf-8", errors="replace"))


def _holds(forced: registry.FormatModule, text: str, data: bytes | None, ascii_only: bool, result: ParseResult) -> bool:
    """Whether a file read as a forced ``--format`` holds that format's markers: its ``sniff`` accepts the
    head, or (``data``: a held file) any window of it; else a ``wrong_format`` problem, and the file gives
    nothing (a README that mentions ``ResourceExhaustedError`` is no out-of-memory tf_cnn run)."""
    if forced.sniff(text[: registry.HEAD_CHARS]):
        return True
    whole = (data.decode("ascii") if ascii_only else text) if data is not None else ""
    step = registry.HEAD_CHARS - 4096  # windows overlap, so that a marker across a boundary is seen
    if any(forced.sniff(whole[i : i + registry.HEAD_CHARS]) for i in range(step, len(whole), step)):
        return True
    where = "anywhere in it" if data is not None else "in its first 256 KiB (a file over 64 MiB is not read further for this)"
    result.problems.append(Problem("wrong_format", f"read as {forced.NAME} (--format), the file holds none of that "
                                                   f"format's markers {where}: nothing is stored from it. Without "
                                                   "--format its format is detected"))
    return False


def _forced_found_nothing(forced: registry.FormatModule | None, result: ParseResult) -> None:
    """A file read as a forced ``--format`` that gave nothing, and said nothing of why, is a problem row,
    never a silent 0 runs."""
    if forced is not None and not (result.runs or result.systems or result.score_scales or len(result.telemetry)
                                   or result.problems):
        result.problems.append(Problem("no_run", f"read as {forced.NAME} (--format), the file gave no run: is it "
                                                 "that format? Without --format its format is detected"))


def parse_stream(
    head: bytes, chunks: Iterator[bytes], *, source: str, fmt: str | None = None, result: ParseResult
) -> FileParse:
    """Like :func:`parse_bytes` for a file too large to hold: ``head`` is its first bytes (at least
    ``HEAD_CHARS`` of them when the file is that long) and ``chunks`` yields the rest."""
    forced = registry.load(fmt) if fmt is not None else None
    if unicode_bom(head[:4]) is not None:
        result.problems.append(Problem("encoding", "UTF-16/32 is read only in files up to 64 MiB; convert it to "
                                                   "UTF-8 (iconv -f UTF-16 -t UTF-8)"))
        return FileParse(None, result)
    if is_binary(head[:8192]):
        result.problems.append(Problem("binary", "control bytes in the first 8 KiB: not a text log"))
        return FileParse(None, result)
    prefix = launcher_prefix(head[:PREFIX_HEAD])
    text = (head if prefix is None else prefix.sub(b"", head)).decode("utf-8", errors="replace")
    module = detect(text, source=source, forced=forced, problems=result.problems)
    if module is None or (forced is not None and not _holds(forced, text, None, False, result)):
        return FileParse(None, result)
    tail: list[bytes] = []  # the bytes after the last line end so far (a cut last line), up to MAX_LINE_BYTES
    tail_bytes = 0

    def note_tail(c: bytes) -> None:
        nonlocal tail_bytes
        end = c.rfind(b"\n")
        if end >= 0:
            tail[:], tail_bytes = [bytes(c[end + 1:])], len(c) - end - 1
        else:
            tail_bytes += len(c)
            if tail_bytes <= MAX_LINE_BYTES:
                tail.append(bytes(c))

    def all_chunks() -> Iterator[bytes]:
        note_tail(head)
        yield head
        for c in chunks:
            if c:
                note_tail(c)
                yield c

    def read_chunks() -> Iterator[bytes]:
        if prefix is None:
            return all_chunks()
        return (prefix.sub(b"", bytes(b)) for b in line_blocks(all_chunks(), result.problems, check_utf8=False))

    fast = registry.chunk_parser(module)
    if fast is not None:
        blocks = line_blocks(read_chunks(), result.problems, check_utf8=False)
        run_parser(module, lambda: fast(blocks, source=source, result=result, check_utf8=True), result)
    else:
        lines = _counted(iter_stream_lines(read_chunks(), result.problems), result)
        run_lines(module, lines, source=source, result=result)
    _forced_found_nothing(forced, result)
    if tail_bytes:  # the file ends without a line end; its last line's number is the lines the parse read
        last = b"".join(tail).decode("utf-8", errors="replace") if tail_bytes <= MAX_LINE_BYTES else None
        result.problems.append(
            Problem("truncated", "the file ends without a final newline (cut mid-line?)", result.lines_read, last))
    return FileParse(module.NAME, result)


def _counted(lines: Iterable[str], result: ParseResult) -> Iterator[str]:
    """``lines``, counted into ``result.lines_read`` once the parser has read them all."""
    n = 0
    for line in lines:
        n += 1
        yield line
    result.lines_read = n


def has_result(log: Path | str, fmt: str | None = None) -> bool:
    """Does the log hold a run with a result, parsed as the ingest parses it (``fmt`` forces the format)?

    One verdict: a command that exits 0 and prints no result is ``no_result`` in what ``bench run`` prints,
    its exit code, run.json and the store alike. The log is streamed, never held whole."""
    result = ParseResult()
    with open(log, "rb") as f:
        head = f.read(1 << 16)
        if not head.strip():
            return False
        parse_stream(head, iter(lambda: f.read(1 << 20), b""), source=str(log), fmt=fmt, result=result)
    return any(r.status == "ok" and any(getattr(r, m, None) is not None for m in RESULT_METRICS)
               for r in result.runs)
