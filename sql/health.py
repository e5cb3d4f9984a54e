"""Which files of a store's committed state can be read, and ``bench ingest --check``.

Every reader (``readable``) checks every file it will read: it is there with the size its Delta commit
recorded, and its bytes have the SHA-256 recorded when it was committed (a flipped bit reads as another
number, or fails a whole query). A file that fails is left out with a one-line warning naming it and the
fix, and the rest of the store answers. A file's hash is taken again whenever its inode changes (its size,
modification or change time: any write), and otherwise remembered in ``STORE/.verified.json`` (``Verified``),
so that a query does not hash the whole store each time. ``--check`` (``findings``) hashes every file
whatever was remembered, and checks the commits table, every table's Delta log, and that each source which
gave runs still has them.
``bench ingest --rebuild`` repairs what either finds, by parsing the recorded sources again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.sql import delta, deltalog, journal
from bench.sql.errors import one_line
from bench.sql.layout import TABLE_NAMES

#: What ``Health.damaged`` names when its "why" is the whole message (a repair that did not finish:
#: bench.sql.journal; a commits log object lost on object storage: bench.sql.remote).
SAID = "said"


@dataclass
class Health:
    """A committed state's files per table that can be read, and what is wrong with the others."""

    snap: delta.Snapshot | None = None
    files: dict[str, list[Path]] = field(default_factory=dict)
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    #: Commits rows written but not yet in the commits table's log (bench.sql.delta.roll_forward): read as
    #: committed; the next writer records them.
    pending: list[str] = field(default_factory=list)

    def messages(self, root: Path | str) -> list[str]:
        """One line per damaged file or table, naming it, what is wrong and the fix (on object storage,
        where there is no --rebuild: ingest its sources into a new store)."""
        if isinstance(root, str):
            return [why if what == SAID else f"store {what} cannot be read ({why}) and is left out; ingest its sources into a new store"
                    for what, why in self.damaged]
        fix = f"run `bench ingest --rebuild --store {root}` to parse its sources again"
        return [why if what == SAID else f"store {what} is damaged ({why}); run `bench ingest --rebuild --store {root}` to recover it"
                if what == f"table {delta.COMMITS}" else f"store {what} is damaged ({why}) and is left out; {fix}"
                for what, why in self.damaged]


def readable(root: Path, *, verify: bool = True, from_log: bool = True) -> Health:
    """The committed state's files that are there with their committed size and bytes (see the module
    docstring); ``verify`` False: sizes only (--check, which hashes every file itself); ``from_log`` False:
    each table's files as deltalake reads its log (a writer's, --check's), not from its JSON commits."""
    out = Health()
    if why := journal.interrupted(root):
        out.damaged.append((SAID, why))
    verified = Verified(root) if verify else None
    try:
        read = verified.commit_rows if verified is not None else None
        out.snap, out.pending = delta.roll_forward(root, delta.snapshot(root, checksums=False, read=read), record=False)
    except Exception as e:  # deltalake raises its own types and OSError; all mean the same to a reader
        # the tables' own logs still say what they hold: read each at its newest version, which may include
        # what a killed writer committed and never published (said in the warning), rather than nothing
        out.damaged.append((f"table {delta.COMMITS}", f"{one_line(e)}; every table is read at its newest version"))
        versions, unreadable = delta.newest_versions(root)
        out.snap = delta.Snapshot(-1, versions)
        out.damaged += [(f"table {t}", why) for t, why in unreadable.items()]
    for table in TABLE_NAMES:
        try:
            found = delta.files(root, table, out.snap, from_log=from_log)
        except Exception as e:
            out.damaged.append((f"table {table}", one_line(e)))
            out.files[table] = []
            continue
        out.files[table] = []
        for f in found:
            why = _file_damage(f) or (verified.check(f) if verified is not None else None)
            if why is None:
                out.files[table].append(f.path)
            else:
                out.damaged.append((f"file {f.key}", why))
    if verified is not None:
        verified.save({str(p) for paths in out.files.values() for p in paths})
    return out


