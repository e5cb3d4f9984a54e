"""``bench run``: one training, its run directories, their ingest (or Slurm jobs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import StoreOpt
from bench.runner.commands.shared import TRAINER_PANEL, has_result, ingest_runs, store_root
from bench.sql.errors import UsageError


def run_command(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="resnet50, inception3, ..., trivial, resnet20", rich_help_panel=TRAINER_PANEL)] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="Per-device batch size", rich_help_panel=TRAINER_PANEL)] = None,
    num_batches: Annotated[int | None, typer.Option(min=1, help="Timed steps", rich_help_panel=TRAINER_PANEL)] = None,
    num_epochs: Annotated[float | None, typer.Option(min=0, help="Epochs instead of --num-batches", rich_help_panel=TRAINER_PANEL)] = None,
    num_examples: Annotated[int | None, typer.Option(min=1, help="Images per epoch of --data-dir [default: counted]", rich_help_panel=TRAINER_PANEL)] = None,
    num_warmup_batches: Annotated[int | None, typer.Option(min=0, rich_help_panel=TRAINER_PANEL)] = None,
    display_every: Annotated[int | None, typer.Option(min=1, rich_help_panel=TRAINER_PANEL)] = None,
    variable_update: Annotated[str | None, typer.Option(help="parameter_server|replicated|horovod|distributed_ps|multi_worker", rich_help_panel=TRAINER_PANEL)] = None,
    all_reduce: Annotated[str | None, typer.Option(help="nccl|hierarchical|ring", rich_help_panel=TRAINER_PANEL)] = None,
    num_gpus: Annotated[int | None, typer.Option(min=1, rich_help_panel=TRAINER_PANEL)] = None,
    device: Annotated[str | None, typer.Option(help="gpu|cpu", rich_help_panel=TRAINER_PANEL)] = None,
    data_format: Annotated[str | None, typer.Option(help="NCHW|NHWC", rich_help_panel=TRAINER_PANEL)] = None,
    precision: Annotated[str | None, typer.Option(help="fp32|fp16", rich_help_panel=TRAINER_PANEL)] = None,
    optimizer: Annotated[str | None, typer.Option(help="sgd|momentum", rich_help_panel=TRAINER_PANEL)] = None,
    data_dir: Annotated[str | None, typer.Option(help="ImageNet TFRecords (default: synthetic data)", rich_help_panel=TRAINER_PANEL)] = None,
    decode_threads: Annotated[str | None, typer.Option(help="Integer or auto", rich_help_panel=TRAINER_PANEL)] = None,
    xla: Annotated[bool, typer.Option("--xla", help="jit_compile the training step", rich_help_panel=TRAINER_PANEL)] = False,
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
        from bench.runner import slurm

        code = slurm.submit_runs(spec, out, repeat, dry_run=dry_run, and_wait=wait, telemetry_interval_s=telemetry_interval,
                                 store=None if no_ingest else store_root(store), ingest=ingest_runs, echo=typer.echo)
        if code:
            raise typer.Exit(code)
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

        check_writable(store_root(store))
    outcomes = lr.run_many(spec, out, repeat, drop=drop_caches, telemetry_interval_s=telemetry_interval,
                           warn=lambda m: typer.echo(f"Warning: {m}", err=True), echo=sys.stdout.buffer, fmt=fmt,
                           result_check=has_result)
    rows = {} if no_ingest else ingest_runs([o.run_dir for o in outcomes], store_root(store), fmt=fmt)
    for o in outcomes:
        typer.echo(f"{o.run_dir}: {o.status}{lr.result_text(rows.get(o.run_dir.name))}"
                   + (f" ({o.detail})" if o.status != "ok" and o.detail else ""))
    if any(o.status == "interrupted" for o in outcomes):
        raise typer.Exit(130)
    if any(o.status != "ok" for o in outcomes):
        raise typer.Exit(1)


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
