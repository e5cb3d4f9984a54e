"""tf_cnn_benchmarks output, every era (log-formats.md §0-§3), bare or behind MPI/Gloo/Slurm rank prefixes.

- One ``Run`` per header block; the ranks of one job share it. A ``TensorFlow:`` (or ``Model:``) line
  from a rank already active in the current run starts the next run, as does a step counter going back.
- Header (§1): Dataset ``... (synthetic)`` -> data "synthetic", another name -> "real"; Mode training /
  forward only (forward-only) / evaluation -> train / inference / eval (training + evaluation -> train,
  tag ``mode``); ``B per device`` may be a float (old TF) or unindented (Lambda). num_gpus = G/B (None
  on CPU devices, tag device=cpu); num_nodes = G/(B x len(Devices)), None for horovod and single-session
  modes whose device list is not the local one. Other header lines go to tags (``Num epochs``, derived
  from ``Num batches``, to details).
- Step lines (§2) print the cumulative mean m_k = b·k/T_k since warm-up, so the rate of the interval
  (k1, k2] is (k2 - k1) / (k2/m2 - k1/m1): the per-process batch b cancels. The first printed step's
  interval starts at step 0. ``images_per_sec_mean`` = the arithmetic mean of the interval rates;
  stderr / jitter = the last step line's; num_steps = the last printed step; a ``nan`` loss is stored
  as None (detail nan_loss_steps). Eval ``k x examples/sec`` lines are interval rates already (metrics
  ``{"eval": 1.0}``); the ``Accuracy @ 1 = a Accuracy @ 5 = b [n examples]`` values go to details.
- ``total images/sec`` (§3) -> images_per_sec. Every Horovod rank prints its own extrapolated total:
  the run takes rank 0's (else the lowest rank's with a total), never a sum; images_per_sec_ranks keeps
  each rank's. Step-derived metrics come from that same rank.
- Time: wall_time_s = last - first Lambda step stamp (`` <unix s>`` appended to step lines; it omits
  step 1's own duration). TF stderr stamps are not used for it: the training loop logs nothing to
  stderr, so they would time set-up, not training. started_at = the first stamp of any kind; ended_at
  = the last one if read after the last step line (TF ``2020-09-05 18:47:50.1: I`` stamps are local
  time read as UTC; absl ``I0000 00:00:<unix s>`` and Lambda stamps are UTC).
- Status: ok (a total); else oom (ResourceExhaustedError / ``OOM when allocating``); failed (traceback,
  exception line, ``Error reported to Coordinator``); truncated (steps, no error); no_result (nothing
  ran, or it finished -- ``Done with training`` / accuracy line -- without a total). Allocator warnings
  (``ran out of memory trying to allocate``) occur in healthy runs and are ignored; errors after a
  total (teardown) do not change the status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bench.ingest.formats.tf_cnn_run import NAME as NAME  # the registry reads NAME here
from bench.ingest.formats.tf_cnn_run import RunState, build_run
from bench.ingest.records import ParseResult
from bench.ingest.text import contains, split_rank

DESCRIPTION = "TensorFlow tf_cnn_benchmarks (header, images/sec step lines, total images/sec; any era, multi-rank)"

_F = r"[-+]?(?:\d+\.\d+|nan|inf)"  # loss / accuracy: always printed with %.3f (or nan/inf)
_STEP = re.compile(
    r"(\d+)\s+images/sec: (\d+(?:\.\d*)?)(?: \+/- (\d+(?:\.\d*)?|nan) \(jitter = (\d+(?:\.\d*)?|nan)\))?"
    rf"(?:\s+({_F})(?:\s+({_F})(?:\s+({_F}))?)?)?(?:\s+(\d{{9,11}}))?\s*$"  # loss, top-1, top-5 by position
)
_EVAL = re.compile(r"(\d+)\s+(\d+(?:\.\d*)?) examples/sec(?:\s+(\d{9,11}))?\s*$")
#: Any number (signed, exponent, nan, inf): what it says is checked once, after the parse (bench.ingest.checks),
#: so that ``total images/sec: -1`` is an invalid run with its value named, not an unreadable line.
_TOTAL = re.compile(r"total images/sec: ([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)\s*(?:\d{9,11})?\s*$")
_PER_DEVICE = re.compile(r"\s*(\d+(?:\.\d+)?) per device\s*$")
_GROUP = re.compile(r"\s*(\d+) batches per prepocessing group\s*$")
_ACCURACY = re.compile(r"(?:Accuracy|Precision) @ 1 = ([\d.]+|nan) (?:Accuracy|recall) @ 5 = ([\d.]+|nan)(?: \[(\d+) examples\])?")
_EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt)(?::|\s*$)")
_COORD = re.compile(r"Error reported to Coordinator: (.*)")
#: The root cause under TensorFlow's wrappers ("2 root error(s) found."): a numbered root error, or the op
#: that failed with where (``OP_REQUIRES failed at nccl_ops.cc:104 : Internal: unhandled system error``).
_ROOT = re.compile(r"(?:^\s*\(\d+\) |OP_REQUIRES failed at (\S+) : )((?:Internal|Unknown|Invalid ?argument|Not ?found|"
                   r"Failed ?precondition|Resource ?exhausted|Unavailable|Aborted|Data ?loss|Out ?of ?range|"
                   r"Unimplemented|Cancell?ed|Deadline ?exceeded|Permission ?denied): .*)", re.IGNORECASE)
_GPU = re.compile(
    r"StreamExecutor device \(\d+\): (.+?), Compute Capability"
    r"|\(device: \d+, name: ([^,]+),"  # TF>=1.5 "physical GPU (device: ..."; TF<=1.4 "-> (device: 0, name: X, pci"
    r"|name: (.+?) (?:major: \d|computeCapability: )"
    r"|name: (.+?)\s+ROCm AMD GPU ISA"
)
_FLAG = re.compile(r"--(num_warmup_batches|use_fp16)(?:[= ]([^\s-]\S*))?")
_ROUND_UP = re.compile(r"Round up warm up steps to (\d+)")
_SNIFF_STEP = re.compile(r"\d\s+images/sec: \d+(?:\.\d*)? \+/- [\d.]+ \(jitter = ")
_SNIFF_HEADER = re.compile(r"Batch size: +\d+(?:\.\d+)? global")
_SNIFF_TRACE = re.compile(r'File "[^"]*(?:tf_cnn_benchmarks|benchmark_cnn)\.py", line \d')

# Header label -> key in the run's header dict; keys starting with "tag:" become Run.tags, "detail:" Run.details.
LABELS = {
    "TensorFlow": "framework_version", "Model": "model", "Dataset": "dataset", "Mode": "mode",
    "Batch size": "global", "Devices": "devices", "Data format": "data_format",
    "Variables": "variable_update", "AllReduce": "all_reduce", "SingleSess": "tag:single_session",
    "Num batches": "tag:num_batches", "Num epochs": "detail:num_epochs", "Num examples": "detail:num_examples", "NUMA bind": "tag:numa_bind",
    "RewriterConfig": "tag:rewriter_config", "Layout optimizer": "tag:layout_optimizer",
    "Optimizer": "tag:optimizer", "Use NCCL": "tag:use_nccl", "Sync": "tag:sync",
    "Staged vars": "tag:staged_vars", "Horovod on": "tag:horovod_device",
}
#: TensorFlow's stderr line when XLA compiled a cluster ("... xla_compilation_cache.cc:241] Compiled cluster
#: using XLA!  This line is logged at most once ..."): details['xla'] = 'compiled'. _native.c knows it too.
XLA_MARK = "Compiled cluster using XLA"
RARE_MARKERS = ("Accuracy @", "Precision @", "Round up warm", "Done with training")


def sniff(head: str) -> bool:
    """A tf_cnn step line, a total, a ``Batch size: G global`` header with ``Variables:``, or a
    traceback through tf_cnn_benchmarks.py. Horovod synthetic (``Img/sec per GPU``), nvcnn
    (``Images/sec:``, capital I), DLLogger and MLPerf lines match none of these."""
    if contains(head, "total images/sec: ") or (contains(head, "images/sec: ") and _SNIFF_STEP.search(head)):  # the substring test
        # first: the regex alone tries a match at every digit of a digit-heavy file (telemetry)
        return True
    if contains(head, "Variables:") and _SNIFF_HEADER.search(head):
        return True
    return contains(head, "tf_cnn_benchmarks") and _SNIFF_TRACE.search(head) is not None


class Reader:
    """The state machine behind ``parse_lines``: runs so far, the open run and what precedes the next.
    Public for the C fast path (``tf_cnn_scan``), which feeds it the lines it does not read itself."""

    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.runs: list[RunState] = []
        self.cur: RunState | None = None
        self.pending = RunState()  # context (stamps, errors, flags) read before the next run starts
        self.gpu: str | None = None
        # Stamped stderr lines since the last run boundary (first, last); kept as text and parsed
        # once, because a Lambda file is mostly such lines. ``flush_stamps`` hands them to their run.
        self.seg_first: str | None = None
        self.seg_last: str | None = None
        self.seg_last_no = 0

    # -- run boundaries -------------------------------------------------------------------------
    def flush_stamps(self) -> None:
        """Give the stamps read since the last boundary to the context they were read in."""
        if self.seg_first is not None:
            ctx = self.context()
            if ctx.stamp_first is None:
                ctx.stamp_first = self.seg_first
            ctx.stamp_last, ctx.stamp_last_no = self.seg_last, self.seg_last_no
            self.seg_first = self.seg_last = None

    def start_run(self, no: int) -> RunState:
        self.flush_stamps()
        st, self.pending = self.pending, RunState()
        st.index = len(self.runs)
        st.first_line = no
        self.runs.append(st)
        self.cur = st
        return st

    def context(self) -> RunState:
        """Where stamps and command-line flags go: the open run, or the next one once it is done."""
        cur = self.cur
        return cur if cur is not None and not cur.done else self.pending

    def feed(self, no: int, line: str) -> None:
        """Line ``no`` of the file, whatever it is (empty lines are skipped)."""
        if line[:1] == "2" and line[4:5] == "-":  # "2020-09-05 18:47:50.15: I ...": most of a log
            self.stderr_line(no, line)
        elif line:
            self.line(no, line)

    def line(self, no: int, line: str) -> None:
        """Any line but a bare stamped stderr line: strip a rank prefix, then cheap guards dispatch."""
        c, rank = line[0], None
        if c == "[" or c == " " or (c.isdigit() and line.find(": ", 1, 8) > 0) or (
                line[3:4] == " " and "]<std" in line[:40]):
            rank, line = split_rank(line)
            if not line:
                return
            c = line[0]
            if c == "2" and line[4:5] == "-":
                self.stderr_line(no, line)
                return
        if "/sec" in line:
            self.rate_line(no, rank, line)
            return
        if c.isupper():
            i = line.find(":", 1, 17)
            key = LABELS.get(line[:i]) if i > 0 else None
            if key is not None:
                self.header(no, rank, key, line[i + 1:].strip())
                return
            if c in "APRD" and line.startswith(RARE_MARKERS):
                self.rare_line(no, line)
                return
        elif (c.isdigit() or c == " ") and line.endswith((" per device", "prepocessing group")):
            if self.continuation(no, line):
                return
        if "rror" in line or "xception" in line or "OOM" in line or line.startswith("Traceback ("):
            self.error_line(no, line)
        if self.gpu is None and "name: " in line:
            self.find_gpu(line)
        if " --" in line:
            self.flags(line)
        elif line[1:12] == "0000 00:00:":  # absl C++ before InitializeLog: "I0000 00:00:<unix s>"
            self.stderr_line(no, line)

    # -- rate lines (the hot path) --------------------------------------------------------------
    def rate_line(self, no: int, rank: int | None, line: str) -> None:
        """``k images/sec: ...`` step lines, ``total images/sec: x`` and eval ``k x examples/sec``."""
        m = _STEP.match(line)
        if m is not None:
            self.add_step(no, rank, m)
        elif line.startswith("total images/sec:"):
            t = _TOTAL.match(line)
            if t is None:
                self.result.problem("bad_line", "unreadable tf_cnn total line", no, line)
                return
            st = self.cur or self.start_run(no)
            st.mark(rank, no).total = float(t[1])
            if not st.done:
                self.flush_stamps()
                st.done = True
        elif "examples/sec" in line and line[:1].isdigit():
            e = _EVAL.match(line)
            if e is None:
                self.result.problem("bad_line", "unreadable tf_cnn eval line", no, line)
            else:
                self.add_eval(no, rank, e)
        elif line[:1].isdigit() and "images/sec:" in line:
            self.result.problem("bad_line", "unreadable tf_cnn step line", no, line)
        elif line.startswith("Step") and "Img/sec" in line and self.cur is not None:
            parts = line.split()  # "Step  Img/sec  total_loss [top_1_accuracy top_5_accuracy]"
            if len(parts) >= 3:
                self.cur.details.setdefault("loss_name", parts[2])

    def add_step(self, no: int, rank: int | None, m: re.Match[str]) -> None:
        self.add_step_values(no, rank, int(m[1]), float(m[2]), _num(m[3]), _num(m[4]), _num(m[5]), _num(m[6]),
                             _num(m[7]), _num(m[8]))

    def add_step_values(self, no: int, rank: int | None, step: int, mean: float, stderr: float | None,
                        jitter: float | None, loss: float | None, top1: float | None, top5: float | None,
                        ts: float | None) -> None:
        """One step line's values (``None`` where the line has no such field); the C scanner's rows
        come here too (bench.ingest.formats.tf_cnn_scan), so both paths share these rules."""
        st = self.cur or self.start_run(no)
        if rank in st.series and step <= st.series[rank].last_step:  # counter restarted: a new run
            st = self.start_run(no)
        s = st.mark(rank, no)
        st.step_line = no
        rate = s.advance(step, mean)
        s.stderr, s.jitter = stderr, jitter
        if loss is not None and loss != loss:  # a printed nan (or -nan) loss
            st.nan_losses += 1
        if ts is not None:
            if s.first_ts is None:
                s.first_ts = ts
            s.last_ts = ts
        self.result.steps.add(
            st.index, step, rank=rank, images_per_sec=mean, interval_images_per_sec=rate,
            images_per_sec_stderr=stderr, images_per_sec_jitter=jitter, loss=loss,
            top1_accuracy=top1, top5_accuracy=top5, timestamp=ts, line_no=no,
        )

    def add_eval(self, no: int, rank: int | None, e: re.Match[str]) -> None:
        st = self.cur or self.start_run(no)
        s = st.mark(rank, no)
        st.step_line, s.eval_step, rate = no, int(e[1]), float(e[2])
        s.eval_sum += rate
        s.eval_n += 1
        ts = float(e[3]) if e[3] is not None else None
        self.result.steps.add(st.index, s.eval_step, rank=rank, images_per_sec=rate,
                              interval_images_per_sec=rate, timestamp=ts, line_no=no, metrics={"eval": 1.0})

    # -- header -----------------------------------------------------------------------------------
    def header(self, no: int, rank: int | None, key: str, value: str) -> None:
        cur = self.cur
        if key == "framework_version":
            if cur is None or rank in cur.active:
                cur = self.start_run(no)
            cur.tf_ranks.add(rank)
        elif key == "model":
            if cur is None or (rank in cur.active and (rank not in cur.tf_ranks or rank in cur.model_ranks)):
                cur = self.start_run(no)
            cur.model_ranks.add(rank)
        elif cur is None:
            cur = self.start_run(no)
        if key in ("framework_version", "model"):
            cur.active.add(rank)
        cur.first_line = cur.first_line or no
        cur.last_line = no
        if key.startswith("tag:"):
            cur.tags.setdefault(key[4:], value)
        elif key.startswith("detail:"):
            cur.details.setdefault(key[7:], value)
        else:
            cur.hdr.setdefault(key, value)

    def continuation(self, no: int, line: str) -> bool:
        """The ``B per device`` / ``k batches per prepocessing group`` lines under ``Batch size:``."""
        m = _PER_DEVICE.match(line)
        st = self.cur
        if m is not None and st is not None:
            if "per_device" not in st.hdr:
                st.hdr["per_device"], st.hdr["per_device_line"] = m[1], no
            st.last_line = no
            return True
        g = _GROUP.match(line)
        if g is not None and st is not None:
            st.tags.setdefault("batch_group_size", g[1])
            return True
        return False

    # -- errors, rare lines ---------------------------------------------------------------------------
    def error_line(self, no: int, line: str) -> None:
        """Tracebacks, exception lines, coordinator errors and OOM markers (errors in a run that printed
        a total, e.g. teardown exceptions, do not change its status)."""
        st = self.cur if self.cur is not None else self.pending
        is_oom = "ResourceExhaustedError" in line or "OOM when allocating" in line
        if is_oom:
            st.oom = True
            if st.oom_detail is None:
                st.oom_detail = line[:500]
        self.root_cause(st, line)
        c = _COORD.search(line)
        if c is not None:
            if st.coord_detail is None:
                st.coord_detail = line[c.start():][:500]
        elif _EXC.match(line):
            st.exc_detail = line[:500]
        elif not is_oom and not line.startswith("Traceback ("):
            return
        if st.error_line is None:
            st.error_line = no
        st.last_line = no

    @staticmethod
    def root_cause(st: RunState, line: str) -> None:
        """Keep the most specific root error: the first that names where it failed, else the first."""
        r = _ROOT.search(line)
        if r is not None and (st.root_detail is None or (r[1] and " (at " not in st.root_detail)):
            st.root_detail = (r[2].strip() + (f" (at {r[1]})" if r[1] else ""))[:500]

    def rare_line(self, no: int, line: str) -> None:
        st = self.cur
        if line.startswith(("Accuracy @", "Precision @")):
            a = _ACCURACY.match(line)
            if a is None or st is None:
                self.result.problem("bad_line", "unreadable tf_cnn accuracy line", no, line)
                return
            st.details.setdefault("top1_accuracy", a[1])
            st.details.setdefault("top5_accuracy", a[2])
            if a[3]:
                st.details.setdefault("eval_examples", a[3])
            st.last_line = no
        elif line.startswith("Round up warm"):
            r = _ROUND_UP.match(line)
            if r is not None:
                self.context().hdr["warmup"] = r[1]
        elif line.startswith("Done with training") and st is not None:
            st.details["done_with_training"] = "true"
            st.last_line = no

    def flags(self, line: str) -> None:
        ctx = self.context()
        for name, value in _FLAG.findall(line):
            if name == "num_warmup_batches" and value.isdigit():
                ctx.hdr["warmup"] = value
            elif name == "use_fp16":
                ctx.hdr["precision"] = "fp32" if value.lower() in ("false", "0") else "fp16"

    def stderr_line(self, no: int, line: str) -> None:
        """A stamped TF C++ stderr line: its stamp, an OOM marker or a GPU name is all that matters."""
        if self.seg_first is None:
            self.seg_first = line
        self.seg_last, self.seg_last_no = line, no
        if "OOM" in line or "ResourceExhausted" in line:
            self.error_line(no, line)
        elif "OP_REQUIRES failed" in line:
            self.root_cause(self.cur if self.cur is not None else self.pending, line)
        elif XLA_MARK in line:  # TensorFlow says it compiled with XLA: a fact of the run, beside any system name
            (self.cur if self.cur is not None else self.pending).details.setdefault("xla", "compiled")
        elif self.gpu is None and ("name: " in line or "device (" in line):
            self.find_gpu(line)

    def find_gpu(self, line: str) -> None:
        g = _GPU.search(line)
        if g is not None and self.gpu is None:
            self.gpu = next(x for x in g.groups() if x is not None).strip()

    def finish(self) -> None:
        self.flush_stamps()
        pending = self.pending
        if not self.runs and pending.error_line is not None:
            last = pending.last_line
            self.start_run(pending.error_line).last_line = last
        if not self.runs:
            self.result.problem("missing_field", "no tf_cnn header, step, total or error line found")
        for st in self.runs:
            self.result.runs.append(build_run(st, self.gpu, self.result))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one tf_cnn log (see the module docstring). Single pass; steps go to ``result.steps``."""
    result = result if result is not None else ParseResult()
    r = Reader(result)
    feed = r.feed
    for no, line in enumerate(lines, 1):
        try:
            feed(no, line)
        except (ValueError, OverflowError) as e:  # one field that will not convert: never the run
            result.unreadable_line(no, line, e)
    r.finish()
    return result


def _num(text: str | None) -> float | None:
    """A printed loss / accuracy; ``nan`` stays NaN (a diverged loss is data, distinct from NULL)."""
    if text is None:
        return None
    return float(text)
