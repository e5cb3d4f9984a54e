"""The optional C extension ``bench.ingest._native`` (ingest/_native.c), or None when the install had no C
compiler: the one place that imports it. Its users fall back to their pure-Python paths without it."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


ext = _optional("bench.ingest._native")


def pure_python() -> bool:
    """Whether ``BENCH_PURE_PYTHON=1`` asks for the pure-Python paths only: no C scanner and no format's
    fast line (the tests compare both paths this way)."""
    return os.environ.get("BENCH_PURE_PYTHON") == "1"
