"""The root ``bench`` command: composes the commands of ingest, analytics and runner.

Only this module imports across all three packages. Heavy libraries are imported inside commands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from bench.analytics.cli import compare_command, effects_command, fit_command, sql_command
from bench.ingest.cli import ingest_command
from bench.ingest.errors import BenchError

app = typer.Typer(
    name="bench",
    help="dlbench: how fast does deep-learning training run here, and how well does it scale?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _translated(command: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command so a BenchError prints ``Error: ...`` on stderr and exits 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BenchError as e:
            typer.echo(f"Error: {e}", err=True)
            raise typer.Exit(1) from e

    return wrapper


app.command("ingest")(_translated(ingest_command))
app.command("sql")(_translated(sql_command))
app.command("compare")(_translated(compare_command))
app.command("fit")(_translated(fit_command))
app.command("effects")(_translated(effects_command))


def main() -> None:
    """Console entry point: user errors print ``Error: ...`` and exit 1; bugs keep their traceback."""
    app()
