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
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.formats.lines import Line, LineFormat, drive
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
_DTYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8", "uint8": "uint8",
           "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "fp8_e4m3": "fp8",
           "fp8_e5m2": "fp8"}


def sniff(head: str) -> bool:
    """The table's header (``busbw`` beside ``out-of-place``) or the tests' closing line."""
    return (contains(head, "busbw") and contains(head, "out-of-place")) or contains(head, "# Avg bus bandwidth")


@dataclass
class _Row:
    size: int
    busbw: float | None
    in_place_busbw: float | None


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    collective: str | None = None
    dtype: str | None = None
    header: dict[str, int] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, device)
    rows: list[_Row] = field(default_factory=list)
    wrong: int = 0
    out_of_bounds: int = 0
    avg: float | None = None
    concluded: bool = False
    warnings: int = 0
    error: str | None = None


class _Parser(LineFormat[_State]):
    RANKS = True
    MUST_READ = ("Avg bus bandwidth",)
    BAD_LINE = "an Avg bus bandwidth line whose value cannot be read"
    STATE = _State

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.collective: str | None = None  # named before its run opens (the command line)

    def starts_run(self, run: _State, line: Line) -> bool:
        """A new header, or a test that starts after the open one concluded or filled its table."""
        msg = line.msg
        return (msg.startswith("# nThread") or "Collective test starting" in msg) and bool(
            run.rows or run.concluded)

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
            if st is None or st.rows or st.header:
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
                tokens[2][0].isdigit() or "\x1b" in raw:
            return False
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
        st.rows.append(_Row(size, values[2], values[5]))
        metrics = {k: v for k, v in zip(_METRICS, values, strict=True) if v is not None}
        metrics["size_bytes"] = float(size)
        self.step(len(st.rows) - 1, line_no=no, rank=rank, metrics=metrics)

    def emit(self, st: _State) -> None:
        rows = st.rows
        last = rows[-1] if rows else None
        hosts = sorted({host for host, _ in st.ranks.values()})
        devices = Counter(device for _, device in st.ranks.values())
        details: dict[str, str] = {k: str(v) for k, v in st.header.items()}
        if st.avg is not None:
            details["avg_busbw"] = f"{st.avg:g}"
        peak = max((r for r in rows if r.busbw is not None), key=lambda r: r.busbw or 0.0, default=None)
        if peak is not None:
            details["peak_busbw"], details["peak_busbw_bytes"] = f"{peak.busbw:g}", str(peak.size)
        if last is not None and last.in_place_busbw is not None:
            details["in_place_busbw"] = f"{last.in_place_busbw:g}"
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
        elif last is None:
            status, why = "no_result", "no row of the size table"
        elif not st.concluded and maximum is not None and last.size < maximum:
            status, why = "truncated", f"the table stops at {last.size} of {maximum} bytes"
        kw: dict[str, Any] = {}
        if status == "ok" and last is not None:
            if last.busbw is None or not (math.isfinite(last.busbw) and last.busbw > 0):
                status, why = "no_result", f"the busbw at {last.size} bytes reads {last.busbw}: no rate"
            else:
                kw = {"throughput": last.busbw, "throughput_unit": "busbw GB/s", "throughput_derived": False}
        tags = {"message_bytes": str(last.size)} if last is not None else {}
        model = devices.most_common(1)[0][0] if devices else None
        n = max(st.ranks) + 1 if st.ranks else None  # a listing cut in the middle still names its last rank
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="nccl-tests", model=st.collective,
            precision=_DTYPES.get(st.dtype or "", st.dtype), mode="collective", num_ranks=n, num_devices=n,
            num_gpus=n, num_nodes=len(hosts) or None, host=hosts[0] if len(hosts) == 1 else None,
            gpu_model=model, device_model=model, device_type="gpu" if model else None,
            status=status, status_detail=why, first_line=st.first_line, last_line=st.last_line or st.first_line,
            tags=tags, details=details, **kw))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse nccl-tests output (see the module docstring)."""
    return drive(_Parser, lines, result)
