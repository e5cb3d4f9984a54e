"""`caffe train` glog output (BVLC, NVCaffe 0.16/0.17, Intel, AMD OpenCL Caffe) -> runs and steps.

Lines read (log-formats.md §6-7): solver display lines with a rate, ``Iteration N (X iter/s, Ys/K iter[s]),
[e/Eep, ]loss = L`` (NVCaffe: ``[0.0]`` device prefix, singular ``iter)``), without one (old BVLC and the
final line, ``Iteration N, loss = L``), NVCaffe start-up lines ``Iteration N (T s), loss = L``, ``lr`` lines,
``Train/Test net output`` lines, ``Using GPUs``/``GPU k: name``/``Use CPU.``, the printed solver and net
parameters (``iter_size``, TRAIN ``batch_size``), ``Top shape``, NVCaffe ``Solver performance on device`` and
``Overall [multi-GPU ]performance``, ``Optimization Done``, fatal ``F...`` lines and the glog file header.

Grain: one step row per display line (step = solver iteration). Test outputs join the row of their
iteration (or get a row of their own). Run-level decisions:
- images/interval = (X iter/s * Y s) iterations * batch * max(num_gpus, 1) * iter_size. X*Y (rounded) is the
  true iteration count; the printed K is the ``display`` parameter and is wrong for the last NVCaffe 0.16 line.
- ``images_per_sec``: NVCaffe ``Overall ... performance`` if printed, else the sum of its per-device lines,
  else total images / total seconds over the rate lines without the run's first rate line (start-up; its
  step row keeps only ``metrics['iter_per_sec']``). ``images_per_sec_mean``: mean of X * images/iteration.
- Old logs without iter/s: the interval between two display lines is timed with their glog stamps (the same
  thing BVLC's iter/s measures) and used like a rate line (detail throughput_source=glog_timestamps). A display
  line with no earlier display line in the run has no rate, which matches the excluded first rate line.
- failed/oom runs keep their steps but get no throughput; truncated runs keep what was measured.
- ``throughput_derived``: True for the iter/s and glog-stamp rates (images = iterations x batch: no image rate
  was printed), False for NVCaffe's printed img/sec.
- ``num_gpus`` is 0 for ``Use CPU.``; step ``timestamp`` only when the year is known (header or glog year),
  ``metrics['elapsed_s']`` is always the seconds since the run's first training line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.caffe_glog import (
    data_kind,
    device_of,
    fatal_status,
    has_caffe_glog,
    header_year,
    proto_fact,
    top_shape_batch,
)
from bench.ingest.formats.caffe_run import RunState, run_status, throughput
from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains

NAME = "caffe"
DESCRIPTION = "Caffe / NVCaffe / Intel / OpenCL Caffe `caffe train` glog logs (solver display lines)"

_RATE = re.compile(r"Iteration (\d+) \((\S+) iter/s, (\S+)s/\d+ iters?\), (?:(\S+)/\S+ep, )?loss = (\S+)")
_PER_ITER = re.compile(r"Iteration (\d+) \((\S+) s\), (?:(\S+)/\S+ep, )?loss = (\S+)")
_OLD = re.compile(r"Iteration (\d+), loss = (\S+)$")
_LR = re.compile(r"Iteration (\d+), lr = ([^,\s]+)")
_TESTING = re.compile(r"Iteration (\d+), Testing net \(#(\d+)\)")
_OUTPUT = re.compile(r"(Train|Test) net output #\d+: (\S+) = (\S+)")
_DEVICE_PERF = re.compile(r"Solver performance on device (\d+): \S+ \* (\d+) = (\S+) img/sec")
_OVERALL = re.compile(r"^Overall (?:multi-GPU )?performance: (\S+) img/sec")
_USING_GPUS = re.compile(r"^Using GPUs ([\d, ]+)$")
_GPU_NAME = re.compile(r"^GPU (\d+): (.+)$")
_DONE_IN = re.compile(r"Optimization Done in (?:(\d+)h ?)?(?:(\d+)m ?)?(?:([\d.]+)s)?")
_RESUME_ITER = re.compile(r"_iter_(\d+)\.solverstate")
_PRECISION = {"FLOAT": "fp32", "FLOAT16": "fp16", "DOUBLE": "fp64"}
_SOLVER_TAGS = {"lr_policy", "display", "max_iter", "type", "solver_type", "base_lr"}
_RUN_MARKERS = ("Using GPUs", "Use CPU", "Use GPU with device ID", "This is NVCaffe", "Initializing solver")


def sniff(head: str) -> bool:
    """Caffe glog with a solver (`caffe train` builds its solver before the big net printout)."""
    return contains(head, "solver.cpp:") and has_caffe_glog(head)


# ---- per-run state ------------------------------------------------------------------------------


class _Parser(LineFormat[RunState]):
    GLOG, STATE = True, RunState

    def starts_run(self, run: RunState, line: Line) -> bool:
        return line.level is not None and run.started and line.msg.startswith(_RUN_MARKERS)

    # -- dispatch --

    def read(self, line: Line) -> bool:
        if line.level is None:
            self._plain(line)
            return True
        msg, no, raw, t = line.msg, line.no, line.raw, line.time
        assert t is not None
        st = self.current(line.no)
        st.last_line, st.ctx = no, None
        if line.level == "F":
            self._fatal(st, no, raw)
        elif "Iteration" in msg:
            self._iteration(st, no, msg, raw, t)
        elif "net output" in msg:
            self._output(st, no, msg, raw)
        elif "Top shape" in msg:
            self._top_shape(st, msg)
        else:
            self._setup(st, no, line.source or "", msg, raw)
        return True

    def _plain(self, raw: Line) -> None:
        no, line = raw.no, raw.raw
        year = header_year(line)
        st = self.run
        if year is not None:  # a glog file header: after a started run, the next process
            if st is not None and st.started:
                self.open(no)
            assert self.glog is not None
            self.glog.set_year(year)
            return
        if st is None:
            return
        if line.startswith("Running on machine: "):
            st.run["host"] = line[20:].strip()
        elif line.startswith("*** ") and ("Check failure" in line or "Aborted at" in line or "SIG" in line):
            if st.fatal is None:
                self._fatal(st, no, line)
        elif st.ctx is not None:
            st.last_line = no
            fact = proto_fact(line)
            if fact is not None:
                (self._solver_param if st.ctx == "solver" else self._net_param)(st, *fact)

    # -- solver and net parameters --

    def _solver_param(self, st: RunState, indent: int, key: str, value: str) -> None:
        if key == "iter_size" and value.isdigit():
            st.iter_size = int(value)
            st.tags["iter_size"] = value
        elif key in _SOLVER_TAGS:
            st.tags["solver_type" if key == "type" else key] = value
        elif key == "solver_mode":  # the `Use CPU.` / `Using GPUs` line printed before it wins
            st.tags.setdefault("device", value.lower())

    def _net_param(self, st: RunState, indent: int, key: str, value: str) -> None:
        if key == "phase" and indent == 2:  # the net's own ``state { phase: X }``, not a layer rule
            st.phase = value
        if st.phase not in (None, "TRAIN"):
            return
        if key == "name" and indent == 0:
            st.run.setdefault("model", value)
        elif key == "batch_size" and value.isdigit() and st.batch is None:
            st.batch = int(value)
        elif (kind := data_kind(indent, key, value)) is not None:
            st.run.setdefault("data", kind)
        elif key == "default_forward_type" and value in _PRECISION:
            st.run["precision"] = _PRECISION[value]

    def _top_shape(self, st: RunState, msg: str) -> None:
        got = top_shape_batch(msg)
        if got is not None and st.batch_top is None and (got[0] or st.phase or "TRAIN") == "TRAIN":
            st.batch_top = got[1]

    # -- setup lines: devices, versions, anchors --

    def _setup(self, st: RunState, no: int, source: str, msg: str, line: str) -> None:
        if msg.startswith("Initializing solver from parameters"):
            st.ctx = "solver"
        elif msg.startswith("Initializing net from parameters"):
            st.ctx = "net"
        elif msg.startswith("Creating training net"):
            st.phase = "TRAIN"
        elif msg.startswith("Creating test net"):
            st.phase = "TEST"
        elif "performance" in msg:
            self._performance(st, no, msg, line)
        elif msg.startswith("Optimization Done"):
            st.done = True
            m = _DONE_IN.match(msg)
            if m and any(m.groups()):
                h, mi, s = (float(x) if x else 0.0 for x in m.groups())
                st.details["optimization_time_s"] = f"{h * 3600 + mi * 60 + s:g}"
        elif msg.startswith("Optimization stopped early"):
            st.details["stopped_early"] = "true"
        else:
            self._device(st, source, msg)

    def _device(self, st: RunState, source: str, msg: str) -> None:
        run = st.run
        m = _USING_GPUS.match(msg)
        if m:
            run["num_gpus"] = len([x for x in m.group(1).split(",") if x.strip()])
            st.tags["device"] = "gpu"
        elif source.startswith("caffe.cpp") and (m := _GPU_NAME.match(msg)):
            run.setdefault("gpu_model", m.group(2).strip())
        elif (dev := device_of(msg)) is not None:
            st.tags["device"], run["num_gpus"] = dev
        elif msg.startswith("This is NVCaffe "):
            run["framework"], run["framework_version"] = "nvcaffe", msg.split()[3]
        elif "Solving " in msg:
            run.setdefault("model", msg.split("Solving ", 1)[1].split()[0])
        elif msg.startswith("Resuming from "):
            m = _RESUME_ITER.search(msg)
            if m:
                st.details["resumed_from"] = m.group(1)
        elif msg.endswith("as default forward math type") and msg.startswith("Using "):
            run.setdefault("precision", _PRECISION.get(msg.split()[1]))
        elif msg.startswith("P2PManager::Init @ "):
            run["host"] = msg[19:].strip()
        elif "CL_PLATFORM_NAME\t" in msg:
            st.tags["opencl_platform"] = msg.split("CL_PLATFORM_NAME\t", 1)[1].strip()

    def _performance(self, st: RunState, no: int, msg: str, line: str) -> None:
        try:
            m = _DEVICE_PERF.search(msg)
            if m:
                st.perf[int(m.group(1))] = float(m.group(3))
                if st.batch is None and st.batch_top is None:
                    st.batch_top = int(m.group(2))
                return
            m = _OVERALL.match(msg)
            if m:
                st.overall = float(m.group(1))
                return
        except ValueError:
            pass
        if "img/sec" in msg and not msg.startswith("Node "):
            self.result.problem("bad_line", "unreadable NVCaffe performance line", no, line)

    def _fatal(self, st: RunState, no: int, line: str) -> None:
        if st.done:  # e.g. a crash while tearing down after a finished run
            st.details.setdefault("error_after_done", line[:300])
        elif st.fatal is None:
            st.fatal, st.run["status"] = line, fatal_status(line)

    # -- training lines --

    def _iteration(self, st: RunState, no: int, msg: str, line: str, t: float) -> None:
        for marker, pattern, handler in _ITERATION_KINDS:
            if marker in msg:
                m = pattern.search(msg)
                try:
                    if m is not None:
                        return handler(self, st, no, m, t)
                except ValueError:
                    pass
                self.result.problem("bad_line", "unreadable Caffe solver iteration line", no, line)
                return None
        return None  # another line that mentions an iteration (e.g. snapshots): nothing to read

    def _lr(self, st: RunState, no: int, m: re.Match[str], t: float) -> None:
        if st.pending is not None and st.pending["step"] == int(m.group(1)):
            st.pending["metrics"]["lr"] = float(m.group(2))

    def _mark(self, st: RunState, it: int, t: float) -> None:
        if st.first_iter is None:
            st.first_iter, st.t0 = it, t
        st.last_iter, st.t1 = it, t

    def _rate(self, st: RunState, no: int, m: re.Match[str], t: float) -> None:
        it, x, y, loss = int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(5))
        ep = float(m.group(4)) if m.group(4) else None
        self._mark(st, it, t)
        ipi = st.images_per_iter()
        st.rate_lines += 1
        # The first rate line times start-up, and BVLC's Iteration 0 line divides an uninitialised count
        # (e.g. 7.18752e+27 iter/s): it keeps its printed iter/s in metrics but gets no rate.
        timed = st.rate_lines > 1 and ipi is not None and x > 0 and y > 0 and math.isfinite(x * y)
        rate = x * ipi if timed and ipi is not None else None
        if rate is not None and ipi is not None:
            st.rates.add(round(x * y) * ipi, y, rate)
        metrics = {"iter_per_sec": x}
        if ep is not None:
            metrics["epoch_progress"] = ep
        self._step(st, no, it, t, metrics, loss=loss, images_per_sec=rate, interval_images_per_sec=rate,
                   step_time_ms=1000.0 / x if timed else None,
                   epoch=int(ep) if ep is not None and math.isfinite(ep) else None)

    def _per_iter(self, st: RunState, no: int, m: re.Match[str], t: float) -> None:
        it, secs, loss = int(m.group(1)), float(m.group(2)), float(m.group(4))
        self._mark(st, it, t)
        ipi = st.images_per_iter()
        rate = ipi / secs if ipi is not None and secs > 0 else None
        self._step(st, no, it, t, {}, loss=loss, interval_images_per_sec=rate, step_time_ms=secs * 1000.0)

    def _old(self, st: RunState, no: int, m: re.Match[str], t: float) -> None:
        it, loss = int(m.group(1)), float(m.group(2))
        self._mark(st, it, t)
        rate = step_ms = None
        if st.rate_lines == 0:  # no iter/s in this run: time the interval with glog stamps
            prev, ipi = st.prev_old, st.images_per_iter()
            if prev is not None and ipi is not None and it > prev[0] and t > prev[1]:
                dt = t - prev[1]
                rate = st.derived.add((it - prev[0]) * ipi, dt, (it - prev[0]) * ipi / dt)
                step_ms = dt * 1000.0 / (it - prev[0])
            st.prev_old = (it, t)
        self._step(st, no, it, t, {}, loss=loss, interval_images_per_sec=rate, step_time_ms=step_ms)

    def _testing(self, st: RunState, no: int, m: re.Match[str], t: float) -> None:
        it, st.test_net = int(m.group(1)), int(m.group(2))
        self._mark(st, it, t)
        if st.pending is None or st.pending["step"] != it:
            self._flush(st)
            st.pending = self._row(st, no, it, t, {}, test_only=True)

    def _output(self, st: RunState, no: int, msg: str, line: str) -> None:
        m = _OUTPUT.search(msg)
        if m is None:
            self.result.problem("bad_line", "unreadable Caffe net output line", no, line)
            return
        try:
            value = float(m.group(3))
        except ValueError:
            self.result.problem("bad_line", "unreadable value in Caffe net output line", no, line)
            return
        if st.pending is not None:
            kind = "train" if m.group(1) == "Train" else f"test{st.test_net or ''}"
            st.pending["metrics"][f"{kind}/{m.group(2)}"] = value

    # -- step rows --

    def _row(self, st: RunState, no: int, it: int, t: float, metrics: dict[str, float], **kw: Any) -> dict[str, Any]:
        if st.t0 is not None:
            metrics["elapsed_s"] = t - st.t0
        ts = t if self.glog is not None and self.glog.absolute else None
        return {"step": it, "line_no": no, "timestamp": ts, "metrics": metrics, **kw}

    def _step(self, st: RunState, no: int, it: int, t: float, metrics: dict[str, float], **kw: Any) -> None:
        p = st.pending
        if p is not None and p.get("test_only") and p["step"] == it:  # the test ran just before this display
            metrics = {**p["metrics"], **metrics}
        else:
            self._flush(st)
        st.pending = self._row(st, no, it, t, metrics, **kw)

    def _flush(self, st: RunState) -> None:
        if st.pending is not None:
            row, st.pending = st.pending, None
            row.pop("test_only", None)
            self.result.steps.add(len(self.result.runs), row.pop("step"), **row)

    # -- the run row --

    def emit(self, st: RunState) -> None:
        """Flush the run's last step and append its Run."""
        self._flush(st)
        ips, mean, ranks, source = throughput(st)
        if st.rate_lines and st.images_per_iter() is None:
            self.result.problem("missing_field", "no batch size (batch_size / Top shape): images/sec not derived",
                                st.first_line)
        status, detail = run_status(st, ips)
        if status in ("failed", "oom"):
            ips = mean = ranks = None
        elif source is not None:
            st.details["throughput_source"] = source
        if "resumed_from" not in st.details and st.first_iter:
            st.details["resumed_from"] = str(st.first_iter)
        st.tags["caffe_action"] = "train"
        absolute = self.glog is not None and self.glog.absolute
        t0, t1, i0, i1 = st.t0, st.t1, st.first_iter, st.last_iter
        wall = t1 - t0 if t0 is not None and t1 is not None and t1 > t0 else None  # one line: no duration
        run = st.run
        self.result.runs.append(Run(
            run_index=len(self.result.runs), format=NAME, framework=run.get("framework", "caffe"),
            framework_version=run.get("framework_version"), model=run.get("model"), data=run.get("data"),
            mode="train", precision=run.get("precision"),
            batch_size_per_device=st.batch if st.batch is not None else st.batch_top,
            global_batch_size=st.images_per_iter(), num_gpus=run.get("num_gpus"), gpu_model=run.get("gpu_model"),
            host=run.get("host"), started_at=t0 if absolute else None, ended_at=t1 if absolute else None,
            wall_time_s=wall, num_steps=i1 - i0 if i0 is not None and i1 is not None and i1 != i0 else None,
            images_per_sec=ips, images_per_sec_mean=mean, images_per_sec_ranks=ranks,
            throughput_derived=source in ("iter_per_sec", "glog_timestamps"),  # batch x iterations / seconds
            status=status,
            status_detail=detail, first_line=st.first_line, last_line=st.last_line, tags=st.tags,
            details=st.details,
        ))


_ITERATION_KINDS = (  # (substring test, regex, handler), tried in order on lines that mention "Iteration"
    ("iter/s", _RATE, _Parser._rate),
    (" s), ", _PER_ITER, _Parser._per_iter),
    (", loss = ", _OLD, _Parser._old),
    (", lr = ", _LR, _Parser._lr),
    ("Testing net", _TESTING, _Parser._testing),
)


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse `caffe train` output: one Run per training run in the file, one step row per display line.

    Pure: reads ``lines`` once (1-based numbers), never raises for bad input; unreadable solver lines
    become ``bad_line`` problems. ``source`` is accepted for the registry contract only.
    """
    return drive(_Parser, lines, result)
