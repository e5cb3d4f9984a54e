"""A file ingested again after it grew: which earlier version of it the new one extends.

A log ingested while its job still runs, then again once the job is done, is one file in two versions, the
second beginning with every byte of the first. Both stay in the store (nothing is lost), and the sources
row of the later one names the earlier one in ``supersedes``. The analytics views leave out the rows of a
superseded version (``bench.sql.read``): the runs it held are not counted twice, nor as unfinished
(``no_result``) when they had only not finished yet. A file whose start changed (overwritten by another
run) is another log, and both versions count.

A version is known by its place (the absolute path of the file or archive, and the member inside an
archive) and by the SHA-256 of its bytes alone (``content_sha256``; ``source_sha256`` also covers a run
directory's run.json and an MLPerf JSON's place, so a run directory whose run.json changed and whose log
did not also supersedes its earlier version). ``Hashing`` computes the SHA-256 of a file once, taking the
digest at the length of each earlier version of its place on the way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Place = tuple[str, str | None]  # (resolved_path, member), as the sources table stores them


@dataclass(frozen=True, slots=True)
class Version:
    size: int
    content_sha256: str
    source_sha256: str


class Versions:
    """The versions of each place: those in the store, then those this ingest adds."""

    def __init__(self) -> None:
        self._by_place: dict[Place, list[Version]] = {}

    @classmethod
    def from_sources(cls, rows: Iterable[dict[str, Any]]) -> Versions:
        versions = cls()
        for row in rows:
            versions.add((row["resolved_path"], row["member"]), row["size_bytes"],
                         row.get("content_sha256") or row["source_sha256"], row["source_sha256"])
        return versions

    def add(self, place: Place, size: int, content_sha256: str, source_sha256: str) -> None:
        if content_sha256 == source_sha256:  # one string for both (a place per file: 200,000 in a big archive)
            content_sha256 = source_sha256
        self._by_place.setdefault(place, []).append(Version(size, content_sha256, source_sha256))

    def sizes(self, place: Place) -> list[int]:
        """The lengths at which ``Hashing`` must take a digest for a new version of ``place``."""
        return sorted({v.size for v in self._by_place.get(place, ())})

    def superseded(self, place: Place, hashing: Hashing, source_sha256: str) -> str | None:
        """The source_sha256 of the longest earlier version of ``place`` that the new bytes (hashed by
        ``hashing``) begin with, or None; an earlier version that is this very one does not count."""
        best: Version | None = None
        for v in self._by_place.get(place, ()):
            if (v.source_sha256 != source_sha256 and hashing.prefixes.get(v.size) == v.content_sha256
                    and (best is None or v.size > best.size)):
                best = v
        return None if best is None else best.source_sha256


class Hashing:
    """The SHA-256 of a file's bytes, fed in pieces, with the digest at each of ``sizes`` taken on the way
    (``prefixes``: length -> hex digest, for the lengths the bytes reach)."""

    def __init__(self, sizes: Iterable[int] = ()):
        self.hasher = hashlib.sha256()
        self.prefixes: dict[int, str] = {}
        self.content_sha256 = ""
        self._todo = sorted(set(sizes))
        self._pos = 0
        self._take()

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while self._todo and self._pos + len(view) >= self._todo[0]:
            cut = self._todo[0] - self._pos
            self.hasher.update(view[:cut])
            self._pos += cut
            view = view[cut:]
            self._take()
        self.hasher.update(view)
        self._pos += len(view)

    def _take(self) -> None:
        while self._todo and self._todo[0] == self._pos:
            self.prefixes[self._todo.pop(0)] = self.hasher.hexdigest()

    def finish(self, *extra: bytes | None) -> str:
        """The file's identity, its source_sha256: the digest of its bytes, then of ``extra`` (a run
        directory's run.json, an MLPerf JSON's place). ``content_sha256`` keeps the digest of the bytes."""
        self.content_sha256 = self.hasher.hexdigest()
        for more in extra:
            if more is not None:
                self.hasher.update(more)
        return self.hasher.hexdigest()
