"""The options that several `bench` commands share, declared once (ingest, run, sweep, sql, compare, fit,
effects, plot, report, changes, check): the store, and the selection of runs a question is about."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory [default: $BENCH_STORE or ./bench-store]", show_default=False),
]
WhereOpt = Annotated[str | None, typer.Option("--where", help="SQL boolean expression over the columns of runs, tags included, applied before anything is aggregated, e.g. \"num_devices = 8 AND tags['system'] LIKE '%A100%'\"")]
IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Take a factor (framework_version; framework, which also takes its version) or a tag (system) out of what makes a configuration, for this question (repeatable)")]
