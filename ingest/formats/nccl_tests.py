"""nccl-tests (and rccl-tests) output: ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``sendrecv_perf``, ``broadcast_perf`` ...: one run per collective test, one step row per
message size.

Lines read, behind an MPI ``--tag-output`` or Slurm ``--label`` prefix (``[1,0]<stdout>:``, `` 0: ``):

- ``# nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20 ...``;
- ``# Collective test starting: all_reduce_perf`` / ``concluded``, or the command line naming the binary;
- the rank lines under ``# Using devices``: ``#  Rank  0 Group  0 Pid 204199 on  nid005471 device  0
  [0009:01:00] NVIDIA GH200 120GB`` (the 2019 form has no ``Group``): ranks, hosts and the device model;
- the table: ``size count type redop root`` then out-of-place ``time algbw busbw #wrong`` and in-place the
  same. ``redop`` is blank for alltoall and ``root`` absent before 2.13, so a row is read from its right end;
  before 2.13 the ``#wrong`` columns were ``error`` (the largest error, a float), read as such;
- ``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : 19.7866``; ``NCCL WARN`` lines and the tests'
  ``Test NCCL failure`` / ``Test CUDA failure`` lines.

How the numbers are defined: nccl-tests' bus bandwidth (busbw) is algbw (bytes over time) times the
collective's factor (2(n-1)/n for all_reduce), so that it is comparable with the link's rate. The run's
``throughput`` is the out-of-place busbw at the largest message size the table reached, in ``busbw GB/s``;
that size is a tag (``message_bytes``): two runs are compared at the same size. The tool's own ``# Avg bus
bandwidth`` is the mean over every size, small ones included (so it depends on the size range), and is kept
in details (``avg_busbw``) with the peak busbw and its size.

Status: a row with ``#wrong`` > 0 or ``Out of bounds values`` other than 0 is ``failed`` (the collective gave
wrong data: its bandwidth is not a result); an error line ends it ``failed`` (``oom`` for out of memory); a
table that stops before its ``maxBytes`` with no closing lines is ``truncated``. An ``Avg bus bandwidth`` of 0
or a busbw that will not read is an ``invalid_value`` problem, never a stored number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.line_scan import FastRows, Rows
from bench.ingest.formats.lines import Line, drive
from bench.ingest.formats.nccl_chunk import Chunk, program, whole_runs
from bench.ingest.formats.nccl_run import NAME as NAME  # (the format's name, as the registry reads it)
from bench.ingest.formats.nccl_run import OOM, State, Where, build_run, run_of
from bench.ingest.map_columns import MapBlock
from bench.ingest.records import ParseResult
from bench.ingest.text import contains, strip_ansi

DESCRIPTION = "nccl-tests / rccl-tests (all_reduce_perf ...): bus bandwidth per message size, ranks and devices"

_HEADER = re.compile(r"^#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)(.*)")
_ITERS = re.compile(r"warmup iters: (\d+) iters: (\d+)")
_TEST = re.compile(r"Collective test (starting|concluded): (\w+)")
_BINARY = re.compile(r"\b(\w+_perf)(?:_mpi)?\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_FAILURE = re.compile(r"Test (?:NCCL|CUDA|HIP|RCCL) failure|NCCL error|ncclInternalError|ncclSystemError")
#: The six figures of a table row, out of place then in place: as the log names them, and as step metrics.
_FIELDS = ("time (us)", "algbw", "busbw", "in-place time (us)", "in-place algbw", "in-place busbw")
_METRICS = ("time_us", "algbw_gbs", "busbw_gbs", "in_place_time_us", "in_place_algbw_gbs", "in_place_busbw_gbs")
_COLUMNS = ("time", "algbw", "busbw", "in_place_time", "in_place_algbw", "in_place_busbw")  # the C path's


def sniff(head: str) -> bool:
    """The table's header (``busbw`` beside ``out-of-place``) or the tests' closing line."""
    return (contains(head, "busbw") and contains(head, "out-of-place")) or contains(head, "# Avg bus bandwidth")


class _Parser(FastRows):
    RANKS = True
    MUST_READ = ("Avg bus bandwidth",)
    BAD_LINE = "an Avg bus bandwidth line whose value cannot be read"
    STATE = State
    PROGRAM = program()

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.collective: str | None = None  # named before its run opens (the command line)
        self.chunk: Chunk | None = None  # the C path's rows of the chunk being read, by kind
        #: Table rows the C path read, not yet step rows: (run index, the first's place in the chunk's table rows,
        #: how many, the first's step).
        self.pending: list[tuple[int, int, int, int]] = []
        self.pending_rows: Chunk | None = None
        self.where_seen: dict[Any, Where] = {}  # whole_runs' rank listings, each once

    def starts_run(self, run: State, line: Line) -> bool:
        """A new header, or a test that starts after the open one concluded or filled its table."""
        msg = line.msg
        return (msg.startswith("# nThread") or "Collective test starting" in msg) and bool(
            run.sizes or run.concluded)

    def read(self, line: Line) -> bool:
        msg = strip_ansi(line.msg).rstrip()
        if msg.startswith("#"):
            return self._comment(line, msg)
        if (row := self._row(line, msg)) is not None:
            return row
        if (b := _BINARY.search(msg)) is not None and self.run is None:
            self.collective = b.group(1)
        st = self.run
        if st is not None and "NCCL WARN" in msg:
            st.warnings += 1
        if st is not None and (_FAILURE.search(msg) or (OOM.search(msg) and "NCCL" in msg)):
            st.error = st.error or msg.strip()
        return True

    def _comment(self, line: Line, msg: str) -> bool:
        if (h := _HEADER.match(msg)) is not None:
            st = self.run  # a header after "Collective test starting" belongs to that test
            if st is None or st.sizes or st.header:
                st = self.open(line.no)
            st.header = {"threads": int(h.group(1)), "gpus_per_thread": int(h.group(2)), "min_bytes": int(h.group(3)),
                         "max_bytes": int(h.group(4))}
            if (i := _ITERS.search(h.group(5))) is not None:
                st.header.update(warmup_iters=int(i.group(1)), iters=int(i.group(2)))
            st.collective = st.collective or self.collective
            return True
        st = self.current(line.no)
        st.last_line = line.no
        if (t := _TEST.search(msg)) is not None:
            st.collective = t.group(2)
            st.concluded = st.concluded or t.group(1) == "concluded"
        elif (r := _RANK.match(msg)) is not None:
            st.ranks[int(r.group(1))] = (r.group(2), r.group(3))
        elif (a := _AVG.match(msg)) is not None:
            value = self.result.number(a.group(1), "Avg bus bandwidth", line.no)
            if value is None:
                return True
            if not (math.isfinite(value) and value > 0):
                self.result.problem("invalid_value", f"Avg bus bandwidth {a.group(1)} is not a rate > 0; left out",
                                    line.no, line.raw)
            else:
                st.avg = value
            st.concluded = True
        elif (b := _BOUNDS.match(msg)) is not None:
            st.out_of_bounds = int(b.group(1))
        return True

    def fast_line(self, no: int, raw: str) -> bool:
        """A table row of the open run whose numbers all read, without a prefix (``_row`` on the general path)."""
        st = self.run
        tokens = raw.split()
        if st is None or len(tokens) < 11 or not (tokens[0].isdigit() and tokens[1].isdigit()) or \
                tokens[2][0].isdigit() or "\x1b" in raw or "Collective test starting" in raw:
            return False  # (the last may start a run: starts_run)
        try:  # the out-of-place then in-place time, algbw and busbw
            t, a, b, it, ia, ib = map(float, (*tokens[-8:-5], *tokens[-4:-1]))
        except ValueError:
            return False  # the general path names the field
        self._add_row(st, no, None, tokens, [t, a, b, it, ia, ib])
        return True

    def _row(self, line: Line, msg: str) -> bool | None:
        """A table row (True), or None when the line is not one."""
        tokens = msg.split()
        if len(tokens) < 11 or not (tokens[0].isdigit() and tokens[1].isdigit()) or tokens[2][0].isdigit():
            return None
        number = self.result.number
        values = [number(t, name, line.no) for t, name in zip((*tokens[-8:-5], *tokens[-4:-1]), _FIELDS, strict=True)]
        self._add_row(self.current(line.no), line.no, line.rank, tokens, values)
        return True

    def _add_row(self, st: State, no: int, rank: int | None, tokens: list[str], values: list[float | None]) -> None:
        """The row of ``tokens`` (a table line's) with its six ``values`` read (None where one would not):
        the run's size row, its wrong values, and the step row."""
        st.last_line = no
        st.dtype = st.dtype or tokens[2]
        for wrong in (tokens[-5], tokens[-1]):  # the out-of-place and in-place #wrong
            if wrong.isdigit():
                st.wrong += int(wrong)
        size = int(tokens[0])
        st.sizes.append(size)
        st.busbw.append(values[2])
        st.holes = st.holes or values[2] is None
        st.in_place_busbw.append(values[5])
        metrics = {k: v for k, v in zip(_METRICS, values, strict=True) if v is not None}
        metrics["size_bytes"] = float(size)
        self.step(len(st.sizes) - 1, line_no=no, rank=rank, metrics=metrics)

    def step(self, step: int | None, **values: Any) -> None:
        self.flush()  # the C path's rows before it come first
        super().step(step, **values)

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """Rows lo.. as ``read`` would take their lines, up to an Avg bus bandwidth that is not a rate > 0 (the
        general path names it): a header row closes the open run and opens the next where ``starts_run`` and
        ``_comment`` would, so that a chunk's runs are read here one after another; those between its second
        header and its last, each whole, at once (``whole_runs``)."""
        c = self.chunk if self.chunk is not None and self.chunk.rows is rows else self._read_chunk(rows)
        avg = c.avg.between(lo, hi)
        if avg.stop > avg.start and (bad := next((i for i in avg if not c.avg_good[i]), None)) is not None:
            hi = c.avg.at[bad]
            if hi == lo:
                return 0
        heads, start = c.header.between(lo, hi), lo
        if len(heads) >= 3 and c.finite:
            start = self._header(c, heads[0], start)
            if (at := c.header.at[heads[1]]) > start:
                self._run_rows(c, start, at)
            self.close()
            self._whole_runs(c, heads[1], heads[-1])
            heads, start = heads[-1:], c.header.at[heads[-1]]
        for k in heads:
            start = self._header(c, k, start)
        if hi > start:
            self._run_rows(c, start, hi)
        return hi - lo

    def _header(self, c: Chunk, k: int, start: int) -> int:
        """Rows start.. up to header ``k`` into the open run, then the run the header opens (or names, where
        no row came after a test's start): the row after the header."""
        if (at := c.header.at[k]) > start:
            self._run_rows(c, start, at)
        st = self.run
        if st is None or st.sizes or st.concluded or st.header:  # (starts_run's, then _comment's test)
            st = self.open(c.nos[at])
        st.header = c.header_of(k)
        st.collective = st.collective or self.collective
        return at + 1

    def _whole_runs(self, c: Chunk, k0: int, k1: int) -> None:
        """The runs opened at headers k0..k1 - 1, each closed by the next, none open before or after."""
        runs = self.result.runs
        if self.pending_rows is not c:
            self.flush()
            self.pending_rows = c
        for closing, table, where, details, first, n in whole_runs(c, k0, k1, self.collective, self.where_seen):
            if n:
                self.pending.append((len(runs), first, n, 0))
            runs.append(build_run(len(runs), closing, table, where, details))

    def _run_rows(self, c: Chunk, lo: int, hi: int) -> None:
        """Rows lo..hi of the chunk, none of them a header, into the open run."""
        st = self.run
        assert st is not None
        st.last_line = c.nos[hi - 1]
        ranks = c.rank.between(lo, hi)
        if ranks.stop > ranks.start:
            st.ranks.update(zip(c.rank_of[ranks.start:ranks.stop], c.where[ranks.start:ranks.stop], strict=True))
        table = c.table.between(lo, hi)
        if (n := table.stop - table.start) > 0:
            if st.dtype is None:
                st.dtype = c.dtype(table.start)
            st.wrong += int(c.wrong[table.start:table.stop].sum())
            if self.pending_rows is not c:
                self.flush()
                self.pending_rows = c
            self.pending.append((self.index, table.start, n, len(st.sizes)))
            st.sizes.extend(c.size[table.start:table.stop].tolist())
            st.busbw.extend(c.busbw[table.start:table.stop].tolist())
            st.in_place_busbw.extend(c.in_place_busbw[table.start:table.stop].tolist())
        bounds = c.bounds.between(lo, hi)
        if bounds.stop > bounds.start:
            st.out_of_bounds = c.bounds_value[bounds.stop - 1]
        avg = c.avg.between(lo, hi)
        if avg.stop > avg.start:
            st.avg, st.concluded = c.avg_value[avg.stop - 1], True

    def _read_chunk(self, rows: Rows) -> Chunk:
        self.chunk = Chunk(rows)
        return self.chunk

    def chunk_done(self) -> None:
        self.flush()
        self.chunk = None

    def flush(self) -> None:
        """The pending table rows' step rows, as one block."""
        import numpy as np

        if not self.pending:
            return
        c, pending = self.pending_rows, self.pending
        assert c is not None
        self.pending, self.pending_rows = [], None
        starts = np.array([start for _, start, _, _ in pending])
        counts = np.array([n for _, _, n, _ in pending])
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # 0.. within each stretch
        at = c.table.index[np.repeat(starts, counts) + within]
        step = np.repeat([first for _, _, _, first in pending], counts) + within
        col = c.rows.col
        metrics = {name: col[column][at] for name, column in zip(_METRICS, _COLUMNS, strict=True)}
        metrics["size_bytes"] = col["size"][at].astype(np.float64)
        self.result.steps.add_block(np.repeat([run for run, _, _, _ in pending], counts), len(at), {
            "step": step, "line_no": c.rows.no[at], "metrics": MapBlock(len(at), metrics)})

    def emit(self, st: State) -> None:
        self.result.runs.append(run_of(self.index, st))


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse nccl-tests output (see the module docstring)."""
    return drive(_Parser, lines, result)
