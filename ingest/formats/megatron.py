"""Megatron-LM, Megatron-Core, Megatron-DeepSpeed and NeMo training logs: one run per training loop, one step
row per logged iteration.

Lines read, wherever they sit in the line (behind a launcher's, a logger's or a rank's prefix, and with ANSI
colours taken off):

- the iteration line, in its eras: ``iteration 20/ 40000 | consumed samples: 1280 | elapsed time per iteration
  (ms): 826.6 | throughput per GPU (TFLOP/s/GPU): 23.5 | ... | global batch size: 64 | lm loss: 1.1E+01 |
  number of skipped iterations: 0 | ...`` (Megatron-LM and Megatron-Core; Primus adds ``current/average``
  pairs such as ``32208.7/32208.7`` and ``tokens per GPU (tokens/s/GPU)``), Megatron-DeepSpeed's ``samples
  per second: 53.7 | tokens per gpu per second (tgs): 1146.7 | TFLOPs: 69.85``, its newer ``key=value``
  spelling (``iteration= 136004/ 136100 | elapsed_time_per_iteration_ms=3415.3 | global_batch_size= 6144``),
  and NeMo's Lightning line (``Training epoch 0, iteration 120/149 | ... | global_batch_size: 1 | ... |
  train_step_timing in s: 0.03146``);
- the arguments dump (``  seq_length ........ 2048``) and ``using world size: 8, data-parallel size: 8, ...``:
  the sequence length, micro and global batch, precision, world size and parallel layout;
- DeepSpeed's timer line in a Megatron-DeepSpeed log (``RunningAvgSamplesPerSec=28.4``), kept in details;
- a Python traceback and its last exception line, out-of-memory and NCCL errors.

How the numbers are defined:

- Each iteration line averages the iterations since the previous one (``--log-interval``). The first logged
  interval holds compilation and warm-up (826.6 ms against 230 ms after it in a real run), so it is left out:
  ``warmup_steps`` is its iteration number. Where only one interval was logged it is all there is, and it is
  used (details ``warmup_excluded: no``).
- ``throughput`` is samples (global batch x iterations) over time (elapsed per iteration x iterations),
  summed over the intervals after warm-up: total samples over total time, which is what Megatron's own
  per-interval ``samples per second`` is for one interval. It is ``tokens/sec`` (samples/s x sequence
  length) where the log states the sequence length (arguments dump, ``actual seqlen``), else
  ``samples/sec``; derived, since it is computed from printed times (``throughput_derived``).
- ``tflops_per_device`` (details): Megatron's ``throughput per GPU (TFLOP/s/GPU)`` / ``TFLOPs``, weighted
  the same way (time-weighted mean over the same intervals). Its FLOP count is Megatron's own formula.
- Megatron ends every field with `` |``: a field after the last one is not read (a line cut mid-number would
  give a wrong figure), and a line with fewer fields than the run's line before it was cut. A log that ends
  inside an iteration line (killed mid-write) is ``truncated``: what it measured before is
  not the run's result. An unreadable iteration line followed by whole ones is a ``bad_line`` problem.
- An iteration printed twice (Primus prints each from two call sites; several ranks may print) is read once.
  An iteration number lower than the last one starts the next run (a restart in the same log).

Pitfalls: ``lm loss: nan`` is data (a step row with its loss), counted in ``nan_loss_steps``; a TFLOP/s of
``inf`` or ``0`` is an ``invalid_value`` problem and left out of the mean; skipped iterations (loss-scale
overflow) took time and consumed samples, so they stay in the throughput and are counted in details.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.column_buffers import MAX_INT, MapBlock
from bench.ingest.formats.line_scan import STAMP_ANYWHERE, FastRows, Program, Rows
from bench.ingest.formats.lines import Line, drive, error_status, program_error
from bench.ingest.formats.megatron_intervals import Intervals
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import WORLD_SIZE, contains, strip_ansi, utc_seconds

NAME = "megatron"
DESCRIPTION = "Megatron-LM / Megatron-Core / Megatron-DeepSpeed / NeMo iteration lines (samples or tokens/s)"

_MARKERS = ("elapsed time per iteration (ms)", "elapsed_time_per_iteration_ms=", "train_step_timing in s")
_ITERATION = re.compile(r"\biteration[= ]\s*(\d+)\s*/\s*(\d+)")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_KEY = re.compile(r"[A-Za-z][\w ()/.-]*")
_ARG = re.compile(r"(?:^|\s)([a-z_0-9]+) \.{3,} (\S.*?)\s*$")
_WORLD = re.compile(r"using world size: (\d+)(.*)")
_SIZES = re.compile(r"([a-z-]+) size: (\d+)")
_DS_TIMER = re.compile(r"RunningAvgSamplesPerSec=([^,\s]+)")

#: The iteration line's fields, normalised (lower case, ``_`` as a space) -> the name used here.
_KEYS = {
    "elapsed time per iteration (ms)": "elapsed_ms", "elapsed time per iteration ms": "elapsed_ms",
    "train step timing in s": "step_s",
    "throughput per gpu (tflop/s/gpu)": "tflops", "tflops": "tflops",
    "tokens per gpu (tokens/s/gpu)": "tokens_per_device", "tokens per gpu per second (tgs)": "tokens_per_device",
    "tokens per gpu per second tgs": "tokens_per_device",
    "samples per second": "samples_per_sec", "global batch size": "global_batch",
    "lm loss": "loss", "reduced train loss": "loss", "number of skipped iterations": "skipped",
    "number of nan iterations": "nan_iterations", "actual seqlen": "seq_length", "learning rate": "learning_rate",
    "lr": "learning_rate", "grad norm": "grad_norm", "loss scale": "loss_scale",
}
#: Arguments-dump names kept: (name in the dump, where it goes).
_ARGS = {
    "seq_length": "seq_length", "micro_batch_size": "micro_batch", "global_batch_size": "global_batch",
    "world_size": "world_size", "tensor_model_parallel_size": "tensor_parallel",
    "pipeline_model_parallel_size": "pipeline_parallel", "data_parallel_size": "data_parallel",
    "context_parallel_size": "context_parallel", "expert_model_parallel_size": "expert_parallel",
    "fp16": "fp16", "bf16": "bf16", "fp8": "fp8", "num_layers": "num_layers", "hidden_size": "hidden_size",
    "num_attention_heads": "num_attention_heads", "num_experts": "num_experts", "train_iters": "train_iters",
}
_LAYOUT = ("tensor_parallel", "pipeline_parallel", "data_parallel", "context_parallel", "expert_parallel")
_WORLD_NAMES = {"data-parallel": "data_parallel", "context-parallel": "context_parallel",
                "tensor-model-parallel": "tensor_parallel", "pipeline-model-parallel": "pipeline_parallel"}


_PAIR = re.compile(r"([^|:=]*)[:=]([^|]*)")  # within one field: the text before its first ":" or "=", and after
_NAMES: dict[str, str | None] = {}  # a field's text before its ":" or "=" -> its name in _KEYS' values, or None


def _name(head: str) -> str | None:
    """The name of the field whose text before the separator is ``head`` (None: not one read here): a key
    starting with a letter, lower-cased with ``_`` as a space (``elapsed_time_per_iteration_ms``). Looked up
    once per spelling: a log repeats the same few on every line."""
    try:
        return _NAMES[head]
    except KeyError:
        key = head.strip()
        name = _KEYS.get(" ".join(key.lower().replace("_", " ").split())) if _KEY.fullmatch(key) else None
        if len(_NAMES) < 4096:  # a log of ever new field names does not grow it without end
            _NAMES[head] = name
        return name


#: The fields an iteration line prints, as printed (Megatron-LM, Megatron-Core, Megatron-DeepSpeed, NeMo); those
#: ``_name`` does not know are read past. A line with a field not here is read the slow way.
_PRINTED = (
    "consumed samples", "consumed_samples", "elapsed time per iteration (ms)", "train_step_timing in s",
    "throughput per GPU (TFLOP/s/GPU)", "tokens per GPU (tokens/s/GPU)", "TFLOPs", "samples per second",
    "learning rate", "lr", "global batch size", "global_batch_size", "lm loss", "reduced_train_loss", "loss scale",
    "grad norm", "num zeros", "params norm", "number of skipped iterations", "number of nan iterations",
    "actual seqlen", "load_balancing_loss", "seq_load_balancing_loss", "global_step", "val_loss", "epoch")


def _program() -> Program:
    """``_ITERATION`` (its first match) and then every field to the line's last ``|``, each figure in the
    column of its field's name (``_name``)."""
    return (Program(stamp=STAMP_ANYWHERE).first("iteration").lit(" ").ws().digits("iteration").ws().lit("/").ws()
            .digits("total").fields({label: _name(label) for label in _PRINTED}, "bars"))


