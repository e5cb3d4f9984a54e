"""``bench sql``: the command layer only."""

from __future__ import annotations

import signal
import threading
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bench.sql.options import IgnoreOpt, StoreOpt, WhereOpt


def _selected(store: Path | None, where: str | None, ignore: list[str] | None):  # type: ignore[no-untyped-def]
    """A connection to the store whose ``runs`` are the selected ones (bench.analytics.selection)."""
    from bench.analytics.selection import narrow
    from bench.sql.read import connect
    from bench.sql.store import default_store

    con = connect(store or default_store())
    narrow(con, where, ignore or ())
    return con


def _write_junit(path: Path, xml: bytes) -> None:
    """``--junit``: the XML written, or one line saying why it could not be."""
    from bench.sql.errors import BenchError

    try:
        path.write_bytes(xml)
    except OSError as e:
        raise BenchError(f"cannot write {path}: {e.strerror}") from e


class OutFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def sql_command(
    query: Annotated[str | None, typer.Argument(help="SQL over the views runs, steps, telemetry, problems, sources")] = None,
    file: Annotated[Path | None, typer.Option("-f", "--file", help="Read the SQL from this file")] = None,
    store: StoreOpt = None,
    out: Annotated[OutFormat, typer.Option("--format", help="table, csv or json (one array of row objects)")] = OutFormat.table,
) -> None:
    """Run DuckDB SQL over the store.

    Example: bench sql "SELECT model, num_devices, median(images_per_sec) FROM runs GROUP BY ALL"
    """
    from bench.analytics import render
    from bench.analytics.query import run_sql
    from bench.sql.errors import BenchError
    from bench.sql.store import default_store

    if (query is None) == (file is None):
        raise typer.BadParameter("give either a QUERY or -f FILE")
    if file is not None:
        try:
            query = file.read_text()
        except OSError as e:
            raise BenchError(f"cannot read {file}: {e.strerror}") from e
    cols, rows = run_sql(store or default_store(), query or "")
    if out is OutFormat.json:
        typer.echo(render.to_json(cols, rows))
    elif out is OutFormat.csv:
        typer.echo(render.to_csv(cols, rows), nl=False)
    else:
        render.print_table(cols, rows)


class CompareMetric(StrEnum):
    images_per_sec = "images_per_sec"
    speedup = "speedup"
    efficiency = "efficiency"
    mlperf_score = "mlperf_score"
    time_to_train = "time_to_train"


def compare_command(
    factor: Annotated[str, typer.Option("--factor", help="The factor that differs, e.g. device_model, model, data, batch_size_per_device")],
    a: Annotated[str, typer.Option("--a", help="Numerator value: exact, or a case-insensitive substring of one value (P100); NULL for NULL")],
    b: Annotated[str, typer.Option("--b", help="Denominator value, matched like --a")],
    metric: Annotated[CompareMetric, typer.Option("--metric", help="images_per_sec (configs), speedup / efficiency (scaling), or mlperf_score / time_to_train (mlperf_scores, lower is better: the ratio is then a speedup, T_B / T_A)")] = CompareMetric.images_per_sec,
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    equivalence: Annotated[float | None, typer.Option("--equivalence", help="Test 'A and B within ±X' (0.05 = 5%) with a paired TOST")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    best: Annotated[bool, typer.Option("--best", help="MLPerf metrics: where a side has several result sets with one pair key (two 8-GPU systems), compare its fastest")] = False,
    store: StoreOpt = None,
) -> None:
    """Ratio A/B over configurations that differ only in one factor, with median, geometric mean and CI.

    Example: bench compare --factor device_model --a P100 --b K80 --equivalence 0.05
    """
    import json

    from bench.analytics.compare import compare
    from bench.analytics.compare_text import print_compare

    con = _selected(store, where, ignore)
    if metric in (CompareMetric.mlperf_score, CompareMetric.time_to_train):
        from bench.analytics.compare_mlperf import compare_scores

        result = compare_scores(con, factor, a, b, equivalence=equivalence, metric=metric.value, best=best,
                                ignore=tuple(ignore or ()))
    else:
        result = compare(con, factor, a, b, metric=metric.value, equivalence=equivalence)
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
            again = compare(_selected(store, where, [*(ignore or ()), *names]), factor, a, b, metric=metric.value)
            tried[names] = len(again.pairs)
    print_compare(result, tried)
    if not result.pairs:
        raise typer.Exit(1)


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
    import json

    from bench.analytics.scaling_laws import fit

    report = fit(_selected(store, where, ignore), view=view)
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(report), indent=2, default=str))
    else:
        from bench.analytics.scaling_text import print_fits

        print_fits(report)
    if not report.fits:  # nothing to answer: said above in one line, and the exit code says it to a script
        raise typer.Exit(1)


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
    import json

    from bench.analytics.effects import effects

    result = effects(_selected(store, where, ignore))
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(result), indent=2, default=str))
    else:
        from bench.analytics.effects import effect_lines

        for line in effect_lines(result):
            typer.echo(line)


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

    fig = make_figure(_selected(store, where, ignore), kind.value, by=by, a=a, b=b)
    typer.echo(str(save(fig, out or Path(f"plot-{kind.value}.png"))))


