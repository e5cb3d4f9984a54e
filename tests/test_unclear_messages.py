"""Messages that once said too little (an empty --accept, a run without started_at, a string schema_version, no credentials): each says what is wrong and what to do, with the documented exit
code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logtools import tf_cnn_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql.objstore import failure


@pytest.fixture(scope="module")
def unstamped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ok run whose log stamps nothing: no started_at."""
    base = tmp_path_factory.mktemp("unstamped")
    (base / "a.log").write_text(tf_cnn_log(20))
    ingest([str(base / "a.log")], base / "st", workers=0)
    return base / "st"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def run_id(store: Path) -> str:
    _, out = run("sql", "SELECT run_id, started_at FROM runs", "--format", "json", "--store", str(store))
    (row,) = json.loads(out)
    assert row["started_at"] is None
    return str(row["run_id"])


def test_accept_of_an_empty_run_id_is_a_usage_error(unstamped: Path) -> None:
    code, out = run("changes", "--accept", "", "--why", "x", "--store", str(unstamped))
    assert code == 2 and "--accept needs a run id (bench changes names each change's run)" in out


def test_accept_of_a_run_without_a_start_says_so(unstamped: Path) -> None:
    code, out = run("changes", "--accept", run_id(unstamped), "--why", "x", "--store", str(unstamped))
    assert code == 2
    assert "has no started_at, so it has no place in its series (order the runs by another column with --order-by" in out


def test_check_whose_only_run_has_no_start_judges_nothing_and_exits_3(unstamped: Path) -> None:
    code, out = run("check", "--where", "true", "--store", str(unstamped))
    assert code == 3, out
    assert "1 run(s) match --where, but none is a point of a series" in out and "exit 3" in out


def test_a_schema_version_that_is_text_is_a_damaged_file(tmp_path: Path, unstamped: Path) -> None:
    import shutil

    store = tmp_path / "st"
    shutil.copytree(unstamped, store)
    meta = json.loads((store / "STORE.json").read_text())
    (store / "STORE.json").write_text(json.dumps({**meta, "schema_version": str(meta["schema_version"])}))
    code, out = run("sql", "SELECT 1", "--store", str(store))
    assert code == 1
    assert f"is damaged: its schema_version is '{meta['schema_version']}', not a whole number" in out


def test_s3_without_any_credentials_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    error = failure("s3://bucket/store", OSError("AWS Error UNKNOWN (HTTP status 500) during HeadBucket operation"),
                    "reading STORE.json")
    assert str(error).startswith("store s3://bucket/store: reading STORE.json failed: no AWS credentials were found "
                                 "(set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")  # with credentials, what the service said
    assert "no AWS credentials" not in str(failure("s3://bucket/store", OSError("AWS Error UNKNOWN"), "reading"))


@pytest.mark.parametrize(("said", "why"), [
    # a bucket whose name holds 403 (the remote-store tests name theirs from a hash): the endpoint was unreachable
    ("When reading information for key 'store/STORE.json' in bucket 'b540324910015': AWS Error NETWORK_CONNECTION "
     "during HeadObject operation: curlCode: 7, Could not connect to server", "the endpoint cannot be reached"),
    ("Failed to connect to 127.0.0.1:40312 after 401 ms: Could not connect to server", "the endpoint cannot be reached"),
    ("AWS Error UNKNOWN (HTTP status 403) during HeadObject operation: No response body.", "access denied"),
    ("Generic S3 error: Error performing GET http://x/b/k in 2ms - Server returned non-2xx status code: 401 Unauthorized",
     "access denied"),
])
def test_a_status_code_is_read_as_a_status_not_as_digits_of_a_name(said: str, why: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    assert f"reading STORE.json failed: {why}" in str(failure("s3://b540324910015/store", OSError(said),
                                                              "reading STORE.json"))


def test_a_damaged_store_json_is_made_again_by_rebuild(tmp_path: Path, unstamped: Path) -> None:
    """One flipped byte in STORE.json made every command, --rebuild included, refuse; what it
    holds is known from the tables, so --rebuild writes it again and every run is there."""
    import shutil

    store = tmp_path / "st"
    shutil.copytree(unstamped, store)
    raw = bytearray((store / "STORE.json").read_bytes())
    raw[raw.index(b"schema_version") + 2] ^= 0x20  # 'h' -> 'H': the key is gone
    (store / "STORE.json").write_bytes(bytes(raw))
    code, out = run("sql", "SELECT count(*) FROM runs", "--store", str(store))
    assert code == 1 and f"run `bench ingest --rebuild --store {store}` to write it again from the tables" in out
    code, out = run("ingest", "--rebuild", "--store", str(store))
    assert code == 0, out
    assert json.loads((store / "STORE.json").read_text())["schema_version"] == 6
    code, out = run("sql", "SELECT count(*) AS n FROM runs", "--format", "json", "--store", str(store))
    assert code == 0 and json.loads(out) == [{"n": 1}]
