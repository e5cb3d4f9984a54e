"""What ``bench fleet`` finds (bench.analytics.fleet), as data: each workload's hosts and their levels, the flagged
hosts with why (bench.analytics.fleet_why), and the runs it reads."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

#: a host's robust z-score bound (Iglewicz and Hoaglin's for the modified z-score), raised for a workload of
#: more hosts than 3.5 suits (``FAMILY_RATE``: at most one healthy host flagged in 20 workloads)
Z_BOUND = 3.5
FAMILY_RATE = 0.05
SCALE_FLOOR = 0.002  # 0.2%: hosts that agree to the digit still differ by their runs' noise
MAD_TO_SD = 1.4826


def robust_scale(residuals: list[float]) -> float:
    """The robust SD of log levels about their centre: MAD_TO_SD x their median absolute residual, at least
    SCALE_FLOOR."""
    return max(MAD_TO_SD * statistics.median(abs(r) for r in residuals), SCALE_FLOOR)


@dataclass
class HostLevel:
    host: str
    level: float | None  # median of its ok runs
    n_runs: int
    n_failed: int
    logs: list[float] = field(default_factory=list, repr=False)  # log of each ok run's value
    relative: float | None = None  # level / fleet median - 1 (for lower-is-better metrics: fleet / level - 1)
    z: float | None = None
    ci95: tuple[float | None, float | None] = (None, None)


@dataclass
class Outlier:
    host: str
    gpu: int | None
    kind: str  # slower, failed
    workload: str
    relative_difference: float | None
    ci95: tuple[float | None, float | None]
    z: float | None
    level: float | None
    fleet_median: float | None
    n_runs: int
    differs: dict[str, dict[str, Any]] = field(default_factory=dict)
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    gpus: list[int] = field(default_factory=list)  # every GPU the finding is about (``gpu``: the first)
    since: dict[str, Any] | None = None  # when it turned slow (bench.analytics.fleet_history.since)
    against: str = "the median host"  # or, for a host of a slow group, its group's median host


@dataclass
class SlowGroup:
    """Hosts that share a fact and are slower than the workload's other hosts (bench.analytics.fleet_groups)."""

    workload: str
    hosts: list[str]
    facts: list[tuple[str, str]]  # the facts its hosts share and no other host has: (name, value)
    n_others: int  # the other hosts it is compared with
    left_out: int  # hosts that stand apart on their own, in it or among the others, left out of the comparison
    relative_difference: float  # its hosts' geometric mean level over the others', - 1 (slower: < 0)
    ci95: tuple[float, float]
    p_value: float  # Welch's one-sided test of the hosts' log levels
    candidates: int  # the candidate groups of every workload of the fleet (its p is held to FAMILY_RATE / candidates)


@dataclass
class Workload:
    label: str
    key: dict[str, Any]
    n_hosts: int
    n_runs: int
    median: float | None = None
    robust_sd: float | None = None  # relative (on the log scale)
    z_bound: float | None = None  # the bound its hosts are held to (fleet.z_bound_for)
    hosts: list[HostLevel] = field(default_factory=list)
    compared: bool = True
    note: str | None = None


@dataclass
class Fleet:
    metric: str
    lower_is_better: bool
    threshold: float
    z_bound: str = f"{Z_BOUND} robust SDs, or the normal quantile 1 - {FAMILY_RATE} / hosts where higher"
    host_tests: int = 0  # the hosts judged in every workload: the family each host's bound is held to
    scale: str = f"{MAD_TO_SD} x MAD of the hosts' log levels, at least {SCALE_FLOOR:.1%}"
    workloads: list[Workload] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    groups: list[SlowGroup] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        out = asdict(self)
        for w in out["workloads"]:
            for h in w["hosts"]:
                h.pop("logs", None)
        return json.dumps(out, default=str, indent=2)


@dataclass
class FleetRun:
    run_id: str
    host: str
    status: str
    value: float | None
    facts: dict[str, str]
    gpu_load: str | None  # its per-GPU telemetry summaries (JSON), if any
    gpus: str | None  # every GPU's identity and settings (JSON), if known


@dataclass
class HostRuns:
    """One host's runs of one workload as bench fleet reads them (bench.analytics.fleet_load): every ok run's
    value, the statuses of its other runs, and its newest runs whole (``fleet_load.RECENT``)."""

    values: list[float] = field(default_factory=list)
    other_statuses: list[str] = field(default_factory=list)
    newest: list[FleetRun] = field(default_factory=list)