# --- report ---
def report_command(
    where: WhereOpt = None,
    ignore: IgnoreOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for report.html, report.md, figures/ and tables/")] = Path("bench-report"),
    title: Annotated[str, typer.Option("--title", help="Title of the report")] = "Benchmark report",
    equivalence: Annotated[float | None, typer.Option("--equivalence", help="Test every ratio for 'A and B within ±X' (0.05 = 5%)")] = None,
    trace: Annotated[str | None, typer.Option("--trace", help="run_id of the trace figure [default: the first run with telemetry]")] = None,
    max_figures: Annotated[int, typer.Option("--max-figures", min=0, help="Configuration families drawn as figures (12 families get their tables on the page, every family is in the CSV)")] = 3,
    mlperf_compare: Annotated[str | None, typer.Option("--mlperf-compare", help="The MLPerf speedup table's FACTOR:A:B, e.g. device_model:A100:V100 [default: chosen from the selection]")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="Device model the leaderboard is relative to [default: the one measured on the most workloads]")] = None,
    keep_suspects: Annotated[bool, typer.Option("--keep-suspects", help="Keep suspect pairs (far below their row's others) in the leaderboard's geometric means")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings and the report's path as one JSON object")] = False,
    workers: Annotated[int | None, typer.Option("--workers", min=0, help="Processes that draw the figures while the tables are computed (0: draw them in this process) [default: one per core beyond the first]")] = None,
    store: StoreOpt = None,
) -> None:
    """Write an HTML + Markdown report (tables as CSV) of the selected runs, led by its findings; prints the
    findings and the path of report.html.

    Example: bench report --where "device_model LIKE '%P100%'" --equivalence 0.05 --out bench-report
    """
    interrupted = threading.Event()

    def on_ctrl_c(signum: int, frame: object) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    # set first: a Ctrl-C while the report's modules are still being imported is the same one line
    main = threading.current_thread() is threading.main_thread()  # only the main thread may set a handler
    previous = signal.signal(signal.SIGINT, on_ctrl_c) if main else None
    try:
        from bench.analytics.report.build import Options, make_report
        from bench.analytics.report.drawing import DEFAULT_WORKERS
        from bench.sql.errors import UsageError
        from bench.sql.store import default_store

        ab = tuple(mlperf_compare.split(":", 2)) if mlperf_compare else None
        if ab is not None and (len(ab) != 3 or not all(ab)):
            raise UsageError(f"--mlperf-compare takes FACTOR:A:B (e.g. device_model:A100:V100), got {mlperf_compare!r}")
        opts = Options(where=where, ignore=tuple(ignore or ()), title=title, equivalence=equivalence, trace=trace,
                       max_families=max_figures, mlperf_compare=ab, baseline=baseline,
                       keep_suspects=keep_suspects)  # type: ignore[arg-type]
        report, path = make_report(store or default_store(), out, opts, DEFAULT_WORKERS if workers is None else workers)
    except BaseException:
        # after a Ctrl-C, whatever it surfaced as (KeyboardInterrupt, or DuckDB's "Query interrupted" and
        # "... failed: KeyboardInterrupt" errors) is the interrupt: one line; the drawing workers ignore it
        if not interrupted.is_set():
            raise
        typer.echo(f"Interrupted: no report written to {out}.", err=True)
        raise typer.Exit(130) from None
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    if as_json:
        import json

        typer.echo(json.dumps({"report": str(path), "findings": [f.to_json() for f in report.findings]}, indent=2))
        return
    for i, f in enumerate(report.findings, 1):
        typer.echo(f"{i}. {f.text}")
    typer.echo(str(path))
# --- end report ---


class ChangeMetric(StrEnum):
    images_per_sec = "images_per_sec"
    throughput = "throughput"
    time_to_train_s = "time_to_train_s"
    wall_time_s = "wall_time_s"


