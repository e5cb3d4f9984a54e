"""Archives are streamed, so the members of one run directory (``output.log``, ``run.json``,
``telemetry.csv``) meet here: ``pair_members`` gives each ``x/output.log`` its ``x/run.json`` as
``sidecar`` and passes the folder's telemetry.csv on after the paired log (see ``bench.ingest.run_dirs``
for the order and the limits).
"""

from __future__ import annotations

import dataclasses
import io
import posixpath
from collections.abc import Generator, Iterable, Iterator

from bench.ingest.items import READ_ERRORS, Item
from bench.ingest.run_dirs import HOLD_LOG_BYTES, MAX_RUN_JSON_BYTES
from bench.sql.runjson import OUTPUT_LOG, RUN_JSON, TELEMETRY_CSV

_RUN_FILES = (OUTPUT_LOG, RUN_JSON, TELEMETRY_CSV)


def pair_members(items: Iterable[Item]) -> Iterator[Item]:
    """Archive members in, with each ``x/output.log`` carrying its ``x/run.json`` as ``sidecar`` (and
    that run.json not yielded); other members pass through. See the module docstring for the order."""
    held: _Held | None = None
    for item in items:
        folder, name = posixpath.split(item.member or "")
        if held is not None and (item.member is None or not held.covers(folder, name)):
            yield from held.flush()
            held = None
        if item.member is None or item.reader is None or name not in _RUN_FILES:
            yield item
            continue
        held = held or _Held(folder)
        yield from held.add(item, name)
    if held is not None:
        yield from held.flush()


_RUN_FILES = (OUTPUT_LOG, RUN_JSON, TELEMETRY_CSV)


@dataclasses.dataclass
class _Held:
    """The members of one archive folder waiting for their partner (and its telemetry for the pair)."""

    folder: str
    log: Item | None = None
    meta: bytes | None = None
    meta_item: Item | None = None
    telemetry: Item | None = None
    paired: bool = False

    def covers(self, folder: str, name: str) -> bool:
        """Still inside this folder (members of its subfolders other than a run's files pass by)."""
        return folder == self.folder or (folder.startswith(self.folder + "/") and name not in _RUN_FILES)

    def add(self, item: Item, name: str) -> Iterator[Item]:
        if name == TELEMETRY_CSV:
            yield from self._add_telemetry(item)
            return
        if name == RUN_JSON:
            if item.size > MAX_RUN_JSON_BYTES:
                yield item
                return
            try:
                data = item.reader.read() if item.reader else b""
            except READ_ERRORS as e:
                yield dataclasses.replace(item, reader=None, error=f"{type(e).__name__}: {e}")
                return
            if self.log is not None:
                yield dataclasses.replace(self.log, sidecar=data)
                self.log = None
                yield from self._paired()
            else:
                yield from self._release_meta()
                self.meta, self.meta_item = data, item
            return
        if self.meta is not None:
            yield dataclasses.replace(item, sidecar=self.meta)
            self.meta = self.meta_item = None
            yield from self._paired()
        elif item.size > HOLD_LOG_BYTES:
            yield item
        else:
            if self.log is not None:
                yield self.log
            self.log = yield from _in_memory(item)

    def _add_telemetry(self, item: Item) -> Iterator[Item]:
        """Hold the folder's telemetry.csv until its run's log has gone by (pass it on at once when it
        already has, or when it is too large to hold)."""
        if self.paired or item.size > HOLD_LOG_BYTES:
            yield item
            return
        yield from self._release_telemetry()
        self.telemetry = yield from _in_memory(item)

    def _paired(self) -> Iterator[Item]:
        self.paired = True
        yield from self._release_telemetry()

    def _release_telemetry(self) -> Iterator[Item]:
        if self.telemetry is not None:
            yield self.telemetry
            self.telemetry = None

    def _release_meta(self) -> Iterator[Item]:
        if self.meta is not None and self.meta_item is not None:
            yield dataclasses.replace(self.meta_item, reader=io.BytesIO(self.meta))
        self.meta = self.meta_item = None

    def flush(self) -> Iterator[Item]:
        """What never met its partner, as plain members."""
        if self.log is not None:
            yield self.log
            self.log = None
        yield from self._release_meta()
        yield from self._release_telemetry()


def _in_memory(item: Item) -> Generator[Item, None, Item | None]:
    """Read a member whole, to hold it past the stream's position: returns the item with an in-memory
    reader, or yields it as a read_error item (reader None) and returns None when it cannot be read."""
    try:
        return dataclasses.replace(item, reader=io.BytesIO(item.reader.read() if item.reader else b""))
    except READ_ERRORS as e:
        yield dataclasses.replace(item, reader=None, error=f"{type(e).__name__}: {e}")
        return None
