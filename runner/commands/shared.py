"""What several commands' modules call: the selected runs as a DuckDB connection, what ``check`` and
``fleet`` print (``emit``, with the JUnit writer), the store a command writes to, the trainer options' help
panel, and what ``run`` and ``sweep`` hand the runner: the ingest's reading of a log (``has_result``) and the
ingest after a run (``ingest_runs``), the two places where running meets the ingest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from bench.sql.errors import BenchError


def selected_runs(store: Path | None, where: str | None, ignore: list[str] | None):  # type: ignore[no-untyped-def]
    """A connection to the store whose ``runs`` are the selected ones (bench.analytics.selection)."""
    from bench.analytics.selection import narrow
    from bench.sql.read import connect
    from bench.sql.store import default_store

    con = connect(store or default_store())
    narrow(con, where, ignore or ())
    return con


def write_junit(path: Path, xml: bytes) -> None:
    """``--junit``: the XML written, or one line saying why it could not be."""

    try:
        path.write_bytes(xml)
    except OSError as e:
        raise BenchError(f"cannot write {path}: {e.strerror}") from e


def emit(result: Any, *, junit: Path | None, as_json: bool, xml: Callable[[Any], bytes],
         text: Callable[[Any], None]) -> None:
    """What ``check`` and ``fleet`` print: the JUnit file first when ``--junit`` names one (``xml``), then
    ``--json``'s one object (the result's ``to_json``) or the text (``text``)."""
    from bench.analytics.render import plain_output, shown_xml

    if junit is not None:
        write_junit(junit, shown_xml(xml(result)))
    if as_json:
        typer.echo(result.to_json())
    else:
        with plain_output():  # names are data: their control characters reach no terminal
            text(result)


def store_root(store: Path | None) -> Path:
    from bench.sql.store import default_store

    return store or default_store()


TRAINER_PANEL = "Trainer options"  # help panel of the options passed through to the trainer


def has_result(log: Path, fmt: str | None) -> bool:
    """The runner's ``ResultCheck``: does the log hold a result, as the ingest reads it?"""
    from bench.ingest.parse import has_result as parsed_result

    return parsed_result(log, fmt)


def ingest_runs(run_dirs: Sequence[Path], store: Path, fmt: str | None = None) -> dict[str, dict[str, Any]]:
    """Ingest the run directories into ``store``; return {run dir name: runs-row fields} for the rows this
    ingest added under one of them (images_per_sec, images_per_sec_stderr, status, ...; ``fmt`` forces the
    logs' format), read from the files it committed only (``IngestSummary.run_ids`` and ``runs_files``), not
    from the whole store. The runner's ``launch.Ingest``.

    Raises BenchError from the ingest (store of another schema version, ...).
    """
    import pyarrow.parquet as pq

    from bench.ingest.remote_ingest import ingest_into

    summary = ingest_into([str(d) for d in run_dirs], store, fmt=fmt, workers=0)
    added = set(summary.run_ids)
    names = {d.name for d in run_dirs}
    found: dict[str, dict[str, Any]] = {}
    for part in summary.runs_files:
        for row in pq.read_table(part, columns=[
                "run_id", "source", "images_per_sec", "images_per_sec_stderr", "status"]).to_pylist():
            if row["run_id"] not in added:
                continue
            hit = next((n for n in names if n in Path(row["source"]).parts), None)
            if hit is not None and (hit not in found or row["images_per_sec"] is not None):
                found[hit] = row
    return found
