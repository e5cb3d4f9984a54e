"""convnet-benchmarks era timers and early TensorFlow throughput lines, one module, six dialects.

Each dialect is a few handler functions that ``_dispatch`` calls for a line (the shared line driver reads them):

- ``torch7``: ``ModelType: AlexNet<TAB>Kernels: cudnn<TAB>Input shape: 128x3x224x224`` then
  ``<lib>  :updateOutput(): / :updateGradInput(): / :accGradParameters(): / :Forward: / :Backward: /
  :TOTAL:  <ms>`` (``soumith/convnet-benchmarks torch7/imagenet_winners/benchmark.lua``). One run per
  model: forward/backward/forward_backward ms per batch, batch = first input dimension,
  ``images_per_sec`` = batch × 1000 / TOTAL ms. The layer-wise script prints ``CONFIG: ...(bs = N,
  stride = s)`` and per-implementation ``:updateOutput():`` ... ``:TOTAL:`` lines (no Forward/Backward:
  forward = updateOutput, backward = updateGradInput + accGradParameters).
- ``theano``: ``CONFIG: input = ... ( bs = 128 , stride = 1 )`` then ``<impl> ==> fprop|bprop inputs|
  bprop weights ==> <int ms>`` or ``<impl> fprop: FAILED (...)`` (``theano/pylearn2_benchmark.py``).
- Layer benchmarks (Torch7 layer-wise, Theano) time one convolution, not a model: they become runs with
  ``mode="layer"``, ``model`` = the normalised config (``conv in=3x128x128 ker=3x96x11x11 stride=1``) and
  tag ``implementation``; their ms fields are filled but ``images_per_sec`` stays None, so that a layer is
  never compared with a whole network's throughput.
- ``neon``: tables ``| fprop | mean | median | min | max | msec |`` with rows fprop/bprop/iteration; one
  run per table. The log names neither the net nor the batch: model, batch and images/sec are None.
- ``chainer``: ``<arch>`` line, then ``Average Forward: / Backward: / Total: <x> ms``. No batch printed.
- ``tf_legacy``: ``<datetime>: step N, duration = d`` and ``<datetime>: Forward[-backward] across N steps,
  m +/- s sec / batch`` (``tensorflow/benchmark_*.py``). One run per ``across`` summary: ``Forward`` is
  mode inference (forward_ms), ``Forward-backward`` mode train (forward_backward_ms); ``± s`` is the
  standard deviation of step durations (detail ``duration_sd_ms``), not a standard error. Batch not printed.
- ``tf_estimator``: absl/glog ``examples/sec: r`` lines (TPUEstimator and Estimator), with ``loss = L, step = N
  (t sec)`` and ``global_step/sec: g`` before them. One run per ``Using config:`` (Estimator construction);
  it finished at TPUEstimator's ``Elapsed seconds`` or Estimator's ``Loss for final step: L.`` (detail
  ``final_loss``). Steps: one row per ``examples/sec`` line (an interval rate). ``throughput`` (examples/sec: the log does not say
  they are images, so ``images_per_sec`` stays NULL) = total examples / total time over the rate lines
  after the first (the first interval includes the early, slow steps): Σ Δstep / Σ (Δstep / r), Δstep =
  step difference between successive rate lines; when steps are not known, the arithmetic mean of those
  rates. A single rate line is used as is. Without examples/sec, the mean ``global_step/sec`` after the
  first (steps/sec). NVIDIA BERT's ``Throughput Average (sentences/sec) = X`` (not the "with overhead"
  one) is the throughput in sentences/sec and ends the run (``Total Training/Inference Time`` sets mode).
  ``global_batch_size`` = r / g when every line gives the same integer (±0.5%).

A run whose timer says ``FAILED`` is ``failed``; a run cut before its result is ``truncated``; an
Estimator run that finished without examples/sec (evaluation) is ``no_result``. Metrics None then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, parse_glog, utc_seconds

NAME = "convnet"
DESCRIPTION = "convnet-benchmarks timers (Torch7, neon, Chainer, Theano) and early TF step/Estimator lines"

_SNIFF = re.compile(
    r"^\S+[ \t]+:(?:Forward|Backward|TOTAL|updateOutput\(\)|updateGradInput\(\)|accGradParameters\(\)):"
    r"[ \t]+(?:[\d.]+|FAILED!)[ \t]*$"
    r"|^\|[ \t]*(?:fprop|bprop|iteration)[ \t]*\|[ \t]*[\d.]+[ \t]*\|"
    r"|^Average (?:Forward|Backward|Total):[ \t]+[\d.]+[ \t]+ms[ \t]*$"
    r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?:step \d+, duration = [\d.]+|Forward(?:-backward)? across \d+ steps, )"
    r"|(?:\] |^INFO:tensorflow:)(?:examples/sec: [\d.]+[ \t]*$|global_step/sec: [\d.]+[ \t]*$"
    r"|Throughput Average \(sentences/sec\) = [\d.]+)"
    r"|==> (?:fprop|bprop inputs|bprop weights)[ \t]*==>[ \t]+\d+",
    re.MULTILINE,
)
_SNIFF_KEYS = (":TOTAL:", ":Forward:", "():", "fprop", "Average ", " duration = ", " across ", "examples/sec",
               "global_step/sec")

_TORCH = re.compile(
    r"(\S+)\s+:(updateOutput|updateGradInput|accGradParameters|Forward|Backward|TOTAL)(?:\(\))?:\s+([\d.]+|FAILED!)\s*$"
)
_MODELTYPE = re.compile(r"ModelType: (.+?)\tKernels: (\S+)\tInput shape: (\d+)x(\S+?)\s*$")
_CONFIG = re.compile(r"CONFIG: input = (.+?) \* ker = (.+?) \(\s*bs = (\d+)\s*,\s*stride = (\d+)\s*\)")
_THEANO = re.compile(r"(.+?)\s+==> (fprop|bprop inputs|bprop weights)\s*==>\s+(\d+)\s*$")
_THEANO_FAIL = re.compile(r"(.+?) (fprop|bprop inputs|bprop weights): FAILED\b\s*(.*)$")
_NEON = re.compile(r"\|\s*(fprop|bprop|iteration)\s*\|" + r"\s*([\d.]+)\s*\|" * 4 + r"\s*(\w+)\s*\|")
_CHAINER = re.compile(r"Average (Forward|Backward|Total):\s+([\d.]+)\s+ms\s*$")
_WORD = re.compile(r"[A-Za-z][\w.-]*$")
_TF_LINE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?): (?:step (\d+), duration = ([\d.]+)"
    r"|(Forward|Forward-backward) across (\d+) steps, ([\d.]+) \+/- ([\d.]+) sec / batch)\s*$"
)
_GPU = re.compile(r"(?:device: \d+, name: ([^,]+), pci bus id|^Running on device: (.+?)\s*$|^Using gpu device \d+: (.+?)\s*$)")
_EST = re.compile(
    r"(?:examples/sec: ([\d.]+)|global_step/sec: ([\d.]+)|loss = (\S+), step = (\d+)(?: \(([\d.]+) sec\))?"
    r"|Training for (\d+) steps|Precision: (\w+)|\*\*\* Num TPU Cores: (\d+)"
    r"|Finished training up to step \d+\. Elapsed seconds (\d+)|(Using config:)"
    r"|(Starting to evaluate|Starting evaluation at)|(Evaluation finished after|Eval results:)"
    r"|Saving dict for global step \d+: (.*)|Throughput Average \(sentences/sec\) = ([\d.]+)"
    r"|Total (Training|Inference) Time|Loss for final step: (-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|nan|inf)\.?)"
)
_EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exhausted)(?::.*)?$")
_BAD_MARKERS = (":TOTAL:", ":Forward:", ":Backward:", "==> fprop", "==> bprop", ", duration = ", " steps, ",
                "examples/sec", "CONFIG: ", "ModelType: ")
_PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_ESTIMATOR_KEYS = ("examples/sec", "global_step/sec", "loss = ", "Training for", "Precision:", "TPU Cores",
                   "Loss for final step",
                   "Finished training", "Using config", "to evaluate", "Starting evaluation",
                   "Evaluation finished", "Eval results", "Saving dict", "Throughput Average", "Total ")


def sniff(head: str) -> bool:
    """A Torch7/neon/Chainer/Theano timer line, an early-TF step/summary line or Estimator examples/sec."""
    if not contains(head, "==>") and not any(contains(head, k) for k in _SNIFF_KEYS):
        return False
    return _SNIFF.search(head) is not None


class _Parser(LineFormat[dict[str, Any]]):
    """The open run is a dict of Run fields plus private ``_`` accumulators. Finished runs are kept in
    ``runs`` and built at the end, when the file-wide facts (``ctx``: the GPU name) are known."""

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.runs: list[dict[str, Any]] = []
        self.ctx: dict[str, Any] = {}
        self.config: tuple[str, int] | None = None  # current layer CONFIG (model text, batch)
        self.word: str | None = None  # the last bare word line (Chainer prints the arch name)
        self.base = len(result.runs)  # run_index of the first run of this file

    def start(self, dialect: str, n: int, **fields: Any) -> dict[str, Any]:
        """Open a run of one of the dialects this module reads."""
        self.close()
        frameworks = {"tf_legacy": "tensorflow", "tf_estimator": "tensorflow"}
        self.run = {"format": NAME, "framework": frameworks.get(dialect, dialect), "first_line": n,
                    "last_line": n, "_dialect": dialect, **fields}
        return self.run

    def read(self, line: Line) -> bool:
        text = line.raw.rstrip()
        if text:
            _dispatch(self, line.no, text)
        return True

    def emit(self, run: dict[str, Any]) -> None:
        self.runs.append(run)

    def finish(self) -> None:
        for kw in self.runs:
            _emit(self, kw)
        if not self.runs:
            self.result.problem("missing_field", "no convnet-benchmarks timer or throughput line found")

    def run_index(self) -> int:
        """Index of the open run (runs are numbered in the order they are opened)."""
        return self.base + len(self.runs)


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one convnet-era output file into runs (per model, layer config, table or phase) and steps."""
    return drive(_Parser, lines, result)


