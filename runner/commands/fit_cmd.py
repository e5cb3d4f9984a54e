"""``bench fit``: Amdahl's and the USL's fits of every configuration's scaling."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bench.runner.commands.options import (
    IgnoreOpt,
    StoreOpt,
    WhereOpt,
)
from bench.runner.commands.shared import selected_runs


def fit_command(
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    view: Annotated[str, typer.Option("--view", help="scaling (throughput), or mlperf_scaling (MLPerf time to train: speedup T(base) / T(N))")] = "scaling",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    store: StoreOpt = None,
) -> None:
    """Fit Amdahl's law and the Universal Scalability Law to each configuration with 3 or more device counts.

    Example: bench fit --where "device_model LIKE '%P100%'"  (MLPerf: bench fit --view mlperf_scaling)
    """
    import dataclasses

    from bench.analytics.scaling_laws import fit

    report = fit(selected_runs(store, where, ignore), view=view)
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(report), indent=2, default=str))
    else:
        from bench.analytics.scaling_text import print_fits

        print_fits(report)
    if not report.fits:  # nothing to answer: said above in one line, and the exit code says it to a script
        raise typer.Exit(1)
