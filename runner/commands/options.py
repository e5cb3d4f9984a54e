"""The options several ``bench`` commands share, declared once: the store, the selection of runs a
question is about, and the series options of ``changes``, ``check`` and ``fleet``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory [default: $BENCH_STORE or ./bench-store]", show_default=False),
]

WhereOpt = Annotated[str | None, typer.Option("--where", help="SQL boolean expression over the columns of runs, tags included, applied before anything is aggregated, e.g. \"num_devices = 8 AND tags['system'] LIKE '%A100%'\"")]

IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Take a factor (framework_version; framework, which also takes its version) or a tag (system) out of what makes a configuration, for this question (repeatable)")]


class ChangeMetric(StrEnum):
    images_per_sec = "images_per_sec"
    throughput = "throughput"
    time_to_train_s = "time_to_train_s"
    wall_time_s = "wall_time_s"


MetricOpt = Annotated[ChangeMetric, typer.Option("--metric", help="The series' values: images_per_sec or throughput (higher is better), time_to_train_s or wall_time_s (lower is better)")]

OrderOpt = Annotated[str | None, typer.Option("--order-by", help="SQL over the columns of runs that orders a series, e.g. \"tags['commit']\" [default: started_at]")]

MinRunsOpt = Annotated[int, typer.Option("--min-runs", min=2, help="Runs a new level needs before it is a change (fewer, far off their neighbours, are outliers)")]
