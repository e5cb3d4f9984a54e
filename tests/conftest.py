"""Shared test fixtures: where the repository's fixtures and the read-only shared corpus live."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))  # the harness's helpers the tests share (benchmarks/README.md)
FIXTURE_LOGS = REPO / "fixtures" / "logs"
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    """The shared third-party corpus (read-only); skips the test when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"third-party corpus not present at {CORPUS} (tests read it from ../shared)")
    return CORPUS



LAMBDA_TARBALL = CORPUS / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
#: The README's --path-patterns for Lambda's archive (its throughput logs and its thermal telemetry, each with
#: and without a variant), read from the README itself: the numbers the README quotes come from its command.
LAMBDA_PATTERNS = re.findall(r"--path-pattern '(\{system\}\.logs/[^']+)'",
                             (Path(__file__).resolve().parents[1] / "README.md").read_text())
assert len(LAMBDA_PATTERNS) == 4 and sum("/thermal/" in p for p in LAMBDA_PATTERNS) == 2, LAMBDA_PATTERNS


@pytest.fixture(scope="session")
def lambda_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Lambda's archive ingested once for the session (tests only read it); skips when it is absent."""
    if not LAMBDA_TARBALL.is_file():
        pytest.skip(f"Lambda corpus not present at {LAMBDA_TARBALL} (read from ../shared)")
    from bench.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("lambda") / "store"
    ingest([str(LAMBDA_TARBALL)], root, path_patterns=LAMBDA_PATTERNS, workers=0)
    return root
