"""``bench ingest``: its options, the call into the pipeline, the summary; and how an ingest process
is set up (no pandas, one BLAS thread, no final garbage collection)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import StoreOpt
from bench.sql.errors import UsageError


def ingest_command(
    paths: Annotated[list[str] | None, typer.Argument(help="Files, directories, .tar/.tar.gz/.tgz/.zip archives")] = None,
    store: StoreOpt = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Force this format (see --list-formats)")] = None,
    path_pattern: Annotated[
        list[str] | None,
        typer.Option("--path-pattern", help="Template matched against the end of each path, e.g. '{model}-{batch_size_per_device}/{repeat}'"),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help="Skip files (in directories and archives) whose path or name matches this glob"),
    ] = None,
    list_formats: Annotated[bool, typer.Option("--list-formats", help="List the formats and exit")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Re-parse every source recorded in the store")] = False,
    check: Annotated[bool, typer.Option("--check", help="Verify the store's files and say what is wrong")] = False,
    init: Annotated[bool, typer.Option(
        "--init", help="Make --store a store even when it is a folder that already holds other files")] = False,
    accept_loss: Annotated[bool, typer.Option(
        "--accept-loss", help="--rebuild: keep what can be restored even when that is fewer runs than the store held")] = False,
    compact: Annotated[bool, typer.Option("--compact", help="Merge each table's files (Delta OPTIMIZE) and delete replaced ones (VACUUM); an ingest does it past 32 files in a table")] = False,
    max_expansion: Annotated[float, typer.Option(
        "--max-expansion", min=1.0,
        help="Stop an archive member (over 16 MiB) that expands more than this many times its compressed size")] = 100.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any problem was found")] = False,
) -> None:
    """Parse benchmark logs into the Parquet store; bad input becomes problems, never a crash.

    Example: bench ingest logs/ lambda-logs.tar.gz --store bench-store
    """
    from bench.ingest import registry

    if list_formats:
        formats = registry.all_formats()
        width = max(len(mod.NAME) for mod in formats)
        for mod in formats:
            plugin = "" if mod.NAME in registry.FORMAT_MODULES else f" (plugin: {registry.module_path(mod.NAME)})"
            typer.echo(f"{mod.NAME:{width}s}  {mod.DESCRIPTION}{plugin}")
        for name, error in registry.BROKEN_PLUGINS.items():
            typer.echo(f"{name:{width}s}  (plugin {registry.module_path(name)} could not be imported: {error})")
        return
    from bench.sql.store import default_store

    root = store or default_store()
    from bench.sql.objstore import url_of

    url = url_of(root)
    if url and (check or compact or rebuild):
        return _on_object_storage(url, check=check, rebuild=rebuild)
    if check:
        from bench.analytics import decisions
        from bench.sql.health import findings
        from bench.sql.store import check_store

        check_store(root)
        found = findings(root) + decisions.check(root)[1]  # decisions are data too
        for line in found:
            typer.echo(line, err=True)
        if found:
            raise typer.Exit(1)
        typer.echo(f"store {root}: every file matches its recorded checksum")
        return
    if compact:
        from bench.sql.compact import compact as do_compact
        from bench.sql.store import StoreWriter, check_store

        check_store(root, old_ok=True)
        with StoreWriter(root, wait_message=_waiting) as writer:
            n = do_compact(writer)
        typer.echo(f"store {root}: {n} files merged (Delta OPTIMIZE), replaced files vacuumed" if n
                   else f"store {root}: nothing to merge; replaced files vacuumed")
        return
    if rebuild:
        from bench.ingest.rebuild import rebuild as do_rebuild

        summary = do_rebuild(root, on_wait=_waiting, accept_loss=accept_loss)
    else:
        if not paths:
            raise typer.BadParameter("give at least one PATH (or --rebuild / --list-formats)")
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:  # a usage error (exit 2), like any other bad argument
            raise typer.BadParameter(f"no such file or directory: {', '.join(missing)}", param_hint="PATH")
        from bench.ingest.items import Limits
        from bench.ingest.remote_ingest import ingest_into
        from bench.sql.store import check_writable

        if not init:  # as bench run does: a folder of other files is not made a store by mistake
            check_writable(root)

        from bench.runner.launch import ctrl_c_raises

        try:  # SIGINT stops it cleanly, even in a job started with SIGINT ignored (`bench ingest ... &`)
            with ctrl_c_raises(), _progress() as progress:
                summary = ingest_into(paths, root, fmt=fmt, path_patterns=path_pattern or [], progress=progress,
                                 on_wait=_waiting, skip_globs=tuple(exclude or ()),
                                 limits=Limits(max_expansion=max_expansion))
        except KeyboardInterrupt:
            typer.echo("Interrupted: nothing of this ingest is in the store (an ingest is published whole, "
                       "by one commit). Run the same command again.", err=True)
            raise typer.Exit(130) from None
    if summary.rolled_back:
        typer.echo(f"store {root}: undid what a killed writer committed but never published, in "
                   f"{', '.join(summary.rolled_back)}", err=True)
    for line in summary.set_aside:
        typer.echo(f"store {root}: {line}, and made again from the recorded sources", err=True)
    if summary.rolled_forward:
        typer.echo(f"store {root}: recorded the commit(s) {', '.join(summary.rolled_forward)}, written whole but "
                   "never added to the commits table's log (a writer killed at its commit point, or a lost entry)",
                   err=True)
    if summary.recovered:
        typer.echo(f"store {root}: {summary.recovered}", err=True)
    if summary.logs_behind:
        typer.echo(summary.logs_behind, err=True)
    for source in summary.lost:
        typer.echo(f"not restored: {source}: its file cannot be read and the store holds no readable rows of it",
                   err=True)
    for line in summary.given_up:
        typer.echo(f"given up (--accept-loss): {line}", err=True)
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2, sort_keys=True))
    else:
        from bench.ingest.report import print_summary

        print_summary(summary)
    for line in summary.incomplete:  # as tar does: what was read is stored, and the exit says it was not all
        typer.echo(f"bench ingest: not read to its end: {line}", err=True)
    if summary.incomplete or (strict and summary.problems):
        raise typer.Exit(1)


def _on_object_storage(url: str, *, check: bool, rebuild: bool) -> None:
    """--check and --compact of a store on object storage (bench.sql.remote); --rebuild is for a local one."""
    import tempfile

    from bench.sql.health import SAID
    from bench.sql.projection import Remade, damaged_logs, projected
    from bench.sql.remote import Remote, compact

    if rebuild:
        raise UsageError(f"--rebuild works on a local store; for {url}, ingest the logs again into a new store")
    store = Remote(url)
    store.check()
    if check:
        state = store.state()
        _, damaged = store.local_files(state)
        for what, why in state.damage(url) + damaged:
            typer.echo(why if what == SAID else f"store {what} cannot be read ({why})", err=True)
        if damaged or state.missing:
            raise typer.Exit(1)
        typer.echo(f"store {url}: every file matches its recorded checksum (commits version {state.version})")
        if bad := damaged_logs(store):
            for table, why in bad.items():
                typer.echo(f"store {url}: table {table}'s Delta log cannot be read ({why}): readers without bench "
                           "cannot open the table; `bench ingest --compact` sets the log aside and makes it again "
                           "from the committed state", err=True)
            raise typer.Exit(1)
        if (logs := projected(store)) < state.version:
            typer.echo(f"store {url}: the tables' Delta logs hold commits version {logs} at the newest, not "
                       f"{state.version} (a writer stopped before it brought them up, or a store written before "
                       "they existed): readers without bench see the older state until the next ingest or "
                       "`bench ingest --compact` brings them up")
        return

    def remade(r: Remade) -> None:
        typer.echo(f"store {url}: table {r.table}'s Delta log could not be read ({r.why}): set aside under "
                   f"{r.aside}, made again at commits version {r.seq} (its earlier versions are in the copy only)")

    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        n = compact(store, Path(tmp), remake=remade)
    typer.echo(f"store {url}: {n} files merged, replaced files vacuumed" if n
               else f"store {url}: nothing to merge; replaced files vacuumed")


def skip_final_collection() -> None:
    """For a process that ends with the ingest: spare the interpreter's last garbage collection at exit
    (after a large ingest, all of it walking objects that are about to vanish anyway); frozen
    objects are not collected. Not when DuckDB is loaded, whose bindings report what a skipped
    collection leaves behind as leaks."""
    if "duckdb" not in sys.modules:
        import gc

        gc.freeze()


class _NoPandas:
    """An import finder (sys.meta_path) that makes ``import pandas`` fail, as on a machine without pandas."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("bench ingest runs without pandas", name=name)
        return None


