"""Text helpers shared by parsers: decoding, line splitting, wrapper prefixes, timestamps.

Every function here is pure. Wrapper prefixes (MPI/Gloo/Slurm rank tags, glog, TF C++ stderr)
are defined once here so that each format module reads the message behind them, and keeps the
rank or time they carry.
"""

from __future__ import annotations

import calendar
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.ingest.native import ext
from bench.ingest.records import Problem

#: ``contains(text, needle)`` is ``needle in text``. The C version searches 1-byte (ASCII or Latin-1)
#: strings with glibc's memmem, about 2.5 times faster than CPython on the log heads the sniffers test.
contains: Callable[[str, str], bool] = ext.contains if ext is not None else operator.contains

# Open MPI --tag-output: "[1,0]<stdout>:"  (jobid, rank)
_MPI = re.compile(r"\[(\d+),(\d+)\]<(?:stdout|stderr)>:")
# horovodrun Gloo: "[0]<stdout>:" optionally preceded by time.asctime(), e.g. "Mon Jan  4 10:00:00 2021"
_GLOO = re.compile(r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[(\d+)\]<(?:stdout|stderr)>:")
# Slurm srun --label: right-aligned task id, colon, space: " 0: ", "12: "
_SLURM = re.compile(r" *(\d{1,5}): ")
# Intel MPI / MPICH -l: "[0] "
_MPICH = re.compile(r"\[(\d{1,5})\] ")


def split_rank(line: str) -> tuple[int | None, str]:
    """Strip a rank-tagging wrapper prefix. Returns (rank or None, rest of the line).

    Recognised: Open MPI ``[job,rank]<stdout>:``, Gloo ``[rank]<stdout>:`` (with optional asctime),
    Slurm ``" 0: "``, MPICH ``"[0] "``. Lines without a prefix come back unchanged with rank None.
    """
    if not line:
        return None, line
    c = line[0]
    if c == "[" or c.isalpha():
        m = _MPI.match(line)
        if m:
            return int(m.group(2)), line[m.end() :]
        m = _GLOO.match(line)
        if m:
            return int(m.group(1)), line[m.end() :]
        if c == "[":
            m = _MPICH.match(line)
            if m:
                return int(m.group(1)), line[m.end() :]
        return None, line
    if c == " " or c.isdigit():
        m = _SLURM.match(line)
        if m:
            return int(m.group(1)), line[m.end() :]
    return None, line


@dataclass(frozen=True, slots=True)
class GlogLine:
    """A parsed glog line. ``year`` is None for the classic format without a year."""

    level: str
    year: int | None
    month: int
    day: int
    seconds: float  # seconds since midnight
    thread: int
    source: str  # "solver.cpp:242"
    message: str


_GLOG = re.compile(
    r"([IWEF])(\d{4})?(\d\d)(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?) +(\d+) ([^\]\s]+)\] ?(.*)"
)


def parse_glog(line: str) -> GlogLine | None:
    """Parse ``I0302 03:28:02.104485  8238 solver.cpp:242] msg`` (and the ``I20170302`` form)."""
    m = _GLOG.match(line)
    if not m:
        return None
    lvl, year, mo, dd, hh, mi, ss, tid, src, msg = m.groups()
    if not (1 <= int(mo) <= 12 and 1 <= int(dd) <= 31):
        return None  # not a stamp any clock printed (a damaged line)
    return GlogLine(
        lvl,
        int(year) if year else None,
        int(mo),
        int(dd),
        int(hh) * 3600 + int(mi) * 60 + float(ss),
        int(tid),
        src,
        msg,
    )


_GLOG_INSIDE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\s]+:\d+\] ")


def glog_start(line: str) -> int:
    """Where a glog prefix begins inside ``line`` (a program's output and glog's stderr on one line, as
    ``Done.I1127 08:00:00.000000  123 caffe.cpp:412] Average Forward pass: 35.96 ms.``), or -1."""
    m = _GLOG_INSIDE.search(line) if "] " in line else None
    return -1 if m is None else m.start()


