"""Horovod synthetic benchmarks and NVIDIA ``nvcnn_hvd.py`` step tables (log-formats.md §0, §4).

Two programs, one module; the variant is chosen per line by what the line is.

Synthetic benchmark (``examples/*/*_synthetic_benchmark.py``; rank 0 prints)::

    Model: ResNet50 / Batch size: 32 (per rank) / Number of GPUs: 4 / Running warmup... /
    Running benchmark... / Iter #k: r img/sec per GPU / Img/sec per GPU: m +-c /
    Total img/sec on 4 GPU(s): t +-u

- ``images_per_sec`` = t, the program's own (extrapolated, N × rank-0 mean) total.
- ``images_per_sec_mean`` = N × mean(r) over the counted Iter lines: the per-GPU Iter rates scaled to
  the cluster so that it is comparable with ``images_per_sec``.
- The printed ``±`` is 1.96 × population σ of the per-iteration rates: a spread, NOT a standard error.
  It goes to details ``band_1.96sd`` (cluster, u) and ``band_1.96sd_per_device`` (c). Because t = N·m,
  the standard error of t under the program's own extrapolation is N·σ/√n = u / 1.96 / √n, which is
  stored as ``images_per_sec_stderr`` (same convention as tf_cnn's ``+/-``: population σ over √n).
- The Keras variant prints no ``Running benchmark...`` line and excludes ``Iter #0`` (a warm-up
  epoch) from its mean; so does this parser.
- steps: one row per Iter line, ``images_per_sec`` = ``interval_images_per_sec`` = r (per GPU).

nvcnn_hvd table (Estimator version: header ``Step Epoch Speed Loss FinLoss LR``, ends
``Finished in <s>``; v1.1: ``Step Epoch Img/sec Loss LR`` and ``Images/sec: m +/- u (jitter = j)``).
``Speed`` = global batch / mean step time of rank 0 over the rows' interval: a cluster-wide interval
rate (``LogSessionRunHook.after_run``). The Estimator version prints no total, so
``images_per_sec`` = Σk / Σ(k / speed) (total images / total time; k = steps since the previous row)
over rows after the start-up rows (steps 0 and 1, printed unconditionally while the session warms up),
and ``images_per_sec_mean`` = the arithmetic mean of those rows' Speed. v1.1 prints its own total
(a real standard error, ddof=1) and excludes its first 20 steps (``nstep_burnin``), as does the mean here.

Times: Gloo ``time.asctime()`` prefixes and TF C++ stderr stamps are local times read as UTC.
``wall_time_s`` = first to last stamped training line (``Running warmup...`` .. Total) for the synthetic
benchmark, ``Finished in <s>`` for nvcnn; ``ended_at`` only when no result line follows the last stamp.

Failed runs keep their row: ``failed`` (traceback / exception / mpirun abort), ``oom``
(ResourceExhausted, out of memory), ``truncated`` (no result line), ``no_result`` (the program said it
finished without a throughput); their metrics are None.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, tf_stamp_seconds, utc_seconds

NAME = "horovod"
DESCRIPTION = "Horovod synthetic benchmark (Iter #k / Total img/sec) and NVIDIA nvcnn_hvd step tables"

_SNIFF = re.compile(
    r"Iter #\d+: [\d.]+ img/sec per (?:GPU|CPU)|Total img/sec on \d+ (?:GPU|CPU)\(s\):"
    r"|(?:^|>:)(?:Number of (?:GPU|CPU)s|Horovod size): \d+[ \t]*$"
    r"|(?:^|>:)(?:Log:\s+)?[ \t]*Step[ \t]+Epoch[ \t]+(?:Speed|Img/sec)[ \t]+Loss"
    r"|(?:^|>:)This script: \S*nvcnn_hvd\.py v",
    re.MULTILINE,
)

_MODEL = re.compile(r"Model:\s+(\S.*?)\s*$")
_BATCH = re.compile(r"Batch size:\s+(\d+)(?:\s+per device)?\s*$")
_NDEV = re.compile(r"Number of (GPU|CPU)s:\s+(\d+)\s*$")
_NRANKS = re.compile(r"(?:Num ranks|Horovod size):\s+(\d+)\s*$")
_ITER = re.compile(r"Iter #(\d+): ([\d.]+|nan|inf) img/sec per (GPU|CPU)\s*$")
_PER = re.compile(r"Img/sec per (GPU|CPU): ([\d.]+|nan) \+-([\d.]+|nan)\s*$")
_TOTAL = re.compile(r"Total img/sec on (\d+) (GPU|CPU)\(s\): ([\d.]+|nan) \+-([\d.]+|nan)\s*$")
_TABLE = re.compile(r"(?:Log:\s+)?\s*(Step\s+Epoch\s+(?:Speed|Img/sec)\b.*?)\s*$")
_ROW = re.compile(r"\s*\d+\s+[-+\d.]")
_FINISHED = re.compile(r"Finished in ([\d.]+)\s*$")
_SUMMARY = re.compile(r"Images/sec: ([\d.]+) \+/- ([\d.]+|nan) \(jitter = ([\d.]+|nan)\)")
_TFVER = re.compile(r"(?:TensorFlow:\s+(\d[\w.]*)\s*$|\]TF(\d[\w.+-]*)\s*$)")
_DTYPE = re.compile(r"Data (type|format):\s+(fp16|fp32|NCHW|NHWC)\s*$")
_GPUNAME = re.compile(r"device: \d+, name: ([^,]+), pci bus id")
_MPIHOST = re.compile(r"\[([\w.-]+):\d+\] ")
_EXC = re.compile(r"(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exhausted))(?::\s*(.*))?$")
_MPI_FAIL = re.compile(
    r"(?:mpirun noticed that process rank \d+ .*exited on signal"
    r"|Primary job\s+terminated normally, but \d+ process(?:es)? returned)"
)
_ASCTIME = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4})\[\d+\]<")
_MONTHS = {m: i for i, m in enumerate(("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec").split(), 1)}
_COLUMN_METRICS = {"FinLoss": "total_loss", "LR": "lr", "bs": "batch_size", "imsize": "image_size"}


def sniff(head: str) -> bool:
    """A Horovod synthetic result/header line or an nvcnn_hvd table header / ``Horovod size:`` line."""
    if not any(contains(head, k) for k in ("img/sec", "Number of ", "Step", "Horovod", "nvcnn")):
        return False
    return _SNIFF.search(head) is not None


@dataclass
class _State:
    """What one run has shown so far. Sums, not lists: a table may have millions of rows."""

    first_line: int
    last_line: int = 0
    fields: dict[str, Any] = field(default_factory=dict)  # Run keyword values read from headers
    details: dict[str, str] = field(default_factory=dict)
    results: bool = False
    last_result_line: int = 0
    last_stamp_line: int = 0
    bench_started: bool = False
    stamps: list[float] = field(default_factory=list)  # first and last of any timestamp
    train_stamps: list[float] = field(default_factory=list)  # first and last training-line stamp
    iter_n: int = 0
    iter_sum: float = 0.0
    total: tuple[float, float] | None = None
    per_device: tuple[float, float] | None = None
    table: _Table | None = None
    prev_step: int | None = None
    rows: list[float] = field(default_factory=lambda: [0, 0.0, 0.0, 0.0])  # n, Σk, Σk/r, Σr
    last_step: int | None = None
    finished_s: float | None = None
    summary: tuple[float, float, float] | None = None
    error: str | None = None
    oom: bool = False
    no_result: str | None = None


def _num(text: str) -> float | None:
    v = float(text)
    return v if math.isfinite(v) else None


def _asctime(raw: str) -> float | None:
    """Unix seconds of a Gloo ``time.asctime()`` prefix (local time read as UTC), or None."""
    m = _ASCTIME.match(raw)
    if not m or m.group(1) not in _MONTHS:
        return None
    mon, day, hh, mi, ss, year = m.groups()
    return utc_seconds(year, _MONTHS[mon], day, hh, mi, ss)


class _Parser(LineFormat[_State]):
    """A run per ``Model:``/``Horovod size:``/``Num ranks:``/``TensorFlow:`` header block: a new block
    starts when a header repeats or after results."""

    RANKS, STATE = True, _State

    def read(self, line: Line) -> bool:
        raw, n, rank = line.raw, line.no, line.rank
        if not raw.strip():
            return True
        st = self.run if self.run is not None else self.open(1)
        msg = line.msg.rstrip()
        header = _header(msg) if msg and rank in (None, 0) else None
        if header is not None and (st.results or header[0] in st.fields):
            st = self.open(n)  # a header that repeats, or one after results: the next program run
        stamp = _asctime(raw) if rank is not None and raw[:1].isalpha() else None
        if stamp is None and msg[:2] == "20" and msg[4:5] == "-":
            stamp = tf_stamp_seconds(msg)
            if stamp is not None:  # a TF C++ stderr line
                st.fields.setdefault("framework", "tensorflow")
        if stamp is not None:
            _span(st.stamps, stamp)
            st.last_stamp_line = n
        if header is not None:
            st.fields[header[0]] = header[1]
        elif msg and _result(st, self.result, n, rank, msg, stamp):
            st.last_result_line = n
        elif msg:
            _context(st, raw, msg)
        st.last_line = n
        return True

    def emit(self, st: _State) -> None:
        if st.results or st.fields or st.error:
            _finish(st, self.result)

    def finish(self) -> None:
        if not self.result.runs:
            self.result.problem("missing_field", "no Horovod benchmark header or result line found")


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse Horovod synthetic / nvcnn_hvd output into runs (one per program start) and step rows, per rank."""
    return drive(_Parser, lines, result)


