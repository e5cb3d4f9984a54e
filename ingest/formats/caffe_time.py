"""`caffe time` glog output (BVLC, Greentea/OpenCL, MKL and Intel multinode Caffe) -> one run per benchmark.

Lines read (log-formats.md §6, `caffe time`): ``Use GPU with device ID d`` / ``Use CPU.``, the printed net
(``name``, ``input_dim`` or a data layer), the first ``Top shape: N ...`` (batch N), ``Testing for K
iterations.``, ``Iteration: j forward-backward time: X ms.`` (one step row each), ``Average Forward pass`` /
``Average Backward pass`` / ``Average Forward-Backward`` / ``Total Time`` (ms), ``*** Benchmark ends ***`` and
fatal ``F...`` lines.

Decisions:
- ``mode="train"`` with tag ``caffe_action=time``: the benchmark runs forward and backward as in training,
  without the solver update (so it is not comparable with ``caffe train`` throughput; BVLC issue 6261).
- ``forward_backward_ms`` is ``Average Forward-Backward``. Intel multinode Caffe prints ``Min ...`` lines
  instead (its ``Min Forward-Backward`` equals ``Total Time``), so there it is ``Total Time / iterations``,
  which is how caffe.cpp computes the average; the ``Min`` values go to details.
- Without glog's prefix (output pasted into an issue) the same lines are read, with no times; a benchmark
  starts after one that printed its summary. Its times are a result even where no batch was printed (then
  images_per_sec is NULL), and ``Total Time``, printed last, ends it.
- ``images_per_sec = batch * 1000 / forward_backward_ms``; ``images_per_sec_mean`` is the mean of
  ``batch * 1000 / ms`` over the iteration lines, all of them, as caffe's own average includes them all.
- ``wall_time_s = Total Time / 1000``. Per-layer ``forward:``/``backward:`` averages are not stored (the
  schema has no per-layer table); they are recognised and skipped.
- ``num_gpus`` is 1 for ``Use GPU`` (caffe time uses one device) and 0 for ``Use CPU.``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.formats import caffe_glog
from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains

NAME = "caffe_time"
DESCRIPTION = "Caffe `caffe time` benchmark output (forward/backward ms per batch, per iteration)"

_MARK = re.compile(
    r"caffe\.cpp:\d+\] (?:\*\*\* Benchmark begins|Performing Forward|Iteration: \d+ forward-backward time"
    r"|Average Forward pass)"
)
_USE_DEVICE = re.compile(r"caffe\.cpp:\d+\] Use (?:CPU\.|GPU with device ID)")
_ITER = re.compile(r"Iteration: (\d+) forward-backward time: (\S+) ms\.?$")
_SUMMARY = re.compile(r"(Average|Min) (Forward pass|Backward pass|Forward-Backward): (\S+) ms\.?$")
_TOTAL = re.compile(r"Total Time: (\S+) ms\.?$")
_TESTING_FOR = re.compile(r"Testing for (\d+) iterations")
_FIELD = {"Forward pass": "forward_ms", "Backward pass": "backward_ms", "Forward-Backward": "forward_backward_ms"}
#: `caffe time`'s own lines as people paste them into issues, without glog's prefix.
_BARE = re.compile(r"\s*(?:Iteration: \d+ forward-backward time: |(?:Average|Min) (?:Forward pass|Backward pass"
                   r"|Forward-Backward): |Total Time: |\*\*\* Benchmark (?:begins|ends) \*\*\*|Testing for \d+ "
                   r"iterations|Use (?:CPU\.|GPU with device ID)|Top shape: )")


def sniff(head: str) -> bool:
    """A `caffe time` marker line; or (a run that crashed during net set-up, or a printed net too big for
    the head) Caffe glog that picked its device in caffe.cpp and has no solver (`caffe train` always has
    one) and no ``Running for N iterations`` (`caffe test`)."""
    if _MARK.search(head):
        return True
    if sum(1 for line in head.splitlines() if _BARE.match(line)) >= 3 and (
            contains(head, "Average Forward-Backward: ") or contains(head, " forward-backward time: ")):
        return True  # the benchmark's lines pasted without glog's prefix
    other = contains(head, "solver") or contains(head, "] Running for ")
    return not other and bool(_USE_DEVICE.search(head)) and caffe_glog.has_caffe_glog(head)


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    run: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=lambda: {"caffe_action": "time"})
    details: dict[str, str] = field(default_factory=dict)
    in_net: bool = False
    batch: int | None = None
    net_batch: int | None = None  # first ``input_dim`` or ``batch_size`` of the printed net
    planned: int | None = None
    iters: int = 0
    rate_sum: float = 0.0
    total_ms: float | None = None
    began: bool = False
    ended: bool = False
    fatal: str | None = None

    @property
    def batch_size(self) -> int | None:
        return self.batch if self.batch is not None else self.net_batch


class _Parser(LineFormat[_State]):
    """A new run starts where a device is chosen again after a benchmark began or failed."""

    GLOG, STATE = True, _State

    def starts_run(self, run: _State, line: Line) -> bool:
        if line.level is None:  # pasted without glog: a benchmark after one that printed its summary
            msg = line.msg.lstrip()
            summarised = run.ended or "forward_ms" in run.run
            return summarised and msg.startswith(("Iteration: ", "*** Benchmark begins", "Average Forward pass",
                                                  "Use GPU", "Use CPU"))
        return (run.began or run.fatal is not None) and caffe_glog.device_of(line.msg) is not None

    def read(self, line: Line) -> bool:
        if line.level is None and not _BARE.match(line.msg):
            self._plain(line)
            return True
        msg, st, no = line.msg.strip(), self.current(line.no), line.no
        dev = caffe_glog.device_of(msg)
        st.last_line, st.in_net = no, False
        if line.level == "F":
            if st.fatal is None:
                st.fatal = line.raw
        elif dev is not None:
            st.tags["device"], st.run["num_gpus"] = dev
        elif msg.startswith("Iteration: "):
            self._iteration(st, no, msg, line.raw, line.time)
        elif "forward: " in msg or "backward: " in msg:
            return True  # per-layer averages: not stored (see module docstring)
        elif "Top shape" in msg:
            got = caffe_glog.top_shape_batch(msg)
            if got is not None and st.batch is None:
                st.batch = got[1]
        else:
            self._other(st, no, msg, line.raw)
        return True

    def _plain(self, line: Line) -> None:
        year = caffe_glog.header_year(line.raw)
        if year is not None:  # a glog file header: after a benchmark, the next process
            if self.run is not None and self.run.began:
                self.open(line.no)
            assert self.glog is not None
            self.glog.set_year(year)
            return
        st = self.run
        if st is None or not st.in_net:
            return
        st.last_line = line.no
        fact = caffe_glog.proto_fact(line.raw)
        if fact is None:
            return
        indent, key, value = fact
        if indent == 0 and key == "name":
            st.run.setdefault("model", value)
        elif key in ("input_dim", "batch_size") and st.net_batch is None and value.isdigit():
            st.net_batch = int(value)
        kind = caffe_glog.data_kind(indent, key, value)
        if kind is not None:
            st.run.setdefault("data", kind)

    def _iteration(self, st: _State, no: int, msg: str, line: str, t: float | None) -> None:
        m = _ITER.match(msg)
        try:
            ms = float(m.group(2)) if m else None
        except ValueError:
            ms = None
        if m is None or ms is None:
            self.result.problem("bad_line", "unreadable `caffe time` iteration line", no, line)
            return
        st.began = True
        st.iters += 1
        b = st.batch_size
        rate = b * 1000.0 / ms if b is not None and ms > 0 else None
        if rate is not None:
            st.rate_sum += rate
        ts = t if t is not None and self.glog is not None and self.glog.absolute else None
        self.result.steps.add(len(self.result.runs), int(m.group(1)), step_time_ms=ms,
                              interval_images_per_sec=rate, timestamp=ts, line_no=no)

    def _other(self, st: _State, no: int, msg: str, line: str) -> None:
        if msg.startswith("Initializing net from parameters"):
            st.in_net = True
        elif msg.startswith("*** Benchmark begins"):
            st.began = True
        elif msg.startswith("*** Benchmark ends"):
            st.ended = True
        elif (m := _TESTING_FOR.match(msg)) is not None:
            st.planned = int(m.group(1))
        elif msg.startswith(("Average ", "Min ", "Total Time")) and " ms" in msg:
            self._summary(st, no, msg, line)

    def _summary(self, st: _State, no: int, msg: str, line: str) -> None:
        try:
            m = _TOTAL.match(msg)
            if m:
                st.total_ms = float(m.group(1))
                st.ended = True  # caffe.cpp prints Total Time last, just before "*** Benchmark ends ***"
                return
            m = _SUMMARY.match(msg)
            if m and m.group(1) == "Average":
                st.run[_FIELD[m.group(2)]] = float(m.group(3))
                return
            if m:
                st.details["min_" + _FIELD[m.group(2)]] = f"{float(m.group(3)):g}"
                return
        except ValueError:
            pass
        if not msg.startswith("Average time per layer") and not msg.startswith("Min time per layer"):
            self.result.problem("bad_line", "unreadable `caffe time` summary line", no, line)

    def emit(self, st: _State) -> None:
        """Append the Run row of one benchmark."""
        run = st.run
        fb = run.get("forward_backward_ms")
        iterations = st.planned or st.iters or None
        if fb is None and st.total_ms is not None and iterations:
            fb = st.total_ms / iterations
            st.details["forward_backward_source"] = "total_time/iterations"
        b = st.batch_size
        ips = b * 1000.0 / fb if b is not None and fb else None
        mean = st.rate_sum / st.iters if st.iters and b is not None else None
        status = caffe_glog.fatal_status(st.fatal) if st.fatal else ("ok" if ips or fb else "no_result") if st.ended else "truncated"
        failed = status in ("failed", "oom")
        self.result.runs.append(Run(
            run_index=len(self.result.runs), format=NAME, framework="caffe", model=run.get("model"),
            data=run.get("data"), mode="train", batch_size_per_device=b, global_batch_size=b,
            num_gpus=run.get("num_gpus"), num_steps=iterations,
            wall_time_s=None if st.total_ms is None else st.total_ms / 1000.0,
            images_per_sec=None if failed else ips, images_per_sec_mean=None if failed else mean,
            throughput_derived=True,  # batch x 1000 / the printed Forward-Backward ms
            forward_ms=None if failed else run.get("forward_ms"),
            backward_ms=None if failed else run.get("backward_ms"),
            forward_backward_ms=None if failed else fb, status=status, status_detail=st.fatal,
            first_line=st.first_line, last_line=st.last_line, tags=st.tags, details=st.details,
        ))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse `caffe time` output: one Run per benchmark, one step row per ``Iteration: j`` line.

    Pure: reads ``lines`` once (1-based numbers), never raises for bad input; unreadable benchmark lines
    become ``bad_line`` problems. ``source`` is accepted for the registry contract only.
    """
    return drive(_Parser, lines, result)