def _dispatch(p: _Parser, n: int, line: str) -> None:
    c = line[0]
    if c == "|":
        _neon(p, n, line)
    elif c == "2" and line[4:5] == "-" and (m := _TF_LINE.match(line)):
        _tf_legacy(p, n, m)
    elif "==>" in line and (m := _THEANO.match(line)):
        _layer_pass(p, n, m.group(1).strip(), m.group(2), float(m.group(3)), None)
    elif "FAILED" in line and (m := _THEANO_FAIL.match(line)):
        _layer_pass(p, n, m.group(1).strip(), m.group(2), None, line)
    elif ":" in line and (m := _TORCH.match(line)):
        _torch(p, n, m)
    elif line.startswith("ModelType: ") and (m := _MODELTYPE.match(line)):
        p.start("torch7", n, model=m.group(1), batch_size_per_device=int(m.group(3)), mode="train",
               tags={"kernels": m.group(2), "input_shape": f"{m.group(3)}x{m.group(4)}"})
    elif line.startswith("CONFIG: ") and (m := _CONFIG.match(line)):
        p.close()
        dims = [re.sub(r"\s+", "", g) for g in m.group(1, 2)]
        p.config = (f"conv in={dims[0]} ker={dims[1]} stride={m.group(4)}", int(m.group(3)))
    elif line.startswith("Average ") and (m := _CHAINER.match(line)):
        _chainer(p, n, m.group(1), float(m.group(2)))
    elif (c in "IWEF" and line[1:2].isdigit()) or line.startswith(("INFO:tensorflow:", "WARNING:tensorflow:")):
        _estimator_line(p, n, line)
    elif line.startswith(("Running on device", "Using gpu device")) or "name: " in line:
        if m := _GPU.search(line):
            p.ctx.setdefault("gpu_model", next(g for g in m.groups() if g).strip())
    elif _WORD.match(line):
        p.word = line
    elif any(k in line for k in _BAD_MARKERS):
        p.result.problem("bad_line", "a timer or throughput line that could not be read", n, line)
    elif p.run is not None and p.run["_dialect"] == "tf_estimator":
        _error(p.run, line)