def _header(msg: str) -> tuple[str, Any] | None:
    """(Run field, value) for a header line, else None."""
    c = msg[:1]
    if c == "M" and (m := _MODEL.match(msg)):
        return "model", m.group(1)
    if c == "B" and (m := _BATCH.match(msg)):
        return "batch_size_per_device", int(m.group(1))
    if c == "N" and (m := _NDEV.match(msg)):
        return "device", (m.group(1), int(m.group(2)))
    if c in "NH" and (m := _NRANKS.match(msg)):
        return "num_ranks", int(m.group(1))
    if c == "T" or "]TF" in msg:
        m = _TFVER.search(msg)
        if m:
            return "framework_version", m.group(1) or m.group(2)
    return None


def _result(st: _State, res: ParseResult, n: int, rank: int | None, msg: str, stamp: float | None) -> bool:
    """Handle a result line (Iter, totals, table header/row, finish). False if the line is none."""
    c = msg[:1]
    if c == "R" and msg.startswith("Running "):
        st.bench_started = st.bench_started or msg.startswith("Running benchmark")
        _span(st.train_stamps, stamp)
        return True
    if c == "I" and (m := _ITER.match(msg)):
        _iter(st, res, n, rank, m, stamp)
        return True
    if c == "I" and (m := _SUMMARY.match(msg)):
        st.summary = (float(m.group(1)), float(m.group(2)), float(m.group(3)))
        st.results = True
        return True
    if c == "T" and (m := _TOTAL.match(msg)):
        st.total = (float(m.group(3)), float(m.group(4)))
        st.fields.setdefault("device", (m.group(2), int(m.group(1))))
        st.results = True
        _span(st.train_stamps, stamp)
        return True
    if c == "I" and (m := _PER.match(msg)):
        st.per_device = (float(m.group(2)), float(m.group(3)))
        return True
    if c in "LS " and (m := _TABLE.match(msg)):
        st.table = _table(m.group(1))
        st.fields["warmup_steps"] = st.table.warmup_steps
        return True
    if st.table is not None and _ROW.match(msg):
        _row(st, res, n, rank, msg)
        return True
    if c == "F" and (m := _FINISHED.match(msg)):
        st.finished_s = float(m.group(1))
        st.results = True
        return True
    return False


