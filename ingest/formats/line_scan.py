"""The C path of the line formats: a format's commonest lines (its step line; for nccl-tests each kind of line
a run holds) read by a line program in C, its rows handed to the format a stretch at a time.

A format (a ``LineFormat``) that defines ``PROGRAM`` and ``fast_rows`` is parsed by :func:`parse_chunks` (the
registry's chunk parser for the formats in ``registry.LINE_SCANNED``) when the C extension is built:

- ``_native.fields`` reads each chunk's lines: a line the program reads whole (``Program``: what it matches is
  what the format's step regex matches, and every figure converts as ``float()`` converts it) becomes a row of
  columns; every other line, and every line it is not sure of (non-ASCII, colours, control bytes, a label
  printed twice, a figure that will not convert), comes back as text;
- the text lines go through the format's line driver (``lines.Driver``: its fast line, then its general path),
  and between two of them the rows go to ``fast_rows(rows, lo, hi)``, which applies as many from ``lo`` as it
  can at once, exactly as that many calls of its fast line would, and returns how many; 0 sends row ``lo``
  through the driver as text.

So what a format's general path says about a line it still says: tests/ingest/test_fast_lines.py holds every
format to the same runs, step rows and problems as ``BENCH_PURE_PYTHON=1`` on the real corpus and on damaged
logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.lines import Driver, LineFormat
from bench.ingest.native import ext as _native
from bench.ingest.nulls import NULL_BITS, NULL_FLOAT, null_mask
from bench.ingest.records import ParseResult
from bench.ingest.text import utf8_problem

AVAILABLE = _native is not None

#: Where a row's stamp is read (``Program.stamp``): none, ``[YYYY-MM-DD hh:mm:ss`` at the line's start, or the
#: first ``YYYY-MM-DD hh:mm:ss`` (or ``T`` between) anywhere in it.
NO_STAMP, STAMP_AT_START, STAMP_ANYWHERE = 0, 1, 2
_NUMBER_CHARS = set("0123456789,.eE+-")


class Program:
    """A line program for ``_native.fields`` (its comment in ingest/_native.c defines each op), written as the
    format's regex reads: ``Program().find("step:", word=True).ws().digits("step")...``. Each method adds one
    op and returns the program; ``columns`` names the values in order. A program may read several kinds of
    line: ``otherwise()`` starts the next kind's, tried when the ones before do not read the line (``Rows.kind``
    says which did); the kinds share the columns, NULL where a kind does not set one."""

    def __init__(self, stamp: int = NO_STAMP):
        self.kinds: list[bytes] = [b""]
        self.columns: list[str] = []
        self.ints: set[str] = set()
        self.stamp = stamp

    @property
    def ops(self) -> bytes:
        """The ops of the kind being written."""
        return self.kinds[-1]

    @ops.setter
    def ops(self, ops: bytes) -> None:
        self.kinds[-1] = ops

    def otherwise(self) -> Program:
        """Start the next kind of line."""
        self.kinds.append(b"")
        return self

    @property
    def int_mask(self) -> int:
        """The int64 columns, as ``_native.fields`` takes them (a bit per column)."""
        return sum(1 << i for i, name in enumerate(self.columns) if name in self.ints)

    def _col(self, name: str | None, *, integer: bool = False) -> bytes:
        if name is None:
            return bytes([255])
        if name not in self.columns:  # a column another kind named too is the same column
            self.columns.append(name)
        if integer:
            self.ints.add(name)
        return bytes([self.columns.index(name)])

    def _lit(self, text: str) -> bytes:
        raw = text.encode("ascii")
        assert 0 < len(raw) < 256
        return bytes([len(raw)]) + raw

    def find(self, text: str, *, word: bool = False) -> Program:
        """The literal ``text``, printed once only in the rest of the line (after no word character: ``word``)."""
        self.ops += (b"F" if word else b"f") + self._lit(text)
        return self

    def first(self, text: str) -> Program:
        """The first ``text`` in the rest with no word character before it (a regex search for ``\\btext...``
        matches there or nowhere)."""
        self.ops += b"G" + self._lit(text)
        return self

    def fields(self, labels: dict[str, str | None], bars: str) -> Program:
        """The rest of the line (to its end, or to a last ``|`` where it says ``elapsed``, as megatron.py reads
        it) as ``head: value`` fields between bars (a findall of
        ``([^|:=]*)[:=]([^|]*)``): each head, stripped, one of ``labels`` (label -> its column, None: read past),
        each value of a column a figure, no column twice; ``bars`` (an int column) counts the line's ``|``."""
        assert len(labels) < 256
        self.ops += b"M" + self._col(bars, integer=True) + bytes([len(labels)])
        for label, name in labels.items():  # two labels of one name share its column: printed both, the line is not taken
            self.ops += self._lit(label) + self._col(name)
        return self

    def count(self, text: str, times: int) -> Program:
        """The literal ``text`` exactly ``times`` times in the whole line (so that a regex search could match
        nowhere else)."""
        self.ops += b"K" + self._lit(text) + bytes([times])
        return self

    def lit(self, text: str) -> Program:
        """The literal ``text`` right here."""
        self.ops += b"L" + self._lit(text)
        return self

    def ws(self, *, least: int = 0) -> Program:
        """``\\s*`` (``least=1``: ``\\s+``)."""
        self.ops += b"W" if least else b"w"
        return self

    def digits(self, name: str | None) -> Program:
        """``(\\d+)``, an int column (None: read past)."""
        self.ops += b"D" + self._col(name, integer=True)
        return self

    def digits_or_null(self, name: str) -> Program:
        """``(\\S+)``, an int column when it is ``\\d+`` (``token.isdigit()``), else NULL."""
        self.ops += b"N" + self._col(name, integer=True)
        return self

    def word(self) -> Program:
        """``\\S+`` that does not start with a digit, not stored."""
        self.ops += b"Q"
        return self

    def last_tokens(self, n: int) -> Program:
        """On to the line's last ``n`` whitespace-separated tokens (``line.split()[-n:]``), which must begin
        here or after."""
        self.ops += b"E" + bytes([n])
        return self

    def span(self, name: str) -> Program:
        """``(\\S+)``, kept as text: ``Rows.pairs_of``."""
        self.ops += b"Z" + self._col(name + ".start", integer=True) + self._col(name + ".end", integer=True)
        return self

    def rest(self, name: str) -> Program:
        """``(.+?)\\s*$``: the rest of the line without its trailing whitespace, not empty, kept as text."""
        self.ops += b"z" + self._col(name + ".start", integer=True) + self._col(name + ".end", integer=True)
        return self

    def past(self, char: str) -> Program:
        """``[^c]*c``: on past the first ``char``."""
        self.ops += b"U" + char.encode("ascii")
        return self

    def token(self, name: str | None, *, ends: str = "") -> Program:
        """``(\\S+)``, a float (None: read past, not stored); with ``ends`` the token's last character, left out
        (``(\\S+)\\)`` before whitespace)."""
        self.ops += b"S" + self._col(name) + (ends.encode("ascii") or b"\0")
        return self

    def token_until(self, name: str, char: str) -> Program:
        """``([^c\\s]+)`` for ``c`` = ``char``, a float."""
        self.ops += b"T" + self._col(name) + char.encode("ascii")
        return self

    def token_rstrip(self, name: str, chars: str) -> Program:
        """``(\\S+)`` read as ``float(token.rstrip(chars))`` (one character)."""
        self.ops += b"R" + self._col(name) + chars.encode("ascii")
        return self

    def pair(self, key: str, name: str) -> Program:
        """``key`` (``tps:``) anywhere in the rest, as a ``(\\w+):\\s*([\\d,.eE+-]+)`` findall finds it, its
        figure read as ``float(figure.replace(",", ""))``; NULL when the key is not printed. A key that starts with a figure's character
        could be eaten by the figure before it, so none may."""
        assert key[0] not in _NUMBER_CHARS
        self.ops += b"P" + self._lit(key) + self._col(name)
        return self


