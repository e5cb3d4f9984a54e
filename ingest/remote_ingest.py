"""Ingest into a store on object storage (bench.sql.remote): the logs are parsed exactly as into a local
store, into a staging store in a temporary folder that starts from what the remote store already holds of
``SEEDED`` (its sources, for what is new; its runs and telemetry links, to join telemetry to runs), and
that staging store's new files are uploaded and committed with one row."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.ingest import pipeline
from bench.ingest.pipeline import IngestSummary
from bench.sql import delta, objstore, projection, remote
from bench.sql.compact import AUTO_FILES
from bench.sql.errors import BenchError
from bench.sql.store import StoreWriter

#: The remote tables a staging store starts from.
SEEDED = ("sources", "problems", "runs", "telemetry_links")


def ingest_into(paths: Sequence[str], store: os.PathLike[str] | str, **options: Any) -> IngestSummary:
    """``pipeline.ingest`` for a local store, ``ingest_remote`` for one at an object-storage URL."""
    url = objstore.url_of(store)
    if url is None:
        return pipeline.ingest(list(paths), store, **options)
    return ingest_remote(paths, url, **options)


def ingest_remote(paths: Sequence[str], url: str, **options: Any) -> IngestSummary:
    """Ingest ``paths`` into the store at ``url`` (``pipeline.ingest``'s options); the store is made where
    it is not yet. Past ``compact.AUTO_FILES`` files in a table, the store is compacted after."""
    store = remote.Remote(url)
    store.create()
    state = store.state()
    seed, damaged = store.local_files(state, SEEDED)
    if damaged:
        raise BenchError(f"store {url}: {damaged[0][0]} cannot be read ({damaged[0][1]}); nothing was ingested")
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        staging = Path(tmp) / "store"
        with StoreWriter(staging) as writer:
            for table, files in seed.items():
                copies = [writer.root / "_tmp" / f.name for f in files]
                for f, copy in zip(files, copies, strict=True):
                    _link_or_copy(f, copy)
                writer.add(table, copies)
            if writer.checksums:
                writer.publish("seed")
            seeded = writer.start.seq if writer.start else -1
        summary = pipeline.ingest(list(paths), staging, compact=False, **options)
        new = [r for r in delta.commit_rows(staging, ["checksums", "sources"]) if r["seq"] > seeded]
        added = {k: v for r in new for k, v in r["checksums"] or []}
        if added:
            local = {k: delta.table_path(staging, k.partition("/")[0]) / k.partition("/")[2] for k in added}
            store.upload(local)
            store.commit("ingest", added, sources=[c for r in new for c in r["sources"] or []], since=state.version)
            for key, path in local.items():  # this host need not download what it wrote
                _link_or_copy(path, objstore.cached(added[key]))
            summary.runs_files = [str(objstore.cached(added[k])) for k in added if k.startswith("runs/")]
    summary.store = url
    now = store.state()
    try:  # each table's Delta log to the state just committed (bench.sql.projection), by compaction or alone
        if max((len(now.files(t)) for t in delta.TABLE_NAMES), default=0) > AUTO_FILES:
            with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
                summary.compacted_files = remote.compact(store, Path(tmp))
        else:
            projection.project(store, now)
    except projection.Behind as e:  # committed all the same: the next writer brings the logs up
        summary.logs_behind = f"{e}. The ingest is committed; readers without bench see the tables as before it until {e.remedy}"
    return summary


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