def _span(first_last: list[float], stamp: float | None) -> None:
    """Keep [first, last] of the stamps seen (a list of 0, 1 or 2 values)."""
    if stamp is not None:
        first_last[1:] = [stamp]
        del first_last[2:]


def _iter(st: _State, res: ParseResult, n: int, rank: int | None, m: re.Match[str], stamp: float | None) -> None:
    k, rate, dev = int(m.group(1)), _num(m.group(2)), m.group(3)
    st.fields.setdefault("device_kind", dev)
    res.steps.add(len(res.runs), k, rank=rank, images_per_sec=rate, interval_images_per_sec=rate,
                  timestamp=stamp, line_no=n)
    st.results = True
    _span(st.train_stamps, stamp)
    warmup = not st.bench_started and k == 0  # Keras variant: epoch 0 is its warm-up
    if warmup:
        st.details["warmup_iter_excluded"] = "0"
    elif rate is not None and rank in (None, 0):
        st.iter_n += 1
        st.iter_sum += rate


@dataclass(frozen=True)
class _Table:
    """Column positions of an nvcnn table, read once from its header line."""

    header: str
    width: int
    speed: int
    loss: int | None
    epoch: int
    metrics: tuple[tuple[int, str], ...]  # (position, metric name) of the other columns
    burnin: int  # rows with step <= burnin are start-up rows (module docstring)
    warmup_steps: int  # how many steps that is: steps 0 and 1 / printed steps 1..20


