"""The fast path of the tf_cnn parser: the C line scanner (ingest/_native.c) and step blocks.

Same input, same output as ``tf_cnn.parse_lines``, for bytes instead of decoded lines:

- the scanner takes the step lines it can read exactly (their numbers go straight to columns), the
  stamped TF stderr lines that only move the stamp window (it returns the first and last of each
  consecutive stretch) and the GPU-name lines the reader no longer needs; every other line comes back as
  text, in file order, and goes through ``Reader.feed``;
- step rows are handed to the reader in file order, interleaved with those lines by line number. A
  stretch of one rank's steps that neither restarts its counter nor opens a run is applied at once by
  ``_native.advance`` (the interval rates and sums of ``Series.advance``, in the same float operations
  and the same order), its rows added as a block of the scanner's columns when it is long
  (``_add_vector``), else copied to the row buffer (``_add_short``); a row that opens or restarts a run
  goes through ``Reader.add_step_values``.

tests/ingest/test_tf_cnn_scan.py checks that both paths give identical runs, steps and problems.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Any, cast

from bench.ingest.column_buffers import INT_NULL, NULL_BITS
from bench.ingest.formats.tf_cnn import LABELS, RARE_MARKERS, Reader
from bench.ingest.native import ext as _native
from bench.ingest.records import ParseResult
from bench.ingest.text import utf8_problem

AVAILABLE = _native is not None  # without a C compiler the pure-Python parser does everything
VECTOR_MIN = 32  # below this many rows a stretch is found without numpy and copied (a block per few rows would cost more)
_NULL_INT64 = NULL_BITS - (1 << 64) if NULL_BITS >= 1 << 63 else NULL_BITS  # its bits read as an int64
_LABEL_BYTES = tuple(k.encode() for k in LABELS)
_RARE_BYTES = tuple(k.encode() for k in RARE_MARKERS)
_COLS = ("line_no", "rank", "step", "images_per_sec", "images_per_sec_stderr", "images_per_sec_jitter",
         "loss", "top1_accuracy", "top5_accuracy", "timestamp")


def parse_chunks(chunks: Iterable[bytes | memoryview], *, source: str, result: ParseResult | None = None,
                 check_utf8: bool = False) -> ParseResult:
    """Parse a tf_cnn log given as byte chunks that each end at a line end (the last may not).

    Invalid UTF-8 in a line the scanner hands back is replaced, as the decoders of parse.py do; with
    ``check_utf8`` the first invalid byte is also reported as an ``encoding`` problem (the scanner flags
    the chunks that are not pure ASCII, and only those are decoded).
    """
    if _native is None:
        raise RuntimeError("bench.ingest._native is not built")
    result = result if result is not None else ParseResult()
    r = Reader(result)
    before = 0
    for chunk in chunks:
        n, cols, others, ascii_only = _native.scan(chunk, before, NULL_BITS, _LABEL_BYTES, _RARE_BYTES)
        if check_utf8 and not ascii_only and (p := utf8_problem(chunk, before)) is not None:
            result.problems.append(p)
            check_utf8 = False
        before += n
        _merge(r, _Block(cols), others)
    r.finish()
    result.lines_read = before
    return result


class _Block:
    """The step rows of one scanned chunk: int64 / float64 memoryviews (numpy arrays on demand)."""

    def __init__(self, cols: tuple[bytes, ...]):
        self.raw = dict(zip(_COLS, cols, strict=True))
        self.n = len(cols[0]) // 8
        self.lines = memoryview(cols[0]).cast("q")
        self._np: dict[str, Any] | None = None

    def np(self) -> dict[str, Any]:
        if self._np is None:
            import numpy as np

            ints = ("line_no", "rank", "step")
            self._np = {k: np.frombuffer(v, dtype=np.int64 if k in ints else np.float64) for k, v in self.raw.items()}
        return self._np

    def ints(self, name: str, lo: int, hi: int) -> list[int]:
        """Rows lo..hi of a column as Python ints (a float column's bits as int64)."""
        return memoryview(self.raw[name]).cast("q")[lo:hi].tolist()

    def floats(self, name: str, lo: int, hi: int) -> list[float]:
        values: Any = memoryview(self.raw[name]).cast("d")[lo:hi].tolist()  # typeshed says list[int]
        return cast(list[float], values)

    def rows(self, lo: int, hi: int) -> Iterator[tuple[Any, ...]]:
        """(line_no, rank, step, mean, stderr, jitter, loss, top1, top5, ts) with None for NULL."""
        cols: list[list[Any]] = []
        for k, v in self.raw.items():
            ints = memoryview(v).cast("q")[lo:hi].tolist()
            if k in ("line_no", "step"):
                cols.append(ints)
            elif k == "rank":
                cols.append([None if x == INT_NULL else x for x in ints])
            else:
                floats = memoryview(v).cast("d")[lo:hi].tolist()
                cols.append([None if b == _NULL_INT64 else f for b, f in zip(ints, floats, strict=True)])
        return zip(*cols, strict=True)


def _merge(r: Reader, b: _Block, others: list[tuple[int, str]]) -> None:
    """Feed the chunk's lines to the reader in file order: step stretches between the other lines."""
    i = 0
    for no, text in others:
        j = bisect.bisect_left(b.lines, no, i)
        if j > i:
            _add_steps(r, b, i, j)
            i = j
        r.feed(no, text)
    if i < b.n:
        _add_steps(r, b, i, b.n)


def _add_steps(r: Reader, b: _Block, lo: int, hi: int) -> None:
    """Rows lo..hi (no other line between them), in stretches of one rank of the open run with a rising
    step counter (found with numpy when there are many rows, else in one Python pass), and a row that opens
    or restarts a run through ``Reader.add_step_values``."""
    while lo < hi:
        k = _stretch(r, b, lo, hi) if hi - lo >= VECTOR_MIN else _short_stretch(r, b, lo, hi)
        if k >= VECTOR_MIN:
            _add_vector(r, b, lo, lo + k)
        elif k:
            _add_short(r, b, lo, lo + k)
        else:
            k = 1
            for row in b.rows(lo, lo + 1):
                r.add_step_values(*row)
        lo += k


def _short_stretch(r: Reader, b: _Block, lo: int, hi: int) -> int:
    """``_stretch`` for fewer than ``VECTOR_MIN`` rows, without numpy."""
    cur = r.cur
    if cur is None:
        return 0
    ranks, steps = b.ints("rank", lo, hi), b.ints("step", lo, hi)
    rank0 = ranks[0]
    s = cur.series.get(None if rank0 == INT_NULL else rank0)
    if s is not None and steps[0] <= s.last_step:
        return 0
    n = 1
    while n < len(steps) and ranks[n] == rank0 and steps[n] > steps[n - 1]:
        n += 1
    return n


def _add_short(r: Reader, b: _Block, lo: int, hi: int) -> None:
    """Rows lo..hi of one rank in the open run, as ``hi - lo`` calls of ``add_step_values`` would: the
    series advanced (``_advance``), the columns appended to the row buffer as raw bytes."""
    index, cols = _advance(r, b, lo, hi)
    r.result.steps.add_raw(hi - lo, cols, index)


def _add_vector(r: Reader, b: _Block, lo: int, hi: int) -> None:
    """``_add_short`` for a long stretch: the columns are added as one block of views into the scanner's
    columns (not copied)."""
    index, cols = _advance(r, b, lo, hi)
    r.result.steps.add_block(index, hi - lo, cols)


def _advance(r: Reader, b: _Block, lo: int, hi: int) -> tuple[int, dict[str, Any]]:
    """Advance the rank's series over rows lo..hi in C (``_native.advance``: the float operations of
    ``Series.advance``, in the same order); the run index and the rows' columns, interval rates included."""
    st = r.cur
    assert st is not None and _native is not None
    rank = b.ints("rank", lo, lo + 1)[0]
    s = st.mark(None if rank == INT_NULL else rank, b.lines[lo])
    st.last_line = st.step_line = b.lines[hi - 1]
    raw = b.raw
    (rates, s.last_step, s.last_t, s.interval_sum, s.interval_n, nan_losses, first_ts, last_ts) = _native.advance(
        raw["step"], raw["images_per_sec"], raw["loss"], raw["timestamp"], lo, hi, s.last_step, s.last_t,
        s.interval_sum, s.interval_n, NULL_BITS)
    s.stderr = _nullable(b, "images_per_sec_stderr", hi - 1)
    s.jitter = _nullable(b, "images_per_sec_jitter", hi - 1)
    st.nan_losses += nan_losses
    if last_ts is not None:
        if s.first_ts is None:
            s.first_ts = first_ts
        s.last_ts = last_ts
    cols = {k: memoryview(v)[8 * lo:8 * hi] for k, v in raw.items()}
    return st.index, {**cols, "interval_images_per_sec": rates}


def _nullable(b: _Block, name: str, i: int) -> float | None:
    return None if b.ints(name, i, i + 1)[0] == _NULL_INT64 else b.floats(name, i, i + 1)[0]


def _stretch(r: Reader, b: _Block, lo: int, hi: int) -> int:
    """How many rows from ``lo`` belong to one rank of the open run with a rising step counter (0 if the
    first row would open or restart a run). Looks at ``VECTOR_MIN`` rows first, so interleaved ranks
    cost O(VECTOR_MIN) per row, not O(rows left)."""
    import numpy as np

    cur = r.cur
    if cur is None:
        return 0
    a = b.np()
    rank0 = int(a["rank"][lo])
    s = cur.series.get(None if rank0 == INT_NULL else rank0)
    if s is not None and a["step"][lo] <= s.last_step:
        return 0
    n = 0
    for end in (min(hi, lo + VECTOR_MIN), hi):
        ranks, steps = a["rank"][lo:end], a["step"][lo:end]
        other = np.flatnonzero(ranks != rank0)
        n = int(other[0]) if len(other) else end - lo
        back = np.flatnonzero(np.diff(steps[:n]) <= 0)
        n = int(back[0]) + 1 if len(back) else n
        if n < end - lo:
            break
    return n