def _torch(p: _Parser, n: int, m: re.Match[str]) -> None:
    lib, key, value = m.group(1), m.group(2), m.group(3)
    cur = p.run
    if p.config is not None and (cur is None or cur.get("tags", {}).get("implementation") != lib or "TOTAL" in cur):
        cur = _open_layer(p, n, "torch7", lib)
    elif cur is None or cur["_dialect"] != "torch7":
        cur = p.start("torch7", n, mode="train")
    cur["last_line"] = n
    if value == "FAILED!":
        cur.setdefault("_failed", m.group(0).strip())
    else:
        cur[key] = float(value)


def _open_layer(p: _Parser, n: int, framework: str, impl: str) -> dict[str, Any]:
    model, batch = p.config or (None, None)
    return p.start(framework, n, model=model, batch_size_per_device=batch, mode="layer",
                  tags={"implementation": impl})


def _layer_pass(p: _Parser, n: int, impl: str, pass_name: str, ms: float | None, failed: str | None) -> None:
    """A Theano ``impl ==> pass ==> ms`` (or ``impl pass: FAILED ...``) line."""
    cur = p.run
    if cur is None or cur.get("tags", {}).get("implementation") != impl or pass_name in cur:
        cur = _open_layer(p, n, "theano", impl)
    cur["last_line"] = n
    cur[pass_name] = ms
    if failed is not None:
        cur.setdefault("_failed", failed)