def _table(header: str) -> _Table:
    cols = header.split()
    speed_col = "Speed" if "Speed" in cols else "Img/sec"
    skip = ("Step", "Loss", speed_col)
    metrics = tuple((i, _COLUMN_METRICS.get(c, c.lower())) for i, c in enumerate(cols) if c not in skip)
    return _Table(header, len(cols), cols.index(speed_col), cols.index("Loss") if "Loss" in cols else None,
                  cols.index("Epoch"), metrics, *((1, 2) if speed_col == "Speed" else (20, 20)))


def _row(st: _State, res: ParseResult, n: int, rank: int | None, msg: str) -> None:
    """One nvcnn table row (Step is always the first column)."""
    t = st.table
    if t is None:
        return
    parts = msg.split()
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != t.width:
        res.problem("bad_line", f"table row does not match the header {t.header!r}", n, msg)
        if parts[0].isdigit():  # the row's interval still ended here: the next row's k starts from it
            st.prev_step = st.last_step = int(parts[0])
        return
    step, speed, epoch = int(values[0]), values[t.speed], values[t.epoch]
    rate = speed if speed > 0 and math.isfinite(speed) else None
    res.steps.add(len(res.runs), step, rank=rank, epoch=int(epoch) if math.isfinite(epoch) else None,
                  images_per_sec=rate, interval_images_per_sec=rate,
                  loss=None if t.loss is None else values[t.loss], line_no=n,
                  metrics={name: values[i] for i, name in t.metrics})
    st.results = True
    k = step - st.prev_step if st.prev_step is not None else 0
    st.prev_step = st.last_step = step
    if step > t.burnin and rate is not None and k > 0:
        acc = st.rows
        acc[0] += 1
        acc[1] += k
        acc[2] += k / rate
        acc[3] += rate


def _context(st: _State, raw: str, msg: str) -> None:
    """Lines that are not headers or results: errors, GPU names, hosts, data and precision hints."""
    if "name: " in msg and (m := _GPUNAME.search(msg)):
        st.fields.setdefault("gpu_model", m.group(1).strip())
    elif raw[:1] == "[" and (m := _MPIHOST.match(raw)):
        st.fields.setdefault("host", m.group(1))
    elif msg.startswith("Traceback (most recent call last)"):
        st.error = st.error or "Traceback (most recent call last):"
    elif msg.startswith("Out of memory error detected"):
        st.oom, st.error = True, msg
    elif msg.startswith("No results, did not get past burn-in"):
        st.no_result = msg
    elif msg.startswith(("Using data from", "Num images:")):
        st.fields["data"] = "synthetic" if msg.endswith("Synthetic") else "real"
    elif msg[:1] == "D" and (m := _DTYPE.match(msg)):
        st.fields["precision" if m.group(1) == "type" else "data_format"] = m.group(2)
    elif ("Error" in msg or "Exception" in msg or "Exhausted" in msg) and (m := _EXC.match(msg)):
        st.error = msg  # the last exception line wins: it is the one that ended the program
        text = msg.lower()
        st.oom = st.oom or "ResourceExhausted" in m.group(1) or "out of memory" in text or "oom when" in text
    elif "mpirun" in msg or "Primary job" in msg:
        if _MPI_FAIL.search(msg) and (st.error is None or st.error.startswith("Traceback")):
            st.error = msg


