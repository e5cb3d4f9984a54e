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
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from bench.ingest.formats.line_scan import FastRows, Program, Rows
from bench.ingest.formats.lines import Line, drive
from bench.ingest.map_columns import MapBlock
from bench.ingest.nulls import INT_NULL
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, strip_ansi

NAME = "nccl_tests"
DESCRIPTION = "nccl-tests / rccl-tests (all_reduce_perf ...): bus bandwidth per message size, ranks and devices"

_HEADER = re.compile(r"^#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)(.*)")
_ITERS = re.compile(r"warmup iters: (\d+) iters: (\d+)")
_TEST = re.compile(r"Collective test (starting|concluded): (\w+)")
_BINARY = re.compile(r"\b(\w+_perf)(?:_mpi)?\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_FAILURE = re.compile(r"Test (?:NCCL|CUDA|HIP|RCCL) failure|NCCL error|ncclInternalError|ncclSystemError")
_OOM = re.compile(r"out of memory", re.IGNORECASE)
#: The six figures of a table row, out of place then in place: as the log names them, and as step metrics.
_FIELDS = ("time (us)", "algbw", "busbw", "in-place time (us)", "in-place algbw", "in-place busbw")
_METRICS = ("time_us", "algbw_gbs", "busbw_gbs", "in_place_time_us", "in_place_algbw_gbs", "in_place_busbw_gbs")
_COLUMNS = ("time", "algbw", "busbw", "in_place_time", "in_place_algbw", "in_place_busbw")  # the C path's
_DTYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8", "uint8": "uint8",
           "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "fp8_e4m3": "fp8",
           "fp8_e5m2": "fp8"}


def sniff(head: str) -> bool:
    """The table's header (``busbw`` beside ``out-of-place``) or the tests' closing line."""
    return (contains(head, "busbw") and contains(head, "out-of-place")) or contains(head, "# Avg bus bandwidth")


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    collective: str | None = None
    dtype: str | None = None
    header: dict[str, int] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, device)
    # the size table's rows: each one's size and its out-of-place and in-place busbw (None where it would not read)
    sizes: list[int] = field(default_factory=list)
    busbw: list[float | None] = field(default_factory=list)
    in_place_busbw: list[float | None] = field(default_factory=list)
    holes: bool = False  # a None in busbw (a figure the general path could not read; the C path reads all)
    wrong: int = 0
    out_of_bounds: int = 0
    avg: float | None = None
    concluded: bool = False
    warnings: int = 0
    error: str | None = None


class _Kind:
    """The rows of one kind of a chunk's rows: ``index`` (numpy, and ``at``, a list) their places in it."""

    def __init__(self, index: Any):
        self.index, self.at = index, index.tolist()

    def between(self, lo: int, hi: int) -> range:
        """Those of rows lo..hi, as places in ``at``."""
        return range(bisect_left(self.at, lo), bisect_left(self.at, hi))


class _Chunk:
    """A chunk's rows (line_scan.Rows) read once by kind, as lists, so that each run takes its slices."""

    def __init__(self, rows: Rows):
        import numpy as np

        self.rows, col, kind = rows, rows.col, rows.kind
        self.nos = rows.no.tolist()
        self.table = t = _Kind(np.flatnonzero(kind == _ROW_LINE))
        self.size = col["size"][t.index].tolist()
        self.busbw, self.in_place_busbw = col["busbw"][t.index].tolist(), col["in_place_busbw"][t.index].tolist()
        wrong = np.stack([col["wrong"][t.index], col["in_place_wrong"][t.index]])
        self.wrong = np.where(wrong == INT_NULL, 0, wrong).sum(axis=0).tolist()  # two values < 10^18 each
        self.rank = r = _Kind(np.flatnonzero((kind == _RANK_LINE) | (kind == _RANK_LINE_2019)))
        self.rank_of = col["rank"][r.index].tolist()
        self.where = rows.pairs_of("host", "device", r.index)
        self.bounds = b = _Kind(np.flatnonzero(kind == _BOUNDS_LINE))
        self.bounds_value = col["out_of_bounds"][b.index].tolist()
        self.avg = a = _Kind(np.flatnonzero(kind == _AVG_LINE))
        avg = col["avg"][a.index]
        self.avg_value = avg.tolist()
        with np.errstate(invalid="ignore"):
            self.avg_good = (np.isfinite(avg) & (avg > 0)).tolist()
        self.header = h = _Kind(np.flatnonzero((kind == _HEADER_LINE) | (kind == _HEADER_LINE_NO_ITERS)))
        self.header_values = list(zip(*(col[name][h.index].tolist() for name in _HEADER_COLUMNS), strict=True))


