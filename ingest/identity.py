"""Which file this is: the read stage's memory across one ingest.

A file's identity, its source_sha256, is the SHA-256 of its bytes (then of a run directory's run.json, and
of what an MLPerf JSON's or a machine metadata file's place means: ``meaning``). ``Identities`` decides,
from it and the file's place, whether the file is stored: a hash already in the store is skipped; the same
bytes from another place are a copy (skipped and listed, except an MLPerf result, which is stored again);
and a new file that extends an earlier version of its place supersedes it (``versions``).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable
from typing import Any

from bench.ingest import patterns as pat
from bench.ingest import run_dirs
from bench.ingest.items import Item
from bench.ingest.records import Problem
from bench.ingest.table_rows import run_id
from bench.ingest.versions import Hashing, Place, Versions
from bench.sql import runjson
from bench.sql.names import storable


def meaning(item: Item) -> bytes | None:
    """What a file means besides its bytes, hashed into its identity: an MLPerf JSON means what its place
    says, a machine's metadata describes its folder, by name."""
    if item.match_path.endswith(".json"):
        found = pat.match_first([*pat.SCALING_TREE, *pat.SYSTEMS_TREE], item.match_path)
        return repr(sorted(found.items())).encode() if found else b""
    if item.match_path.rsplit("/", 1)[-1] == "metadata":
        return b"folder " + item.match_path.rsplit("/", 2)[-2].encode() if "/" in item.match_path else b""
    return None


def text(name: str | None) -> str | None:
    """A name as the store keeps it (``storable``), None kept."""
    return None if name is None else storable(name)


class Identities:
    """Every identity the store and this ingest hold, with where each was first read. ``known``: the
    store's sources rows; ``duplicates``: the sources of copies recorded as problems; ``earlier``: sources
    rows of versions that are not in the store (a rebuild's old generation)."""

    def __init__(self, known: list[dict[str, Any]], duplicates: Iterable[str], earlier: list[dict[str, Any]]):
        self._first: dict[str, Place] = {row["source_sha256"]: (row["resolved_path"], row["member"]) for row in known}
        self._first.update(dict.fromkeys(duplicates, ("", None)))
        self._versions = Versions.from_sources([*earlier, *known])
        self._resolved: dict[str, str] = {}  # path -> its absolute path, as stored
        #: (archive, folder) -> run_id of the bench run directory log read from that archive folder
        self._archive_runs: dict[tuple[str, str], str] = {}
        #: Files skipped because their identity is known (in the store, or read before in this ingest).
        self.skipped = 0
        #: (item, problem, identity) of the copies found, for the caller to store.
        self.problems: list[tuple[Item, Problem, str]] = []

    def place(self, item: Item) -> Place:
        """Where a file lives, as its sources row says: the absolute path of the file or archive (worked out
        once per path: an archive's members share it), and the member."""
        path = item.archive or item.source
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = self._resolved[path] = storable(os.path.abspath(path))
        return resolved, text(item.member)

    def hashing(self, where: Place) -> Hashing:
        """A hash of a file at ``where`` that also takes the digests at its earlier versions' lengths."""
        return Hashing(self._versions.sizes(where))

    def identify(self, item: Item, where: Place, sha: str) -> str | None:
        """The identity a file at ``where`` whose hash is ``sha`` is stored under, or None when it is not
        stored again."""
        if item.sidecar is not None and item.archive is not None:  # for the run directory's telemetry.csv
            self._archive_runs[(item.archive, posixpath.dirname(item.member or ""))] = run_id(sha, 0)
        first = self._first.get(sha)
        if first is not None and first != where:  # the same bytes elsewhere: a copy, not this file read again
            return self._copy(item, sha, first, where)
        return None if self._seen(sha, where) else sha

    def _copy(self, item: Item, sha: str, first: Place, where: Place) -> str | None:
        """A file whose bytes were stored from another place. Its identity here is (content, place), so
        ingesting the same folder again finds it known. An MLPerf result file means what its place in the
        results tree says (the summarizer scores every system folder), so it is stored again under that
        identity, with a ``warning``; any other copy is skipped, counted and listed (a ``duplicate``
        problem: the view ``duplicates``)."""
        here = hashlib.sha256(f"{sha}\0{where[0]}\0{where[1] or ''}".encode()).hexdigest()
        if self._seen(here, where):
            return None
        origin = first[0] + (f"!{first[1]}" if first[1] else "")
        if pat.match_first(pat.RESULTS_TREE, item.match_path):
            self.problems.append((item, Problem(
                "warning", f"byte-identical to {origin}: two systems' results are the same bytes; both are scored"),
                here))
            return here
        self.skipped += 1
        self.problems.append((item, Problem("duplicate", f"the same bytes as {origin}, stored from there; skipped"),
                              here))
        return None

    def _seen(self, sha: str, where: Place) -> bool:
        if sha in self._first:
            self.skipped += 1
            return True
        self._first[sha] = where
        return False

    def new_version(self, where: Place, size: int, hashing: Hashing, sha: str) -> tuple[str | None, str | None]:
        """Record a new file's version; (its content_sha256 when that differs from its sha, the source_sha256
        of the earlier version of its place that it extends)."""
        supersedes = self._versions.superseded(where, hashing, sha)
        self._versions.add(where, size, hashing.content_sha256, sha)
        return (hashing.content_sha256 if hashing.content_sha256 != sha else None), supersedes

    def owner(self, item: Item) -> str | None:
        """The run_id of the run a run directory's telemetry.csv was sampled for (None for other files): from
        the log beside it on disk, or from the log already read from the same archive folder."""
        if posixpath.basename(item.match_path) != runjson.TELEMETRY_CSV:
            return None
        if item.archive is None:
            return run_dirs.telemetry_run_id(item.source)
        return self._archive_runs.get((item.archive, posixpath.dirname(item.member or "")))
