"""What the DLLogger parser keeps while a log's records go by: the run's ``State`` and one running
throughput ``Series`` per (metric, step depth), in O(1) memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Series:
    """Running throughput summary of one metric at one step depth, in O(1) memory.

    The first logged value (the warm-up interval) and the 0s before the first positive value (logged
    before warm-up ended) are left out; each kept value is weighted by the time since the previous one.
    """

    n: int = 0
    warming: bool = True  # no value > 0 yet
    total: float = 0.0
    count: int = 0
    weighted: float = 0.0
    span: float = 0.0
    timed: bool = True  # every kept value had a positive time since the previous one
    prev_ts: float | None = None

    def add(self, ts: float | None, value: float) -> None:
        if self.n >= 1 and not (self.warming and value <= 0):
            self.total, self.count = self.total + value, self.count + 1
            if ts is not None and self.prev_ts is not None and ts > self.prev_ts:
                self.weighted, self.span = self.weighted + value * (ts - self.prev_ts), self.span + ts - self.prev_ts
            else:
                self.timed = False
        self.warming = self.warming and value <= 0
        self.n, self.prev_ts = self.n + 1, ts

    def rates(self) -> tuple[float | None, float | None]:
        """(time-weighted rate = total samples / total time, arithmetic mean), None when nothing kept."""
        if not self.count:
            return None, None
        mean = self.total / self.count
        return (self.weighted / self.span if self.timed and self.span > 0 else mean), mean


@dataclass
class State:
    params: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # metric -> METADATA (stdout: unit)
    names: set[str] = field(default_factory=set)  # every metric name logged
    row: dict[str, Any] | None = None  # the step row being merged
    series: dict[tuple[str, int], Series] = field(default_factory=dict)  # (metric, step depth) -> values
    summary: dict[str, float] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)  # label summaries (``avg:latency``)
    span_us: list[int] = field(default_factory=list)  # [first, last] LOG time in integer µs: exact wall time
    unix: bool = False  # timestamps are unix seconds (JSON), not a local wall clock (stdout)
    first_line: int | None = None
    last_line: int | None = None
    wrap: tuple[list[str], int, int] | None = None  # stdout PARAMETER pieces, line, µs
    ended: bool = False  # a final summary was logged
    error: tuple[str, int, bool] | None = None  # (error line, line number, out of memory)
    printed_gpus: int | None = None