def _neon(p: _Parser, n: int, line: str) -> None:
    m = _NEON.match(line)
    if m is None:
        if "Func" in line and "Mean" in line:  # a table header: one table per benchmarked net
            p.start("neon", n, mode="train")
        elif p.run is not None and p.run["_dialect"] == "neon":
            p.result.problem("bad_line", "neon table row without numbers", n, line)
        return
    cur = p.run
    if cur is None or cur["_dialect"] != "neon" or m.group(1) in cur:  # a repeated row: the next table
        cur = p.start("neon", n, mode="train")
    scale = {"msec": 1.0, "ms": 1.0, "sec": 1000.0, "usec": 0.001}.get(m.group(6))
    if scale is None:
        p.result.problem("bad_line", f"unknown time unit {m.group(6)!r}", n, line)
        return
    mean, median, low, high = (float(v) * scale for v in m.group(2, 3, 4, 5))
    cur[m.group(1)] = mean
    cur["last_line"] = n
    if m.group(1) == "iteration":
        cur.setdefault("details", {}).update(
            iteration_median_ms=f"{median:g}", iteration_min_ms=f"{low:g}", iteration_max_ms=f"{high:g}")


def _chainer(p: _Parser, n: int, key: str, ms: float) -> None:
    cur = p.run
    if cur is None or cur["_dialect"] != "chainer" or key in cur:
        cur = p.start("chainer", n, model=p.word, mode="train")
    cur[key] = ms
    cur["last_line"] = n


def _tf_legacy(p: _Parser, n: int, m: re.Match[str]) -> None:
    y, mo, d, hh, mi, ss = m.group(1, 2, 3, 4, 5, 6)
    stamp = utc_seconds(y, mo, d, hh, mi, ss)
    cur = p.run
    if cur is None or cur["_dialect"] != "tf_legacy" or "_summary" in cur:
        cur = p.start("tf_legacy", n, started_at=stamp)
    cur["last_line"], cur["ended_at"] = n, stamp
    if m.group(7) is not None:  # step line: the duration of that one step (seconds)
        p.result.steps.add(p.run_index(), int(m.group(7)), step_time_ms=float(m.group(8)) * 1000.0,
                        timestamp=stamp, line_no=n)
        return
    kind, steps, mean_s, sd_s = m.group(9), int(m.group(10)), float(m.group(11)), float(m.group(12))
    cur["_summary"] = True
    cur["num_steps"] = steps
    cur["mode"] = "inference" if kind == "Forward" else "train"
    cur["forward_ms" if kind == "Forward" else "forward_backward_ms"] = mean_s * 1000.0
    cur.setdefault("tags", {})["benchmark"] = kind.lower()
    cur.setdefault("details", {})["duration_sd_ms"] = f"{sd_s * 1000.0:g}"


def _estimator_line(p: _Parser, n: int, line: str) -> None:
    if line[0] in "IWEF":
        g = parse_glog(line)
        msg = g.message if g is not None else line
    else:
        msg = line.split(":", 2)[2]
    cur = p.run if p.run is not None and p.run["_dialect"] == "tf_estimator" else None
    if not any(k in msg for k in _ESTIMATOR_KEYS) or (m := _EST.search(msg)) is None:
        if "examples/sec" in msg or "global_step/sec" in msg:
            p.result.problem("bad_line", "an Estimator rate line that could not be read", n, line)
        elif cur is not None:
            _error(cur, msg)
        return
    if m.group(10) is not None or cur is None:  # "Using config:" = a new Estimator in this process
        cur = p.start("tf_estimator", n, _rates=[0, None, 0.0, 0.0, 0.0, True], _ratios=[])
    cur["last_line"] = n
    _estimator_fields(p, cur, n, m)


