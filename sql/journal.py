"""The repair journal, ``STORE/REPAIR.json``: what ``bench ingest --rebuild`` has moved out of the way, so that
a repair is as crash-safe as an ingest.

A repair of a damaged store moves each table whose log cannot be read into ``STORE/damaged/`` and makes it
again (bench.sql.store), and a damaged commits table is recovered into a new one (bench.sql.recover). Killed
between those steps and its one publishing commit, it would leave tables that are new and nearly empty: a
reader would count fewer runs and nothing would say why. So before it moves anything the repair writes this
journal (atomically), naming each move before it is made, and deletes it only once the rebuilt state is
published. While the journal is there:

- every reader warns that a repair did not finish (bench.sql.health: ``--check`` exits 1);
- an ingest or a compaction refuses to write, naming the fix;
- the next ``--rebuild`` first undoes what the journal names (the tables it made are deleted and the moved
  ones put back, in reverse order: each step can be killed and done again), which leaves the store as it was
  before the first repair, damage and all, and then repairs it from there.

A rebuild that refuses (it would lose rows) or fails undoes its moves the same way before it exits.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench.sql.atomic import write_json

JOURNAL = "REPAIR.json"


def _read(root: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((root / JOURNAL).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # a journal cut by a crash of the disk itself: it still says a repair began
        return {"started_at": None, "moves": [], "unreadable": True}
    return doc if isinstance(doc, dict) and isinstance(doc.get("moves"), list) else {"moves": [], "unreadable": True}


def interrupted(root: Path) -> str | None:
    """What a reader is told while a repair has not finished, or None."""
    doc = _read(root)
    if doc is None:
        return None
    moved = sorted({m.get("table", "?") for m in doc["moves"] if isinstance(m, dict)})
    what = f" (it had moved table(s) {', '.join(moved)} aside)" if moved else ""
    return (f"a `bench ingest --rebuild` begun {doc.get('started_at') or 'earlier'} did not finish{what}: queries may "
            f"read fewer rows than the store holds; run `bench ingest --rebuild --store {root}` to finish it")


def begin(root: Path) -> None:
    """Start the journal of a repair (before its first move)."""
    if _read(root) is None:
        write_json(root / JOURNAL, {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "moves": []})


def move_aside(root: Path, table: str, path: Path, aside: Path | None) -> None:
    """Record, then make, the move of ``table``'s folder ``path`` to ``aside`` (None: ``path`` does not exist,
    and the table the repair makes there is deleted on undo)."""
    doc = _read(root) or {"started_at": None, "moves": []}
    doc["moves"].append({"table": table, "path": str(path), "aside": str(aside) if aside else None})
    write_json(root / JOURNAL, doc)
    if aside is not None:
        aside.parent.mkdir(exist_ok=True)
        os.rename(path, aside)


def undo(root: Path) -> list[str]:
    """Undo an unfinished repair's moves, newest first, and delete the journal; returns what was put back.
    Each step is safe to repeat: a move whose folder is no longer aside was undone (or never made)."""
    doc = _read(root)
    if doc is None:
        return []
    done = []
    for move in reversed(doc["moves"]):
        path, aside = Path(move["path"]), move["aside"] and Path(move["aside"])
        if aside is None:
            shutil.rmtree(path, ignore_errors=True)
        elif aside.exists():
            shutil.rmtree(path, ignore_errors=True)  # what the repair made in its place
            os.rename(aside, path)
            done.append(f"table {move['table']} was put back from {aside}")
    finish(root)
    return done


def finish(root: Path) -> None:
    """The repair is published (or undone): readers stop warning."""
    (root / JOURNAL).unlink(missing_ok=True)