class Rows:
    """One chunk's rows: ``no`` (line numbers), each column by name (numpy int64 / float64, NULL sentinels),
    ``stamp`` (float64), and each row's text on demand."""

    def __init__(self, data: bytes, program: Program, nos: bytes, spans: bytes, cols: tuple[bytes, ...],
                 stamps: bytes, kinds: bytes):
        import numpy as np

        self.data = data
        self.no = np.frombuffer(nos, np.int64)
        self.n = len(self.no)
        self.spans = np.frombuffer(spans, np.int64).reshape(-1, 2)
        self.col = {name: np.frombuffer(c, np.int64 if name in program.ints else np.float64)
                    for name, c in zip(program.columns, cols, strict=True)}
        self.stamp = np.frombuffer(stamps, np.float64)
        self.kind = np.frombuffer(kinds, np.uint8)

    def text(self, i: int) -> str:
        start, end = self.spans[i].tolist()
        return self.data[start:end].decode("ascii")

    def pairs_of(self, first: str, second: str, rows: Any) -> list[tuple[str, str]]:
        """(``first``'s text, ``second``'s text) of each of ``rows``, as ``span`` or ``rest`` kept them (``second``
        after ``first`` in the line), one tuple for the rows whose bytes from one's start to the other's end are
        the same: lines that repeat their texts (nccl-tests' rank lines, a host and a device each) decode each once."""
        col, data = self.col, self.data
        seen: dict[bytes, tuple[str, str]] = {}
        out = []
        for a, b, c, d in zip(*(col[f"{name}.{end}"][rows].tolist() for name in (first, second) for end in ("start", "end")),
                              strict=True):
            key = data[a:d]
            if (pair := seen.get(key)) is None:
                pair = seen[key] = (data[a:b].decode("ascii"), data[c:d].decode("ascii"))
            out.append(pair)
        return out

    def holds(self, needle: bytes, lo: int, hi: int) -> bool:
        """Whether the lines of rows lo..hi (consecutive lines) hold ``needle``."""
        return self.data.find(needle, int(self.spans[lo, 0]), int(self.spans[hi - 1, 1])) >= 0

    def timestamps(self, lo: int, hi: int, stamps: list[float]) -> Any:
        """Each of rows lo..hi's latest stamp (its own, or the last before it: ``stamps[-1]``, else NULL), as a
        parser that appends each line's stamp to ``stamps`` gives it; ``stamps`` is extended."""
        import numpy as np

        own = self.stamp[lo:hi]
        stamped = ~null_mask(own)
        latest = np.maximum.accumulate(np.where(stamped, np.arange(hi - lo), -1))
        out = np.full(hi - lo, stamps[-1] if stamps else NULL_FLOAT)
        out[latest >= 0] = own[latest[latest >= 0]]
        stamps.extend(own[stamped].tolist())
        return out

    def null(self, name: str, lo: int, hi: int) -> Any:
        """Where column ``name`` is NULL in rows lo..hi (a bool array)."""
        return null_mask(self.col[name][lo:hi])


