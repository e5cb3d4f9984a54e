"""The telemetry table's column buffer: one row per sample per GPU (``TelemetrySample`` is the row's shape).

A ``ColumnBuffer`` like the steps table (``bench.ingest.columns``), with fast paths for files of one line
per sample (Lambda's thermal files).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.ingest.columns import INT_NULL, NULL_FLOAT, ColumnBuffer


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



# Columns of the telemetry table as parsers give them (see TelemetrySample for the meaning).
TELEMETRY_COLUMNS: dict[str, str] = {
    "run_index": "i",
    "sample_index": "i",
    "timestamp": "d",
    "elapsed_s": "d",
    "gpu_index": "i",
    "images_per_sec": "d",
    "temperature_c": "d",
    "utilization_pct": "d",
    "memory_used_mib": "d",
    "power_w": "d",
    "sm_clock_mhz": "d",
}


class TelemetryTable(ColumnBuffer):
    """Telemetry rows, one per sample per GPU. Indexing and iteration give ``TelemetrySample`` views."""

    COLUMNS: ClassVar[dict[str, str]] = TELEMETRY_COLUMNS

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
        c = self._cols or self._row_buffer()
        c["run_index"].append(INT_NULL if run_index is None else run_index)
        c["sample_index"].append(sample_index)
        c["timestamp"].append(NULL_FLOAT if timestamp is None else timestamp)
        c["elapsed_s"].append(NULL_FLOAT if elapsed_s is None else elapsed_s)
        c["gpu_index"].append(INT_NULL if gpu_index is None else gpu_index)
        c["images_per_sec"].append(NULL_FLOAT if images_per_sec is None else images_per_sec)
        c["temperature_c"].append(NULL_FLOAT if temperature_c is None else temperature_c)
        c["utilization_pct"].append(NULL_FLOAT if utilization_pct is None else utilization_pct)
        c["memory_used_mib"].append(NULL_FLOAT if memory_used_mib is None else memory_used_mib)
        c["power_w"].append(NULL_FLOAT if power_w is None else power_w)
        c["sm_clock_mhz"].append(NULL_FLOAT if sm_clock_mhz is None else sm_clock_mhz)
        self._added()

    def add_gpu_samples(
        self, sample_index: list[int], temperatures_c: list[list[float]], *, timestamp: list[float],
        elapsed_s: list[float], images_per_sec: list[float | None],
    ) -> None:
        """Many samples of several GPUs at once (sample j has one temperature per GPU): the fast path
        for files with one line per sample, such as Lambda's thermal files. Lists are parallel."""
        counts = [len(t) for t in temperatures_c]
        k = sum(counts)
        if not k:
            return
        c = self._cols or self._row_buffer()

        def each(values: list[Any]) -> list[Any]:
            return [v for v, n in zip(values, counts, strict=True) for _ in range(n)]

        c["run_index"].extend(array("q", [INT_NULL]) * k)
        c["sample_index"].extend(each(sample_index))
        c["timestamp"].extend(each(timestamp))
        c["elapsed_s"].extend(each(elapsed_s))
        c["gpu_index"].extend([i for n in counts for i in range(n)])
        c["images_per_sec"].extend(each([NULL_FLOAT if r is None else r for r in images_per_sec]))
        c["temperature_c"].extend([t for temps in temperatures_c for t in temps])
        nulls = array("d", [NULL_FLOAT]) * k
        for name in ("utilization_pct", "memory_used_mib", "power_w", "sm_clock_mhz"):
            c[name].extend(nulls)
        self._n += k
        self.total_rows += k
        if self._spill is not None and self._n >= self._spill_rows:
            self.flush()

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

    def __getitem__(self, i: int) -> TelemetrySample:
        n = self._n
        if not -n <= i < n:
            raise IndexError(i)
        return TelemetrySample(**self._row(i % n, self._consolidated()))

    def __iter__(self) -> Iterator[TelemetrySample]:
        cols = self._consolidated()
        return (TelemetrySample(**self._row(i, cols)) for i in range(self._n))
