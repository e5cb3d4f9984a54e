"""``bench check``: the CI gate over the newest runs of every series."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import (
    ChangeMetric,
    MetricOpt,
    MinRunsOpt,
    OrderOpt,
    StoreOpt,
)
from bench.runner.commands.shared import emit
from bench.sql.errors import UsageError


def check_command(
    where: Annotated[str, typer.Option("--where", help="SQL over the columns of runs selecting the candidate runs, e.g. \"started_at >= '2026-10-01'\"")],
    threshold: Annotated[float, typer.Option("--threshold", help="Fail a series whose candidates are slower than its reference with significance and possibly by this fraction or more (0.05: a sustained 5% slowdown fails)")] = 0.05,
    baseline_where: Annotated[str | None, typer.Option("--baseline-where", help="SQL selecting the reference runs [default: each series' level before its earliest unaccepted slower change, since its latest accepted one]")] = None,
    metric: MetricOpt = ChangeMetric.images_per_sec,
    order_by: OrderOpt = None,
    min_runs: MinRunsOpt = 3,
    fail_on: Annotated[str, typer.Option("--fail-on", help="regression, or suspect: also fail a series whose candidates are far off its reference either way (possibly an outlier)")] = "regression",
    alpha: Annotated[float, typer.Option("--alpha", help="The chance that a morning on which no series changed fails at all: shared among the series judged (Bonferroni, family-wise: a CI job is red or green as a whole), so 1,000 quiet series fail at most 1 morning in 100")] = 0.01,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: the verdict of every series")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Also write JUnit XML here (one test case per series)")] = None,
    store: StoreOpt = None,
) -> None:
    """The CI gate. A series fails when its candidates (--where), alone or with the night before, or the
    unaccepted slower level they are on, are slower than its reference level with significance (--alpha
    shared among every series judged) and by --threshold or more (a 90% bound reaches it where the runs
    resolve it, else shown beyond it). The reference stays where it was until `bench changes --accept` moves
    it: a regression fails every morning until someone accepts it. Exit 1: a series failed; 3: no run matched
    --where, or a series that ran in the week before has no run (MISSING); 2: a bad argument; 0: passed.

    Example: bench check --where "started_at >= current_date" --junit bench-check.xml
    """
    from bench.analytics import decisions
    from bench.analytics.changes import cycles_uncollected
    from bench.analytics.check import check
    from bench.sql.read import connect
    from bench.sql.store import default_store

    if not 0 < alpha < 0.5:
        raise UsageError(f"--alpha {alpha}: between 0 and 0.5")
    root = store or default_store()
    # the runs (the candidates, the series, their facts) and the curated views the options name, no other
    reads = " ".join(filter(None, ("runs", where, baseline_where, order_by)))
    with cycles_uncollected():  # a fleet's points and verdicts hold no cycle (its docstring)
        result = check(connect(root, reads=reads), where, threshold, baseline_where, metric.value, order_by,
                       alpha=alpha, min_runs=min_runs, accepted=decisions.accepted(root), fail_on=fail_on)
    from bench.analytics.changes_text import junit_xml, print_check

    emit(result, junit=junit, as_json=as_json, xml=junit_xml, text=print_check)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
