"""Which batches of a store can be read, checked from their files' footers and their commit record.

Every committed batch holds ``MANIFEST.json``: the row count of each of its files, and the sources it
came from. A batch is damaged when a file it should hold is missing, its Parquet footer cannot be read,
or its row count differs from the record (a batch committed before manifests existed is checked for its
files and footers only). Readers use only sound batches (``store.table_files``); the next ingest moves a
damaged batch aside into ``STORE/damaged/`` (never deleting it), and ``bench ingest --rebuild`` parses its
sources again from their original files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST = "MANIFEST.json"
#: What a batch holds at least: one file per table (an empty steps / telemetry part when it has none).
REQUIRED = ("runs.parquet", "problems.parquet", "sources.parquet", "steps-00000.parquet", "telemetry-00000.parquet")
DAMAGED_DIR = "damaged"


@dataclass
class Health:
    """The batches of a store: the sound ones, the damaged ones with why, and those already set aside."""

    sound: list[Path] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    set_aside: list[Path] = field(default_factory=list)

    def messages(self, root: Path) -> list[str]:
        """One line per damaged or set-aside batch, naming it, what is wrong and the fix."""
        fix = f"run `bench ingest --rebuild --store {root}` to parse its sources again"
        out = [f"store batch {b.name} is damaged ({why}) and is left out; {fix}" for b, why in self.damaged]
        out += [f"store batch {b.name} was set aside as damaged in {b.parent}; {fix}" for b in self.set_aside]
        return out


def check(root: Path) -> Health:
    """The health of every batch under ``root`` (see the module docstring)."""
    health = Health()
    for batch in sorted((root / "batches").glob("*")) if (root / "batches").is_dir() else []:
        if batch.is_dir():
            why = batch_damage(batch)
            if why is None:
                health.sound.append(batch)
            else:
                health.damaged.append((batch, why))
    health.set_aside = set_aside(root)
    return health


def set_aside(root: Path) -> list[Path]:
    """The batches moved into ``STORE/damaged/``."""
    aside = root / DAMAGED_DIR
    return sorted(p for p in aside.glob("*") if p.is_dir()) if aside.is_dir() else []


def batch_damage(batch: Path) -> str | None:
    """What is wrong with one batch directory, or None when it is sound."""
    record: dict[str, int] | None = None
    if (batch / MANIFEST).exists():
        try:
            record = {str(k): int(v) for k, v in json.loads((batch / MANIFEST).read_text())["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return f"{MANIFEST} is unreadable: {type(e).__name__}"
    for name in record if record is not None else REQUIRED:
        path = batch / name
        if not path.exists():
            return f"{name} is missing"
        try:
            rows = pq.read_metadata(path).num_rows
        except (OSError, pa.ArrowException) as e:
            return f"{name} is unreadable: {str(e).splitlines()[0][:120]}"
        if record is not None and rows != record[name]:
            return f"{name} has {rows} rows where its commit recorded {record[name]}"
    return None


def findings(root: Path) -> list[str]:
    """What ``bench ingest --check`` reports: damaged and set-aside batches, and sources that say they
    gave runs of which the store holds none. Empty when the store is sound."""
    state = check(root)
    out = state.messages(root)
    have: set[str] = set()
    for batch in state.sound:
        have.update(pq.read_table(batch / "runs.parquet", columns=["source_sha256"]).column(0).to_pylist())
    for batch in state.sound:
        for row in pq.read_table(batch / "sources.parquet", columns=["source", "source_sha256", "n_runs"]).to_pylist():
            if row["n_runs"] and row["source_sha256"] not in have:
                out.append(f"source {row['source']} gave {row['n_runs']} run(s) of which the store holds none; "
                           f"run `bench ingest --rebuild --store {root}`")
    return out


def write_manifest(batch: Path, sources: list[dict[str, Any]]) -> bytes:
    """The manifest of a batch about to be committed: every file's row count (from its footer) and the
    sources, as ``bench ingest --rebuild`` needs them should the batch's own sources file be lost."""
    files = {p.name: pq.read_metadata(p).num_rows for p in sorted(batch.glob("*.parquet"))}
    keep = ("source", "source_sha256", "archive", "resolved_path", "format", "forced_format", "path_patterns")
    body = {"files": files, "sources": [{k: s.get(k) for k in keep} for s in sources]}
    return json.dumps(body, separators=(",", ":")).encode()  # no indent: the C encoder, 2000 sources a batch


def recorded_sources(batch: Path) -> list[dict[str, Any]]:
    """The sources of a batch: from its sources file when that can be read, else from its manifest;
    none when neither can (the batch's data is then gone; its original files may be ingested again)."""
    try:
        return list(pq.read_table(batch / "sources.parquet").to_pylist())
    except (OSError, pa.ArrowException):
        pass
    try:
        return list(json.loads((batch / MANIFEST).read_text())["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
