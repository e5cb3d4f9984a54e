"""``bench changes``: every series' changes of level in time."""

from __future__ import annotations

from typing import Annotated

import typer

from bench.runner.commands.options import (
    ChangeMetric,
    MetricOpt,
    MinRunsOpt,
    OrderOpt,
    StoreOpt,
    WhereOpt,
)
from bench.runner.commands.shared import selected_runs
from bench.sql.errors import UsageError


def changes_command(
    where: WhereOpt = None,
    metric: MetricOpt = ChangeMetric.images_per_sec,
    order_by: OrderOpt = None,
    min_runs: MinRunsOpt = 3,
    accept: Annotated[str | None, typer.Option("--accept", metavar="RUN_ID", help="Accept the level that starts at this run (a change's run): bench check compares its series with it from now on")] = None,
    unaccept: Annotated[str | None, typer.Option("--unaccept", metavar="RUN_ID", help="Take an acceptance back")] = None,
    why: Annotated[str | None, typer.Option("--why", help="Why (required with --accept and --unaccept; recorded with who and when)")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who decides [default: the user name]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: changes, outliers, too_short, left_out, notes, accepted")] = False,
    store: StoreOpt = None,
) -> None:
    """Find where each series (one workload on one system, in time order) changed level, and what changed on
    the machine then; accept a change as the new reference for bench check, or take that back.

    Example: bench changes --where "host = 'gpu-node07'"; bench changes --accept RUN_ID --why "new driver: expected"
    """
    from bench.analytics import decisions
    from bench.analytics.changes import find_changes
    from bench.analytics.results import first
    from bench.sql.store import default_store

    root = store or default_store()
    con = selected_runs(store, where, None)
    if where and not first(con, "SELECT 1 FROM runs LIMIT 1"):
        raise UsageError(f"--where {where!r} selects no run")
    if accept is not None or unaccept is not None:
        from bench.analytics.accept import decide
        from bench.analytics.render import shown

        typer.echo(shown(decide(root, con, metric.value, order_by, accept, unaccept, why, by)))
        return
    found = find_changes(con, metric.value, order_by, min_runs, accepted=decisions.accepted(root))
    if as_json:
        typer.echo(found.to_json())
        return
    from bench.analytics.changes_text import print_changes
    from bench.analytics.render import plain_output

    with plain_output():  # series labels are data: their control characters reach no terminal
        print_changes(found)
