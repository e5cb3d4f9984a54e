"""Atomic file writes, the one way the store, run directories and sweep records are written: a temporary
file in the same directory, fsync, rename over the target, fsync of the directory. A reader sees the old
file or the new one, never a part of either, and a crash leaves at most a stray ``.<name>.<pid>.tmp``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    """``doc`` as indented JSON with sorted keys (values JSON cannot hold written with ``str``), atomically."""
    write_atomic(path, (json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n").encode())
