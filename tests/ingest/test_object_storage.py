"""A store's tables on object storage: a local S3-compatible server (moto in server mode, from the dev
extra) holds a copy of a store made by ``bench ingest``, and Delta readers read it there, each table at the
version of the store's newest commits row, as the README shows. (A store bench writes on object storage
itself, by many hosts at once: tests/ingest/test_remote_store.py.)"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.ingest.pipeline import ingest
from bench.sql import delta
from bench.sql.store import table_files

FIXTURE_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


@pytest.fixture
def s3() -> Iterator[dict[str, str]]:
    """deltalake's storage options for a bucket ``bench`` on a moto server of this test's own."""
    server_module = pytest.importorskip("moto.server", reason="moto (the dev extra) is not installed")
    boto3 = pytest.importorskip("boto3", reason="boto3 (moto's dependency) is not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket="bench")
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}
    finally:
        server.stop()


def test_a_store_copied_to_s3_is_read_there_in_its_committed_state(tmp_path: Path, s3: dict[str, str]) -> None:
    import boto3
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    st = tmp_path / "st"
    ingest([str(FIXTURE_LOGS / "tf_cnn")], st, workers=0, skip_globs=("*.json",))
    ingest([str(FIXTURE_LOGS / "caffe")], st, workers=0, skip_globs=("*.json",))
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], aws_access_key_id="test",
                          aws_secret_access_key="test", region_name="us-east-1")
    for f in (st / delta.TABLES_DIR).rglob("*"):  # as `aws s3 sync STORE/tables s3://bench/store/tables` does
        if f.is_file():
            client.upload_file(str(f), "bench", f"store/{f.relative_to(st).as_posix()}")

    base = "s3://bench/store/tables"
    commits = DeltaTable(f"{base}/commits", storage_options=s3).to_pyarrow_table(columns=["seq", "versions"]).to_pylist()
    versions = dict(max(commits, key=lambda row: row["seq"])["versions"])
    assert len(commits) == 2 and versions == delta.snapshot(st).versions
    remote = DeltaTable(f"{base}/runs", version=versions["runs"], storage_options=s3).to_pyarrow_table(
        columns=["run_id", "images_per_sec"]).to_pylist()
    local = [r for f in table_files(st, "runs") for r in pq.read_table(f, columns=["run_id", "images_per_sec"]).to_pylist()]
    assert sorted(remote, key=str) == sorted(local, key=str) and len(local) == 20 + 9
    steps = DeltaTable(f"{base}/steps", version=versions["steps"], storage_options=s3).to_pyarrow_table()
    assert steps.num_rows == sum(pq.read_metadata(f).num_rows for f in table_files(st, "steps")) > 0
