"""The driver that line formats share: a format says what its lines mean, the driver does the rest.

The driver reads the lines once, numbering them from 1. For each it takes off what wraps the message:
an MPI, Gloo, Slurm or MPICH rank prefix (``RANKS``) and a glog prefix (``GLOG``: severity and a time in
seconds, kept monotonic across midnight and years by :class:`GlogTimer`; a glog line written behind other
output on the same line, as stdout and stderr interleave, is read from where its prefix begins). It asks the format whether the
line starts the next run and, if so, closes the open one. A line that holds one of the format's
``MUST_READ`` but that ``read`` did not use becomes a ``bad_line`` problem row, so a number the format
could not read is reported instead of dropped. At the end it closes the last run and calls ``finish``.

A format module then holds only what is its own: ``NAME``, ``DESCRIPTION``, ``sniff``, its regexes, and a
:class:`LineFormat` subclass that turns lines into a run. Its ``parse_lines`` is one call::

    def parse_lines(lines, *, source, result=None):
        return drive(MyFormat, lines, result)

A format whose step line is most of a big log may also define ``fast_line(no, raw)``: it reads such a
line whole, exactly as the general path would (the same rows, state and problems), and returns True; for any
other line, or one it is not sure of, it returns False and the line takes the general path. It skips what the
driver does for every line (the prefixes, the ``Line``, ``starts_run``, the markers) and what a general
reader does for every field. ``BENCH_PURE_PYTHON=1`` turns it off; tests/ingest/test_fast_lines.py holds each
fast line to the general path's rows and problems.

Where a fast line is not fast enough, a format can also be read through a C path (``line_scan``): a line
program reads its step lines into columns and ``fast_rows`` applies them a stretch at a time, the other
lines going through a :class:`Driver` as here.

``ingest/README.md`` walks through adding one. Two formats keep a loop of their own, because a C scanner
hands them their lines and that loop is their hot path: tf_cnn (``tf_cnn_scan`` feeds its ``Reader`` the
lines it does not read itself) and mlperf (it gets ``""`` for each line without an MLPerf marker).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Generic, TypeVar

from bench.ingest.native import pure_python
from bench.ingest.records import ParseResult
from bench.ingest.text import GlogTimer, glog_start, split_rank

S = TypeVar("S")

_EXCEPTION = re.compile(r"(?:\w+\.)*\w*(?:Error|Exception)\b.*")
_OOM = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
_NCCL_ERROR = re.compile(r"NCCL error|nccl(?:System|Internal|Invalid|Remote|UnhandledCuda)Error")


def program_error(seen: str | None, msg: str) -> str | None:
    """The error a program's output has stated so far, given the one ``seen`` before ``msg``: the first
    ``Traceback``, NCCL error or out-of-memory line, then each exception line after it (the last is the one
    that ended the program, ``torch.OutOfMemoryError: CUDA out of memory ...``)."""
    text = msg.strip()
    if seen is not None:
        return text if _EXCEPTION.fullmatch(text) else seen
    if "Traceback (most recent call last)" in text or _NCCL_ERROR.search(text) or _OOM.search(text):
        return text
    return None


def error_status(error: str) -> str:
    """``oom`` for an error that says the memory ran out, else ``failed``."""
    return "oom" if _OOM.search(error) else "failed"


class Line:
    """One line as the format sees it: ``msg`` is the text behind the rank and glog prefixes; ``level``,
    ``time`` and ``source`` (``solver.cpp:242``) are the glog prefix's, None on other lines."""

    __slots__ = ("level", "msg", "no", "rank", "raw", "source", "time")

    def __init__(self, no: int, raw: str, msg: str, rank: int | None = None, level: str | None = None,
                 time: float | None = None, source: str | None = None):
        self.no, self.raw, self.msg, self.rank = no, raw, msg, rank
        self.level, self.time, self.source = level, time, source


