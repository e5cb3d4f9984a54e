"""Generated tf_cnn_benchmarks-style logs, for tests and the ingest benchmark.

The lines follow upstream's printing code (log-formats.md §1-3): the header block, step lines
``<step>\\timages/sec: <mean> +/- <stderr> (jitter = <jitter>)\\t<loss>`` where mean = b / mean(t_i),
stderr = std(b/t_i)/sqrt(n) (ddof 0) and jitter = 1.4826 · median(|s_i − median(s)|), and the
``total images/sec`` block. Step times are drawn from ``random.Random(seed)``, so a log is reproducible.
For long logs (more than ``EXACT_JITTER_STEPS`` steps) the jitter is computed over the last
``EXACT_JITTER_STEPS`` step rates, to keep generation linear; mean and stderr stay exact.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from collections.abc import Iterator

EXACT_JITTER_STEPS = 1000


def tf_cnn_lines(
    num_steps: int,
    *,
    batch_per_device: int = 64,
    num_gpus: int = 1,
    model: str = "resnet50",
    display_every: int = 10,
    step_time_s: float = 0.2,
    seed: int = 42,
    with_total: bool = True,
    jitter_every: int = 1,
    prefix: str = "",
    accuracy: bool = False,
    epoch_start: int | None = None,
) -> Iterator[str]:
    """Lines (without newlines) of one synthetic training run; see the module docstring.

    ``jitter_every`` > 1 recomputes the jitter only at every that many printed steps (for very long
    generated logs, where a median per line would dominate the generation time). ``prefix`` goes in
    front of every line (e.g. Open MPI's ``[1,0]<stdout>:``); ``accuracy`` adds the top-1/top-5 columns
    of forward-only runs; ``epoch_start`` appends unix seconds to step lines, as Lambda's harness does.
    """
    for line in _lines(num_steps, batch_per_device, num_gpus, model, display_every, step_time_s, seed,
                       with_total, jitter_every, accuracy, epoch_start):
        yield prefix + line


def _lines(num_steps: int, batch_per_device: int, num_gpus: int, model: str, display_every: int,
           step_time_s: float, seed: int, with_total: bool, jitter_every: int, accuracy: bool,
           epoch_start: int | None) -> Iterator[str]:
    rng = random.Random(seed)
    b = batch_per_device * num_gpus
    yield "TensorFlow:  2.15"
    yield f"Model:       {model}"
    yield "Dataset:     imagenet (synthetic)"
    yield "Mode:        training"
    yield "SingleSess:  False"
    yield f"Batch size:  {b} global"
    yield f"             {batch_per_device} per device"
    yield f"Num batches: {num_steps}"
    yield f"Devices:     {[f'/gpu:{i}' for i in range(num_gpus)]}"
    yield "Data format: NCHW"
    yield "Optimizer:   sgd"
    yield "Variables:   replicated"
    yield "AllReduce:   nccl"
    yield "=========="
    yield "Running warm up"
    yield "Done warm up"
    yield "Step\tImg/sec\ttotal_loss" + ("\ttop_1_accuracy\ttop_5_accuracy" if accuracy else "")
    total_t = 0.0
    n = 0
    mean_r = m2 = 0.0  # Welford over per-step rates
    recent: deque[float] = deque(maxlen=EXACT_JITTER_STEPS)
    jitter = 0.0
    printed = 0
    for step in range(1, num_steps + 1):
        t = step_time_s * rng.uniform(0.95, 1.05)
        r = b / t
        total_t += t
        n += 1
        delta = r - mean_r
        mean_r += delta / n
        m2 += delta * (r - mean_r)
        recent.append(r)
        if step == 1 or step % display_every == 0:
            stderr = math.sqrt(m2 / n) / math.sqrt(n)
            if printed % jitter_every == 0:
                med = statistics.median(recent)
                jitter = 1.4826 * statistics.median(abs(x - med) for x in recent)
            printed += 1
            loss = 8.0 - step % 70_000 * 1e-4  # > 0 however long the log (a loss < 0 is a problem row)
            tail = f"\t{rng.random() / 100:.3f}\t{rng.random() / 20:.3f}" if accuracy else ""
            if epoch_start is not None:
                tail += f" {epoch_start + int(total_t)}"
            yield f"{step}\timages/sec: {b * n / total_t:.1f} +/- {stderr:.1f} (jitter = {jitter:.1f})\t{loss:.3f}{tail}"
    if with_total:
        yield "-" * 64
        yield f"total images/sec: {b * n / (total_t * 1.001):.2f}"  # loop overhead: slightly below the step mean
        yield "-" * 64
