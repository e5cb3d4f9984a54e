"""``bench effects``: each factor's multiplicative effect on images/sec."""

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


def effects_command(
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    store: StoreOpt = None,
) -> None:
    """Multiplicative effect of each factor level on images/sec (OLS of the log), with 95% CI and p-value.

    Example: bench effects --where "num_devices = 1 AND batch_size_per_device = 64"
    """
    import dataclasses

    from bench.analytics.effects import effects

    result = effects(selected_runs(store, where, ignore))
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(result), indent=2, default=str))
    else:
        from bench.analytics.effects import effect_lines
        from bench.analytics.render import plain_output

        with plain_output():  # factor levels are data: their control characters reach no terminal
            for line in effect_lines(result):
                typer.echo(line)
