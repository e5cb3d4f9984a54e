"""``bench plot``: one figure from the store."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import IgnoreOpt, StoreOpt, WhereOpt
from bench.runner.commands.shared import selected_runs


class PlotKind(StrEnum):
    speedup = "speedup"
    efficiency = "efficiency"
    throughput = "throughput"
    ratio = "ratio"
    minibatch = "minibatch"
    trace = "trace"


def plot_command(
    kind: Annotated[PlotKind, typer.Argument(help="speedup, efficiency, throughput, ratio, minibatch or trace")],
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Factor named first in the series labels; for ratio, the compared factor")] = None,
    a: Annotated[str | None, typer.Option("--a", help="ratio only: numerator value of --by, e.g. P100")] = None,
    b: Annotated[str | None, typer.Option("--b", help="ratio only: denominator value of --by, e.g. K80")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="FILE.png, .svg or .pdf [default: plot-KIND.png]")] = None,
    store: StoreOpt = None,
) -> None:
    """Draw one figure from the store and write it to a file; prints the file's path.

    Example: bench plot speedup --where "model = 'resnet50'" --by device_model --out speedup.png
    """
    from bench.analytics.plots import make_figure, save

    fig = make_figure(selected_runs(store, where, ignore), kind.value, by=by, a=a, b=b)
    typer.echo(str(save(fig, out or Path(f"plot-{kind.value}.png"))))