def _finish(st: _State, res: ParseResult) -> None:
    """Turn the state into a Run row and append it."""
    f = st.fields
    kind = f.pop("device_kind", None)
    if "device" in f:
        kind, size = f.pop("device")
        f.setdefault("num_ranks", size)
    ranks = f.get("num_ranks")
    kw: dict[str, Any] = dict(f)
    kw.update(format=NAME, mode="train", num_ranks=ranks, first_line=st.first_line, last_line=st.last_line)
    if st.table is not None or st.finished_s is not None or st.summary is not None:
        kw.update(_table_metrics(st, ranks))
    else:
        kw.update(_synthetic_metrics(st, kind, ranks))
    if st.stamps:
        kw["started_at"] = st.stamps[0]
        # the last stamp is the run's end only if no result line came after it (nvcnn's table
        # rows carry no time, so a TF stderr stamp before the table says nothing about the end)
        kw["ended_at"] = st.stamps[-1] if st.last_stamp_line >= st.last_result_line else None
    if len(st.train_stamps) == 2 and kw.get("wall_time_s") is None:
        kw["wall_time_s"] = st.train_stamps[1] - st.train_stamps[0]
    if ranks and kw.get("batch_size_per_device"):  # each rank runs one batch of B per step
        kw["global_batch_size"] = ranks * kw["batch_size_per_device"]
    if kw["status"] != "ok":
        for name in ("images_per_sec", "images_per_sec_mean", "images_per_sec_stderr", "images_per_sec_jitter"):
            kw[name] = None
    kw["details"] = {**st.details, **kw.get("details", {})}
    res.runs.append(Run(run_index=len(res.runs), **kw))


def _status(st: _State, ok: bool) -> tuple[str, str | None]:
    if ok:
        return "ok", None
    if st.error is not None:
        return ("oom" if st.oom else "failed"), st.error
    if st.no_result is not None:
        return "no_result", st.no_result
    return "truncated", None


def _synthetic_metrics(st: _State, kind: str | None, ranks: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"data": "synthetic", "tags": {"benchmark": "horovod_synthetic"}, "details": {}}
    if kind is not None:
        out["tags"]["device"] = kind
        out["num_gpus"] = ranks if kind == "GPU" else None
    out["status"], out["status_detail"] = _status(st, st.total is not None)
    if st.total is None:
        return out
    total, band = st.total
    if not math.isfinite(total):
        out["status"], out["status_detail"] = "no_result", f"Total img/sec is {total}"
        return out
    out["images_per_sec"] = total
    out["details"]["band_1.96sd"] = f"{band:g}"
    if st.per_device is not None:
        out["details"]["images_per_sec_per_device"] = f"{st.per_device[0]:g}"
        out["details"]["band_1.96sd_per_device"] = f"{st.per_device[1]:g}"
    if st.iter_n:
        out["details"]["num_iters"] = str(st.iter_n)
        if ranks:
            out["images_per_sec_mean"] = ranks * st.iter_sum / st.iter_n
        if math.isfinite(band):
            out["images_per_sec_stderr"] = band / 1.96 / math.sqrt(st.iter_n)
    return out


def _table_metrics(st: _State, ranks: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"framework": "tensorflow", "tags": {"benchmark": "nvcnn_hvd"}}
    out["num_gpus"] = ranks  # nvcnn_hvd pins one GPU per rank (visible_device_list = local_rank)
    out["num_steps"] = st.last_step
    out["wall_time_s"] = st.finished_s  # seconds of classifier.train(), the program's own timer
    n, sum_k, sum_k_over_r, sum_r = st.rows
    if st.summary is not None:
        ok = not st.oom  # v1.1 prints its summary even after an OOM cut the loop short
        out["images_per_sec"], stderr, out["images_per_sec_jitter"] = st.summary
        out["images_per_sec_stderr"] = stderr if math.isfinite(stderr) else None
    else:
        ok = st.finished_s is not None and n > 0
        if st.finished_s is not None and n == 0 and st.error is None:
            st.no_result = st.no_result or "finished without table rows after start-up"
        out["images_per_sec"] = sum_k / sum_k_over_r if sum_k_over_r > 0 else None
    out["images_per_sec_mean"] = sum_r / n if n else None
    out["status"], out["status_detail"] = _status(st, ok)
    return out
