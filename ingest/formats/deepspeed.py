"""DeepSpeed's own throughput lines: its ThroughputTimer in both eras, and the Flops Profiler's summary.

Lines read (behind DeepSpeed's ``[2024-03-07 15:27:02,646] [INFO] [timer.py:260:stop]`` prefix or any other):

- the timer, 2022 and before: ``0/40, SamplesPerSec=83.486, MemAllocated=0.26GB, MaxMemAllocated=9.02GB``;
- the timer since: ``epoch=0/micro_step=199/global_step=199, RunningAvgSamplesPerSec=58.73,
  CurrSamplesPerSec=61.35, MemAllocated=6.01GB, MaxMemAllocated=19.52GB``;
- ``[Rank 0] step=40, skipped=2, lr=[...]`` (the optimizer's steps and loss-scale overflows);
- the Flops Profiler's ``Profile Summary at step 10:`` block (``world size:``, ``batch size per GPU:``,
  ``fwd+bwd FLOPS per GPU = ...: 102.0 TFLOPS``, ``samples/second: 433.07``): a run of its own;
- the world size (``dist_world_size=4``, ``world_size = 3072``), a traceback, out-of-memory and NCCL errors.

How the numbers are defined: the timer's batch is the engine's ``train_batch_size`` (micro batch x gradient
accumulation x data-parallel size), so its rates are the whole job's samples per second. ``SamplesPerSec``
(old) and ``RunningAvgSamplesPerSec`` (new) are the timer's running average since its warm-up steps
(``start_step``, 2 by default): the run's ``throughput`` is the last one printed, the tool's own summary
(printed, so not derived). ``CurrSamplesPerSec`` is the last step's rate: a step row's metric. The
profiler's ``samples/second`` is batch per GPU x data-parallel size over one iteration's latency.

A log with Megatron's iteration lines as well (Megatron-DeepSpeed) is read by ``megatron``, which keeps the
timer's figure in its details.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.column_buffers import MAX_INT, MapBlock
from bench.ingest.formats.line_scan import STAMP_AT_START, FastRows, Program, Rows
from bench.ingest.formats.lines import Line, drive, error_status, program_error
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import WORLD_SIZE, contains, strip_ansi, utc_seconds

NAME = "deepspeed"
DESCRIPTION = "DeepSpeed ThroughputTimer lines (SamplesPerSec, RunningAvgSamplesPerSec) and Flops Profiler summaries"

_TIMER = re.compile(r"(?:\b(\d+)/(\d+)|global_step=(\d+)), (?:Running)?(Avg)?SamplesPerSec=([^,\s]+)"
                    r"(?:, CurrSamplesPerSec=([^,\s]+))?")
_SKIPPED = re.compile(r"\bstep=(\d+), skipped=(\d+)")
_STAMP = re.compile(r"^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
_PROFILE = re.compile(r"^([a-z+/ ]+?)(?: = [^:]*)?:\s+([\d.]+)\s*([a-z]*)\s*$", re.IGNORECASE)


def sniff(head: str) -> bool:
    """The timer's rate or the profiler's banner."""
    return (contains(head, "SamplesPerSec=") or contains(head, "DeepSpeed Flops Profiler")
            or contains(head, "RunningAvgSamplesPerSec"))


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    profile: dict[str, str] | None = None  # the profiler summary's fields, for a profiler run
    rate: float | None = None  # the last running average
    steps: int | None = None
    skipped: int | None = None
    stamps: list[float] = field(default_factory=list)
    error: str | None = None


class _Parser(FastRows):
    #: ``_TIMER``'s newer form, both rates printed (the form ``fast_line`` reads), for the C path (line_scan);
    #: with no other ``SamplesPerSec=`` in the line, the regex can match nowhere else
    PROGRAM = (Program(stamp=STAMP_AT_START).count("SamplesPerSec=", 2).find("global_step=").digits("step")
               .lit(", RunningAvgSamplesPerSec=").token_until("avg", ",").lit(", CurrSamplesPerSec=")
               .token_until("current", ","))
    MUST_READ = ("SamplesPerSec=",)
    BAD_LINE = "a DeepSpeed timer line whose rate cannot be read"
    STATE = _State

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.world: int | None = None

    def read(self, line: Line) -> bool:
        msg = strip_ansi(line.msg)
        if "SamplesPerSec=" in msg:
            return self._timer(line, msg)
        if msg.startswith("Profile Summary at step"):
            self.open(line.no).profile = {"step": msg.split()[-1].rstrip(":")}
            return True
        st = self.run
        if st is not None and st.profile is not None:
            if (p := _PROFILE.match(msg.strip())) is not None:
                st.profile.setdefault(p.group(1).strip().lower(), p.group(2) + (" " + p.group(3) if p.group(3) else ""))
                st.last_line = line.no
            elif msg.startswith("---") and "samples/second" in st.profile:
                self.close()  # the summary ends where the per-module tables begin
            return True
        if (w := WORLD_SIZE.search(msg)) is not None:
            self.world = self.world or int(w.group(1))
        elif st is not None and (s := _SKIPPED.search(msg)) is not None:
            st.steps, st.skipped = int(s.group(1)), int(s.group(2))
        elif st is not None:
            st.error = program_error(st.error, msg)
        return True

    def fast_line(self, no: int, raw: str) -> bool:
        """A timer line of the open timer run whose rates both read (``_timer`` on the general path)."""
        st = self.run
        if st is None or st.profile is not None or "\x1b" in raw or (m := _TIMER.search(raw)) is None:
            return False
        try:
            avg, current = float(m.group(5)), float(m.group(6))
        except (TypeError, ValueError):  # a rate absent or unreadable: the general path says which
            return False
        st.last_line = no
        if (stamp := _STAMP.match(raw)) is not None and (t := utc_seconds(*stamp.groups())):
            st.stamps.append(t)
        st.rate = avg
        self.result.steps.add(len(self.result.runs), int(m.group(2) or m.group(3)),
                              timestamp=st.stamps[-1] if st.stamps else None, line_no=no,
                              metrics={"running_avg_samples_per_sec": avg, "samples_per_sec": current})
        return True

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """``fast_line`` over rows lo.. of the open timer run."""
        import numpy as np

        st = self.run
        assert st is not None  # (line_scan calls it for an open run only)
        if st.profile is not None:
            return 0
        step = rows.col["step"][lo:hi]
        good = step <= MAX_INT  # add refuses a larger one: the row goes the slow way, which says so
        k = hi - lo if good.all() else int(np.argmin(good))
        if k == 0:
            return 0
        avg, current = rows.col["avg"][lo:lo + k], rows.col["current"][lo:lo + k]
        st.last_line = int(rows.no[lo + k - 1])
        st.rate = float(avg[-1])
        self.result.steps.add_block(len(self.result.runs), k, {
            "step": step[:k], "timestamp": rows.timestamps(lo, lo + k, st.stamps), "line_no": rows.no[lo:lo + k],
            "metrics": MapBlock(k, {"running_avg_samples_per_sec": avg, "samples_per_sec": current})})
        return k

    def _timer(self, line: Line, msg: str) -> bool:
        m = _TIMER.search(msg)
        if m is None:
            return False
        step = int(m.group(2) or m.group(3))
        avg = self.result.number(m.group(5), "SamplesPerSec", line.no)
        current = self.result.number(m.group(6), "CurrSamplesPerSec", line.no)
        st = self.current(line.no)
        if st.profile is not None:
            st = self.open(line.no)
        st.last_line = line.no
        if (stamp := _STAMP.match(line.msg)) is not None and (t := utc_seconds(*stamp.groups())):
            st.stamps.append(t)
        if avg is not None:
            st.rate = avg
        metrics = {k: v for k, v in (("running_avg_samples_per_sec", avg), ("samples_per_sec", current))
                   if v is not None}
        self.step(step, timestamp=st.stamps[-1] if st.stamps else None, line_no=line.no, rank=line.rank,
                  metrics=metrics or None)
        return True

    def emit(self, st: _State) -> None:
        if st.profile is not None:
            return self._emit_profile(st)
        details = {"throughput_source": "the timer's last running average (RunningAvgSamplesPerSec / SamplesPerSec)"}
        if st.skipped is not None:
            details["skipped_steps"] = str(st.skipped)
        status = "ok" if st.rate is not None else "no_result"
        if st.error is not None:
            status = error_status(st.error)
        kw: dict[str, Any] = {}
        if status == "ok":
            kw = {"throughput": st.rate, "throughput_unit": "samples/sec", "throughput_derived": False}
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="deepspeed", mode="train", num_devices=self.world,
            num_ranks=self.world, num_steps=st.steps, started_at=st.stamps[0] if st.stamps else None,
            ended_at=st.stamps[-1] if st.stamps else None, status=status, status_detail=st.error,
            first_line=st.first_line, last_line=st.last_line, details=details, **kw))

    def _emit_profile(self, st: _State) -> None:
        p = st.profile or {}
        rate = _number(p.get("samples/second"))
        world, batch = _number(p.get("world size")), _number(p.get("batch size per gpu"))
        details = {"throughput_source": "the Flops Profiler's samples/second (one profiled iteration)",
                   "profiled_step": p.get("step", "")}
        for key, name in (("fwd+bwd flops per gpu", "tflops_per_device"), ("iter latency", "iteration_latency"),
                          ("params per gpu", "parameters_per_device"), ("model parallel size", "model_parallel"),
                          ("data parallel size", "data_parallel")):
            if key in p:
                details[name] = p[key].removesuffix(" TFLOPS")
        kw: dict[str, Any] = {}
        if rate is not None and rate > 0:
            kw = {"throughput": rate, "throughput_unit": "samples/sec", "throughput_derived": False}
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="deepspeed", mode="train",
            batch_size_per_device=int(batch) if batch else None, num_devices=int(world) if world else None,
            status="ok" if kw else "no_result", first_line=st.first_line, last_line=st.last_line or st.first_line,
            details=details, **kw))


def _number(text: str | None) -> float | None:
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse DeepSpeed's timer and profiler output (see the module docstring)."""
    return drive(_Parser, lines, result)
