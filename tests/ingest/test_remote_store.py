"""A store on object storage (bench.sql.remote) against a local S3-compatible server (moto in server mode,
from the dev extra, in a process of its own on 127.0.0.1): what it holds equals a local ingest of the same
logs; eight writers and a compaction at once end as one serial ingest, with readers seeing committed states
only, through bench and through each table's Delta log; a writer killed at ten points leaves the store and
its Delta logs as before or as after; S3's errors are one line each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import fleet_sim  # benchmarks/ (tests/conftest.py)
import pytest
from logtools import KILL_AT_EVENT, bench_counts, delta_counts
from moto_server import moto_server  # benchmarks/

from bench.analytics.query import run_sql
from bench.ingest.pipeline import ingest
from bench.sql import projection, remote
from bench.sql.errors import BenchError
from bench.sql.layout import TABLE_NAMES

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_LOGS = ROOT / "fixtures" / "logs"
STATE = ("SELECT count(*), (SELECT count(*) FROM steps), (SELECT count(*) FROM telemetry), "
         "(SELECT count(*) FROM sources), round(sum(images_per_sec), 6) FROM runs")


def _state(store: str | Path) -> tuple[int, ...]:
    return tuple(run_sql(Path(store), STATE)[1][0])  # type: ignore[arg-type]


def _logs_follow_the_commits(store: str) -> None:
    """Every table's Delta log holds the committed state, each commits version once at most, in order."""
    from deltalake import DeltaTable

    r = remote.Remote(store)
    assert projection.projected(r) == r.state().version
    counts = bench_counts(store)
    assert delta_counts(store) == counts
    try:
        import polars as pl
    except ImportError:  # the dev extra's
        pass
    else:
        assert {t: pl.scan_delta(f"{store}/tables/{t}", storage_options=r.options).select(pl.len()).collect().item()
                for t in TABLE_NAMES} == counts
    for t in TABLE_NAMES:
        history = DeltaTable(f"{store}/tables/{t}", storage_options=r.options).history()
        seqs = [projection.seq_of(h) for h in sorted(history, key=lambda h: int(h["version"]))]
        assert seqs == sorted(set(seqs)), (t, seqs)


BENCH = [sys.executable, "-c", "import sys; from bench.runner.cli import main; sys.argv[0] = 'bench'; main()"]


def _bench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BENCH, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_store_on_s3_holds_what_a_local_ingest_holds(tmp_path: Path, s3: str) -> None:
    from deltalake import DeltaTable

    from bench.ingest.remote_ingest import ingest_into

    logs = [str(FIXTURE_LOGS / "tf_cnn"), str(FIXTURE_LOGS / "caffe")]
    ingest(logs, tmp_path / "local", workers=0, skip_globs=("*.json",))
    first = ingest_into(logs[:1], s3, workers=0, skip_globs=("*.json",))
    second = ingest_into(logs, s3, workers=0, skip_globs=("*.json",))
    assert (first.runs_added, second.runs_added) == (20, 9)  # the tf_cnn logs are not stored twice
    local = _state(tmp_path / "local")
    assert _state(s3) == local and local[0] == 29
    ids = "SELECT run_id, status, images_per_sec FROM runs ORDER BY ALL"
    assert run_sql(Path(s3), ids)[1] == run_sql(tmp_path / "local", ids)[1]

    done = _bench("ingest", "--compact", "--store", s3)
    assert done.returncode == 0 and "files merged" in done.stdout, done.stderr
    store = remote.Remote(s3)
    assert len(store.state().files("runs")) == 1 and _state(s3) == local
    # the commits table's three one-row files merged into one, each row's seq kept
    assert [(r["seq"], r["kind"]) for r in store.state().rows] == [(1, "ingest"), (2, "ingest"), (3, "compact")]
    assert len(DeltaTable(store.commits_uri, storage_options=store.options).file_uris()) == 1
    os.environ["BENCH_CACHE"] = str(tmp_path / "cold")  # read again from S3, every file checked
    assert _state(s3) == local
    assert _bench("ingest", "--check", "--store", s3).returncode == 0