#: The kinds of line the C path reads (``PROGRAM``), in its order.
_ROW_LINE, _RANK_LINE, _RANK_LINE_2019, _BOUNDS_LINE, _AVG_LINE, _HEADER_LINE, _HEADER_LINE_NO_ITERS, _PLAIN_COMMENT = (
    range(8))
#: A header line's figures, as the C path's columns and as ``_State.header`` names them.
_HEADER_COLUMNS = ("threads", "gpus_per_thread", "min_bytes", "max_bytes", "warmup_iters", "iters")
_TEST_WORDS = "Collective test "  # what _TEST searches for: a line without it is no test line


def _program() -> Program:
    """The lines the C path reads, each exactly as the general path's regex does: a table row with its six
    figures (the last eight tokens: ``_row``), a rank line (``_RANK``, with and without ``Group``), the out of
    bounds and Avg bus bandwidth lines, a header line that starts with ``# nThread`` (as ``starts_run`` reads
    it), and a comment line that holds none of what ``_comment`` looks for."""
    program = Program().ws().digits("size").ws(least=1).digits(None).ws(least=1).word().last_tokens(8)
    for prefix in ("", "in_place_"):
        program.token(f"{prefix}time").ws(least=1).token(f"{prefix}algbw").ws(least=1).token(f"{prefix}busbw")
        program.ws(least=1).digits_or_null(f"{prefix}wrong").ws()
    program.count("Collective test starting", 0)  # (such a line would start a run: starts_run)
    for group in (True, False):
        program.otherwise().lit("#").ws(least=1).lit("Rank").ws(least=1).digits("rank")
        if group:
            program.ws(least=1).lit("Group").ws(least=1).digits(None)
        (program.ws(least=1).lit("Pid").ws(least=1).digits(None).ws(least=1).lit("on").ws(least=1).span("host")
         .ws(least=1).lit("device").ws(least=1).digits(None).ws(least=1).lit("[").past("]").ws(least=1)
         .rest("device").count(_TEST_WORDS, 0))
    (program.otherwise().lit("#").ws().lit("Out of bounds values").ws().lit(":").ws().digits("out_of_bounds")
     .count(_TEST_WORDS, 0))
    program.otherwise().lit("#").ws().lit("Avg bus bandwidth").ws().lit(":").ws().token("avg").count(_TEST_WORDS, 0)
    for iters in (True, False):  # a header as it starts a run (starts_run), with or without its iterations
        program.otherwise().lit("# nThread ").digits("threads").lit(" nGpus ").digits("gpus_per_thread")
        program.lit(" minBytes ").digits("min_bytes").lit(" maxBytes ").digits("max_bytes")
        if iters:  # _ITERS's search in the rest: its words there once, or the line is left to it
            program.find("warmup iters: ").digits("warmup_iters").lit(" iters: ").digits("iters")
        else:
            program.count("warmup iters: ", 0)
        program.count(_TEST_WORDS, 0)
    program.otherwise().lit("#")
    for word in ("nThread", _TEST_WORDS, "Rank", "Avg bus bandwidth", "Out of bounds values"):
        program.count(word, 0)
    return program


