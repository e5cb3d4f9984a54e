"""What people decided about changes: ``bench changes --accept RUN`` makes the level that RUN starts the
reference of its series for ``bench check``, and ``--unaccept RUN`` takes that back.

Each decision is one JSON line appended to ``STORE/decisions.jsonl`` (who, when, why, the run and its series),
under an exclusive lock on that file, and flushed to disk before the command returns: the file is the
history of every decision, never rewritten. The current decisions are its replay: a run's last line wins.

Decisions are data, checked as the store's files are. Each line carries ``sha256``, the hash of its own
decision, and ``chain``, the hash of that and the chain of the decision before it; STORE.json records how
many decisions there are and the last chain (``decisions``). So a reader finds a line that was changed (its
hash), one deleted or put in between (the next line's chain), and lines cut from the end or the whole file
deleted (STORE.json's count and chain). A line that does not read, or whose hash is wrong, is left out; every
finding is a warning on every command that reads decisions ("2 decisions could not be read; the gate treats
their changes as not accepted") and a finding of ``bench ingest --check``. So damage can only make the gate
stricter (an acceptance lost), never hide a regression. Lines written before these fields existed are read
as they are.
"""

from __future__ import annotations

import getpass
import hashlib
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
    """Append one decision (``action``: accept or unaccept) to the store's decisions file, record the
    file's count and chain in STORE.json, and return the decision.

    Raises BenchError when the file cannot be written.
    """
    import fcntl

    d = Decision(action, run_id, series_id, label, by or _user(), datetime.now(UTC).isoformat(timespec="seconds"), why)
    path = root / FILE
    try:
        with path.open("a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            read = _read(f.read(), path)
            own = _hash(d)
            chain = _link(read.chain, own)
            f.write(json.dumps({**asdict(d), "sha256": own, "chain": chain}, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
            _note(root, read.count + 1, chain)
    except OSError as e:
        raise BenchError(f"cannot record the decision in {path}: {e.strerror}") from e
    return d


def _hash(d: Decision) -> str:
    return hashlib.sha256(json.dumps(asdict(d), sort_keys=True).encode()).hexdigest()


def _link(previous: str, own: str) -> str:
    return hashlib.sha256(f"{previous}:{own}".encode()).hexdigest()


def _note(root: Path, count: int, chain: str) -> None:
    """STORE.json's record of the decisions: their count and last chain (written atomically)."""
    from bench.sql.atomic import write_atomic

    meta = root / "STORE.json"
    try:
        body = json.loads(meta.read_text())
    except (OSError, ValueError):
        return  # no readable STORE.json (a folder used as a store by hand, a damaged one): the chain still holds
    write_atomic(meta, json.dumps({**body, "decisions": {"count": count, "chain": chain}}, indent=2).encode())


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return f"uid {os.getuid()}"


@dataclass
class _Read:
    decisions: list[Decision]
    findings: list[str]
    count: int = 0  # decisions read whole
    chain: str = ""  # the chain of the last one


def _read(text: str, path: Path) -> _Read:
    """The file's decisions and what is wrong with it, line by line (see the module docstring)."""
    out = _Read([], [])
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            d = Decision(**{k: str(raw[k]) for k in Decision.__dataclass_fields__})
            if d.action not in ("accept", "unaccept"):
                raise ValueError(d.action)
        except (ValueError, KeyError, TypeError):
            out.findings.append(f"{path} line {n} does not read as a decision; left out")
            continue
        own = _hash(d)
        if "sha256" in raw and raw["sha256"] != own:
            out.findings.append(f"{path} line {n} was changed after it was written (its SHA-256 differs); left out")
            continue
        if "chain" in raw and raw["chain"] != _link(out.chain, own):
            out.findings.append(f"{path} line {n}: a decision before it is missing or was changed (its chain "
                                "differs)")
        out.decisions.append(d)
        out.count, out.chain = out.count + 1, _link(out.chain, own)
    return out


def check(root: Path) -> tuple[list[Decision], list[str]]:
    """The decisions that read whole, and every finding about the file: damaged lines, and decisions that
    STORE.json records but the file lacks (lines cut from its end, the file deleted)."""
    path = root / FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except OSError as e:
        return [], [f"{path}: cannot be read ({e.strerror})"]
    read = _read(text, path)
    try:
        noted = json.loads((root / "STORE.json").read_text()).get("decisions") or {}
    except (OSError, ValueError, AttributeError):
        noted = {}
    count = noted.get("count") if isinstance(noted, dict) else None
    if isinstance(count, int) and (count > read.count or (count == read.count and noted.get("chain") != read.chain)):
        lost = max(count - read.count, 1)
        read.findings.append(f"{path}: STORE.json records {count} decisions, the file holds {read.count} that read "
                             f"whole: {lost} could not be read")
    return read.decisions, read.findings


def history(root: Path) -> list[Decision]:
    """Every decision in the order it was made; what cannot be read is left out, with a warning."""
    decisions, findings = check(root)
    for line in findings:
        print(f"warning: {line}", file=sys.stderr)
    if findings:
        print(f"warning: {len(findings)} problem(s) with the decisions; the gate treats the changes they name as "
              "not accepted", file=sys.stderr)
    return decisions


def accepted(root: Path) -> dict[str, Decision]:
    """run_id -> the acceptance in force for it (its latest decision is an accept)."""
    current: dict[str, Decision] = {}
    for d in history(root):
        current[d.run_id] = d
    return {r: d for r, d in current.items() if d.action == "accept"}

