"""``bench ingest --rebuild``: re-parse every source recorded in the store (after a parser fix, or to
repair damage that ``bench ingest --check`` found).

The new generation is built beside the old one and published as one commit (bench.sql.store); rows of
sources that can no longer be read (moved, deleted, changed) are carried over unchanged, so a rebuild
never loses data it can still read, and names what it could not restore.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.ingest.pipeline import IngestSummary, ingest
from bench.sql import delta, deltalog, health, journal
from bench.sql.errors import BenchError
from bench.sql.names import fs_name
from bench.sql.schema import TABLES, conform, write_part
from bench.sql.store import StoreWriter, table_files


def _plans(sources: list[dict[str, Any]]) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """(path to re-ingest, forced format, path patterns), one per top-level path of recorded ``sources``."""
    seen: dict[tuple[str, str | None, tuple[str, ...]], None] = {}
    for row in sources:
        fmt = row["format"] if row["forced_format"] else None
        seen[(_original(row), fmt, tuple(row["path_patterns"] or ()))] = None
    return list(seen)


def _passes(plans: list[tuple[str, str | None, tuple[str, ...]]]) -> dict[tuple[str | None, tuple[str, ...]], list[str]]:
    """The plans that still exist, as one ingest per set of options (forced format, path patterns): every
    file of a directory ingested once is one pass, not one ingest per file (which made a rebuild
    quadratic: 300 files took 30 times their first ingest, in 281 batches)."""
    passes: dict[tuple[str | None, tuple[str, ...]], list[str]] = {}
    for path, fmt, patterns in plans:
        if os.path.exists(path):
            passes.setdefault((fmt, patterns), []).append(path)
    return passes


def _original(row: dict[str, Any]) -> str:
    """Where a recorded source's file is now: its path as given, else its absolute path, each as stored
    or with ``bench.sql.names.storable``'s escapes of a name that is not UTF-8 undone; the path as given when none
    of these exists."""
    given = row["archive"] or row["source"]
    for path in (given, row["resolved_path"]):
        for candidate in (path, fs_name(path)) if path else ():
            if os.path.exists(candidate):
                return str(candidate)
    return str(given)


def rebuild(root: Path, *, on_wait: Callable[[], None] | None = None, accept_loss: bool = False) -> IngestSummary:
    """Re-ingest every recorded source into a fresh generation (a store under ``_tmp``), in one ingest per
    set of options (usually one), and publish it as one commit that overwrites every table. Sources are
    those of the sources table and those each ``commits`` row recorded, so a rebuild restores runs whatever
    table was damaged, the sources table included (a damaged commits table is recovered first:
    bench.sql.recover). Rows of sources whose files cannot be read any more are carried over from the
    readable files; a source neither parsed again nor carried over is named. A rebuild that would leave
    fewer runs than the store's runs table holds (its Delta log's row counts, damaged files included)
    replaces nothing and raises BenchError naming what it cannot restore, unless ``accept_loss``."""
    if not (root / "STORE.json").exists():
        raise BenchError(f"{root} is not a bench store; nothing to rebuild")
    total = IngestSummary(store=str(root))
    with StoreWriter(root, wait_message=on_wait, repair=True) as writer:
        try:
            _rebuild(root, writer, total, accept_loss)
        except BaseException:  # refused, failed or interrupted: the store as it was, damage warnings and all
            total.set_aside += journal.undo(root)
            raise
        journal.finish(root)
    total.store = str(root)
    return total


def _rebuild(root: Path, writer: StoreWriter, total: IngestSummary, accept_loss: bool) -> None:
    total.rolled_back, total.set_aside, total.recovered = writer.rolled_back, writer.set_aside, writer.recovered
    total.rolled_forward = writer.rolled_forward
    state = health.readable(root, from_log=False)
    held = sum(f.rows or 0 for f in delta.files(root, "runs", writer.start))
    gone: dict[str, list[str]] = {}  # of a table set aside: files that held rows and cannot be read
    for table, (replayed, aside) in writer.aside.items():  # a table whose log was unreadable: what it held
        state.files[table], gone[table] = _intact(table, replayed, root, aside)
        held += sum(f.rows or 0 for f in replayed.files) if table == "runs" else 0
    earlier = _recorded_sources(root, state)  # also what supersedes is found against
    new = root / "_tmp" / "rebuild"
    for (fmt, patterns), paths in _passes(_plans(earlier)).items():
        _add(total, ingest(paths, new, fmt=fmt, path_patterns=list(patterns), earlier=earlier))
    files = {t: table_files(new, t) if (new / "STORE.json").exists() else [] for t in TABLES}
    have = {r["source_sha256"] for f in files["sources"] for r in pq.read_table(f, columns=["source_sha256"]).to_pylist()}
    carried = _carry_over(state, have, root / "_tmp")
    files = {t: files[t] + carried.get(t, []) for t in TABLES}
    now = [r for f in files["sources"] for r in pq.read_table(f).to_pylist()]
    kept = _sources_from_records(earlier, now, files)  # a lost sources file's rows, from the commits' records
    if kept:
        now += kept
        files["sources"].append(root / "_tmp" / f"sources-recorded-{uuid.uuid4().hex[:8]}.parquet")
        write_part(pa.Table.from_pylist(kept, schema=TABLES["sources"]), files["sources"][-1], sync=True)
    lost = {r["source_sha256"]: r["source"] for r in earlier if r.get("source_sha256")}
    runs_of = Counter(v for f in files["runs"] for v in pq.read_table(f, columns=["source_sha256"]).column(0).to_pylist())
    short = {s["source_sha256"]: s["source"] for s in now if (s.get("n_runs") or 0) > runs_of[s["source_sha256"]]}
    total.lost = sorted({src for sha, src in lost.items() if sha not in {s["source_sha256"] for s in now}}
                        | set(short.values()))
    runs = runs_of.total()
    total.given_up = _unrestored(root, writer, state, have, gone, {r["source_sha256"] for r in kept})
    if (runs < held or total.given_up) and not accept_loss:
        raise BenchError(_refusal(root, held, runs, total.lost, total.given_up))
    if short:  # forgotten, so that ingesting the log again (found, or put back) stores its runs
        now = [s for s in now if s["source_sha256"] not in short]
        files["sources"] = [root / "_tmp" / f"sources-kept-{uuid.uuid4().hex[:8]}.parquet"]
        write_part(pa.Table.from_pylist(now, schema=TABLES["sources"]), files["sources"][0], sync=True)
    for table in TABLES:
        writer.add(table, files[table], overwrite=True)
    writer.sources = [delta.sources_json(now)]
    writer.publish("rebuild")


def _unrestored(root: Path, writer: StoreWriter, state: health.Health, have: set[str],
                gone: dict[str, list[str]], recorded: set[str]) -> list[str]:
    """One line per table of the rows a rebuild cannot restore: those of its committed files that cannot be
    read whole (for a table set aside: ``gone``, from ``_intact``), unless every source they came from is
    parsed again (``have``; for the sources table, also those made again from the commits' records:
    ``recorded``). Which sources a file holds is what the commit that added it recorded; a file no commit
    names (a compaction's output, a damaged commits table) is taken to hold sources that are gone."""
    holds: dict[str, set[str]] = {}
    try:
        for row in delta.commit_rows(root, ["checksums", "sources"]):
            shas = {str(s.get("source_sha256")) for s in delta.recorded_sources(row)}
            for key, _ in row["checksums"] or []:
                holds.setdefault(key, set()).update(shas)
    except Exception:  # a damaged commits table: nothing says which sources a file holds
        holds = {}
    out = []
    for table in TABLES:
        if table in writer.aside:
            rows = {f.path.name: f.rows for f in writer.aside[table][0].files}
            lost = [(name, rows.get(name)) for name in gone[table]]
        else:
            readable = set(state.files.get(table, []))
            lost = [(f.path.name, f.rows) for f in delta.files(root, table, writer.start) if f.path not in readable]
        restored = have | recorded if table == "sources" else have
        # a file no commit names holds sources that are gone (the empty name is never a source's)
        lost = [(name, n) for name, n in lost if not (holds.get(f"{table}/{name}") or {""}) <= restored]
        if lost:
            counted = sum(n or 0 for _, n in lost)
            rows_said = f"{counted} rows" if all(n is not None for _, n in lost) else f"the rows (at least {counted})"
            out.append(f"{rows_said} of table {table} (damaged file(s) {', '.join(name for name, _ in lost[:3])}"
                       f"{' and more' if len(lost) > 3 else ''}, whose logs cannot be read)")
    return out


def _refusal(root: Path, held: int, runs: int, lost: list[str], given_up: list[str]) -> str:
    what = [f"would leave {runs} runs where the store holds {held}"] if runs < held else []
    what += [f"not restored: {', '.join(lost[:10])}{' and more' if len(lost) > 10 else ''}"] if lost else []
    what += [f"cannot restore {'; '.join(given_up)}"] if given_up else []
    return (f"--rebuild {'; '.join(what)}: nothing was replaced, "
            f"and the damaged files stay where they are (every read warns of them). Put the missing logs back "
            f"where they were ingested from and run it again, or run "
            f"`bench ingest --rebuild --accept-loss --store {root}` to keep only what can be restored")


def _intact(table: str, replayed: deltalog.Replayed, root: Path, aside: Path) -> tuple[list[Path], list[str]]:
    """The files of a set-aside table (``StoreWriter.aside``, now in the folder ``aside``) that hold its rows,
    and the names of those it held that cannot be restored. Its files are those its log's replay lists, there
    with their committed size and, where a commit recorded it, their SHA-256. When the replay is incomplete
    (a commit lost or cut), also the folder's files whose SHA-256 a commit recorded, unless the table ever had
    files removed (a compaction's inputs stay on disk and would count twice): then none, and every file a
    commit recorded is named as not restored."""
    try:
        recorded = {k: v for row in delta.commit_rows(root, ["checksums"]) for k, v in row["checksums"] or []}
    except Exception:  # a damaged commits table: sizes are all there is to go by
        recorded = {}
    files: dict[Path, int | None] = {f.path: f.size for f in replayed.files}
    if not replayed.complete:
        files.update({aside / k.split("/", 1)[1]: None for k in recorded if k.startswith(f"{table}/")})
    if not replayed.complete and replayed.removes:
        return [], sorted(p.name for p in files)
    out, gone = [], []
    for path, size in files.items():
        try:
            sha = delta.sha256(path)
        except OSError:
            gone.append(path.name)
            continue
        if (size is None or path.stat().st_size == size) and recorded.get(f"{table}/{path.name}", sha) == sha:
            out.append(path)
        else:
            gone.append(path.name)
    return out, gone


def _sources_from_records(earlier: list[dict[str, Any]], now: list[dict[str, Any]],
                          files: dict[str, list[Path]]) -> list[dict[str, Any]]:
    """Sources rows for the sources whose rows the new generation keeps (carried over) but whose own row it
    lacks (its file damaged, its log gone): what the commit that added it recorded (its path, identity, size
    and format), with its runs, steps and problems counted from the kept rows; what no record holds (when it
    was ingested, which version it superseded) is NULL."""
    have = {r["source_sha256"] for r in now}
    missing = {r["source_sha256"]: r for r in earlier if r.get("source_sha256") and r["source_sha256"] not in have}
    if not missing:
        return []
    count = Counter[str]()
    run_source: dict[str, str] = {}
    for table in ("runs", "problems", "telemetry"):
        for f in files[table]:
            for row in pq.read_table(f, columns=["source_sha256", "run_id"] if table == "runs" else ["source_sha256"]
                                     ).to_pylist():
                if row["source_sha256"] in missing:
                    count[f"{table}:{row['source_sha256']}"] += 1
                    if table == "runs":
                        run_source[row["run_id"]] = row["source_sha256"]
    for f in files["steps"]:
        for run in pq.read_table(f, columns=["run_id"]).column(0).to_pylist():
            if run in run_source:
                count[f"steps:{run_source[run]}"] += 1
    return [{**row, "n_runs": count[f"runs:{sha}"], "n_steps": count[f"steps:{sha}"],
             "n_problems": count[f"problems:{sha}"]}
            for sha, row in missing.items() if any(count[f"{t}:{sha}"] for t in ("runs", "problems", "telemetry"))]


def _recorded_sources(root: Path, state: health.Health) -> list[dict[str, Any]]:
    """Every source the store recorded: the sources table's readable rows, then what each ``commits`` row
    recorded (which holds the sources of a damaged or lost sources file)."""
    rows: list[dict[str, Any]] = []
    for f in state.files.get("sources", []):
        try:
            rows += pq.read_table(f).to_pylist()
        except (OSError, pa.ArrowException):
            continue
    try:
        commits = delta.commit_rows(root, ["sources"])
    except Exception:  # a damaged commits table: the sources table is all there is
        commits = []
    seen = {r["source_sha256"] for r in rows}
    for commit in commits:
        for r in delta.recorded_sources(commit):
            if r.get("source_sha256") not in seen:
                seen.add(r.get("source_sha256"))
                rows.append({**dict.fromkeys(TABLES["sources"].names), **r})
    return rows


def _carry_over(state: health.Health, have: set[str], scratch: Path) -> dict[str, list[Path]]:
    """A file per table of the rows of every old source (of the readable files) whose content is absent
    from the new generation (``have``), written under ``scratch``."""
    out: dict[str, list[Path]] = {}
    for table in TABLES:
        parts = []
        for f in state.files.get(table, []):
            try:
                t = pq.read_table(f)
            except (OSError, pa.ArrowException):
                continue
            if table == "steps":
                ids = pc.utf8_slice_codeunits(t["run_id"].cast(pa.string()), 0, 16)
                keep = pc.invert(pc.is_in(ids, pa.array([h[:16] for h in have], pa.string())))
            elif table == "telemetry":
                keep = pc.invert(pc.is_in(t["source_sha256"].cast(pa.string()), pa.array(list(have), pa.string())))
            elif table == "problems":
                keep = pc.invert(pc.fill_null(pc.is_in(t["source_sha256"], pa.array(list(have), pa.string())), False))
            else:
                keep = pc.invert(pc.fill_null(pc.is_in(t["source_sha256"], pa.array(list(have), pa.string())), True))
            parts.append(conform(t.filter(keep), TABLES[table]))
        if parts and sum(p.num_rows for p in parts):
            path = scratch / f"{table}-carried-{uuid.uuid4().hex[:8]}.parquet"
            write_part(pa.concat_tables(parts, promote_options="default"), path, sync=True)
            out[table] = [path]
    return out


def _add(total: IngestSummary, s: IngestSummary) -> None:
    for name in ("files_seen", "files_parsed", "runs_added", "steps_added", "telemetry_added",
                 "duplicates_skipped", "unrecognized", "bytes_read"):
        setattr(total, name, getattr(total, name) + getattr(s, name))
    total.wall_time_s += s.wall_time_s
    for attr in ("problems_by_kind", "runs_by_status", "runs_by_format"):
        d = getattr(total, attr)
        for k, v in getattr(s, attr).items():
            d[k] = d.get(k, 0) + v
