"""Shared test fixtures: where the repository's fixtures and the read-only shared corpus live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE_LOGS = REPO / "fixtures" / "logs"
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    """The shared third-party corpus (read-only); skips the test when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"third-party corpus not present at {CORPUS} (tests read it from ../shared)")
    return CORPUS

