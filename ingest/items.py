"""What the ingest reads: one file or archive member (``Item``) and the reader it is read through."""

from __future__ import annotations

import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Protocol

#: What reading a file or an archive member may raise; the ingest turns each into a ``read_error`` problem.
READ_ERRORS = (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile, RuntimeError)


class Reader(Protocol):
    """What the ingest reads a file through: an open file, a zip member or a streamed tar member."""

    def read(self, n: int = -1, /) -> bytes: ...


@dataclass
class Item:
    """One file to ingest.

    ``source`` is the path as given (for an archive member ``archive::member``); ``match_path`` is what
    ``--path-pattern`` templates match (the file path, or the member path inside its archive).
    ``error`` is set when the item could not be opened (its reader is then None).
    """

    source: str
    match_path: str
    size: int
    reader: Reader | None
    archive: str | None = None
    member: str | None = None
    error: str | None = None
    sidecar: bytes | None = None  # the run.json of the run directory this output.log belongs to
