"""``bench fleet``: the hosts slower than their peers, and why."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import (
    ChangeMetric,
    MetricOpt,
    StoreOpt,
    WhereOpt,
)
from bench.runner.commands.shared import emit, selected_runs
from bench.sql.errors import UsageError


def fleet_command(
    where: WhereOpt = None,
    metric: MetricOpt = ChangeMetric.images_per_sec,
    threshold: Annotated[float, typer.Option("--threshold", help="Flag a host only when it is slower than its workload's median host by more than this fraction (and beyond 3.5 robust SDs)")] = 0.03,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: workloads, groups (hosts, facts, relative_difference, ci95, p_value), outliers (host, gpu, relative_difference, ci95, differs, telemetry), notes")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when a host is flagged or a group of hosts sharing a fact is slower (a node qualification gate)")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Also write JUnit XML here (one test case per host and workload)")] = None,
    days: Annotated[int, typer.Option("--days", help="Judge each workload's hosts on its runs of this many days before its newest run (0: every run); a host slow since last week is slow in these, not in the median of its whole history")] = 7,
    store: StoreOpt = None,
) -> None:
    """Find the hosts slower than their peers on the same workload, and say why: the facts in which each
    differs from most of its peers (driver, clocks, power limits, ...) and the GPU its telemetry sets apart;
    first, the groups of hosts that share a fact (a driver, a rack) and are slower together.

    Example: bench fleet --where "started_at >= current_date - 1" --fail --junit fleet.xml
    """
    from bench.analytics.fleet import find_outliers
    from bench.analytics.results import first

    con = selected_runs(store, where, None)
    if where and not first(con, "SELECT 1 FROM runs LIMIT 1"):
        raise UsageError(f"--where {where!r} selects no run")
    found = find_outliers(con, metric.value, threshold, days)
    from bench.analytics.fleet_text import junit_xml, print_fleet

    emit(found, junit=junit, as_json=as_json, xml=junit_xml, text=print_fleet)
    if fail and (found.outliers or found.groups):
        raise typer.Exit(1)