class LineFormat(Generic[S]):
    """Base of a line format's parser. ``self.run`` is the run being read (a state of the format's own
    type ``S``) or None; the run's rows go to ``self.result``, and its step rows carry ``self.index``."""

    #: Take a rank prefix (``[1,0]<stdout>:``, ``[0]<stdout>:``, `` 0: ``, ``[0] ``) off each line.
    RANKS: ClassVar[bool] = False
    #: Read a glog prefix (``I1127 08:00:00.000000  123 file.cc:12] ``) off each line.
    GLOG: ClassVar[bool] = False
    #: Substrings that mark a line as carrying a value of this format (a rate, a time). Such a line that
    #: ``read`` returns False for is reported as a ``bad_line`` problem with ``BAD_LINE`` as its detail.
    MUST_READ: ClassVar[tuple[str, ...]] = ()
    BAD_LINE: ClassVar[str] = "a line of this format that could not be read"
    #: The state of one run: a class that takes ``first_line`` (or override ``new_run``).
    STATE: ClassVar[Callable[..., Any]]

    def __init__(self, result: ParseResult):
        self.result = result
        self.run: S | None = None
        self.glog = GlogTimer() if self.GLOG else None
        #: True while ``emit`` runs for a run that another run's start closed (not the end of the lines).
        self.followed = False

    # -- what a format defines --

    def new_run(self, no: int) -> S:
        """A fresh state for a run whose first line is line ``no``: by default ``STATE(first_line=no)``."""
        return self.STATE(first_line=no)

    def starts_run(self, run: S, line: Line) -> bool:
        """Whether ``line`` begins the next run, ``run`` being the open one."""
        return False

    def read(self, line: Line) -> bool:
        """Use one line; False when it was not one of this format's lines."""
        raise NotImplementedError

    def emit(self, run: S) -> None:
        """Append the finished run's Run row to ``self.result.runs``."""
        raise NotImplementedError

    def finish(self) -> None:
        """Called once after the last line and the last run's ``emit``."""

    #: ``fast_line(no, raw) -> bool``: see the module docstring; None for a format without one.
    fast_line: Callable[[int, str], bool] | None = None

    # -- what the driver and the format share --

    @property
    def index(self) -> int:
        """The run_index of the open run: runs are appended in order as they close."""
        return len(self.result.runs)

    def current(self, no: int) -> S:
        """The open run, opening one at line ``no`` if none is."""
        return self.run if self.run is not None else self.open(no)

    def open(self, no: int) -> S:
        """Close the open run, if any (another run follows it), and open a new one at line ``no``."""
        if self.run is not None:
            self.followed = True
            self.close()
        self.run = self.new_run(no)
        return self.run

    def close(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            self.emit(run)
        self.followed = False

    def bad_line(self, line: Line, detail: str | None = None) -> None:
        self.result.problem("bad_line", detail or self.BAD_LINE, line.no, line.raw)

    def step(self, step: int | None, **values: Any) -> None:
        """A step row of the open run."""
        self.result.steps.add(self.index, step, **values)


class Driver:
    """Feeds one format's parser the lines of a file, one at a time (``feed``), then ends it (``end``)."""

    def __init__(self, fmt: type[LineFormat[Any]], result: ParseResult):
        self.result = result
        self.p = p = fmt(result)
        self.ranks, self.glog, self.markers = fmt.RANKS, p.glog, fmt.MUST_READ
        self.fast = None if pure_python() else p.fast_line

    def feed(self, no: int, raw: str) -> None:
        """Line ``no`` (from 1), ``raw`` as the file holds it without its line end."""
        p, glog = self.p, self.glog
        if self.fast is not None and self.fast(no, raw):
            return
        rank, msg = split_rank(raw) if self.ranks else (None, raw)
        if glog is not None and ((got := glog.read(msg)) is not None or (
                (at := glog_start(msg)) > 0 and (got := glog.read(msg[at:])) is not None)):
            g = got[0]
            line = Line(no, raw, g.message, rank, g.level, got[1], g.source)
        else:
            line = Line(no, raw, msg, rank)
        if p.run is not None and p.starts_run(p.run, line):
            p.followed = True
            p.close()
        try:
            if not p.read(line) and self.markers and any(m in msg for m in self.markers):
                p.bad_line(line)
        except (ValueError, OverflowError) as e:  # a field that will not convert (``1.2.3``): never the run
            self.result.unreadable_line(no, raw, e)

    def end(self) -> ParseResult:
        """Close the last run and finish the parse."""
        self.p.close()
        self.p.finish()
        return self.result


def drive(fmt: type[LineFormat[Any]], lines: Iterable[str], result: ParseResult | None = None) -> ParseResult:
    """Run the line format ``fmt`` over ``lines`` into ``result`` (a new one if None) and return it."""
    d = Driver(fmt, result if result is not None else ParseResult())
    for no, raw in enumerate(lines, 1):
        d.feed(no, raw)
    return d.end()
