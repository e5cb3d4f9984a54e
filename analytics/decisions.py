"""What people decided about changes: ``bench changes --accept RUN`` makes the level that RUN starts the
reference of its series for ``bench check``, and ``--unaccept RUN`` takes that back.

Each decision is one JSON line appended to ``STORE/decisions.jsonl`` (who, when, why, the run and its series),
under an exclusive lock on that file, and flushed to disk before the command returns: the file is the
history of every decision, never rewritten. The current decisions are its replay: a run's last line wins. A
line that does not read (a torn write, an edit by hand) is left out with a warning naming it, so a damaged
file can only make the gate stricter (an acceptance lost), never hide a regression.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.sql.errors import BenchError

FILE = "decisions.jsonl"


@dataclass(frozen=True)
class Decision:
    action: str  # accept, unaccept
    run_id: str  # the first run on the accepted level
    series_id: str
    label: str  # the series as bench changes names it
    by: str
    at: str  # ISO 8601, UTC
    why: str


def record(root: Path, action: str, run_id: str, series_id: str, label: str, why: str, by: str | None = None
           ) -> Decision:
    """Append one decision (``action``: accept or unaccept) to the store's decisions file and return it.

    Raises BenchError when the file cannot be written.
    """
    import fcntl

    d = Decision(action, run_id, series_id, label, by or _user(), datetime.now(UTC).isoformat(timespec="seconds"), why)
    path = root / FILE
    try:
        with path.open("a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(json.dumps(asdict(d), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise BenchError(f"cannot record the decision in {path}: {e.strerror}") from e
    return d


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return f"uid {os.getuid()}"


def history(root: Path) -> list[Decision]:
    """Every decision in the order it was made; unreadable lines are left out with a warning."""
    path = root / FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as e:
        print(f"warning: {path}: cannot read the accepted changes ({e.strerror}); every change counts as unaccepted",
              file=sys.stderr)
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            d = Decision(**{k: str(raw[k]) for k in Decision.__dataclass_fields__})
            if d.action not in ("accept", "unaccept"):
                raise ValueError(d.action)
        except (ValueError, KeyError, TypeError):
            print(f"warning: {path} line {n} does not read as a decision; left out (the gate treats its change "
                  "as unaccepted)", file=sys.stderr)
            continue
        out.append(d)
    return out


def accepted(root: Path) -> dict[str, Decision]:
    """run_id -> the acceptance in force for it (its latest decision is an accept)."""
    current: dict[str, Decision] = {}
    for d in history(root):
        current[d.run_id] = d
    return {r: d for r, d in current.items() if d.action == "accept"}