class FastRows(LineFormat[Any]):
    """What a format with a C path defines (besides ``fast_line``)."""

    PROGRAM: Program

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """Apply rows ``lo``.. (at most ``hi``) of the open run (``self.run`` is never None here) as their fast
        lines would; how many (0: none)."""
        raise NotImplementedError

    def flush(self) -> None:
        """What ``fast_rows`` held back of its rows (step rows it adds as one block) goes out."""

    def chunk_done(self) -> None:
        """Called after each chunk: ``flush``, and let go of what was kept of the chunk's rows."""
        self.flush()


def parse_chunks(fmt: type[FastRows], chunks: Iterable[bytes | memoryview], *, source: str | None = None,
                 result: ParseResult | None = None, check_utf8: bool = False) -> ParseResult:
    """Parse a line format's log given as byte chunks that each end at a line end (the last may not): the
    registry's chunk parser of the formats it names in LINE_SCANNED (``source`` is not used). Invalid UTF-8 is
    replaced in the lines that hold it; with ``check_utf8`` the first is reported as an ``encoding`` problem."""
    import numpy as np

    if _native is None:
        raise RuntimeError("bench.ingest._native is not built")
    result = result if result is not None else ParseResult()
    d = Driver(fmt, result)
    p = d.p
    assert isinstance(p, FastRows)
    program = fmt.PROGRAM
    before = 0
    for chunk in chunks:
        data = bytes(chunk)
        n, nos, spans, cols, stamps, kinds, others, ascii_only = _native.fields(
            data, before, NULL_BITS, tuple(program.kinds), len(program.columns), program.int_mask, program.stamp)
        if check_utf8 and not ascii_only and (problem := utf8_problem(data, before)) is not None:
            result.problems.append(problem)
            check_utf8 = False
        before += n
        rows = Rows(data, program, nos, spans, cols, stamps, kinds)
        i = 0
        for (no, text), j in zip(others, np.searchsorted(rows.no, [no for no, _ in others]).tolist(), strict=True):
            if j > i:
                _apply(d, p, rows, i, j)
                i = j
            d.feed(no, text)
        if i < rows.n:
            _apply(d, p, rows, i, rows.n)
        p.chunk_done()
    d.end()
    result.lines_read = before
    return result


def _apply(d: Driver, p: FastRows, rows: Rows, lo: int, hi: int) -> None:
    """Rows lo..hi (consecutive lines): in stretches the format applies at once, each other row as text."""
    while lo < hi:
        k = p.fast_rows(rows, lo, hi) if p.run is not None else 0
        if k == 0:
            d.feed(int(rows.no[lo]), rows.text(lo))
            k = 1
        lo += k