class GlogClock:
    """Turns successive glog (month, day, seconds) stamps into monotonically comparable seconds.

    glog without a year still carries month and day, so a run that crosses midnight moves to the next
    day and is handled by the date itself. The only wrap left is New Year (Dec 31 -> Jan 1), which is
    detected by the month going backwards and handled by adding a year. ``base_year`` (e.g. from a glog
    file header ``Log file created at: 2015/09/06 ...``) makes the result absolute unix seconds.
    """

    def __init__(self, base_year: int | None = None):
        self.year = base_year if base_year is not None else 2001  # a non-leap year as neutral default
        self.absolute = base_year is not None
        self._last_month: int | None = None

    def seconds(self, g: GlogLine) -> float:
        if g.year is not None:
            self.year, self.absolute = g.year, True
        elif self._last_month is not None and g.month < self._last_month:
            self.year += 1
        self._last_month = g.month
        return calendar.timegm((self.year, g.month, g.day, 0, 0, 0)) + g.seconds


class GlogTimer:
    """Reads the glog lines of one file: the parsed line and its time, with a year from a glog file
    header (``Log file created at: 2015/09/06 ...``) when one was seen (see GlogClock)."""

    def __init__(self) -> None:
        self._year: int | None = None
        self._clock: GlogClock | None = None

    def set_year(self, year: int) -> None:
        """A glog file header gave the year: the clock restarts from it."""
        self._year, self._clock = year, None

    @property
    def absolute(self) -> bool:
        """True when times are unix seconds (the year is known), not just comparable with each other."""
        return self._clock is not None and self._clock.absolute

    def read(self, line: str) -> tuple[GlogLine, float] | None:
        """(parsed line, seconds) of a glog line, or None for any other line."""
        g = parse_glog(line) if line[:1] in "IWEF" and line[1:2].isdigit() else None
        if g is None:
            return None
        if self._clock is None:
            self._clock = GlogClock(self._year)
        return g, self._clock.seconds(g)


_TF_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?): [IWEF] ")


def tf_stamp_seconds(line: str) -> float | None:
    """Unix seconds of a TF C++ stderr line ``2020-09-05 18:47:50.152480: I tensorflow/...``.

    The stamp is local time of the machine that ran it; it is read as UTC (durations are exact).
    """
    m = _TF_STAMP.match(line)
    if not m:
        return None
    y, mo, d, hh, mi, ss = m.groups()
    return utc_seconds(y, mo, d, hh, mi, ss)


def utc_seconds(y: str | int, mo: str | int, d: str | int, hh: str | int, mi: str | int, ss: str | float
                ) -> float | None:
    """Unix seconds of a date and time read as UTC, or None when it is no date (month 17, hour 25): a
    damaged stamp is a missing value, never an exception out of a parser."""
    try:
        fields = (int(y), int(mo), int(d), int(hh), int(mi))
        sec = float(ss)
    except ValueError:
        return None
    if not (1 <= fields[1] <= 12 and 1 <= fields[2] <= 31 and 0 <= fields[3] <= 24 and 0 <= fields[4] <= 59
            and 0 <= sec < 62):
        return None
    try:
        return calendar.timegm((*fields, 0)) + sec
    except (ValueError, OverflowError):
        return None


def decode(data: bytes) -> tuple[str, list[Problem]]:
    """Bytes -> text. Invalid UTF-8 is replaced (U+FFFD) and reported once, with its line number."""
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        text = data.decode("utf-8", errors="replace")
        return text, [Problem("encoding", f"bytes that are not UTF-8 ({e.reason}); replaced", line_no)]


def utf8_problem(block: bytes | memoryview, line_base: int = 0) -> Problem | None:
    """The ``encoding`` problem of a block of lines that follows ``line_base`` earlier lines, with the line
    number of its first invalid byte; None when the block is valid UTF-8."""
    data = bytes(block)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_no = line_base + data.count(b"\n", 0, e.start) + 1
        return Problem("encoding", f"bytes that are not UTF-8 ({e.reason}); replaced", line_no)
    return None


def iter_lines(text: str) -> Iterator[str]:
    """Split on LF only (not on the other separators str.splitlines knows), dropping a CR before it.

    A final line without LF is yielded too (a file cut mid-line still gives its partial last line).
    """
    start = 0
    find = text.find
    n = len(text)
    while start < n:
        end = find("\n", start)
        if end < 0:
            end = n
        line = text[start:end]
        if line.endswith("\r"):
            line = line[:-1]
        yield line
        start = end + 1


