"""What the ``caffe train`` parser keeps of one run while its lines go by (``RunState``, with an ``Acc``
of timed intervals), and the run's throughput and status once it is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.ingest.checks import by_index


@dataclass
class Acc:
    """Throughput accumulator over timed intervals (images and seconds, and the per-interval rates)."""

    images: float = 0.0
    seconds: float = 0.0
    rate_sum: float = 0.0
    n: int = 0

    def add(self, images: float, seconds: float, rate: float) -> float:
        self.images, self.seconds = self.images + images, self.seconds + seconds
        self.rate_sum, self.n = self.rate_sum + rate, self.n + 1
        return rate


@dataclass
class RunState:
    first_line: int
    run: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    ctx: str | None = None  # "solver" | "net" while a printed prototxt follows its glog line
    phase: str | None = None  # phase of the net being set up ("TRAIN" / "TEST")
    batch: int | None = None
    batch_top: int | None = None
    iter_size: int = 1
    first_iter: int | None = None
    last_iter: int | None = None
    t0: float | None = None
    t1: float | None = None
    rate_lines: int = 0
    rates: Acc = field(default_factory=Acc)
    derived: Acc = field(default_factory=Acc)
    prev_old: tuple[int, float] | None = None
    pending: dict[str, Any] | None = None
    test_net: int = 0
    perf: dict[int, float] = field(default_factory=dict)
    overall: float | None = None
    done: bool = False
    fatal: str | None = None
    last_line: int = 0

    @property
    def started(self) -> bool:
        return self.first_iter is not None or self.done or self.fatal is not None

    def images_per_iter(self) -> int | None:
        b = self.batch if self.batch is not None else self.batch_top
        return None if b is None else b * max(self.run.get("num_gpus") or 1, 1) * self.iter_size


def throughput(st: RunState) -> tuple[float | None, float | None, tuple[float | None, ...] | None, str | None]:
    """(images_per_sec, images_per_sec_mean, per-device img/sec, source tag) of a finished run."""
    acc = st.rates if st.rates.n else st.derived if st.derived.n else None
    mean = acc.rate_sum / acc.n if acc is not None else None
    ranks = by_index(st.perf)
    if st.overall is not None:
        return st.overall, mean, ranks, "nvcaffe_overall"
    if st.perf:
        return sum(st.perf.values()), mean, ranks, "nvcaffe_device_sum"
    if acc is not None and acc.seconds > 0:
        source = "iter_per_sec" if acc is st.rates else "glog_timestamps"
        return acc.images / acc.seconds, mean, None, source
    return None, mean, None, None


def run_status(st: RunState, ips: float | None) -> tuple[str, str | None]:
    if st.fatal is not None:
        return st.run["status"], st.fatal
    if not st.done:
        return "truncated", None
    return ("ok", None) if ips is not None else ("no_result", None)