def test_a_damaged_object_is_named_and_left_out(tmp_path: Path, s3: str) -> None:
    import boto3

    from bench.ingest.remote_ingest import ingest_into

    ingest_into([str(FIXTURE_LOGS / "tf_cnn")], s3, workers=0, skip_globs=("*.json",))
    ingest_into([str(FIXTURE_LOGS / "caffe")], s3, workers=0, skip_globs=("*.json",))
    store = remote.Remote(s3)
    (key,) = [k for k, _ in store.state().rows[0]["checksums"] if k.startswith("runs/")]  # tf_cnn's runs
    bucket, _, prefix = s3[5:].partition("/")
    boto3.client("s3").put_object(Bucket=bucket, Key=f"{prefix}/tables/{key}", Body=b"not the bytes committed")
    os.environ["BENCH_CACHE"] = str(tmp_path / "cold")
    check = _bench("ingest", "--check", "--store", s3)
    assert check.returncode == 1 and key.split("/")[1] in check.stderr and "SHA-256" in check.stderr
    out = _bench("sql", "SELECT count(*) FROM runs", "--store", s3)
    assert out.returncode == 0 and "warning: store file" in out.stderr and key.split("/")[1] in out.stderr
    assert "left out; ingest its sources into a new store" in out.stderr and "│ 9 " in out.stdout  # caffe's 9 runs, not tf_cnn's 20


#: An ingest of argv[2:] into the store at argv[1], in a process of its own.
WRITER = "import sys; from bench.ingest.remote_ingest import ingest_into; ingest_into(sys.argv[2:], sys.argv[1], workers=0)"