def keep_out_pandas() -> None:
    """For a process that is there to run ``bench ingest`` (the console entry point calls this): run it,
    and the parser processes forked from it, without pandas.

    pyarrow imports pandas the first time it converts any Python or numpy value, only to check whether
    the value is a pandas object, which the ingest never hands it, and pandas is the largest import a
    parser process would make. pyarrow supports running without pandas, and treats a failed import as exactly that
    for the rest of the process, which is why this is for a process that ends with the ingest and not
    for ``ingest()`` called as a library or the command invoked in-process (tests).
    """
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def one_blas_thread() -> None:
    """For a ``bench ingest`` process (the console entry point calls this before numpy is imported): no
    OpenBLAS thread pool. The ingest never multiplies matrices, but numpy's import starts one OpenBLAS
    thread per core, and they spin a while before they sleep, on a core the parsers need. A value the
    user set is kept."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _waiting() -> None:
    typer.echo("another ingest holds the store lock; waiting for it to finish", err=True)


class _progress:
    """A rich progress line on a terminal (stderr); nothing otherwise."""

    def __enter__(self):  # type: ignore[no-untyped-def]
        if not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        self._p = Progress(SpinnerColumn(), TextColumn("{task.fields[files]} files, {task.fields[mb]:.1f} MB  {task.description}",
                                                          markup=False),  # a path is text, not markup
                           console=Console(stderr=True, markup=False, emoji=False), transient=True)
        self._p.start()
        task = self._p.add_task("", files=0, mb=0.0)
        count = [0]

        def update(source: str, nbytes: int) -> None:
            count[0] += 1
            if count[0] % 50 == 1:
                self._p.update(task, description=source[-60:], files=count[0], mb=nbytes / 1e6)

        return update

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "_p"):
            self._p.stop()
