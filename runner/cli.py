"""The root ``bench`` command: composes the commands of ingest, analytics and runner.

Only this module imports across all three packages. Heavy libraries are imported inside commands.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.analytics.cli import (
    changes_command,
    check_command,
    compare_command,
    effects_command,
    fit_command,
    fleet_command,
    plot_command,
    report_command,
    sql_command,
)
from bench.ingest.cli import ingest_command
from bench.sql.errors import BenchError, UsageError, fault_message
from bench.sql.options import StoreOpt

app = typer.Typer(
    name="bench",
    help="dlbench: how fast does deep-learning training run here, and how well does it scale?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help is plain text: rich would read "FACTOR:A:B" as an emoji code and "[default: ...]" as markup
    rich_markup_mode=None,
)


def _translated(command: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command so a BenchError prints ``Error: ...`` on stderr and exits 1 (a UsageError: 2), and a
    fault of the machine (a full disk, a read-only file system: ``fault_message``) does the same with exit 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BenchError as e:
            typer.echo(f"Error: {e}", err=True)
            raise typer.Exit(2 if isinstance(e, UsageError) else 1) from e
        except Exception as e:  # a full disk or a read-only mount (OSError, or deltalake's): one line
            message = fault_message(e)
            if message is None:
                raise
            typer.echo(f"Error: {message}", err=True)
            raise typer.Exit(1) from e

    return wrapper


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"bench (dlbench) {version('dlbench')}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit")] = False) -> None:
    """dlbench: how fast does deep-learning training run here, and how well does it scale?"""


app.command("ingest")(_translated(ingest_command))
app.command("sql")(_translated(sql_command))
app.command("compare")(_translated(compare_command))
app.command("fit")(_translated(fit_command))
app.command("effects")(_translated(effects_command))
app.command("plot")(_translated(plot_command))
app.command("report")(_translated(report_command))
app.command("changes")(_translated(changes_command))
app.command("check")(_translated(check_command))
app.command("fleet")(_translated(fleet_command))


_T = "Trainer options"  # help panel of the options passed through to the trainer


def run_command(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="resnet50, inception3, ..., trivial, resnet20", rich_help_panel=_T)] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="Per-device batch size", rich_help_panel=_T)] = None,
    num_batches: Annotated[int | None, typer.Option(min=1, help="Timed steps", rich_help_panel=_T)] = None,
    num_epochs: Annotated[float | None, typer.Option(min=0, help="Epochs instead of --num-batches", rich_help_panel=_T)] = None,
    num_examples: Annotated[int | None, typer.Option(min=1, help="Images per epoch of --data-dir [default: counted]", rich_help_panel=_T)] = None,
    num_warmup_batches: Annotated[int | None, typer.Option(min=0, rich_help_panel=_T)] = None,
    display_every: Annotated[int | None, typer.Option(min=1, rich_help_panel=_T)] = None,
    variable_update: Annotated[str | None, typer.Option(help="parameter_server|replicated|horovod|distributed_ps|multi_worker", rich_help_panel=_T)] = None,
    all_reduce: Annotated[str | None, typer.Option(help="nccl|hierarchical|ring", rich_help_panel=_T)] = None,
    num_gpus: Annotated[int | None, typer.Option(min=1, rich_help_panel=_T)] = None,
    device: Annotated[str | None, typer.Option(help="gpu|cpu", rich_help_panel=_T)] = None,
    data_format: Annotated[str | None, typer.Option(help="NCHW|NHWC", rich_help_panel=_T)] = None,
    precision: Annotated[str | None, typer.Option(help="fp32|fp16", rich_help_panel=_T)] = None,
    optimizer: Annotated[str | None, typer.Option(help="sgd|momentum", rich_help_panel=_T)] = None,
    data_dir: Annotated[str | None, typer.Option(help="ImageNet TFRecords (default: synthetic data)", rich_help_panel=_T)] = None,
    decode_threads: Annotated[str | None, typer.Option(help="Integer or auto", rich_help_panel=_T)] = None,
    xla: Annotated[bool, typer.Option("--xla", help="jit_compile the training step", rich_help_panel=_T)] = False,
    out: Annotated[Path, typer.Option(help="Parent of the run directories")] = Path("logs"),
    repeat: Annotated[int, typer.Option(min=1, help="Run N times (tag repeat=i)")] = 1,
    tag: Annotated[list[str] | None, typer.Option(help="key=value stored in run.json tags (repeatable)")] = None,
    launcher: Annotated[str, typer.Option(help="local|horovodrun|mpirun|slurm")] = "local",
    hosts: Annotated[str | None, typer.Option(help="host1:4,host2:4")] = None,
    np: Annotated[int | None, typer.Option("--np", min=1, help="Processes [default: slots of --hosts, else --num-gpus]")] = None,
    gloo: Annotated[bool, typer.Option("--gloo", help="horovodrun --gloo (no MPI)")] = False,
    sbatch: Annotated[bool, typer.Option("--sbatch", help="With --launcher slurm: write and submit a batch script")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="With --sbatch: wait for the job to end, then ingest it")] = False,
    partition: Annotated[str | None, typer.Option(help="Slurm partition (srun/sbatch --partition)")] = None,
    mpi: Annotated[str | None, typer.Option(help="srun --mpi plugin: pmix|pmi2|none [default: pmix for horovod]")] = None,
    timeout: Annotated[float | None, typer.Option(min=0, help="Kill the run's process group after S seconds")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the exact command(s) and exit")] = False,
    no_ingest: Annotated[bool, typer.Option("--no-ingest", help="Do not ingest the run directory")] = False,
    store: StoreOpt = None,
    telemetry_interval: Annotated[float, typer.Option(min=0, help="Telemetry sampling period in seconds (0: off)")] = 5.0,
    drop_caches: Annotated[bool, typer.Option("--drop-caches", help="sync and drop the page cache first (root)")] = False,
    shell: Annotated[bool, typer.Option("--shell", help="Run the command through /bin/sh -c (pipes, globs, $VARS)")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="The log's format when detection must not decide (bench ingest --list-formats)")] = None,
) -> None:
    """Launch a training benchmark: the bundled trainer, or any command given after `--`.

    Each run gets <out>/<run_id>/ with output.log, run.json and telemetry.csv, and is ingested.

    \b
    bench run [OPTIONS] -- COMMAND ARGS...   any benchmark: the first word after `--` is not an option
    bench run [OPTIONS] [-- TRAINER ARGS]    the bundled TensorFlow trainer; unknown options go to it

    A command runs verbatim (never through a shell unless --shell), wrapped by --launcher; describe what its
    log does not say with --tag (model=, batch_size_per_device=, num_gpus=, framework=...). Exits 1 when a
    run did not end ok, 130 when interrupted.

    \b
    Example: bench run --model resnet50 --batch-size 64 --num-gpus 1 --repeat 3 --out logs/
    Example: bench run --tag model=resnet50 --tag batch_size_per_device=256 -- python train.py --bs 256
    """
    import os
    import sys

    from bench.runner import launch as lr
    from bench.runner.spec import RunSpec, build_command, parse_tags

    for name, value in (("--num-epochs", num_epochs), ("--timeout", timeout)):
        if value is not None and value <= 0:
            raise typer.BadParameter(f"{value:g} is not a positive number of {'epochs' if name == '--num-epochs' else 'seconds'}",
                                     param_hint=name)
    command, trainer_args = _split_command(list(ctx.args), shell)
    spec = RunSpec(model=model, batch_size=batch_size, num_batches=num_batches, num_epochs=num_epochs,
                   num_examples=num_examples, num_warmup_batches=num_warmup_batches, display_every=display_every,
                   variable_update=variable_update, all_reduce=all_reduce, num_gpus=num_gpus, device=device,
                   data_format=data_format, precision=precision, optimizer=optimizer, data_dir=data_dir,
                   decode_threads=decode_threads, xla=xla, extra_args=trainer_args, launcher=launcher,
                   hosts=hosts, np=np, gloo=gloo, timeout_s=timeout, tags=parse_tags(tag or []), command=command,
                   partition=partition, mpi=mpi)
    from bench.ingest.registry import check_format

    check_format(fmt)
    if (wait or partition is not None or mpi is not None) and launcher != "slurm":
        raise typer.BadParameter("--wait, --partition and --mpi are for --launcher slurm")
    if sbatch or wait:
        if launcher != "slurm" or not sbatch:
            raise typer.BadParameter("--sbatch needs --launcher slurm, and --wait needs --sbatch")
        _submit_runs(spec, out, repeat, dry_run=dry_run, wait=wait, store=None if no_ingest else _store_root(store),
                     telemetry_interval_s=telemetry_interval)
        return
    if dry_run:
        lr.check_trainer(spec)  # a command the real run would refuse (--precision fp8) is not printed as one
        env_names = sorted(lr.rundir.matching_env(lr.child_env(os.environ)))
        for _ in range(repeat):
            typer.echo(lr.describe(build_command(spec, export_env=env_names, as_root=os.geteuid() == 0)))
        return
    lr.check_trainer(spec)
    lr.rundir.check_out(out)
    lr.check_tensorflow(spec)
    if not no_ingest:  # a store that cannot take the runs is found now, not after the training
        from bench.sql.store import check_writable

        check_writable(_store_root(store))
    outcomes = lr.run_many(spec, out, repeat, drop=drop_caches, telemetry_interval_s=telemetry_interval,
                           warn=lambda m: typer.echo(f"Warning: {m}", err=True), echo=sys.stdout.buffer, fmt=fmt)
    rows = {} if no_ingest else lr.ingest_runs([o.run_dir for o in outcomes], _store_root(store), fmt=fmt)
    for o in outcomes:
        typer.echo(f"{o.run_dir}: {o.status}{lr.result_text(rows.get(o.run_dir.name))}"
                   + (f" ({o.detail})" if o.status != "ok" and o.detail else ""))
    if any(o.status == "interrupted" for o in outcomes):
        raise typer.Exit(130)
    if any(o.status != "ok" for o in outcomes):
        raise typer.Exit(1)


def _submit_runs(spec: Any, out: Path, repeat: int, *, dry_run: bool, wait: bool, store: Path | None,
                 telemetry_interval_s: float) -> None:
    """``--sbatch``: submit each repeat as a batch job; with ``wait``, wait for them, ingest, and exit as
    ``bench run`` does (1 when a run did not end ok)."""
    import json

    from bench.runner import launch as lr
    from bench.runner import slurm

    if not dry_run:
        lr.check_trainer(spec)
        lr.rundir.check_out(out)
    run_dirs = []
    for i in range(1, repeat + 1):
        run_dir, script, argv = slurm.submit(spec, out, repeat=i if repeat > 1 else None, dry_run=dry_run,
                                             telemetry_interval_s=telemetry_interval_s)
        typer.echo(script if dry_run else f"submitted {run_dir} (job {_job_of(run_dir)})")
        typer.echo(lr.describe(argv))
        if run_dir is not None:
            run_dirs.append(run_dir)
    if not wait or not run_dirs:
        return
    slurm.wait([(d, None) for d in run_dirs])
    rows = {} if store is None else lr.ingest_runs(run_dirs, store)
    statuses = []
    for d in run_dirs:
        doc = json.loads((d / "run.json").read_text(encoding="utf-8"))
        statuses.append(doc.get("status"))
        detail = doc.get("status_detail") if doc.get("status") != "ok" else None
        typer.echo(f"{d}: {doc.get('status')}{lr.result_text(rows.get(d.name))}" + (f" ({detail})" if detail else ""))
    if any(s != "ok" for s in statuses):
        raise typer.Exit(1)


def _job_of(run_dir: Path | None) -> str | None:
    import json

    return None if run_dir is None else json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("slurm_job_id")


def _split_command(args: list[str], shell: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(command, trainer arguments) from what follows the runner's options: a first word that is not an
    option starts a command (everything from it on, verbatim; with ``shell``, one ``/bin/sh -c`` line);
    otherwise the words are the bundled trainer's own options, as before commands existed."""
    if not args or args[0].startswith("-"):
        if shell:
            raise UsageError("--shell needs a command: bench run --shell -- 'python train.py | tee train.log'")
        return (), tuple(args)
    if shell:
        return ("/bin/sh", "-c", " ".join(args)), ()
    return tuple(args), ()


