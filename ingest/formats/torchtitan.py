"""torchtitan and trainers that log steps the same way (nanochat, MaxText, LitGPT's summary): one run per
training, one step row per logged step.

Lines read, behind any prefix (``[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - ``, ezpz's
``[2025-09-11 14:09:46,954794][I][components/metrics:437:log] ``) and with ANSI colours taken off:

- torchtitan: ``step: 10  loss:  5.85245  grad_norm: 26.8750  memory: 169.10GiB(94.81%)  tps: 10,131
  tflops: 853.65  mfu: 37.94%`` (``mfu`` and ``grad_norm`` are absent in some versions); its set-up lines
  ``Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1`` (the
  parallel layout; their product is the world size), ``CUDA capacity: NVIDIA B200 with 178.35GiB memory``
  (the device), ``Model qwen3 14B size: 14,768,307,200 total parameters``, ``Trainer is initialized with local
  batch size 160, global batch size 1280, gradient accumulation steps 1, sequence length 128, ...``, ``Peak
  FLOPS used for computing MFU: 2.250e+15`` and ``Training completed``;
- nanochat: ``step 00004/21400 (0.02%) | loss: 8.893647 | lrm: 1.00 | dt: 989.44ms | tok/sec: 529,882 |
  mfu: 74.13 | total time: 0.00m``;
- MaxText: ``completed step: 15107, seconds: 2.167, TFLOP/s: 36.722, loss: 2.191``;
- LitGPT's closing summary (``| - Tok/sec       : 60.93 tok/s``, ``Total tokens``, ``Training Time``).

How the numbers are defined:

- torchtitan's ``tps`` is tokens per second per device (its tokens since the last log over the time, divided
  by the non-data-parallel degree); ``tflops`` and ``mfu`` are per device too. The first logged step holds
  compilation and is left out (``warmup_steps``). The run's rate is the harmonic mean of the logged ``tps``,
  each weighted by the steps its line covers (total tokens over total time, the batch being fixed), times
  the world size: ``tokens/sec`` for the job. Where the log does not say the world size it stays per device,
  in the unit ``tokens/sec/device``, never multiplied by a guess.
- nanochat's ``tok/sec`` is the whole job's (its global batch in tokens over the step time): the same mean,
  not multiplied.
- MaxText prints no token count: the run's rate is the mean ``TFLOP/s`` per device (``TFLOP/s/device``).
- LitGPT's ``Tok/sec`` is its own summary (tokens over training time), printed, not derived.
- ``mfu`` (details ``mfu_pct``) is the trainer's own, against the peak it states (``peak_flops``).

Pitfalls: several ranks print the same step (without a rank prefix they are indistinguishable): a step is
read once, the first time. ``tps: 10,131`` has a thousands separator. A ``Traceback``, out-of-memory or NCCL
error ends the run ``failed`` / ``oom``; ``^C`` or ``KeyboardInterrupt`` ``interrupted``.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.column_buffers import MAX_INT, MapBlock
from bench.ingest.formats.line_scan import STAMP_ANYWHERE, FastRows, Program, Rows
from bench.ingest.formats.lines import Line, drive, error_status, program_error
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import WORLD_SIZE, contains, strip_ansi, utc_seconds

NAME = "torchtitan"
DESCRIPTION = "torchtitan-style LLM step lines (tps, tflops, mfu), nanochat, MaxText and LitGPT summaries"

_TITAN = re.compile(r"\bstep:\s*(\d+)\s+loss:\s*(\S+)(.*)")
_NANOCHAT = re.compile(r"\bstep (\d+)/(\d+) \([\d.]+%\) \| loss: (\S+) \|(.*)")
_MAXTEXT = re.compile(r"\bcompleted step: (\d+), seconds: (\S+), TFLOP/s: (\S+), loss: (\S+)")
_LITGPT = re.compile(r"\| - (Tok/sec|Total tokens|Training Time)\s*: ([\d,.]+)")
_PAIR = re.compile(r"(\w+(?:/\w+)?):\s*([\d,.eE+-]+|nan|inf)")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_MESH = re.compile(r"Building device mesh with parallelism: (.*)")
_MESH_1D = re.compile(r"Building 1-D device mesh with \[[^\]]*\], \[(\d+)\]")
_DEVICE = re.compile(r"\b(?:CUDA|XPU|ROCm|HIP|NPU) capacity: (.+?) with [\d.]+GiB memory")
_MODEL = re.compile(r"Model (.+?) size: ([\d,]+) total parameters")
_TRAINER = re.compile(r"local batch size (\d+), global batch size (\d+), gradient accumulation steps (\d+), "
                      r"sequence length (\d+)")
_PEAK = re.compile(r"Peak FLOPS used for computing MFU: (\S+)")
_LAYOUT_NAMES = {"pp": "pipeline_parallel", "dp_replicate": "data_parallel_replicate", "dp_shard": "data_parallel_shard",
                 "cp": "context_parallel", "tp": "tensor_parallel", "ep": "expert_parallel"}


def sniff(head: str) -> bool:
    """A step line of one of the trainers, or torchtitan's own banner lines."""
    if contains(head, "tps: ") and contains(head, "step:"):
        return True
    return (contains(head, "| tok/sec: ") or contains(head, "completed step: ")
            or contains(head, "| - Tok/sec       :"))


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    kind: str = "torchtitan"
    steps: array[int] = field(default_factory=lambda: array("q"))  # each logged step with a rate ...
    rates: array[float] = field(default_factory=lambda: array("d"))  # ... and that rate
    mfu: list[float] = field(default_factory=list)
    tflops: list[float] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    completed: bool = False
    error: str | None = None
    interrupted: bool = False
    summary: dict[str, float] = field(default_factory=dict)