def split_lines(text: str) -> list[str]:
    """The lines of an in-memory text, as :func:`iter_lines` yields them (one C-level split: the fast
    path for files that are held whole anyway)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [x[:-1] if x.endswith("\r") else x for x in lines]
    return lines


#: Control bytes a text log does not hold (all below 0x20 but tab, LF, VT, FF, CR and ESC).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27))
_HIGH = bytes(range(128, 256))
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def is_binary(head: bytes) -> bool:
    """True for content that is not a text log, judged from its first block: more than 5% control bytes
    (NUL included), or more than 30% bytes above 0x7F that are not UTF-8. Random or compressed bytes
    have 5-10% of the first and about half of the second; a text log with a few NUL bytes (what a crashed
    writer leaves) has next to none, and is text; so is Chinese or Russian UTF-8 text."""
    if head.isascii() and b"\x00" not in head:
        return False  # the usual case, at memchr speed: plain ASCII with no NUL is read as text
    if len(head) - len(head.translate(None, _CONTROL)) > len(head) // 20:
        return True
    if len(head) - len(head.translate(None, _HIGH)) <= len(head) * 3 // 10:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 3  # not just a character cut at the block's end
    return False


def unicode_bom(head: bytes) -> str | None:
    """The codec of a UTF-16 or UTF-32 byte order mark at the start (what a PowerShell redirect writes),
    or None."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    return None


def as_utf8(data: bytes) -> tuple[bytes, list[Problem]]:
    """A whole file's bytes as the parsers read them: UTF-16/32 with a BOM re-encoded as UTF-8, a UTF-8
    BOM dropped, and NUL bytes removed, each line that held some reported (the first ten, then a count)."""
    problems: list[Problem] = []
    codec = unicode_bom(data[:4])
    if codec is not None:
        data = data.decode(codec, errors="replace").lstrip("\ufeff").encode("utf-8")
    elif data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data:
        lines = [i + 1 for i, line in enumerate(data.split(b"\n")) if b"\x00" in line]
        for line_no in lines[:10]:
            problems.append(Problem("encoding", "NUL bytes in a text line (a crashed writer?); removed", line_no))
        if len(lines) > 10:
            problems.append(Problem("encoding", f"NUL bytes in {len(lines) - 10} more lines; removed"))
        data = data.replace(b"\x00", b"")
    return data, problems


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(line: str) -> str:
    """``line`` without its ANSI colour and cursor sequences (``ESC[32m``): loggers that colour their output
    (Primus, torchtitan) write them into files too."""
    return _ANSI.sub("", line) if "\x1b" in line else line


#: A launcher's or trainer's statement of the job's size: ``world_size=8`` (Primus, torchrun's environment),
#: ``WORLD_SIZE: 24`` (ALCF's launcher), ``world_size = 3072`` (DeepSpeed's config), ``dist_world_size=4``.
WORLD_SIZE = re.compile(r"\b(?:dist_)?(?:world_size|WORLD_SIZE)\s*[=:]\s*(\d+)")


#: Prefixes that a launcher or a log shipper writes before every line of a program's output: Kubeflow's TFJob
#: launcher (``INFO|2019-03-01T10:00:00|/opt/launcher.py|27| ``), Docker's and Kubernetes' ``stdout: `` /
#: ``stderr: ``, and ``kubectl logs --timestamps`` / ``docker logs -t`` (``2026-11-29T06:42:31.123456789Z ``).
#: Rank tags (``[1,0]<stdout>:``) are not here: formats that read ranks take them off themselves (split_rank).
_LAUNCHER_PREFIXES = tuple(re.compile(p) for p in (
    rb"(?:INFO|WARNING|WARN|ERROR|DEBUG)\|\d{4}-\d\d-\d\d[^|\n]*\|[^|\n]*\|\d+\| ?",
    rb"std(?:out|err): ",
    rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) ",
))
#: The share of a head's non-blank lines that must carry one prefix for it to be the launcher's.
LAUNCHER_SHARE = 0.9


def launcher_prefix(head: bytes) -> re.Pattern[bytes] | None:
    """The launcher prefix on (nearly) every line of ``head`` (its first 2,000 lines are asked), as a pattern
    that takes it off every line of a block (``pattern.sub(b"", block)``); None when there is none. A log so
    wrapped then reads as the same log without it, in every format."""
    lines = [line for line in head.split(b"\n", 2000)[:2000] if line.strip()]
    for prefix in _LAUNCHER_PREFIXES:
        if len(lines) >= 2 and sum(prefix.match(line) is not None for line in lines) >= LAUNCHER_SHARE * len(lines):
            return re.compile(rb"^" + prefix.pattern, re.MULTILINE)
    return None
