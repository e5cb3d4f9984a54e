"""A Delta table's log read without deltalake (the Delta protocol's documented JSON commits and Parquet
checkpoints): how readers list a table's files in a tenth of the time deltalake's import takes, and what a
table whose log deltalake cannot open still says it holds (bench.sql.recover)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DataFile:
    """A data file of a table in a committed state: where it is, its size and row count as committed."""

    table: str
    path: Path
    size: int
    rows: int | None

    @property
    def key(self) -> str:
        return f"{self.table}/{self.path.name}"


def read_parquet_rows(path: Path, columns: list[str], where: str = "true") -> list[dict[str, Any]]:
    """Rows of a Parquet file read by DuckDB (no pyarrow import: readers of a sound store never need it);
    MAP columns come back as dicts. ``columns`` are SQL expressions (``"add".path``), named by the text."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        cur = con.execute(f"SELECT {', '.join(columns)} FROM read_parquet(?) WHERE {where}", [str(path)])
        return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


@dataclass
class Replayed:
    """A table's files as its Delta log's JSON commits give them (``replay_log``)."""

    files: list[DataFile]
    complete: bool  # every commit of the log read whole (else some adds or removes may be missing)
    version: int    # the newest commit read
    removes: int    # files removed (by a compaction or an overwrite) in what was read
    added_in: dict[str, int] = field(default_factory=dict)  # file name -> the version that added it
    unmatched: int = 0  # removes that named no file added before (a damaged path)


def replay_log(path: Path, table: str, *, upto: int | None = None, checkpoint: bool = False) -> Replayed:
    """The files of the Delta table at ``path`` (at version ``upto``, else its newest) from its log's JSON
    commits, replayed in order (add, remove): how readers list a table's files without importing deltalake,
    and what a table whose log deltalake cannot open (a damaged checkpoint or commit) still says it holds.
    Every commit stays on disk (``CONFIG``: no log clean-up), so the JSON commits are the whole history; a
    line that does not parse, or a missing commit, makes the replay incomplete. ``checkpoint`` (readers):
    start from the newest checkpoint at or before ``upto`` (Delta's Parquet snapshot of the log, every 10
    commits) rather than from the first commit: a store fed hourly for a year has 9,000 commits a table."""
    from urllib.parse import unquote

    live: dict[str, DataFile] = {}
    added_in: dict[str, int] = {}
    complete, version, removes, unmatched = True, -1, 0, 0
    logs = sorted((p for p in (path / "_delta_log").glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
    if checkpoint and (start := _checkpoint_files(path, table, upto)) is not None:
        version, files = start
        live = dict(files)
        added_in = dict.fromkeys(live, version)
        logs = [p for p in logs if int(p.stem) > version]
    for log in logs if upto is None else [p for p in logs if int(p.stem) <= upto]:
        complete &= int(log.stem) == version + 1
        version = int(log.stem)
        try:
            lines = log.read_bytes().splitlines()
        except OSError:
            complete = False
            continue
        for line in lines:
            try:
                action = json.loads(line)
                if "add" in action:
                    add = action["add"]
                    stats = json.loads(add.get("stats") or "{}")
                    name = unquote(add["path"])
                    live[name] = DataFile(table, path / name, int(add["size"]), stats.get("numRecords"))
                    added_in[name] = version
                elif "remove" in action:
                    unmatched += live.pop(unquote(action["remove"]["path"]), None) is None
                    removes += 1
            except (ValueError, KeyError, TypeError, AttributeError):
                complete = False
    return Replayed(list(live.values()), complete and bool(logs), version, removes,
                    {name: added_in[name] for name in live}, unmatched)


def _checkpoint_files(path: Path, table: str, upto: int | None) -> tuple[int, list[tuple[str, DataFile]]] | None:
    """(version, its files) of the newest single-file checkpoint of the table at ``path`` at or before
    ``upto``; None when there is none or it cannot be read (then the replay starts from the first commit)."""
    from urllib.parse import unquote

    found = [(int(p.name[:20]), p) for p in (path / "_delta_log").glob("*.checkpoint.parquet")
             if p.name[:20].isdigit() and p.name[20:] == ".checkpoint.parquet" and (upto is None or int(p.name[:20]) <= upto)]
    if not found:
        return None
    version, cp = max(found)
    try:
        adds = read_parquet_rows(cp, ['"add".path', '"add".size', '"add".stats'], '"add" IS NOT NULL')
        files = [(unquote(a['"add".path']), DataFile(table, path / unquote(a['"add".path']), int(a['"add".size']),
                                                      json.loads(a['"add".stats'] or "{}").get("numRecords")))
                 for a in adds]
    except Exception:  # a damaged checkpoint: the JSON commits hold the same
        return None
    return version, files


def log_schema(path: Path) -> list[dict[str, Any]] | None:
    """The fields of the Delta table at ``path`` as its log's newest ``metaData`` action gives them (Delta's
    JSON schema: name, type, nullable), or None when no commit of it says (read for an empty table, whose
    log is a commit or two)."""
    found = None
    logs = sorted((p for p in (path / "_delta_log").glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
    for log in logs:
        try:
            for line in log.read_bytes().splitlines():
                if b'"metaData"' in line:
                    found = json.loads(json.loads(line)["metaData"]["schemaString"])["fields"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return found


def trusted(replayed: Replayed) -> bool:
    """Whether a replay can stand for deltalake's own reading of the log: every commit read whole, every
    remove matched a file added before, and every file is on disk with the size its add recorded (a flipped
    bit that leaves the JSON valid breaks one of these, or touches nothing a reader uses)."""
    if not replayed.complete or replayed.unmatched:
        return False
    try:
        return all(f.path.stat().st_size == f.size for f in replayed.files)
    except OSError:
        return False


def log_gaps(path: Path) -> list[int]:
    """Versions of the table at ``path`` whose JSON commit is missing from its log, between its first JSON commit
    and its newest version (a checkpoint's included). Readers open such a table from its checkpoint without a
    word, while deltalake's writer fails on it ("Invalid table version"): bench keeps every commit (no log
    clean-up), so a gap is damage."""
    log = path / "_delta_log"
    jsons = {int(p.stem) for p in log.glob("*.json") if p.stem.isdigit()}
    points = {int(p.name[:20]) for p in log.glob("*.checkpoint.parquet") if p.name[:20].isdigit()}
    if not jsons and not points:
        return []
    newest = max(jsons | points)
    first = min(jsons) if jsons else newest
    return [v for v in range(first, newest + 1) if v not in jsons]
