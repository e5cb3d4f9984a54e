"""What several commands' modules call: the selected runs as a DuckDB connection, the JUnit writer of
``check`` and ``fleet``, the store a command writes to, the trainer options' help panel."""

from __future__ import annotations

from pathlib import Path

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


def store_root(store: Path | None) -> Path:
    from bench.sql.store import default_store

    return store or default_store()


TRAINER_PANEL = "Trainer options"  # help panel of the options passed through to the trainer
