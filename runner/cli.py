"""The root ``bench`` command: registers every command of the command layer (bench.runner.commands: one
module per command) and turns a user error into one line.

Only the command layer imports across the packages. Heavy libraries are imported inside commands.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bench.runner.commands.changes_cmd import changes_command
from bench.runner.commands.check_cmd import check_command
from bench.runner.commands.compare_cmd import compare_command
from bench.runner.commands.effects_cmd import effects_command
from bench.runner.commands.fit_cmd import fit_command
from bench.runner.commands.fleet_cmd import fleet_command
from bench.runner.commands.ingest_cmd import ingest_command
from bench.runner.commands.plot_cmd import plot_command
from bench.runner.commands.report_cmd import report_command
from bench.runner.commands.run_cmd import run_command
from bench.runner.commands.sql_cmd import sql_command
from bench.runner.commands.sweep_cmd import sweep_command
from bench.sql.errors import BenchError, UsageError, fault_message

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
app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    _translated(run_command)
)
app.command("sweep")(_translated(sweep_command))


def main() -> None:
    """Console entry point: user errors print ``Error: ...`` and exit 1; bugs keep their traceback.

    A ``bench ingest`` process runs without pandas, keeps its memory settings (its own and those of
    deltalake's allocator) to the end and skips its last garbage collection (see bench.runner.commands.ingest_cmd and
    bench.ingest.memory): it is started for that one command and ends with it."""
    ingest_process = sys.argv[1:2] == ["ingest"]
    if ingest_process:
        from bench.ingest.memory import deltalake_gives_back, keep_tuned
        from bench.runner.commands.ingest_cmd import keep_out_pandas, one_blas_thread

        keep_out_pandas()
        one_blas_thread()
        deltalake_gives_back()
        keep_tuned()
    try:
        app()
    finally:
        if ingest_process:
            from bench.runner.commands.ingest_cmd import skip_final_collection

            skip_final_collection()