class Verified:
    """The files whose SHA-256 matched their recorded one, by their inode's identity (``STORE/.verified.json``):
    a file is hashed again when its size, modification or change time moves. Saved only when it grew, and
    not at all where the store cannot be written (read-only media: every file is hashed each time)."""

    def __init__(self, root: Path):
        self.root = root
        self._recorded: dict[str, str] | None = None  # read only when a file must be hashed (all commits files)
        self.path = root / ".verified.json"
        try:
            self.known: dict[str, list[int]] = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            self.known = {}
        self.added = False
        self.commits_read: set[str] = set()  # commits files read (kept in the file with the data files)

    def commit_rows(self, path: Path, columns: list[str]) -> list[dict[str, Any]]:
        """The rows of a commits file: read by DuckDB once its page checksums were verified (by pyarrow, and
        remembered like a data file's hash: a reader then never imports pyarrow)."""
        ident = _identity(path)
        self.commits_read.add(str(path))
        if self.known.get(str(path)) == ident:
            return deltalog.read_parquet_rows(path, columns)
        rows = delta.read_commit_file(path, columns)
        self.known[str(path)] = ident
        self.added = True
        return rows

    def check(self, f: delta.DataFile) -> str | None:
        """Why ``f`` cannot be trusted (its bytes are not those committed), or None."""
        ident = _identity(f.path)
        if self.known.get(str(f.path)) == ident:
            return None
        if self._recorded is None:
            try:
                self._recorded = snap.checksums if (snap := delta.snapshot(self.root)) is not None else {}
            except Exception:  # the commits table became unreadable since: nothing to compare with
                self._recorded = {}
        want = self._recorded.get(f.key)
        if want is None:
            return None  # committed before checksums were kept: nothing to compare with
        if delta.sha256(f.path) != want:
            return "its bytes do not match the SHA-256 recorded when it was committed (changed on disk since)"
        self.known[str(f.path)] = ident
        self.added = True
        return None

    def save(self, current: set[str]) -> None:
        """Write what is known of the ``current`` files (those of files no state holds any more dropped)."""
        if not self.added:
            return
        current = current | self.commits_read
        tmp = self.path.with_name(f".verified.{os.getpid()}.tmp")
        try:  # a cache: no fsync; a reader that finds it cut or stale hashes again
            tmp.write_text(json.dumps({k: v for k, v in self.known.items() if k in current}))
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)


def _file_damage(f: delta.DataFile) -> str | None:
    try:
        size = f.path.stat().st_size
    except FileNotFoundError:
        return "it is missing"
    except OSError as e:
        return f"it cannot be read: {e.strerror}"
    return None if size == f.size else f"{size} bytes where its commit recorded {f.size}"


def findings(root: Path) -> list[str]:
    """What ``bench ingest --check`` reports, one line each; empty when the store is sound."""
    from bench.sql.recover import commits_damage

    state = readable(root, verify=False, from_log=False)  # every file is hashed below, whatever readers remembered
    out = state.messages(root)
    out += [f"store table {table}: its Delta log lacks version(s) {', '.join(map(str, gaps))} (a log entry deleted); "
            f"readers use its checkpoint, writers cannot; run `bench ingest --rebuild --store {root}` to repair it"
            for table in [*TABLE_NAMES, delta.COMMITS] if (gaps := deltalog.log_gaps(delta.table_path(root, table)))]
    out += [f"store table {table}: an entry of its Delta log cannot be read whole (cut or changed); readers use "
            f"the rest, writers cannot; run `bench ingest --rebuild --store {root}` to repair it"
            for table in TABLE_NAMES
            if not deltalog.replay_log(delta.table_path(root, table), table, checkpoint=True).complete]
    why = commits_damage(root)
    if why is not None:
        return [*out, f"store table {delta.COMMITS} is damaged: {why}; its checksums cannot be verified; run "
                      f"`bench ingest --rebuild --store {root}` to recover it from the tables' own logs"]
    rows = delta.commit_rows(root, ["checksums"])
    out += [f"store table {delta.COMMITS}: {name} is not in the table's log (a writer killed at its commit point, "
            "or a log entry lost); it is read as committed, and the next ingest records it" for name in state.pending]
    rows += [r for name in state.pending for r in delta.read_commit_file(delta.table_path(root, delta.COMMITS) / name,
                                                                         ["seq", "checksums"])]
    recorded = {k: v for row in rows for k, v in (row["checksums"] or [])}
    fix = f"run `bench ingest --rebuild --store {root}` to parse its sources again"
    for table, paths in state.files.items():
        for path in list(paths):
            key = f"{table}/{path.name}"
            want = recorded.get(key)
            if want is None:
                out.append(f"store file {key} has no checksum in the store's commits; it cannot be verified")
            elif delta.sha256(path) != want:
                out.append(f"store file {key} does not match the SHA-256 recorded when it was committed "
                           f"(changed on disk since); {fix}")
                paths.remove(path)
    out += _orphan_sources(root, state)
    return out


def _orphan_sources(root: Path, state: Health) -> list[str]:
    """Sources that say they gave runs of which the store holds none."""
    import pyarrow.parquet as pq

    have: set[str] = set()
    for path in state.files.get("runs", []):
        have.update(pq.read_table(path, columns=["source_sha256"]).column(0).to_pylist())
    out = []
    for path in state.files.get("sources", []):
        for row in pq.read_table(path, columns=["source", "source_sha256", "n_runs"]).to_pylist():
            if row["n_runs"] and row["source_sha256"] not in have:
                out.append(f"source {row['source']} gave {row['n_runs']} run(s) of which the store holds none; "
                           f"run `bench ingest --rebuild --store {root}`")
    return out


def _identity(path: Path) -> list[int]:
    """What says a file is the one verified before: inode, size, and modification and change times (ns).
    Raises OSError when it cannot be read."""
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
