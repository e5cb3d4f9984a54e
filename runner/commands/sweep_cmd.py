"""``bench sweep``: a plan's grid of runs, in turn or as Slurm job arrays."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import StoreOpt
from bench.runner.commands.shared import has_result, ingest_runs, store_root


def sweep_command(
    plan: Annotated[Path, typer.Argument(help="Plan file (TOML); see fixtures/plans/")],
    resume: Annotated[bool, typer.Option("--resume", help="Skip cells that already have an ok run in the store")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the expanded cells and exit")] = False,
    out: Annotated[Path, typer.Option(help="Parent of the run directories")] = Path("logs"),
    store: StoreOpt = None,
    launcher: Annotated[str | None, typer.Option(help="local|horovodrun|mpirun|slurm [default: the plan's]")] = None,
    sbatch: Annotated[bool, typer.Option("--sbatch", help="With --launcher slurm: submit the points as job arrays")] = False,
    array_limit: Annotated[int | None, typer.Option(min=1, help="With --sbatch: at most N array tasks at once")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="With --sbatch: wait for the arrays, then ingest every run")] = False,
) -> None:
    """Run a plan's matrix of benchmarks (weak or strong scaling, repetitions), one run directory per cell.

    Every run is tagged sweep=<plan name>, cell=<factors> and repeat=<i>, and ingested as it ends. A plan
    runs the bundled trainer ([trainer]) or any command ([command] argv with {batch_size}-style fields).
    Exits 1 when a launched cell did not end ok, 130 when interrupted.

    With --launcher slurm --sbatch the points are submitted as Slurm job arrays (one task per point) and the
    command returns; --wait waits and ingests; --resume submits only the points without an ok run.

    Example: bench sweep fixtures/plans/cpu-smoke.toml --out logs/ --resume
    Example: bench sweep plan.toml --launcher slurm --sbatch --array-limit 4 --wait
    """

    from rich.console import Console

    from bench.runner import sweep as sw
    from bench.runner.progress import PlainReporter, RichReporter

    if (sbatch or wait or array_limit is not None) and not (sbatch and (launcher or "") == "slurm"):
        raise typer.BadParameter("--sbatch needs --launcher slurm; --wait and --array-limit need --sbatch")
    parsed = sw.load_plan(plan, launcher=launcher)
    cells = sw.expand(parsed)
    if dry_run:  # with --resume, only the cells it would launch
        done = sw.completed_runs(store_root(store), parsed.name) if resume else set()
        left = [c for c in cells if (c.key, str(c.repeat)) not in done]
        Console(width=200, markup=False, emoji=False, highlight=False).print(sw.plan_table(parsed, left))
        if resume:
            typer.echo(f"--resume: {len(cells) - len(left)} of {len(cells)} cells already have an ok run in the store")
        return
    if sbatch:
        from bench.runner import array

        code = array.sweep_arrays(parsed, cells, out, store_root(store), resume=resume, limit=array_limit,
                                  wait=wait, echo=typer.echo, ingest=ingest_runs)
        if code:
            raise typer.Exit(code)
        return
    reporter_cls = RichReporter if sys.stderr.isatty() else PlainReporter
    reporter = reporter_cls(lambda m: typer.echo(m, err=True))
    results = sw.run_sweep(parsed, cells, out, store_root(store), resume=resume, reporter=reporter,
                           warn=lambda m: typer.echo(f"Warning: {m}", err=True), result_check=has_result,
                           ingest=ingest_runs)
    for r in results:
        typer.echo(sw.result_line(r))
    code = sw.exit_code(results)
    if code:
        raise typer.Exit(code)