MetricOpt = Annotated[ChangeMetric, typer.Option("--metric", help="The series' values: images_per_sec or throughput (higher is better), time_to_train_s or wall_time_s (lower is better)")]
OrderOpt = Annotated[str | None, typer.Option("--order-by", help="SQL over the columns of runs that orders a series, e.g. \"tags['commit']\" [default: started_at]")]
MinRunsOpt = Annotated[int, typer.Option("--min-runs", min=2, help="Runs a new level needs before it is a change (fewer, far off their neighbours, are outliers)")]


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
    from bench.sql.errors import UsageError
    from bench.sql.store import default_store

    root = store or default_store()
    con = _selected(store, where, None)
    if where and not first(con, "SELECT 1 FROM runs LIMIT 1"):
        raise UsageError(f"--where {where!r} selects no run")
    if accept or unaccept:
        from bench.analytics.accept import decide

        typer.echo(decide(root, con, metric.value, order_by, accept, unaccept, why, by))
        return
    found = find_changes(con, metric.value, order_by, min_runs, accepted=decisions.accepted(root))
    if as_json:
        typer.echo(found.to_json())
        return
    from bench.analytics.changes_text import print_changes

    print_changes(found)


def check_command(
    where: Annotated[str, typer.Option("--where", help="SQL over the columns of runs selecting the candidate runs, e.g. \"started_at >= '2026-10-01'\"")],
    threshold: Annotated[float, typer.Option("--threshold", help="Fail a series whose candidates are slower than its reference with significance and possibly by this fraction or more (0.05: a sustained 5% slowdown fails)")] = 0.05,
    baseline_where: Annotated[str | None, typer.Option("--baseline-where", help="SQL selecting the reference runs [default: each series' level before its earliest unaccepted slower change, since its latest accepted one]")] = None,
    metric: MetricOpt = ChangeMetric.images_per_sec,
    order_by: OrderOpt = None,
    min_runs: MinRunsOpt = 3,
    fail_on: Annotated[str, typer.Option("--fail-on", help="regression, or suspect: also fail a series whose candidates are far off its reference either way (possibly an outlier)")] = "regression",
    alpha: Annotated[float, typer.Option("--alpha", help="Significance of 'slower'")] = 0.002,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: the verdict of every series")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Also write JUnit XML here (one test case per series)")] = None,
    store: StoreOpt = None,
) -> None:
    """The CI gate. A series fails when its candidates (--where) are slower than its reference level with
    significance (one-sided p < --alpha) and possibly by --threshold or more (the slowdown's 95% bound reaches
    it). The reference stays where it was until `bench changes --accept` moves it: a regression fails every
    morning until someone accepts it. Exit 1: a series failed; 3: no run matched --where, or a series that ran
    in the week before has no run (MISSING); 2: a bad argument; 0: passed.

    Example: bench check --where "started_at >= current_date" --junit bench-check.xml
    """
    from bench.analytics import decisions
    from bench.analytics.check import check
    from bench.sql.errors import UsageError
    from bench.sql.read import connect
    from bench.sql.store import default_store

    if not 0 < alpha < 0.5:
        raise UsageError(f"--alpha {alpha}: between 0 and 0.5")
    root = store or default_store()
    result = check(connect(root), where, threshold, baseline_where, metric.value, order_by, alpha=alpha,
                   min_runs=min_runs, accepted=decisions.accepted(root), fail_on=fail_on)
    if junit is not None:
        from bench.analytics.changes_text import junit_xml

        _write_junit(junit, junit_xml(result))
    if as_json:
        typer.echo(result.to_json())
    else:
        from bench.analytics.changes_text import print_check

        print_check(result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def fleet_command(
    where: WhereOpt = None,
    metric: MetricOpt = ChangeMetric.images_per_sec,
    threshold: Annotated[float, typer.Option("--threshold", help="Flag a host only when it is slower than its workload's median host by more than this fraction (and beyond 3.5 robust SDs)")] = 0.03,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: workloads, outliers (host, gpu, relative_difference, ci95, differs, telemetry), notes")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when a host is flagged (a node qualification gate)")] = False,
    junit: Annotated[Path | None, typer.Option("--junit", help="Also write JUnit XML here (one test case per host and workload)")] = None,
    store: StoreOpt = None,
) -> None:
    """Find the hosts slower than their peers on the same workload, and say why: the facts in which each
    differs from most of its peers (driver, clocks, power limits, ...) and the GPU its telemetry sets apart.

    Example: bench fleet --where "started_at >= current_date - 1" --fail --junit fleet.xml
    """
    from bench.analytics.fleet import find_outliers
    from bench.analytics.results import first
    from bench.sql.errors import UsageError

    con = _selected(store, where, None)
    if where and not first(con, "SELECT 1 FROM runs LIMIT 1"):
        raise UsageError(f"--where {where!r} selects no run")
    found = find_outliers(con, metric.value, threshold)
    if junit is not None:
        from bench.analytics.fleet_text import junit_xml

        _write_junit(junit, junit_xml(found))
    if as_json:
        typer.echo(found.to_json())
    else:
        from bench.analytics.fleet_text import print_fleet

        print_fleet(found)
    if fail and found.outliers:
        raise typer.Exit(1)
