"""What the tf_cnn reader keeps of a run while the lines go by (``RunState``, one ``Series`` per rank),
and how it becomes a ``Run`` once the file is read (``build_run``): topology, status, times, tags.

The line-by-line reading is ``bench.ingest.formats.tf_cnn``; its docstring says what the log holds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from bench.ingest.checks import by_index
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import tf_stamp_seconds
from bench.ingest.units import IMAGES

NAME = "tf_cnn"  # the format name (bench.ingest.formats.tf_cnn.NAME)

_GLOBAL = re.compile(r"(\d+(?:\.\d+)?) global")
_MODES = {"training": "train", "forward only": "inference", "forward-only": "inference",
          "evaluation": "eval", "training + evaluation": "train"}
_LOCAL_MODES = ("replicated", "parameter_server", "independent")


@dataclass(slots=True)
class Series:
    """One rank's step lines in one run: enough to derive interval rates without keeping rows."""

    last_step: int = 0  # last printed step; 0 = none yet (the timed window starts at step 0)
    last_t: float = 0.0  # k/m at the last step: the time to it in units of the batch b (b cancels)
    interval_sum: float = 0.0
    interval_n: int = 0
    eval_sum: float = 0.0
    eval_n: int = 0
    eval_step: int = 0
    stderr: float | None = None
    jitter: float | None = None
    total: float | None = None
    first_ts: float | None = None
    last_ts: float | None = None

    def advance(self, step: int, mean: float) -> float | None:
        """Record a cumulative mean at ``step``; return the rate of the interval since the last one."""
        t = step / mean if mean > 0 else math.inf
        dt = t - self.last_t
        rate = (step - self.last_step) / dt if 0 < dt < math.inf else None
        self.last_step, self.last_t = step, t
        if rate is not None:
            self.interval_sum += rate
            self.interval_n += 1
        return rate


@dataclass
class RunState:
    """What has been read of one run so far (header fields, per-rank series, errors, stamps)."""

    index: int = -1
    hdr: dict[str, object] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    series: dict[int | None, Series] = field(default_factory=dict)
    active: set[int | None] = field(default_factory=set)  # ranks with a header start, step or total
    tf_ranks: set[int | None] = field(default_factory=set)
    model_ranks: set[int | None] = field(default_factory=set)
    first_line: int | None = None
    last_line: int | None = None
    step_line: int = 0  # the last step / eval line
    done: bool = False  # a total was printed: later stderr belongs to whatever comes next
    error_line: int | None = None  # the first error line
    exc_detail: str | None = None  # the last exception line (the final one of chained tracebacks)
    coord_detail: str | None = None  # the first "Error reported to Coordinator"
    oom_detail: str | None = None  # the first ResourceExhaustedError / OOM line
    root_detail: str | None = None  # the root error under the wrappers (tf_cnn._ROOT), where it names one
    oom: bool = False
    nan_losses: int = 0
    stamp_first: str | None = None
    stamp_last: str | None = None
    stamp_last_no: int = 0

    def mark(self, rank: int | None, no: int) -> Series:
        """Note a line of ``rank`` at ``no``; return that rank's series."""
        if self.first_line is None:
            self.first_line = no
        self.last_line = no
        self.active.add(rank)
        s = self.series.get(rank)
        if s is None:
            s = self.series[rank] = Series()
        return s


def _int(text: object) -> int | None:
    """``"224"`` / ``"12.0"`` -> int; None for anything else."""
    try:
        f = float(str(text))
    except ValueError:
        return None
    return int(f) if f.is_integer() else None


def _stamp_seconds(line: str | None) -> float | None:
    if line is None:
        return None
    if line[1:12] == "0000 00:00:":  # absl C++ before InitializeLog: "I0000 00:00:<unix seconds>"
        head = line[12:].split(" ", 1)[0]
        try:
            return float(head)
        except ValueError:
            return None
    return tf_stamp_seconds(line)


@dataclass(frozen=True, slots=True)
class _Topology:
    global_batch: int | None = None
    per_device: int | None = None
    num_gpus: int | None = None
    num_nodes: int | None = None
    num_devices: int = 0
    cpu: bool = False


def _topology(st: RunState, result: ParseResult) -> _Topology:
    """Batch sizes, GPU and node counts from the batch lines and the device list (log-formats §1).

    G/B counts every GPU in any mode. A single local process (replicated / parameter_server /
    independent, no ``Sync:`` line i.e. no job_name) lists all its devices, so there G must equal
    B x len(Devices); where a real log breaks that (Lambda A6000 TF1.15 inception3: ``1024 global``,
    ``256 per device``, 2 devices), the device list and G are kept, B = G/len(Devices), and a
    ``conflict`` problem records the printed value.
    """
    h = st.hdr
    gm = _GLOBAL.match(str(h.get("global", "")))
    g, b = _int(gm[1]) if gm else None, _int(h.get("per_device"))
    devices = re.findall(r"'([^']*)'", str(h.get("devices", "")))
    n = len(devices)
    cpu = n > 0 and all("cpu" in d.lower() for d in devices)
    local = h.get("variable_update") in _LOCAL_MODES and "sync" not in st.tags
    if not (g and b):
        return _Topology(g, b, num_devices=n, cpu=cpu)
    if local and n and g != b * n and g % n == 0:
        line = h.get("per_device_line")
        result.problem("conflict", f"header says {b} per device but {g} global over {n} local devices; "
                       f"using {g // n}", line if isinstance(line, int) else None, f"{b} per device")
        b = g // n
    gpus = g // b if g % b == 0 else None
    nodes = None
    if n and h.get("variable_update") != "horovod" and st.tags.get("single_session") != "True":
        nodes = g // (b * n) if g % (b * n) == 0 else None
    return _Topology(g, b, None if cpu else gpus, nodes, n, cpu)


