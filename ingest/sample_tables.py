"""The per-sample tables parsers fill: steps and telemetry. Each is a ``ColumnBuffer``
(``bench.ingest.column_buffers``) declared by its columns (``bench.sql.columns``: they are the store's); its ``add``
names them, so a parser's call reads as the row it adds. A new per-sample table is one more such declaration.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.ingest.column_buffers import MAX_INT, MAX_UNIX, MIN_UNIX, NULL_FLOAT, ColumnBuffer
from bench.sql.columns import STEP_COLUMNS, TELEMETRY_COLUMNS


class StepTable(ColumnBuffer):
    """Step rows (``STEP_COLUMNS``); parsers call :meth:`add`."""

    COLUMNS: ClassVar[dict[str, str]] = STEP_COLUMNS
    #: What a step's values can be (bench.ingest.checks states the rules): a rate beyond 10^12 images/s
    #: (10^7 per device on 10^5 devices) or a step of more than a day is a misprint, as is a rate or a step
    #: time of 0 on a line that says a step ran; a loss is finite and >= 0 (every format's is a
    #: cross-entropy or a sum of them; a diverging one is large, 1.4e20 in a real tf_cnn CPU run, and stays),
    #: an accuracy a fraction or a percentage, a stamp a unix time.
    CHECKED: ClassVar[dict[str, tuple[float, float, bool]]] = {
        "images_per_sec": (0.0, 1e12, False), "interval_images_per_sec": (0.0, 1e12, False),
        "images_per_sec_stderr": (0.0, 1e12, True), "images_per_sec_jitter": (0.0, 1e12, True),
        "step_time_ms": (0.0, 86_400_000.0, False), "loss": (0.0, sys.float_info.max, True),
        "top1_accuracy": (0.0, 100.0, True), "top5_accuracy": (0.0, 100.0, True),
        "timestamp": (MIN_UNIX, MAX_UNIX, True)}
    POSITION = "line_no"

    def add(
        self,
        run_index: int,
        step: int | None,
        *,
        rank: int | None = None,
        epoch: int | None = None,
        images_per_sec: float | None = None,
        interval_images_per_sec: float | None = None,
        images_per_sec_stderr: float | None = None,
        images_per_sec_jitter: float | None = None,
        loss: float | None = None,
        top1_accuracy: float | None = None,
        top5_accuracy: float | None = None,
        step_time_ms: float | None = None,
        timestamp: float | None = None,
        line_no: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        for name, value in (("step", step), ("epoch", epoch), ("rank", rank)):
            if value is not None and not -MAX_INT <= value <= MAX_INT:
                self.refused.append((run_index, line_no, f"{name} {value}"))
                return
        self._append((run_index, rank, step, epoch, images_per_sec, interval_images_per_sec, images_per_sec_stderr,
                      images_per_sec_jitter, loss, top1_accuracy, top5_accuracy, step_time_ms, timestamp, line_no,
                      metrics))


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """One telemetry sample for one GPU (``gpu_index`` None for host-wide values): the row shape of
    ``TelemetryTable``, which stores them as columns."""

    sample_index: int
    timestamp: float | None = None  # unix seconds
    elapsed_s: float | None = None
    gpu_index: int | None = None
    images_per_sec: float | None = None
    temperature_c: float | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    run_index: int | None = None


class TelemetryTable(ColumnBuffer):
    """Telemetry rows, one per sample per GPU. Indexing and iteration give ``TelemetrySample`` rows."""

    COLUMNS: ClassVar[dict[str, str]] = TELEMETRY_COLUMNS
    ROW = TelemetrySample
    #: What a sample's values can be: a stamp a unix time, a temperature between -50 and 200 C (a
    #: sensor's), utilisation a percentage, memory, power and clocks >= 0 and below any device's.
    CHECKED: ClassVar[dict[str, tuple[float, float, bool]]] = {
        "timestamp": (MIN_UNIX, MAX_UNIX, True), "elapsed_s": (0.0, 10 * 365 * 86400.0, True),
        "images_per_sec": (0.0, 1e12, True), "temperature_c": (-50.0, 200.0, True),
        "utilization_pct": (0.0, 100.0, True), "memory_used_mib": (0.0, 1e9, True), "power_w": (0.0, 1e6, True),
        "sm_clock_mhz": (0.0, 1e6, True)}
    POSITION = "sample_index"

    def add(
        self,
        sample_index: int,
        *,
        timestamp: float | None = None,
        elapsed_s: float | None = None,
        gpu_index: int | None = None,
        images_per_sec: float | None = None,
        temperature_c: float | None = None,
        utilization_pct: float | None = None,
        memory_used_mib: float | None = None,
        power_w: float | None = None,
        sm_clock_mhz: float | None = None,
        run_index: int | None = None,
    ) -> None:
        self._append((run_index, sample_index, timestamp, elapsed_s, gpu_index, images_per_sec, temperature_c,
                      utilization_pct, memory_used_mib, power_w, sm_clock_mhz))

    def add_gpu_samples(
        self, sample_index: list[int], temperatures_c: list[list[float]], *, timestamp: list[float],
        elapsed_s: list[float], images_per_sec: list[float | None],
    ) -> None:
        """Many samples of several GPUs at once (sample j has one temperature per GPU): the fast path
        for files with one line per sample, such as Lambda's thermal files. Lists are parallel."""
        counts = [len(t) for t in temperatures_c]

        def each(code: str, values: Iterable[Any]) -> memoryview:
            return memoryview(array(code, [v for v, n in zip(values, counts, strict=True) for _ in range(n)])).cast("B")

        columns = {
            "sample_index": each("q", sample_index), "timestamp": each("d", timestamp),
            "elapsed_s": each("d", elapsed_s),
            "images_per_sec": each("d", (NULL_FLOAT if r is None else r for r in images_per_sec)),
            "gpu_index": memoryview(array("q", [i for n in counts for i in range(n)])).cast("B"),
            "temperature_c": memoryview(array("d", [t for temps in temperatures_c for t in temps])).cast("B"),
        }
        if sum(counts):
            self.add_raw(sum(counts), columns)

    def add_gpu_matrix(self, first_sample: int, timestamp: Any, elapsed_s: Any, images_per_sec: Any, present: Any,
                       temperatures_c: Any) -> None:
        """The numpy form of :meth:`add_gpu_samples` for n samples of g GPUs each: ``timestamp``,
        ``elapsed_s`` and ``images_per_sec`` are float arrays of n (``present`` False where the rate is
        NULL), ``temperatures_c`` an n x g array; samples are numbered from ``first_sample``. The rows
        are the ones add_gpu_samples would add, appended at once."""
        import numpy as np

        n, g = temperatures_c.shape
        k = n * g
        if not k:
            return
        rate = np.where(present, images_per_sec, NULL_FLOAT)
        columns = {
            "sample_index": np.repeat(np.arange(first_sample, first_sample + n, dtype=np.int64), g),
            "timestamp": np.repeat(np.asarray(timestamp, np.float64), g),
            "elapsed_s": np.repeat(np.asarray(elapsed_s, np.float64), g),
            "gpu_index": np.tile(np.arange(g, dtype=np.int64), n), "images_per_sec": np.repeat(rate, g),
            "temperature_c": np.ascontiguousarray(temperatures_c, dtype=np.float64).ravel(),
        }
        self.add_raw(k, {name: v.view(np.uint8) for name, v in columns.items()})
