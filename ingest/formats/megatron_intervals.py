"""The intervals of a Megatron run (bench.ingest.formats.megatron): one per logged iteration, held as columns, since
a long training logs hundreds of thousands and its C path adds them a stretch at a time."""

from __future__ import annotations

from array import array
from typing import Any

from bench.ingest.nulls import NULL_FLOAT, null_mask


class Intervals:
    """Each logged iteration's number, time per iteration (ms), global batch (0 where none), TFLOP/s and tokens/s
    per device (NULL where the line had none), in the order logged."""

    def __init__(self) -> None:
        self.iteration = array("q")
        self.elapsed_ms = array("d")
        self.global_batch = array("q")
        self.tflops = array("d")
        self.tokens = array("d")

    def __len__(self) -> int:
        return len(self.iteration)

    def append(self, iteration: int, elapsed_ms: float | None, global_batch: int | None, tflops: float | None,
               tokens: float | None) -> None:
        self.iteration.append(iteration)
        self.elapsed_ms.append(NULL_FLOAT if elapsed_ms is None else elapsed_ms)
        self.global_batch.append(global_batch or 0)
        self.tflops.append(NULL_FLOAT if tflops is None else tflops)
        self.tokens.append(NULL_FLOAT if tokens is None else tokens)

    def extend(self, iteration: Any, elapsed_ms: Any, global_batch: Any, tflops: Any, tokens: Any) -> None:
        """Many at once: numpy arrays of one length, with the NULL sentinels (and 0 batches) in place."""
        for column, values in ((self.iteration, iteration), (self.elapsed_ms, elapsed_ms),
                               (self.global_batch, global_batch), (self.tflops, tflops), (self.tokens, tokens)):
            column.frombytes(values.tobytes())

    def holds(self, n: int) -> bool:
        """Whether iteration ``n`` was logged."""
        import numpy as np

        return bool((np.frombuffer(self.iteration, np.int64) == n).any())

    def last_global_batch(self) -> int | None:
        return next((g for g in reversed(self.global_batch) if g), None)

    def sums(self) -> tuple[float, float, float, float, bool]:
        """Over the intervals after the first (the first alone when it is the only one), each covering the
        iterations since the one before (at least 1) and skipped where its time is NULL: the samples and the
        seconds of those with a global batch, the TFLOP/s x seconds and the seconds of those with TFLOP/s, and
        whether every one has TFLOP/s. Added in order (cumsum), as a loop over them adds."""
        import numpy as np

        its = np.frombuffer(self.iteration, np.int64)
        start = 1 if len(its) > 1 else 0
        covered = np.maximum(np.diff(its), 1) if start else np.ones(len(its), np.int64)
        elapsed = np.frombuffer(self.elapsed_ms, np.float64)[start:]
        timed = ~null_mask(elapsed)
        took = elapsed * covered / 1e3
        batch = np.frombuffer(self.global_batch, np.int64)[start:]
        tflops = np.frombuffer(self.tflops, np.float64)[start:]
        with_batch, with_tflops = timed & (batch != 0), timed & ~null_mask(tflops)

        def total(values: Any) -> float:
            return float(np.cumsum(values)[-1]) if len(values) else 0.0

        return (total((batch * covered)[with_batch].astype(np.float64)), total(took[with_batch]),
                total((tflops * took)[with_tflops]), total(took[with_tflops]), bool((with_tflops == timed).all()))
