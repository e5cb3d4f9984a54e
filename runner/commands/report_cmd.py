"""``bench report``: the HTML and Markdown report, and its one line on Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.runner.commands.options import IgnoreOpt, StoreOpt, WhereOpt


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
    status: Any = None  # rich's status line on a terminal

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
        if sys.stderr.isatty() and not as_json:  # on a terminal, a line that says what it is doing
            from rich.console import Console

            status = Console(stderr=True).status("bench report")
            status.start()
        opts = Options(where=where, ignore=tuple(ignore or ()), title=title, equivalence=equivalence, trace=trace,
                       max_families=max_figures, mlperf_compare=ab, baseline=baseline, keep_suspects=keep_suspects,
                       progress=(lambda stage: status.update(f"bench report: {stage}")) if status else None
                       )  # type: ignore[arg-type]
        report, path = make_report(store or default_store(), out, opts, DEFAULT_WORKERS if workers is None else workers)
    except BaseException:
        # after a Ctrl-C, whatever it surfaced as (KeyboardInterrupt, or DuckDB's "Query interrupted" and
        # "... failed: KeyboardInterrupt" errors) is the interrupt: one line; the drawing workers ignore it
        if not interrupted.is_set():
            raise
        typer.echo(f"Interrupted: no report written to {out}.", err=True)
        raise typer.Exit(130) from None
    finally:
        if status is not None:
            status.stop()
        if main:
            signal.signal(signal.SIGINT, previous)
    if as_json:
        import json

        typer.echo(json.dumps({"report": str(path), "findings": [f.to_json() for f in report.findings]}, indent=2))
        return
    for i, f in enumerate(report.findings, 1):
        typer.echo(f"{i}. {f.text}")
    typer.echo(str(path))