def _estimator_fields(p: _Parser, cur: dict[str, Any], n: int, m: re.Match[str]) -> None:
    if m.group(1) is not None:
        _estimator_rate(p, cur, n, float(m.group(1)))
    elif m.group(2) is not None:
        cur["_gsps"] = float(m.group(2))
        cur.setdefault("_gsps_all", []).append(float(m.group(2)))
    elif m.group(4) is not None:
        cur["_step"], cur["_loss"] = int(m.group(4)), _float(m.group(3))
    elif m.group(6) is not None:
        cur.update(num_steps=int(m.group(6)), mode="train")
    elif m.group(7) is not None:
        cur["precision"] = _PRECISION.get(m.group(7).lower(), m.group(7).lower())
    elif m.group(8) is not None:
        cur.setdefault("tags", {}).update(accelerator="TPU", tpu_cores=m.group(8))
    elif m.group(9) is not None:
        cur.update(wall_time_s=float(m.group(9)), _finished=True)
    elif m.group(11) is not None:
        cur["mode"] = "eval"
    elif m.group(12) is not None:
        cur["_finished"] = True
    elif m.group(13) is not None:
        for key, value in re.findall(r"(top_[15]_accuracy|loss) = ([\d.eE+-]+)", m.group(13)):
            cur.setdefault("details", {})[f"eval_{key}"] = value
    elif m.group(14) is not None:  # NVIDIA BERT's closing summary: steady-state sentences/sec
        cur.update(_sentences=float(m.group(14)), _finished=True)
    elif m.group(15) is not None:
        cur["mode"] = "train" if m.group(15) == "Training" else "inference"
    elif m.group(16) is not None:  # Estimator.train's last line: the run finished (no TPU "Elapsed seconds")
        cur["_finished"] = True
        cur.setdefault("details", {})["final_loss"] = m.group(16)


def _estimator_rate(p: _Parser, cur: dict[str, Any], n: int, rate: float) -> None:
    """One ``examples/sec`` line: a step row, and the sums behind the run's throughput."""
    step, gsps = cur.get("_step"), cur.pop("_gsps", None)
    metrics = {"global_step_per_sec": gsps} if gsps is not None else None
    p.result.steps.add(p.run_index(), step, images_per_sec=rate, interval_images_per_sec=rate,
                    loss=cur.get("_loss"), line_no=n, metrics=metrics)
    if gsps:
        r = cur["_ratios"]  # [min, max, first] of examples/sec ÷ global_step/sec = global batch
        q = rate / gsps
        r[:] = [min(r[0], q), max(r[1], q), r[2]] if r else [q, q, q]
    acc = cur["_rates"]  # [count, previous step, Σk, Σk/r, Σr (after the first line), steps known]
    acc[0] += 1
    if acc[0] == 1:
        cur["_first_rate"] = rate
    else:
        k = step - acc[1] if step is not None and acc[1] is not None else None
        acc[5] = acc[5] and k is not None and k > 0
        if acc[5] and k:
            acc[2] += k
            acc[3] += k / rate
        acc[4] += rate
    acc[1] = step


def _error(cur: dict[str, Any], msg: str) -> None:
    if msg.startswith("Traceback (most recent call last)"):
        cur.setdefault("_error", "Traceback (most recent call last):")
    elif ("Error" in msg or "Exception" in msg or "Exhausted" in msg) and _EXC.match(msg):
        cur["_error"] = msg


def _float(text: str) -> float | None:
    try:
        v = float(text.rstrip(","))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _emit(p: _Parser, kw: dict[str, Any]) -> None:
    """Derive the metrics of one finished run and append the Run."""
    fields = {k: v for k, v in kw.items() if not k.startswith("_") and k in Run.__dataclass_fields__}
    for k, v in p.ctx.items():
        fields.setdefault(k, v)
    derive = {"torch7": _torch_metrics, "theano": _theano_metrics, "neon": _neon_metrics,
              "chainer": _chainer_metrics, "tf_legacy": _legacy_metrics, "tf_estimator": _estimator_metrics}
    fields.update(derive[kw["_dialect"]](kw))
    if fields.get("mode") == "layer":
        fields["images_per_sec"] = None  # a layer's timing is not a model throughput (module docstring)
    if fields.get("status", "ok") != "ok":
        for name in ("images_per_sec", "images_per_sec_mean", "forward_ms", "backward_ms", "forward_backward_ms"):
            fields[name] = None
    p.result.runs.append(Run(run_index=len(p.result.runs), **fields))


