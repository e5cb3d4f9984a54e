"""tf_cnn_benchmarks statistics and output lines, pure Python (no TensorFlow).

The trainer prints exactly what tf_cnn_benchmarks prints (log-formats.md §1-§3), so that
``bench.ingest.formats.tf_cnn`` reads our logs and theirs alike:

- ``step_stats`` is upstream's ``get_perf_timing`` (``benchmark_cnn.py`` L938-L950): with per-step wall
  times t_i (seconds, cumulative since warm-up ended) and b images per step (the global batch of this
  process), mean = b / mean(t_i); stderr = pstdev(b / t_i) / sqrt(n); jitter = 1.4826 · median(|s_i −
  median(s)|) with s_i = b / t_i.
- ``step_line`` / ``header_lines`` / ``total_lines`` format them the way upstream's ``log_fn`` calls do.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Images in the training split of each dataset, for ``Num epochs`` (upstream's ``num_examples_per_epoch``).
TRAIN_IMAGES = {"imagenet": 1_281_167, "cifar10": 50_000}
#: The normal-consistency constant that turns a median absolute deviation into an estimate of sigma.
MAD_TO_SIGMA = 1.4826
RULE = "-" * 64


@dataclass(frozen=True, slots=True)
class StepStats:
    """Throughput statistics over the steps timed so far, in images per second."""

    images_per_sec: float  # b / mean(t_i): images over step time, not the mean of per-step rates
    stderr: float  # standard error of the mean of per-step rates (ddof=0), 0.0 for one step
    jitter: float  # normalised MAD of per-step rates: a robust sigma that does not shrink with n
    num_steps: int


@dataclass(frozen=True, slots=True)
class Header:
    """What upstream's ``print_info`` prints; ``devices`` are names such as ``/gpu:0``."""

    tf_version: str  # "major.minor"
    model: str
    dataset: str  # "imagenet" or "cifar10"
    synthetic: bool
    batch_size_per_device: int
    devices: tuple[str, ...]
    num_batches: int
    data_format: str
    optimizer: str
    variable_update: str
    all_reduce: str | None  # printed (as "None" when unset) only in replicated mode
    mode: str = "training"
    epochs: float | None = None  # as given with --num-epochs; else derived from num_batches
    #: real data: (images per epoch, how it was learned), printed as ``Num examples:``; None: the dataset's split
    epoch_images: tuple[int, str] | None = None
    #: worker processes with ``devices`` each (multi_worker / distributed_ps); > 1 prints ``Sync: True``
    num_workers: int = 1

    @property
    def global_batch(self) -> int:
        return self.batch_size_per_device * len(self.devices) * self.num_workers


def step_stats(step_times_s: Sequence[float], batch: int) -> StepStats:
    """Upstream's step statistics for ``batch`` images per step over ``step_times_s`` (seconds, > 0).

    Raises ValueError for no steps or a non-positive time (a step cannot take no time).
    """
    if not step_times_s:
        raise ValueError("step_stats needs at least one step time")
    if min(step_times_s) <= 0:
        raise ValueError(f"step times must be positive seconds, got {min(step_times_s)}")
    n = len(step_times_s)
    speeds = [batch / t for t in step_times_s]
    mean = batch / (math.fsum(step_times_s) / n)
    stderr = statistics.pstdev(speeds) / math.sqrt(n)
    centre = statistics.median(speeds)
    jitter = MAD_TO_SIGMA * statistics.median(abs(s - centre) for s in speeds)
    return StepStats(mean, stderr, jitter, n)


def is_display_step(step: int, display_every: int) -> bool:
    """Upstream prints step 1 and then every ``display_every``-th step (steps counted from 1)."""
    return step == 1 or (display_every > 0 and step % display_every == 0)


def step_line(step: int, stats: StepStats, loss: float) -> str:
    """``<k>\\timages/sec: <mean> +/- <u> (jitter = <j>)\\t<loss>`` (upstream L876-L888, L929-L935)."""
    return (f"{step}\timages/sec: {stats.images_per_sec:.1f} +/- {stats.stderr:.1f} "
            f"(jitter = {stats.jitter:.1f})\t{loss:.3f}")


def num_epochs(h: Header) -> float:
    """The ``--num-epochs`` given, else the timed batches as a fraction of the dataset's training split."""
    if h.epochs is not None:
        return h.epochs
    images = h.epoch_images[0] if h.epoch_images is not None else TRAIN_IMAGES[h.dataset]
    return h.num_batches * h.global_batch / images


def header_lines(h: Header) -> list[str]:
    """``TensorFlow:`` plus upstream's ``print_info`` block, labels padded to column 14."""
    lines = [
        f"TensorFlow:  {h.tf_version}",
        f"Model:       {h.model}",
        f"Dataset:     {h.dataset}{' (synthetic)' if h.synthetic else ''}",
        f"Mode:        {h.mode}",
        "SingleSess:  False",
        f"Batch size:  {h.global_batch} global",
        f"             {h.batch_size_per_device} per device",
        f"Num batches: {h.num_batches}",
        f"Num epochs:  {num_epochs(h):.2f}",
        *([f"Num examples: {h.epoch_images[0]} ({h.epoch_images[1]})"] if h.epoch_images is not None else []),
        f"Devices:     {list(h.devices)!r}",
        f"Data format: {h.data_format}",
        f"Optimizer:   {h.optimizer}",
        f"Variables:   {h.variable_update}",
    ]
    if h.variable_update == "replicated":
        lines.append(f"AllReduce:   {h.all_reduce}")
    if h.variable_update in ("multi_worker", "distributed_ps"):
        lines.append("Sync:        True")  # upstream prints it for every job with a job_name
    lines.append("==========")
    return lines


def total_images_per_sec(images: int, elapsed_s: float) -> float:
    """Upstream's total: images processed in the timed loop over its wall time (loop start to end)."""
    if elapsed_s <= 0:
        raise ValueError(f"the timed window must be positive seconds, got {elapsed_s}")
    return images / elapsed_s


def total_lines(images: int, elapsed_s: float) -> list[str]:
    """Our ``Timed window`` line (ignored by the tf_cnn parser) and upstream's total block (L2486-L2495)."""
    return [
        f"Timed window: {elapsed_s:.9f} s for {images} images",
        RULE,
        f"total images/sec: {total_images_per_sec(images, elapsed_s):.2f}",
        RULE,
    ]
