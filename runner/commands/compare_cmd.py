"""``bench compare``: two values of one factor, paired on everything else."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer

from bench.runner.commands.options import (
    IgnoreOpt,
    StoreOpt,
    WhereOpt,
)
from bench.runner.commands.shared import selected_runs


class CompareMetric(StrEnum):
    images_per_sec = "images_per_sec"
    throughput = "throughput"
    speedup = "speedup"
    efficiency = "efficiency"
    mlperf_score = "mlperf_score"
    time_to_train = "time_to_train"


def compare_command(
    factor: Annotated[str, typer.Option("--factor", help="The factor that differs, e.g. device_model, model, data, batch_size_per_device")],
    a: Annotated[str, typer.Option("--a", help="Numerator value: exact, or a case-insensitive substring of one value (P100); NULL for NULL")],
    b: Annotated[str, typer.Option("--b", help="Denominator value, matched like --a")],
    metric: Annotated[CompareMetric, typer.Option("--metric", help="images_per_sec or throughput (in the runs' own unit: tokens/sec, samples/sec, ...) (configs), speedup / efficiency (scaling), or mlperf_score / time_to_train (mlperf_scores, lower is better: the ratio is then a speedup, T_B / T_A)")] = CompareMetric.images_per_sec,
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    equivalence: Annotated[float | None, typer.Option("--equivalence", help="Test 'A and B within ±X' (0.05 = 5%) with a paired TOST")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    best: Annotated[bool, typer.Option("--best", help="MLPerf metrics: where a side has several result sets with one pair key (two 8-GPU systems), compare its fastest")] = False,
    keep_suspects: Annotated[bool, typer.Option("--keep-suspects", help="Keep a pair far below the others (below half their median ratio and 3 robust SDs) in the summary; by default it is listed and left out")] = False,
    store: StoreOpt = None,
) -> None:
    """Ratio A/B over configurations that differ only in one factor, with median, geometric mean and CI.

    Example: bench compare --factor device_model --a P100 --b K80 --equivalence 0.05
    """

    from bench.analytics.compare import compare
    from bench.analytics.compare_text import print_compare

    con = selected_runs(store, where, ignore)
    if metric in (CompareMetric.mlperf_score, CompareMetric.time_to_train):
        from bench.analytics.compare_mlperf import compare_scores

        result = compare_scores(con, factor, a, b, equivalence=equivalence, metric=metric.value, best=best,
                                ignore=tuple(ignore or ()), keep_suspects=keep_suspects)
    else:
        result = compare(con, factor, a, b, metric=metric.value, equivalence=equivalence, keep_suspects=keep_suspects)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        if not result.pairs:
            raise typer.Exit(1)  # no answer: a script must not take an empty comparison for one
        return
    tried = {}  # no pair: the --ignore options that might form some, each run to say only what works
    if not result.pairs and metric not in (CompareMetric.mlperf_score, CompareMetric.time_to_train):
        from bench.analytics.compare_text import apart_factors

        lift = apart_factors(result)
        for names in [*([(n,) for n in lift] if len(lift) > 1 else []), *([tuple(lift)] if lift else [])]:
            again = compare(selected_runs(store, where, [*(ignore or ()), *names]), factor, a, b, metric=metric.value)
            tried[names] = len(again.pairs)
    print_compare(result, tried)
    if not result.pairs:
        raise typer.Exit(1)