def _timer_status(kw: dict[str, Any], complete: bool) -> dict[str, Any]:
    if "_failed" in kw:
        return {"status": "failed", "status_detail": kw["_failed"]}
    return {"status": "ok"} if complete else {"status": "truncated"}


def _images_per_sec(batch: int | None, fb_ms: float | None) -> float | None:
    """batch x 1000 / ms: a figure the timers never print (the run's throughput_derived)."""
    return batch * 1000.0 / fb_ms if batch and fb_ms else None


def _torch_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    fwd = kw.get("Forward", kw.get("updateOutput"))
    grad_in, grad_w = kw.get("updateGradInput"), kw.get("accGradParameters")
    bwd = kw.get("Backward", grad_in + grad_w if grad_in is not None and grad_w is not None else None)
    total = kw.get("TOTAL")
    out = {"forward_ms": fwd, "backward_ms": bwd, "forward_backward_ms": total}
    out["images_per_sec"] = _images_per_sec(kw.get("batch_size_per_device"), total)
    out["throughput_derived"] = True
    return out | _timer_status(kw, total is not None)


def _theano_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    fwd, b_in, b_w = kw.get("fprop"), kw.get("bprop inputs"), kw.get("bprop weights")
    bwd = b_in + b_w if b_in is not None and b_w is not None else None
    total = fwd + bwd if fwd is not None and bwd is not None else None
    return {"forward_ms": fwd, "backward_ms": bwd, "forward_backward_ms": total} | _timer_status(kw, total is not None)


def _neon_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    out = {"forward_ms": kw.get("fprop"), "backward_ms": kw.get("bprop"), "forward_backward_ms": kw.get("iteration")}
    return out | _timer_status(kw, kw.get("iteration") is not None)


def _chainer_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    out = {"forward_ms": kw.get("Forward"), "backward_ms": kw.get("Backward"), "forward_backward_ms": kw.get("Total")}
    return out | _timer_status(kw, kw.get("Total") is not None)


def _legacy_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _timer_status(kw, "_summary" in kw)
    if kw.get("ended_at") is not None and kw.get("started_at") is not None:
        out["wall_time_s"] = kw["ended_at"] - kw["started_at"]
    return out


def _estimator_metrics(kw: dict[str, Any]) -> dict[str, Any]:
    count, _, sum_k, sum_k_over_r, sum_r, steps_known = kw["_rates"]
    out: dict[str, Any] = {}
    steps = kw.get("_gsps_all", [])[1:] or kw.get("_gsps_all", [])
    if "_sentences" in kw:
        out.update(throughput=kw["_sentences"], throughput_unit="sentences/sec")
    elif count == 1:
        out.update(throughput=kw["_first_rate"], throughput_unit="examples/sec")
    elif count > 1:
        mean = sum_r / (count - 1)
        out.update(throughput=sum_k / sum_k_over_r if steps_known and sum_k_over_r else mean,
                   throughput_unit="examples/sec")
    elif steps:  # an Estimator without examples/sec: its steps, not samples (the batch is not printed)
        out.update(throughput=sum(steps) / len(steps), throughput_unit="steps/sec")
    ratios = kw["_ratios"]
    if ratios and ratios[1] - ratios[0] <= 0.005 * ratios[0] and abs(ratios[2] - round(ratios[2])) < 0.005 * ratios[2]:
        out["global_batch_size"] = round(ratios[2])
    finished = kw.get("_finished", False)
    if finished and (count or "throughput" in out):
        out["status"] = "ok"
    elif finished:
        out["status"] = "no_result"
    elif "_error" in kw:
        out["status"], out["status_detail"] = "failed", kw["_error"]
        if "Exhausted" in kw["_error"] or "out of memory" in kw["_error"].lower():
            out["status"] = "oom"
    else:
        out["status"] = "truncated"
    return out