@pytest.mark.slow
def test_the_servers_conditional_writes_are_atomic_as_on_s3(s3: str) -> None:
    """Eight writers racing to create one key on the tests' S3 (benchmarks/moto_server.py): one wins, seven are
    refused with PreconditionFailed, in each of 20 rounds. The store's commits and Delta logs rest on that race;
    moto alone checks and then writes, so nothing else here would show an unrefereed one."""
    import threading

    import boto3
    from botocore.exceptions import ClientError

    client, bucket = boto3.client("s3"), s3.removeprefix("s3://").split("/")[0]

    def put(i: int, key: str, start: threading.Barrier, won: list[int], refused: list[str]) -> None:
        start.wait()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=str(i).encode() * 100_000, IfNoneMatch="*")
            won.append(i)
        except ClientError as e:
            refused.append(e.response["Error"]["Code"])

    for r in range(20):
        start, won, refused = threading.Barrier(8), list[int](), list[str]()
        threads = [threading.Thread(target=put, args=(i, f"race/{r}", start, won, refused)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and refused == ["PreconditionFailed"] * 7, (r, won, refused)
        body = client.get_object(Bucket=bucket, Key=f"race/{r}")["Body"].read()
        assert body == str(won[0]).encode() * 100_000  # the winner's bytes


def test_eight_writers_and_compactions_at_once_end_as_one_serial_ingest(tmp_path: Path, s3: str) -> None:
    fleet_sim.generate(tmp_path / "runs", hosts=40, runs=3, faults=0)
    dirs = sorted(str(d) for d in (tmp_path / "runs").iterdir())
    assert len(dirs) == 120
    ingest([str(tmp_path / "runs")], tmp_path / "serial", workers=0)
    serial = _state(tmp_path / "serial")
    per_run = [n // 120 for n in serial[1:4]]  # steps, telemetry samples, sources (output.log, telemetry.csv)
    assert serial[:4] == (120, *(120 * n for n in per_run)) and min(per_run) > 0

    logs = [(tmp_path / f"writer-{i}.err").open("w") for i in range(8)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, s3, *dirs[i::8]], stderr=logs[i]) for i in range(8)]
    compactions = 0
    states, compacted = set(), set()
    try:
        while any(w.poll() is None for w in writers):
            if remote.Remote(s3).exists():
                runs, steps, telemetry, sources, _ = state = _state(s3)  # a committed state: whole ingests only
                assert runs % 15 == 0 and [steps, telemetry, sources] == [runs * n for n in per_run]
                states.add(state)
                if projection.projected(remote.Remote(s3)) >= 0:  # each Delta table: whole ingests only
                    delta = delta_counts(s3, ("runs", "steps", "telemetry"))
                    assert delta["runs"] % 15 == 0 and delta["steps"] % per_run[0] == 0, delta
                    assert delta["telemetry"] % per_run[1] == 0, delta
                if runs >= 30 and runs not in compacted:  # two ingests or more, each a file to merge, and new
                    compacted.add(runs)  # (not a cadence: a compaction of the empty store outlasted the writers)
                    done = _bench("ingest", "--compact", "--store", s3)
                    assert done.returncode == 0, done.stderr
                    compactions += "files merged" in done.stdout
    finally:  # a failed check leaves no writer running into the next test
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
        for log in logs:
            log.close()
    for i, w in enumerate(writers):
        assert w.wait() == 0, (tmp_path / f"writer-{i}.err").read_text()
    assert _bench("ingest", "--compact", "--store", s3).returncode == 0
    assert _state(s3) == serial
    _logs_follow_the_commits(s3)  # eight projectors raced on each table's log (the server's writes atomic, as S3's)
    assert len(states) >= 2 and compactions >= 1, (states, compactions)  # readers and compactions met the writers
    ids = "SELECT run_id, images_per_sec FROM runs ORDER BY ALL"
    assert run_sql(Path(s3), ids)[1] == run_sql(tmp_path / "serial", ids)[1]


#: Runs an ingest (argv[3:]) or a compaction into the store at argv[2], SIGKILLed at its Nth event
#: (argv[1]; 0: never), and prints how many events it met: before and after each upload, each commits
#: row written, each conditional commit, each state read and each delete.
KILLER = KILL_AT_EVENT + """
import tempfile
from pathlib import Path
from deltalake import DeltaTable
from bench.sql import objstore, remote
store, paths = sys.argv[2], sys.argv[3:]
for owner, name in ((objstore, "upload_all"), (remote.Remote, "_write_row"), (remote.Remote, "state"),
                    (remote.Remote, "_delete"), (DeltaTable, "create_write_transaction")):
    setattr(owner, name, hooked(getattr(owner, name)))
if paths:
    from bench.ingest.remote_ingest import ingest_into
    ingest_into(paths, store, workers=0)
else:
    with tempfile.TemporaryDirectory() as tmp:
        remote.compact(remote.Remote(store), Path(tmp), retention_hours=0)
print(count[0])
"""


def _killed_at(n: int, store: str, paths: list[str], tmp: Path) -> int:
    # its temporary folders in the test's (a writer SIGKILLed cannot remove its staging store from /tmp)
    proc = subprocess.run([sys.executable, "-c", KILLER, str(n), store, *paths], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TMPDIR": str(tmp)})
    if n:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return n
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ingest", "compact"])
def test_a_writer_killed_at_ten_points_leaves_the_store_as_before_or_after(tmp_path: Path, s3: str, op: str) -> None:
    from bench.ingest.remote_ingest import ingest_into

    logs = [str(FIXTURE_LOGS / "tf_cnn"), str(FIXTURE_LOGS / "caffe")]
    base = s3.rsplit("/", 1)[0]
    reference = f"{base}/reference"
    first = logs[:1] if op == "ingest" else logs[1:]  # a compaction has two files a table to merge
    ingest_into(first, reference, workers=0)
    if op == "compact":
        ingest_into(logs[:1], reference, workers=0)
    before = _state(reference)
    events = _killed_at(0, reference, logs if op == "ingest" else [], tmp_path)
    after = _state(reference)
    assert after != before if op == "ingest" else after == before
    points = sorted({max(1, round(events * k / 11)) for k in range(1, 11)})
    assert len(points) == 10, events
    for i, n in enumerate(points):
        store = f"{base}/killed-{i}"
        ingest_into(first, store, workers=0)
        if op == "compact":
            ingest_into(logs[:1], store, workers=0)
        _killed_at(n, store, logs if op == "ingest" else [], tmp_path)
        assert _state(store) in (before, after), f"killed at event {n} of {events}"
        assert delta_counts(store, ("runs",))["runs"] in (before[0], after[0]), f"killed at event {n} of {events}"
        _killed_at(0, store, logs if op == "ingest" else [], tmp_path)  # run again: the store ends as after
        assert _state(store) == after, f"killed at event {n} of {events}"
        _logs_follow_the_commits(store)


def test_errors_are_one_line_and_commit_nothing(tmp_path: Path, s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from bench.ingest.remote_ingest import ingest_into

    logs = str(FIXTURE_LOGS / "caffe")
    with socket.socket() as closed:  # bound and never listening: the port refuses every connection while it is held
        closed.bind(("127.0.0.1", 0))
        cases = {
            "bucket": (["ingest", logs, "--store", "s3://no-such-bucket/store"], {},
                       "the bucket no-such-bucket does not exist"),
            "endpoint": (["ingest", logs, "--store", s3],
                         {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed.getsockname()[1]}"}, "the endpoint cannot be reached"),
        }
        for name, (args, env, message) in cases.items():
            proc = subprocess.run([*BENCH, *args], capture_output=True, text=True,
                                  timeout=120, env={**os.environ, **env})
            assert proc.returncode == 1 and message in proc.stderr, (name, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
    assert not remote.Remote(s3).exists()

    ingest_into([str(FIXTURE_LOGS / "tf_cnn")], s3, workers=0)
    before = _state(s3)
    real = remote.Remote.state
    other = remote.Remote(s3)

    def raced(self: remote.Remote, version: int | None = None) -> remote.State:  # another writer commits first, always
        state = real(self, version)
        if version is None and not getattr(raced, "inside", False):
            raced.inside = True  # type: ignore[attr-defined]
            try:
                other.commit("ingest", {})
            finally:
                raced.inside = False  # type: ignore[attr-defined]
        return state

    monkeypatch.setattr(remote.Remote, "state", raced)
    monkeypatch.setattr(remote, "BACKOFF_S", 0.0)
    monkeypatch.setattr(remote, "ATTEMPTS", 5)
    with pytest.raises(BenchError, match="other writers committed first 5 times in a row; nothing of this one was committed"):
        ingest_into([logs], s3, workers=0)
    monkeypatch.setattr(remote.Remote, "state", real)
    assert _state(s3) == before


def test_the_same_files_ingested_by_two_hosts_at_once_are_stored_once(tmp_path: Path, s3: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.ingest.remote_ingest import ingest_into

    logs = [str(FIXTURE_LOGS / "caffe")]  # 18 files: 9 logs and their .expected.json, each a source
    real = remote.Remote.upload

    def other_host_first(self: remote.Remote, files: dict[str, Path]) -> None:
        monkeypatch.setattr(remote.Remote, "upload", real)
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "other-host"))
        assert ingest_into(logs, s3, workers=0).runs_added == 9  # commits while this ingest is under way
        real(self, files)

    monkeypatch.setattr(remote.Remote, "upload", other_host_first)
    with pytest.raises(BenchError, match="another writer committed 18 of these sources while this ingest ran"):
        ingest_into(logs, s3, workers=0)
    assert _state(s3)[0] == 9
    assert ingest_into(logs, s3, workers=0).runs_added == 0 and _state(s3)[0] == 9


def test_wrong_credentials_are_one_line(tmp_path: Path) -> None:
    """A moto server that checks credentials (INITIAL_NO_AUTH_ACTION_COUNT=0): every key is unknown to it."""
    pytest.importorskip("moto.server", reason="moto (the dev extra) is not installed")
    with moto_server({**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as endpoint:
        proc = subprocess.run(
            [*BENCH, "ingest", str(FIXTURE_LOGS / "caffe"), "--store", "s3://bench/store"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "wrong",
                 "AWS_SECRET_ACCESS_KEY": "wrong", "AWS_REGION": "us-east-1", "BENCH_CACHE": str(tmp_path / "c")})
    assert proc.returncode == 1 and "access denied" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_deleted_newest_commits_log_object_is_a_warning_not_an_older_answer(tmp_path: Path, s3: str) -> None:
    """The writers' marks (``commits/_seq/<seq>``) are a second record of the newest
    version, so the log object deleted under a reader is said on every read and by --check, and a writer
    refuses to take the lost version's place; a cut commits row object is one line, never a traceback."""
    import boto3

    from bench.ingest.remote_ingest import ingest_into

    ingest_into([str(FIXTURE_LOGS / "tf_cnn")], s3, workers=0, skip_globs=("*.json",))
    ingest_into([str(FIXTURE_LOGS / "caffe")], s3, workers=0, skip_globs=("*.json",))
    assert _bench("sql", "SELECT count(*) FROM runs", "--store", s3).stderr == ""
    bucket, _, prefix = s3[5:].partition("/")
    client = boto3.client("s3")
    logs = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/tables/commits/_delta_log/")
                  ["Contents"] if o["Key"].endswith(".json"))
    assert logs[-1].endswith("00000000000000000002.json")
    client.delete_object(Bucket=bucket, Key=logs[-1])
    out = _bench("sql", "SELECT count(*) FROM runs", "--store", s3)
    assert out.returncode == 0 and "│ 20 " in out.stdout  # tf_cnn's 20 runs: version 1's answer ...
    assert "lacks version(s) 2 (a log object deleted)" in out.stderr and "this answer is of version 1" in out.stderr
    check = _bench("ingest", "--check", "--store", s3)
    assert check.returncode == 1 and "lacks version(s) 2" in check.stderr
    again = _bench("ingest", str(FIXTURE_LOGS / "tf_cnn"), "--store", s3)
    assert again.returncode == 1 and "nothing was committed" in again.stderr and "Traceback" not in again.stderr

    (row,) = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/tables/commits/commit-0000000001")
              ["Contents"]]
    body = client.get_object(Bucket=bucket, Key=row)["Body"].read()
    client.put_object(Bucket=bucket, Key=row, Body=body[: len(body) // 2])
    os.environ["BENCH_CACHE"] = str(tmp_path / "cold")
    for args in (("sql", "SELECT count(*) FROM runs"), ("ingest", "--check")):
        out = _bench(*args, "--store", s3)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "is damaged" in out.stderr, out.stderr