class _Parser(FastRows):
    RANKS = True
    MUST_READ = ("Avg bus bandwidth",)
    BAD_LINE = "an Avg bus bandwidth line whose value cannot be read"
    STATE = _State
    PROGRAM = _program()

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.collective: str | None = None  # named before its run opens (the command line)
        self.chunk: _Chunk | None = None  # the C path's rows of the chunk being read, by kind
        #: Table rows the C path read, not yet step rows: (run index, the first's place in the chunk's table rows,
        #: how many, the first's step).
        self.pending: list[tuple[int, int, int, int]] = []
        self.pending_rows: _Chunk | None = None

    def starts_run(self, run: _State, line: Line) -> bool:
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
        if st is not None and (_FAILURE.search(msg) or (_OOM.search(msg) and "NCCL" in msg)):
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

    def _add_row(self, st: _State, no: int, rank: int | None, tokens: list[str], values: list[float | None]) -> None:
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
        ``_comment`` would, so that a chunk's runs are read here one after another."""
        c = self.chunk if self.chunk is not None and self.chunk.rows is rows else self._read_chunk(rows)
        avg = c.avg.between(lo, hi)
        if avg.stop > avg.start and (bad := next((i for i in avg if not c.avg_good[i]), None)) is not None:
            hi = c.avg.at[bad]
            if hi == lo:
                return 0
        start = lo
        for k in c.header.between(lo, hi):
            if (at := c.header.at[k]) > start:
                self._run_rows(c, start, at)
            st = self.run
            assert st is not None
            if st.sizes or st.concluded or st.header:  # (starts_run's, then _comment's test)
                st = self.open(c.nos[at])
            *figures, warmup, iters = c.header_values[k]
            st.header = dict(zip(_HEADER_COLUMNS[:4], figures, strict=True))
            if iters != INT_NULL:
                st.header.update(warmup_iters=warmup, iters=iters)
            st.collective = st.collective or self.collective
            start = at + 1
        if hi > start:
            self._run_rows(c, start, hi)
        return hi - lo

    def _run_rows(self, c: _Chunk, lo: int, hi: int) -> None:
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
                st.dtype = c.rows.text(c.table.at[table.start]).split()[2]
            st.wrong += sum(c.wrong[table.start:table.stop])
            if self.pending_rows is not c:
                self.flush()
                self.pending_rows = c
            self.pending.append((self.index, table.start, n, len(st.sizes)))
            st.sizes.extend(c.size[table.start:table.stop])
            st.busbw.extend(c.busbw[table.start:table.stop])
            st.in_place_busbw.extend(c.in_place_busbw[table.start:table.stop])
        bounds = c.bounds.between(lo, hi)
        if bounds.stop > bounds.start:
            st.out_of_bounds = c.bounds_value[bounds.stop - 1]
        avg = c.avg.between(lo, hi)
        if avg.stop > avg.start:
            st.avg, st.concluded = c.avg_value[avg.stop - 1], True

    def _read_chunk(self, rows: Rows) -> _Chunk:
        self.chunk = _Chunk(rows)
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

    def emit(self, st: _State) -> None:
        n_rows = len(st.sizes)
        last_size = st.sizes[-1] if n_rows else None
        last_busbw = st.busbw[-1] if n_rows else None
        where = set(st.ranks.values())  # (host, device): the ranks' few pairs (one tuple per pair: Rows.pairs_of)
        hosts = sorted({host for host, _ in where})
        devices = {device for _, device in where}
        details: dict[str, str] = {k: str(v) for k, v in st.header.items()}
        if st.avg is not None:
            details["avg_busbw"] = f"{st.avg:g}"
        busbw = st.busbw
        if st.holes:
            peak = max((i for i, b in enumerate(busbw) if b is not None), key=lambda i: busbw[i] or 0.0, default=None)
        else:  # the same place: max keeps the first of equal values, and index finds it (a NaN by identity)
            peak = busbw.index(max(cast("list[float]", busbw))) if busbw else None
        if peak is not None:
            details["peak_busbw"], details["peak_busbw_bytes"] = f"{busbw[peak]:g}", str(st.sizes[peak])
        if n_rows and (in_place := st.in_place_busbw[-1]) is not None:
            details["in_place_busbw"] = f"{in_place:g}"
        if len(hosts) > 1:
            details["hosts"] = ",".join(hosts)
        if st.warnings:
            details["nccl_warnings"] = str(st.warnings)
        status, why = "ok", st.error
        maximum = st.header.get("max_bytes")
        if st.error is not None:
            status = "oom" if _OOM.search(st.error) else "failed"
        elif st.wrong or st.out_of_bounds:
            status, why = "failed", f"{st.wrong or st.out_of_bounds} wrong values: the collective gave wrong data"
        elif last_size is None:
            status, why = "no_result", "no row of the size table"
        elif not st.concluded and maximum is not None and last_size < maximum:
            status, why = "truncated", f"the table stops at {last_size} of {maximum} bytes"
        kw: dict[str, Any] = {}
        if status == "ok" and last_size is not None:
            if last_busbw is None or not (math.isfinite(last_busbw) and last_busbw > 0):
                status, why = "no_result", f"the busbw at {last_size} bytes reads {last_busbw}: no rate"
            else:
                kw = {"throughput": last_busbw, "throughput_unit": "busbw GB/s", "throughput_derived": False}
        tags = {"message_bytes": str(last_size)} if last_size is not None else {}
        model: str | None = None
        if len(devices) > 1:  # the commonest, the first listed of equals
            model = Counter(device for _, device in st.ranks.values()).most_common(1)[0][0]
        else:
            model = next(iter(devices), None)
        n = max(st.ranks) + 1 if st.ranks else None  # a listing cut in the middle still names its last rank
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="nccl-tests", model=st.collective,
            precision=_DTYPES.get(st.dtype or "", st.dtype), mode="collective", num_ranks=n, num_devices=n,
            num_gpus=n, num_nodes=len(hosts) or None, host=hosts[0] if len(hosts) == 1 else None,
            gpu_model=model, device_model=model, device_type="gpu" if model else None,
            status=status, status_detail=why, first_line=st.first_line, last_line=st.last_line or st.first_line,
            tags=tags, details=details, **kw))


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse nccl-tests output (see the module docstring)."""
    return drive(_Parser, lines, result)