def _store_root(store: Path | None) -> Path:
    from bench.sql.store import default_store

    return store or default_store()


app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    _translated(run_command)
)


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
    import sys

    from rich.console import Console

    from bench.runner import sweep as sw
    from bench.runner.progress import PlainReporter, RichReporter

    if (sbatch or wait or array_limit is not None) and not (sbatch and (launcher or "") == "slurm"):
        raise typer.BadParameter("--sbatch needs --launcher slurm; --wait and --array-limit need --sbatch")
    parsed = sw.load_plan(plan, launcher=launcher)
    cells = sw.expand(parsed)
    if dry_run:  # with --resume, only the cells it would launch
        done = sw.completed_runs(_store_root(store), parsed.name) if resume else set()
        left = [c for c in cells if (c.key, str(c.repeat)) not in done]
        Console(width=200, markup=False, emoji=False, highlight=False).print(sw.plan_table(parsed, left))
        if resume:
            typer.echo(f"--resume: {len(cells) - len(left)} of {len(cells)} cells already have an ok run in the store")
        return
    if sbatch:
        from bench.runner import array

        code = array.sweep_arrays(parsed, cells, out, _store_root(store), resume=resume, limit=array_limit,
                                  wait=wait, echo=typer.echo)
        if code:
            raise typer.Exit(code)
        return
    reporter_cls = RichReporter if sys.stderr.isatty() else PlainReporter
    reporter = reporter_cls(lambda m: typer.echo(m, err=True))
    results = sw.run_sweep(parsed, cells, out, _store_root(store), resume=resume, reporter=reporter,
                           warn=lambda m: typer.echo(f"Warning: {m}", err=True))
    for r in results:
        typer.echo(sw.result_line(r))
    code = sw.exit_code(results)
    if code:
        raise typer.Exit(code)


app.command("sweep")(_translated(sweep_command))


def main() -> None:
    """Console entry point: user errors print ``Error: ...`` and exit 1; bugs keep their traceback.

    A ``bench ingest`` process runs without pandas, keeps its memory settings (its own and those of
    deltalake's allocator) to the end and skips its last garbage collection (see bench.ingest.cli and
    bench.ingest.memory): it is started for that one command and ends with it."""
    ingest_process = sys.argv[1:2] == ["ingest"]
    if ingest_process:
        from bench.ingest.cli import keep_out_pandas, one_blas_thread
        from bench.ingest.memory import deltalake_gives_back, keep_tuned

        keep_out_pandas()
        one_blas_thread()
        deltalake_gives_back()
        keep_tuned()
    try:
        app()
    finally:
        if ingest_process:
            from bench.ingest.cli import skip_final_collection

            skip_final_collection()
