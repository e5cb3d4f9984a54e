"""Which files of a store's committed state can be read, and ``bench ingest --check``.

Every reader (``readable``) checks what costs a ``stat`` per file: the file is there with the size its
Delta commit recorded; a missing or truncated file is left out with a one-line warning naming it and the
fix. ``--check`` (``findings``) also verifies every file against the SHA-256 recorded when it was
committed (a flipped bit), every table's Delta log, and that each source which gave runs still has them.
``bench ingest --rebuild`` repairs what either finds, by parsing the recorded sources again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.sql import delta
from bench.sql.errors import one_line
from bench.sql.schema import TABLES


@dataclass
class Health:
    """A committed state's files per table that can be read, and what is wrong with the others."""

    snap: delta.Snapshot | None = None
    files: dict[str, list[Path]] = field(default_factory=dict)
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    #: Commits rows written but not yet in the commits table's log (bench.sql.delta.roll_forward): read as
    #: committed; the next writer records them.
    pending: list[str] = field(default_factory=list)

    def messages(self, root: Path) -> list[str]:
        """One line per damaged file or table, naming it, what is wrong and the fix."""
        fix = f"run `bench ingest --rebuild --store {root}` to parse its sources again"
        return [f"store {what} is damaged ({why}); run `bench ingest --rebuild --store {root}` to recover it"
                if what == f"table {delta.COMMITS}" else f"store {what} is damaged ({why}) and is left out; {fix}"
                for what, why in self.damaged]


def readable(root: Path) -> Health:
    """The committed state's files that are there with their committed size (see the module docstring)."""
    out = Health()
    try:
        out.snap, out.pending = delta.roll_forward(root, delta.snapshot(root), record=False)
    except Exception as e:  # deltalake raises its own types and OSError; all mean the same to a reader
        # the tables' own logs still say what they hold: read each at its newest version, which may include
        # what a killed writer committed and never published (said in the warning), rather than nothing
        out.damaged.append((f"table {delta.COMMITS}", f"{one_line(e)}; every table is read at its newest version"))
        versions, unreadable = delta.newest_versions(root)
        out.snap = delta.Snapshot(-1, versions)
        out.damaged += [(f"table {t}", why) for t, why in unreadable.items()]
    for table in TABLES:
        try:
            found = delta.files(root, table, out.snap)
        except Exception as e:
            out.damaged.append((f"table {table}", one_line(e)))
            out.files[table] = []
            continue
        out.files[table] = []
        for f in found:
            why = _file_damage(f)
            if why is None:
                out.files[table].append(f.path)
            else:
                out.damaged.append((f"file {f.key}", why))
    return out


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

    state = readable(root)
    out = state.messages(root)
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
