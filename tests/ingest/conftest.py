"""Fixtures of the tests of a store on object storage: a moto server (S3 in server mode, from the dev extra, in a
process of its own on 127.0.0.1) and a bucket on it per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto_server import moto_server  # benchmarks/


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """The endpoint of a moto server in its own process (benchmarks/moto_server.py)."""
    pytest.importorskip("moto.server", reason="moto (the dev extra) is not installed")
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3(moto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A new bucket on the server, the AWS variables bench reads set for it (and for child processes), a
    cache of this test's own; returns the store's URL."""
    import boto3

    for key, value in {"AWS_ENDPOINT_URL": moto, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_REGION": "us-east-1", "BENCH_CACHE": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    bucket = "b" + str(abs(hash(request.node.name)))[:12]
    boto3.client("s3").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/store"
