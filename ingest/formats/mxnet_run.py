"""What the MXNet parser keeps of one run while its lines go by (``RunState``, one ``RankState`` per worker)
and how it becomes a ``Run`` (``build_run``): devices and batch from the Namespace line, rates, status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.ingest.checks import by_index
from bench.ingest.records import Run

NAME = "mxnet"  # the format name (bench.ingest.formats.mxnet.NAME)
_PRECISION = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float64": "fp64"}
_LOCAL_KV = ("local", "device", "nccl")  # single-machine kvstores


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass
class RankState:
    """What one rank (worker) printed in one run."""

    last: tuple[int | None, int] | None = None  # (epoch, end batch) of its last interval
    pending: dict[str, Any] | None = None  # interval row that more per-metric lines may extend
    epoch_row: dict[str, Any] | None = None
    batches: float = 0.0  # Σ f over counted intervals
    time_units: float = 0.0  # Σ f / s (seconds per B images)
    speed_sum: float = 0.0  # Σ s and their count n (running sums: a 1 GB log keeps no list)
    n: int = 0
    time_cost: float | None = None


@dataclass
class RunState:
    """One run being read; :func:`build_run` turns it into a :class:`Run`."""

    index: int
    first_line: int
    last_line: int
    ns: dict[str, str] = field(default_factory=dict)
    ns_ranks: set[int | None] = field(default_factory=set)
    started: set[int | None] = field(default_factory=set)
    start_gpus: int | None = None
    ranks: dict[int | None, RankState] = field(default_factory=dict)
    intervals: int = 0
    rated: int = 0  # intervals whose Speed was a rate (finite and > 0)
    epoch_ends: int = 0
    last_event: str = ""  # "interval" | "epoch_end"
    max_epoch: int | None = None
    gluon: list[float] = field(default_factory=lambda: [0.0, 0.0])  # Σ speed·time, Σ time
    error: str | None = None
    oom: bool = False
    era: str | None = None
    stamps: list[float] = field(default_factory=list)  # [first, last]

    def rank(self, r: int | None) -> RankState:
        return self.ranks.setdefault(r, RankState())

    def seen(self, ts: float | None, epoch: int | None = None) -> None:
        if ts is not None:
            self.stamps = [min(self.stamps[0], ts), max(self.stamps[1], ts)] if self.stamps else [ts, ts]
        if epoch is not None:
            self.max_epoch = epoch if self.max_epoch is None else max(self.max_epoch, epoch)


def _hardware(run: RunState) -> tuple[int, int | None, int | None, int | None]:
    """(workers, GPUs in all, batch per device, global batch). fit.py's batch is per worker and split
    over its GPUs (CPU: one device); GluonCV's is per device (``num_gpus`` and no ``gpus``)."""
    workers = len((run.ranks.keys() | run.ns_ranks | run.started) - {None}) or 1
    gpus = run.start_gpus
    if gpus is None and "gpus" in run.ns:
        gpus = len([g for g in run.ns["gpus"].split(",") if g.strip() and g.strip() != "None"])
    if gpus is None:
        gpus = _int(run.ns.get("num_gpus"))
    batch = _int(run.ns.get("batch_size"))
    total = None if gpus is None else gpus * workers
    if batch is None:
        return workers, total, None, None
    if "gpus" not in run.ns and "num_gpus" in run.ns:
        return workers, total, batch, batch * max(1, gpus or 0) * workers
    if not gpus:
        return workers, total, batch, batch * workers
    return workers, total, (batch // gpus if batch % gpus == 0 else None), batch * workers


def _rates(run: RunState) -> tuple[float | None, float | None, tuple[float | None, ...] | None]:
    """(images_per_sec, images_per_sec_mean, per-rank images/sec) over the counted intervals."""
    per = {r: st.batches / st.time_units for r, st in run.ranks.items() if st.n}
    if not per:
        return (run.gluon[0] / run.gluon[1] if run.gluon[1] > 0 else None), None, None
    mean = sum(st.speed_sum / st.n for st in run.ranks.values() if st.n)
    known = [r for r in per if r is not None]
    ranks = by_index({r: v for r, v in per.items() if r is not None}) if known and len(known) == len(per) else None
    return sum(per.values()), mean, ranks


def _status(run: RunState, followed: bool) -> str:
    if run.error is not None:
        if run.oom:
            return "oom"
        return "interrupted" if "KeyboardInterrupt" in run.error else "failed"
    if not run.intervals and not run.gluon[1]:
        return "no_result"
    if not run.rated and not run.gluon[1]:
        return "invalid"  # it ran (it printed intervals) and no Speed: says how fast: not a result
    if run.last_event == "interval" and (run.epoch_ends or followed):
        return "truncated"  # ended mid-epoch although epochs end with lines, or a new run followed
    num_epochs = _int(run.ns.get("num_epochs"))
    if num_epochs is not None and run.max_epoch is not None and run.max_epoch < num_epochs - 1:
        return "truncated"
    return "ok"


def build_run(run: RunState, followed: bool) -> Run:
    workers, gpus, per_device, global_batch = _hardware(run)
    ips, mean, ranks = _rates(run)
    costs = [st.time_cost for st in run.ranks.values() if st.time_cost is not None]
    ns = run.ns
    kv, bench = ns.get("kv_store"), ns.get("benchmark")
    tags = {k: ns[k] for k in ("kv_store", "optimizer") if ns.get(k)}
    details = {"speedometer": run.era} if run.era else {}  # which Speedometer line form was read
    failed = run.error is not None
    return Run(
        run_index=run.index, format=NAME, framework="mxnet",
        model=ns.get("network") or ns.get("model") or None,
        dataset=ns.get("data_type") or ns.get("dataset") or None,
        data=None if bench is None else "real" if bench in ("0", "False") else "synthetic",
        mode="train",
        precision=_PRECISION.get(ns.get("dtype", "")) or ("amp" if ns.get("amp") == "True" else None),
        batch_size_per_device=per_device, global_batch_size=global_batch, num_gpus=gpus,
        num_nodes=1 if kv in _LOCAL_KV else None,
        num_ranks=workers if (workers > 1 or run.ranks.keys() - {None} or kv in _LOCAL_KV) else None,
        started_at=run.stamps[0] if run.stamps else None, ended_at=run.stamps[1] if run.stamps else None,
        wall_time_s=max(costs) if costs else None,
        images_per_sec=ips, images_per_sec_mean=mean, images_per_sec_ranks=ranks,
        status=(status := _status(run, followed)),
        status_detail=run.error if failed else f"no Speed: of its {run.intervals} intervals is a rate (> 0)"
        if status == "invalid" else None,
        first_line=run.first_line, last_line=run.last_line, tags=tags, details=details,
    )