def sniff(head: str) -> bool:
    """An iteration line's timing field, in any of its eras' spellings."""
    return any(contains(head, m) for m in _MARKERS)


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    intervals: Intervals = field(default_factory=Intervals)
    stamps: list[float] = field(default_factory=list)
    total_iterations: int | None = None
    skipped: int = 0
    nan_loss: int = 0
    seq_length: int | None = None
    error: str | None = None
    ds_samples_per_sec: str | None = None
    partial: Line | None = None  # an iteration line without its timing, not yet followed by a whole one
    partial_at: int = 0  # its iteration number
    bars: int = 0  # the field separators of the run's last whole iteration line


class _Parser(FastRows):
    #: The iteration line, its fields by name, for the C path (line_scan)
    PROGRAM = _program()
    MUST_READ = _MARKERS
    BAD_LINE = "an iteration line whose iteration number or time per iteration cannot be read"
    STATE = _State

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.args: dict[str, str] = {}

    def read(self, line: Line) -> bool:
        msg = strip_ansi(line.msg)
        if any(m in msg for m in _MARKERS):
            return self._iteration(line, msg)
        if (a := _ARG.search(msg)) is not None and a.group(1) in _ARGS:
            self.args.setdefault(_ARGS[a.group(1)], a.group(2))
        elif (w := _WORLD.search(msg)) is not None:
            self.args.setdefault("world_size", w.group(1))
            for name, size in _SIZES.findall(w.group(2)):
                if name in _WORLD_NAMES:
                    self.args.setdefault(_WORLD_NAMES[name], size)
        elif (w := WORLD_SIZE.search(msg)) is not None:
            self.args.setdefault("world_size", w.group(1))
        elif self.run is not None:
            if (it := _ITERATION.search(msg)) is not None and " | " in msg:
                self.run.partial, self.run.partial_at = line, int(it.group(1))  # cut short, as below
            else:
                self._other(self.run, msg)
        return True

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """``_iteration`` over rows lo.. of the open run, for as long as each is a later iteration with a time,
        none cut short (fewer bars than the line before), every rate it prints > 0."""
        import numpy as np

        st = self.run
        assert st is not None  # (line_scan calls it for an open run only)
        if st.partial is not None:
            return 0
        col = {name: values[lo:hi] for name, values in rows.col.items()}
        null = {name: rows.null(name, lo, hi) for name in rows.col}
        n, bars = col["iteration"], col["bars"]
        elapsed = np.where(null["elapsed_ms"], col["step_s"] * 1e3, col["elapsed_ms"])
        metrics = ("learning_rate", "grad_norm", "loss_scale", "samples_per_sec", "tflops", "tokens_per_device")
        with np.errstate(invalid="ignore"):
            good = (n <= MAX_INT) & np.isfinite(elapsed) & (elapsed > 0)  # no time at all: NaN
            for name in ("tflops", "tokens_per_device"):
                good &= null[name] | (np.isfinite(col[name]) & (col[name] > 0))
            good &= null["skipped"] | ((col["skipped"] >= 0) & (col["skipped"] < 1 << 31))
        good &= ~np.logical_and.reduce([null[m] for m in metrics])  # a step's metrics are never none
        good[1:] &= (n[1:] > n[:-1]) & (bars[1:] >= bars[:-1])
        good[0] &= (not st.intervals or int(n[0]) > st.intervals.iteration[-1]) and int(bars[0]) >= st.bars
        k = hi - lo if good.all() else int(np.argmin(good))
        if k == 0:
            return 0
        col, null, elapsed = {a: v[:k] for a, v in col.items()}, {a: v[:k] for a, v in null.items()}, elapsed[:k]
        gbs = np.where(~null["global_batch"] & (col["global_batch"] > 0) & (col["global_batch"] < 1 << 62),
                       col["global_batch"], 0).astype(np.int64)  # as _iteration: 0 for none
        seq = col["seq_length"][~null["seq_length"] & (col["seq_length"] > 0)]
        if len(seq):
            st.seq_length = int(seq[-1])
        st.last_line, st.total_iterations, st.bars = int(rows.no[lo + k - 1]), int(col["total"][-1]), int(bars[k - 1])
        timestamps = rows.timestamps(lo, lo + k, st.stamps)
        st.intervals.extend(n[:k], elapsed, gbs, col["tflops"], col["tokens_per_device"])
        st.skipped += int(np.trunc(col["skipped"][~null["skipped"]]).astype(np.int64).sum())
        self.result.steps.add_block(len(self.result.runs), k, {
            "step": n[:k], "loss": col["loss"], "step_time_ms": elapsed, "timestamp": timestamps,
            "line_no": rows.no[lo:lo + k], "metrics": MapBlock(k, {
                **{m: col[m] for m in metrics[:4]}, "tflops_per_device": col["tflops"],
                "tokens_per_sec_per_device": col["tokens_per_device"]})})
        return k

    def _other(self, st: _State, msg: str) -> None:
        if (d := _DS_TIMER.search(msg)) is not None:
            st.ds_samples_per_sec = d.group(1)
        else:
            st.error = program_error(st.error, msg)

    def _iteration(self, line: Line, msg: str) -> bool:
        it = _ITERATION.search(msg)
        if it is None:
            return False
        values: dict[str, str] = {}
        rest = msg[it.end():]
        if "elapsed" in msg and not msg.rstrip().endswith("|"):
            rest = rest[:max(rest.rfind("|"), 0)]  # Megatron ends each field with " |": text after the last may be cut
        for head, value in _PAIR.findall(rest):  # each field between bars: "name: value" or "name=value"
            name = _NAMES[head] if head in _NAMES else _name(head)
            if name is not None and (value := value.strip()):
                values[name] = value.split("/")[0].strip()
        no, number = line.no, self.result.number
        elapsed = number(values.get("elapsed_ms"), "elapsed time per iteration (ms)", no)
        if elapsed is None and (s := number(values.get("step_s"), "train_step_timing in s", no)) is not None:
            elapsed = s * 1e3
        if self.run is not None and (elapsed is None or msg.count("|") < self.run.bars):
            self.run.partial, self.run.partial_at = line, int(it.group(1))  # cut: the last line, unless one follows
            return True
        if elapsed is None:
            return False
        n, total = int(it.group(1)), int(it.group(2))
        st = self.run
        if st is not None and st.intervals and n <= st.intervals.iteration[-1]:
            if st.intervals.holds(n):
                return True  # the same iteration printed again (a second call site, another rank)
            st = None  # an earlier iteration: the training started again
        if st is None:
            st = self.open(no)
        if st.partial is not None:  # an unreadable line within the run: its iterations count in no interval
            self.bad_line(st.partial)
            if st.intervals and st.intervals.iteration[-1] < st.partial_at < min(n, MAX_INT + 1):
                st.intervals.append(st.partial_at, None, None, None, None)
            st.partial = None
        st.last_line, st.total_iterations, st.bars = no, total, msg.count("|")
        if (stamp := _STAMP.search(msg[:it.start()])) is not None and (t := utc_seconds(*stamp.groups())):
            st.stamps.append(t)
        gbs = number(values.get("global_batch"), "global batch size", no)
        seq = number(values.get("seq_length"), "actual seqlen", no)
        if seq is not None and seq > 0:
            st.seq_length = int(seq)
        tflops = self._positive(number(values.get("tflops"), "TFLOP/s per GPU", no), "TFLOP/s per GPU", line)
        tokens = self._positive(number(values.get("tokens_per_device"), "tokens/s per GPU", no),
                                "tokens/s per GPU", line)
        elapsed = self._positive(elapsed, "elapsed time per iteration (ms)", line)
        if n <= MAX_INT:  # a larger one is a misprint: its row is refused (StepTable.add)
            st.intervals.append(n, elapsed, int(gbs) if gbs and 0 < gbs < 1 << 62 else None, tflops, tokens)
        loss = number(values.get("loss"), "lm loss", no)
        if loss is not None and math.isnan(loss):
            st.nan_loss += 1
        st.skipped += int(number(values.get("skipped"), "skipped iterations", no) or 0)
        metrics = {k: v for k in ("learning_rate", "grad_norm", "loss_scale", "samples_per_sec")
                   if (v := number(values.get(k), k, no)) is not None}
        if tflops is not None:
            metrics["tflops_per_device"] = tflops
        if tokens is not None:
            metrics["tokens_per_sec_per_device"] = tokens
        self.step(n, loss=loss, step_time_ms=elapsed, timestamp=st.stamps[-1] if st.stamps else None,
                  line_no=no, rank=line.rank, metrics=metrics or None)
        return True

    def _positive(self, value: float | None, name: str, line: Line) -> float | None:
        """``value`` when finite and > 0; otherwise an ``invalid_value`` problem naming the line, and None."""
        if value is None or (math.isfinite(value) and value > 0):
            return value
        self.result.problem("invalid_value", f"{name} {value:g} is not a finite number > 0; left out", line.no,
                            line.raw)
        return None

    def emit(self, st: _State) -> None:
        a = self.args
        seq = st.seq_length or _int(a.get("seq_length"))
        # intervals after the first (warm-up), each weighted by the iterations it covers
        samples, seconds, flop_s, flop_seconds, tflops_everywhere = st.intervals.sums()
        rate = samples / seconds if samples and seconds else None
        details: dict[str, str] = {k: a[k] for k in (*_LAYOUT, "num_layers", "hidden_size", "num_attention_heads",
                                                    "num_experts") if a.get(k) not in (None, "None")}
        if flop_s and tflops_everywhere:
            details["tflops_per_device"] = f"{flop_s / flop_seconds:.4g}"
        details["warmup_excluded"] = "yes" if len(st.intervals) > 1 else "no"
        details["skipped_iterations"] = str(st.skipped)
        if st.nan_loss:
            details["nan_loss_steps"] = str(st.nan_loss)
        if st.ds_samples_per_sec is not None:
            details["deepspeed_running_avg_samples_per_sec"] = st.ds_samples_per_sec
        if st.total_iterations is not None:
            details["train_iters"] = str(st.total_iterations)
        unit = "tokens/sec" if seq else "samples/sec"
        status = "ok" if rate is not None else "no_result"
        if st.partial is not None:
            status, st.error = "truncated", f"the log ends inside iteration line {st.partial.no}"
        if st.error is not None and status != "truncated":
            status = error_status(st.error)
        kw: dict[str, Any] = {}
        if status == "ok" and rate is not None:
            kw = {"throughput": rate * seq if seq else rate, "throughput_unit": unit, "throughput_derived": True}
        world = _int(a.get("world_size"))
        gbs = st.intervals.last_global_batch() or _int(a.get("global_batch"))
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="megatron", mode="train", precision=_precision(a),
            batch_size_per_device=_int(a.get("micro_batch")), global_batch_size=gbs,
            num_devices=world, num_ranks=world, num_steps=st.intervals.iteration[-1] if st.intervals else None,
            warmup_steps=st.intervals.iteration[0] if len(st.intervals) > 1 else None,
            started_at=st.stamps[0] if st.stamps else None, ended_at=st.stamps[-1] if st.stamps else None,
            status=status, status_detail=st.error, first_line=st.first_line, last_line=st.last_line,
            tags={"seq_length": str(seq)} if seq else {}, details=details, **kw))


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _precision(args: dict[str, str]) -> str | None:
    """fp8 (its recipe named), bf16 or fp16 where the arguments say; None where they do not."""
    if args.get("fp8") not in (None, "None", "False"):
        return "fp8"
    for name in ("bf16", "fp16"):
        if args.get(name) == "True":
            return name
    return "fp32" if args.get("fp16") == "False" and args.get("bf16") == "False" else None


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse a Megatron-family log (see the module docstring); unreadable iteration lines become problems."""
    return drive(_Parser, lines, result)