class _Parser(FastRows):
    #: ``_TITAN`` and the three pairs ``fast_line`` reads, for the C path (line_scan)
    PROGRAM = (Program(stamp=STAMP_ANYWHERE).find("step:", word=True).ws().digits("step").ws(least=1).lit("loss:")
               .ws().token_rstrip("loss", ",").pair("tps:", "tps").pair("tflops:", "tflops").pair("mfu:", "mfu"))
    MUST_READ = ("tps: ", "| tok/sec: ", "completed step: ")
    BAD_LINE = "a step line whose step number or rate cannot be read"
    STATE = _State

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.facts: dict[str, Any] = {}
        self.layout: dict[str, str] = {}
        self.titan = False  # the log names torchtitan ("[titan]" loggers, its module path)

    def read(self, line: Line) -> bool:
        msg = strip_ansi(line.msg)
        if (m := _TITAN.search(msg)) is not None:
            return self._titan(line, msg, m)
        if (m := _NANOCHAT.search(msg)) is not None:
            pairs = dict(_PAIR.findall(m.group(4)))
            rate = self._number(pairs.get("tok/sec"), "tok/sec", line)
            return self._step(line, msg, "nanochat", int(m.group(1)), rate, loss=m.group(3),
                              mfu=pairs.get("mfu"), step_ms=pairs.get("dt", "").removesuffix("ms") or None)
        if (m := _MAXTEXT.search(msg)) is not None:
            seconds = self._number(m.group(2), "seconds", line)
            return self._step(line, msg, "maxtext", int(m.group(1)), self._number(m.group(3), "TFLOP/s", line),
                              loss=m.group(4), mfu=None, step_ms=None if seconds is None else str(seconds * 1e3))
        if (m := _LITGPT.search(msg)) is not None:
            st = self.current(line.no)
            st.kind, st.last_line = "litgpt", line.no
            value = self._number(m.group(2).replace(",", ""), m.group(1), line)
            if value is not None:
                st.summary[m.group(1)] = value
            return True
        self._fact(msg)
        return True

    def _fact(self, msg: str) -> None:
        st = self.run
        self.titan = self.titan or "[titan]" in msg or "torchtitan" in msg
        if (m := _MESH.search(msg)) is not None:
            self.layout = dict(re.findall(r"(\w+)=(\d+)", m.group(1)))
        elif (m := _MESH_1D.search(msg)) is not None:
            self.facts.setdefault("world", int(m.group(1)))
        elif (m := WORLD_SIZE.search(msg)) is not None:
            self.facts.setdefault("world", int(m.group(1)))
        elif (m := _DEVICE.search(msg)) is not None:
            self.facts.setdefault("device", m.group(1).strip())
        elif (m := _MODEL.search(msg)) is not None:
            self.facts.setdefault("model", m.group(1).strip())
            self.facts.setdefault("parameters", m.group(2).replace(",", ""))
        elif (m := _TRAINER.search(msg)) is not None:
            for key, value in zip(("local_batch", "global_batch", "grad_accum", "seq_length"), m.groups(), strict=True):
                self.facts.setdefault(key, int(value))
        elif (m := _PEAK.search(msg)) is not None:
            self.facts.setdefault("peak_flops", m.group(1))
        elif st is None:
            return
        elif "Training completed" in msg:
            st.completed = True
        elif msg.strip() == "^C" or "KeyboardInterrupt" in msg:
            st.interrupted = True
        else:
            st.error = program_error(st.error, msg)

    def _number(self, text: str | None, name: str, line: Line) -> float | None:
        """A printed figure (thousands separators allowed); None and an ``invalid_value`` problem when it is
        not a finite number > 0."""
        value = self.result.number(text.replace(",", "") if text else None, name, line.no)
        if value is None or (math.isfinite(value) and value > 0):
            return value
        self.result.problem("invalid_value", f"{name} {text} is not a finite number > 0; left out", line.no,
                            line.raw)
        return None

    def _titan(self, line: Line, msg: str, m: re.Match[str]) -> bool:
        self.titan = self.titan or "[titan]" in msg
        pairs = dict(_PAIR.findall(m.group(3)))
        if "tps" not in pairs:
            return False
        rate = self._number(pairs["tps"], "tps", line)
        tflops = self._number(pairs.get("tflops"), "tflops", line)
        st = self.run
        if st is not None and st.steps and int(m.group(1)) <= st.steps[-1]:
            return True  # another rank's copy of a step already read (or an earlier one: a restart is not told)
        ok = self._step(line, msg, "torchtitan", int(m.group(1)), rate, loss=m.group(2),
                        mfu=pairs.get("mfu", "").rstrip("%") or None, step_ms=None)
        if tflops is not None and self.run is not None:
            self.run.tflops.append(tflops)
        return ok

    def fast_line(self, no: int, raw: str) -> bool:
        """A torchtitan step line of the open run whose figures all read (``_titan`` on the general path)."""
        st = self.run
        if st is None or "\x1b" in raw or (m := _TITAN.search(raw)) is None:
            return False
        pairs = dict(_PAIR.findall(m.group(3)))
        try:
            rate, loss = float(pairs["tps"].replace(",", "")), float(m.group(2).rstrip(","))
            tflops = float(pairs["tflops"].replace(",", "")) if "tflops" in pairs else None
            mfu = float(pairs["mfu"].replace(",", "")) if pairs.get("mfu") else None
        except (KeyError, ValueError):
            return False  # no rate, or a figure that will not read: the general path says which
        if not all(x is None or (math.isfinite(x) and x > 0) for x in (rate, tflops, mfu)):
            return False
        self.titan = self.titan or "[titan]" in raw
        step = int(m.group(1))
        if step > MAX_INT:
            return False
        if st.steps and step <= st.steps[-1]:
            return True  # another rank's copy of a step already read
        st.kind, st.last_line = "torchtitan", no
        if (s := _STAMP.search(raw)) is not None and (t := utc_seconds(*s.groups())) is not None:
            st.stamps.append(t)
        st.steps.append(step)
        st.rates.append(rate)
        metrics = {"rate": rate}
        if mfu is not None:
            st.mfu.append(mfu)
            metrics["mfu_pct"] = mfu
        self.result.steps.add(len(self.result.runs), step, loss=loss, timestamp=st.stamps[-1] if st.stamps else None,
                              line_no=no, metrics=metrics)
        if tflops is not None:
            st.tflops.append(tflops)
        return True

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """``fast_line`` over rows lo.. of the open run, for as long as each would take its line and add a step."""
        import numpy as np

        st = self.run
        assert st is not None
        step, tps, loss = rows.col["step"][lo:hi], rows.col["tps"][lo:hi], rows.col["loss"][lo:hi]
        tflops, mfu = rows.col["tflops"][lo:hi], rows.col["mfu"][lo:hi]
        no_tflops, no_mfu = rows.null("tflops", lo, hi), rows.null("mfu", lo, hi)
        with np.errstate(invalid="ignore"):
            good = ~rows.null("tps", lo, hi) & np.isfinite(tps) & (tps > 0) & (step <= MAX_INT)
            good &= (no_tflops | (np.isfinite(tflops) & (tflops > 0))) & (no_mfu | (np.isfinite(mfu) & (mfu > 0)))
        good[1:] &= step[1:] > step[:-1]
        good[0] &= not st.steps or int(step[0]) > st.steps[-1]
        k = hi - lo if good.all() else int(np.argmin(good))
        if k == 0:
            return 0
        step, tps, loss, tflops, mfu, no_tflops, no_mfu = (a[:k] for a in (step, tps, loss, tflops, mfu, no_tflops, no_mfu))
        self.titan = self.titan or rows.holds(b"[titan]", lo, lo + k)
        st.kind, st.last_line = "torchtitan", int(rows.no[lo + k - 1])
        timestamps = rows.timestamps(lo, lo + k, st.stamps)
        st.steps.frombytes(step.tobytes())
        st.rates.frombytes(tps.tobytes())
        st.mfu.extend(mfu[~no_mfu].tolist())
        st.tflops.extend(tflops[~no_tflops].tolist())
        self.result.steps.add_block(len(self.result.runs), k, {
            "step": step, "loss": loss, "timestamp": timestamps, "line_no": rows.no[lo:lo + k],
            "metrics": MapBlock(k, {"rate": tps, "mfu_pct": mfu})})
        return k

    def _step(self, line: Line, msg: str, kind: str, step: int, rate: float | None, *, loss: str,
              mfu: str | None, step_ms: str | None) -> bool:
        st = self.current(line.no)
        if st.steps and step <= st.steps[-1]:
            return True
        st.kind, st.last_line = kind, line.no
        if (s := _STAMP.search(msg)) is not None and (t := utc_seconds(*s.groups())) is not None:
            st.stamps.append(t)
        if rate is not None and step <= MAX_INT:  # a larger one is a misprint: its row is refused (StepTable.add)
            st.steps.append(step)
            st.rates.append(rate)
        loss_value = self.result.number(loss.rstrip(","), "loss", line.no)
        mfu_value = self._number(mfu, "mfu", line) if mfu else None
        if mfu_value is not None:
            st.mfu.append(mfu_value)
        metrics = {"rate": rate} if rate is not None else {}
        if mfu_value is not None:
            metrics["mfu_pct"] = mfu_value
        self.step(step, loss=loss_value, step_time_ms=self.result.number(step_ms, "step time", line.no),
                  timestamp=st.stamps[-1] if st.stamps else None, line_no=line.no, rank=line.rank,
                  metrics=metrics or None)
        return True

    def emit(self, st: _State) -> None:
        f = self.facts
        world = f.get("world")
        if world is None and self.layout:
            world = math.prod(int(v) for k, v in self.layout.items() if k != "ep")  # ep splits dp, adds none
        details: dict[str, str] = {_LAYOUT_NAMES[k]: v for k, v in self.layout.items() if k in _LAYOUT_NAMES}
        for key in ("parameters", "peak_flops"):
            if key in f:
                details[key] = str(f[key])
        rate, unit, derived = self._rate(st, world)
        if st.mfu:
            details["mfu_pct"] = f"{sum(st.mfu[1:] or st.mfu) / len(st.mfu[1:] or st.mfu):.4g}"
        if st.tflops:
            details["tflops_per_device"] = f"{sum(st.tflops[1:] or st.tflops) / len(st.tflops[1:] or st.tflops):.4g}"
        status = "ok" if rate is not None else "no_result"
        if st.interrupted:
            status, st.error = "interrupted", st.error or "interrupted (^C)"
        elif st.error is not None:
            status = error_status(st.error)
        kw: dict[str, Any] = {}
        if status == "ok":
            kw = {"throughput": rate, "throughput_unit": unit, "throughput_derived": derived}
        device = f.get("device")
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, mode="train", model=f.get("model"),
            framework=st.kind if st.kind != "torchtitan" or self.titan else None,  # only where the log says
            batch_size_per_device=f.get("local_batch"), global_batch_size=f.get("global_batch"),
            num_devices=world, num_ranks=world, num_gpus=world if device else None, gpu_model=device,
            device_model=device, device_type="gpu" if device else None,
            num_steps=st.steps[-1] if st.steps else None,
            warmup_steps=st.steps[0] if len(st.steps) > 1 else None,
            started_at=st.stamps[0] if st.stamps else None, ended_at=st.stamps[-1] if st.stamps else None,
            status=status, status_detail=st.error, first_line=st.first_line, last_line=st.last_line,
            tags={"seq_length": str(f["seq_length"])} if "seq_length" in f else {}, details=details, **kw))

    @staticmethod
    def _rate(st: _State, world: int | None) -> tuple[float | None, str, bool]:
        """The run's rate, its unit and whether it is computed (see the module docstring)."""
        if st.kind == "litgpt":
            return st.summary.get("Tok/sec"), "tokens/sec", False
        import numpy as np

        if not st.steps:
            return None, "", True
        # Each logged step after the first covers the steps since the one before (one step when the first is
        # the only one), at its rate. Sums in order (cumsum), as Python's sum adds.
        steps, rates = np.frombuffer(st.steps, np.int64), np.frombuffer(st.rates, np.float64)
        covered = np.maximum(np.diff(steps), 1) if len(steps) > 1 else np.ones(1, np.int64)
        rates = rates[1:] if len(steps) > 1 else rates
        if st.kind == "maxtext":
            return float(np.cumsum(rates)[-1]) / len(rates), "TFLOP/s/device", True
        mean = int(covered.sum()) / float(np.cumsum(covered / rates)[-1])
        if st.kind == "nanochat":
            return mean, "tokens/sec", True
        return (mean * world, "tokens/sec", True) if world else (mean, "tokens/sec/device", True)


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse a torchtitan-style log (see the module docstring)."""
    return drive(_Parser, lines, result)
