"""``bench sql``: a query over the store's views, as a table, CSV or JSON."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bench.runner.commands.options import StoreOpt
from bench.sql.errors import BenchError


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