def _cpu_devices(topo: _Topology) -> int | None:
    """The CPU devices of a run whose towers are all ``/cpu:N``: global batch / per-device batch (every rank
    of a multi-process run), else the devices this process listed; None for a GPU run."""
    if not topo.cpu:
        return None
    if topo.global_batch and topo.per_device and topo.global_batch % topo.per_device == 0:
        return topo.global_batch // topo.per_device
    return topo.num_devices or None


def _primary(st: RunState) -> tuple[int | None, Series | None]:
    """The rank whose numbers stand for the run: rank 0, else the lowest rank, with a total first."""
    order = sorted(st.series, key=lambda r: -1 if r is None else r)
    chosen = [r for r in order if st.series[r].total is not None] or order
    if not chosen:
        return None, None
    return chosen[0], st.series[chosen[0]]


def _status(st: RunState, s: Series | None) -> str:
    if s is not None and s.total is not None:
        return "ok"
    if st.oom:
        return "oom"
    if st.error_line is not None:
        return "failed"
    finished = "done_with_training" in st.details or "top1_accuracy" in st.details  # ended without a total
    if s is not None and (s.last_step > 0 or s.eval_n > 0) and not finished:
        return "truncated"
    return "no_result"


def _times(st: RunState, s: Series | None) -> tuple[float | None, float | None, float | None]:
    """(started_at, ended_at, wall_time_s). Start: the first stamp of any kind. End: the last stamp,
    if it was read after the run's last step line (or after its header when nothing ran): a stderr
    stamp that precedes training would date set-up, not the end. Wall time: step stamps only."""
    step_ts = [x for se in st.series.values() for x in (se.first_ts, se.last_ts) if x is not None]
    first = _stamp_seconds(st.stamp_first)
    starts = [x for x in [first, *step_ts] if x is not None]
    ends = list(step_ts)
    if st.stamp_last_no > (st.step_line or st.first_line or 0):
        last = _stamp_seconds(st.stamp_last)
        if last is not None:
            ends.append(last)
    wall = None
    if s is not None and s.first_ts is not None and s.last_ts is not None and s.last_ts > s.first_ts:
        wall = s.last_ts - s.first_ts
    return (min(starts) if starts else None), (max(ends) if ends else None), wall


def _tags(st: RunState, topo: _Topology) -> dict[str, str]:
    tags = dict(st.tags)
    mode = str(st.hdr.get("mode", ""))
    if mode and mode not in ("training", "forward only", "forward-only", "evaluation"):
        tags["mode"] = mode
    if topo.cpu:
        tags["device"] = "cpu"
    return tags


def _details(st: RunState, rank: int | None) -> dict[str, str]:
    details = dict(st.details)
    if any(r is not None for r in st.series):
        details["rank_used"] = str(rank)
    if st.nan_losses:
        details["nan_loss_steps"] = str(st.nan_losses)
    return details


def build_run(st: RunState, gpu: str | None, result: ParseResult) -> Run:
    h, (rank, s), topo = st.hdr, _primary(st), _topology(st, result)
    by_rank = by_index({r: v.total for r, v in st.series.items() if r is not None})
    num_ranks = len(by_rank) if by_rank else None
    if h.get("variable_update") == "horovod" and topo.num_devices:  # horovod lists one device per rank
        num_ranks = max(num_ranks or 0, topo.num_devices)
    dataset, data = _str(h.get("dataset")), None
    if dataset:
        data = "synthetic" if dataset.endswith("(synthetic)") else "real"
        dataset = dataset.removesuffix("(synthetic)").strip()
    mean = None
    if s is not None and (s.interval_n or s.eval_n):
        mean = s.interval_sum / s.interval_n if s.interval_n else s.eval_sum / s.eval_n
    started, ended, wall = _times(st, s)
    status = _status(st, s)
    total = s.total if s is not None else None
    printed = total is not None and status == "ok"  # the run's throughput: the images/sec it printed
    return Run(
        run_index=st.index, format=NAME, framework="tensorflow", framework_version=_str(h.get("framework_version")),
        model=_str(h.get("model")), dataset=dataset, data=data, mode=_MODES.get(str(h.get("mode"))),
        precision=_str(h.get("precision")), data_format=_str(h.get("data_format")),
        variable_update=_str(h.get("variable_update")),
        all_reduce=None if h.get("all_reduce") in (None, "None") else str(h.get("all_reduce")),
        batch_size_per_device=topo.per_device, global_batch_size=topo.global_batch, num_gpus=topo.num_gpus,
        num_devices=_cpu_devices(topo), device_type="cpu" if topo.cpu else None,
        num_nodes=topo.num_nodes, num_ranks=num_ranks, gpu_model=gpu, started_at=started, ended_at=ended,
        wall_time_s=wall, num_steps=(s.last_step or s.eval_step or None) if s is not None else None,
        warmup_steps=_int(h.get("warmup")), images_per_sec=total, throughput=total if printed else None,
        throughput_unit=IMAGES if printed else None, throughput_derived=False if printed else None,
        images_per_sec_mean=mean, images_per_sec_stderr=s.stderr if s is not None else None,
        images_per_sec_jitter=s.jitter if s is not None else None, images_per_sec_ranks=by_rank,
        status=status, first_line=st.first_line, last_line=st.last_line, tags=_tags(st, topo),
        details=_details(st, rank),
        status_detail=(st.root_detail or st.exc_detail or st.coord_detail or st.oom_detail)
        if status in ("failed", "oom") else None,
    )


def _str(value: object) -> str | None:
    return None if value is None or value == "" else str(value)
