"""A store on object storage read without bench (bench.sql.projection): each data table is a Delta Lake table
whose log follows the commits table, read by deltalake, Polars, DuckDB (through the file list) and Daft with the
counts bench sql gives, and the README's recipe exits cleanly in fresh interpreters; a writer stopped before its
projection, a store written before the projection existed (also when its conversion is killed) and a damaged
table log are brought up by the next write or by --compact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from logtools import bench_counts, delta_counts, delta_rows_of

from bench.analytics.query import run_sql
from bench.ingest.remote_ingest import ingest_into
from bench.sql import projection, remote
from bench.sql.layout import TABLE_NAMES

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"
SKIP = ("*.json",)


def _seqs(store: str, table: str) -> list[int]:
    from deltalake import DeltaTable

    dt = DeltaTable(f"{store}/tables/{table}", storage_options=remote.Remote(store).options)
    return sorted(projection.seq_of(h) for h in dt.history())


def test_each_table_on_s3_is_a_delta_table_with_the_rows_bench_reads(s3: str, tmp_path: Path) -> None:
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

    from bench.sql.remote import compact

    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    ingest_into([str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)
    counts = bench_counts(s3)
    assert counts["runs"] == 29 and counts["steps"] > 0 and counts["sources"] > 0  # 20 tf_cnn runs, 9 caffe
    assert delta_counts(s3) == counts
    store = remote.Remote(s3)
    assert projection.projected(store) == store.state().version == 2
    assert _seqs(s3, "runs") == [-1, 1, 2]  # made, then one log version per ingest

    assert compact(store, tmp_path) > 0
    state = store.state()
    assert len(state.files("runs")) == 1 and bench_counts(s3) == counts
    assert delta_counts(s3) == counts  # compacted: no version counts a row twice
    # versions 3 and 4 of the commits table: the compaction's row, then its merge of the commits files
    assert state.version == 4 and _seqs(s3, "runs") == [-1, 1, 2, 4] and projection.projected(store) == 4
    # as Delta's OPTIMIZE says it, for a streaming reader: the compaction changed no row, the ingests did
    def data_change(version: int) -> set[tuple[str, bool]]:
        with store.fs.open_input_stream(store.path(f"runs/_delta_log/{version:020d}.json")) as f:
            lines = [json.loads(line) for line in f.read().decode().splitlines()]
        return {(kind, a[kind]["dataChange"]) for a in lines for kind in ("add", "remove") if kind in a}

    assert data_change(1) == data_change(2) == {("add", True)}
    assert data_change(3) == {("add", False), ("remove", False)}
    # the replaced files are still in the folder (until vacuum), the log no longer names them
    listed = store.fs.get_file_info(pafs.FileSelector(store.path("runs")))
    assert sum(i.base_name.endswith(".parquet") for i in listed) == 3

    # every table at one committed state: the version that held commits version 2, before the compaction
    before = {t: projection.version_at(DeltaTable(f"{s3}/tables/{t}", storage_options=store.options), 2)
              for t in TABLE_NAMES}
    assert None not in before.values() and before["runs"] == 2
    assert delta_counts(s3, version_of=before) == counts  # type: ignore[arg-type]


def test_polars_and_duckdb_read_the_tables_as_bench_does(s3: str) -> None:
    pl = pytest.importorskip("polars", reason="polars (the dev extra) is not installed")
    import duckdb
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    ingest_into([str(LOGS / "tf_cnn"), str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)
    counts = bench_counts(s3)
    opts = remote.Remote(s3).options
    for table in TABLE_NAMES:
        uri = f"{s3}/tables/{table}"
        assert pl.scan_delta(uri, storage_options=opts).select(pl.len()).collect().item() == counts[table], table
        files = [u.removeprefix("s3://") for u in DeltaTable(uri, storage_options=opts).file_uris()]
        rows = pq.read_table(files, filesystem=remote.Remote(s3).fs) if files else None  # DuckDB over the log's files
        con = duckdb.connect()
        got = con.execute("SELECT count(*) FROM rows").fetchone() if rows is not None else (0,)
        assert got == (counts[table],), table
    ids = pl.scan_delta(f"{s3}/tables/runs", storage_options=opts).select("run_id").collect()["run_id"].sort()
    assert ids.to_list() == sorted(r[0] for r in run_sql(Path(s3), "SELECT run_id FROM runs")[1])


def test_daft_reads_every_table_as_bench_does(s3: str, moto: str, tmp_path: Path) -> None:
    """Daft (the engines extra), an engine that spreads a query over a cluster, reads each table's latest version
    and a table at an older one; in a process of its own, as Daft's threads outlive a query (the README says
    what that needs at exit)."""
    import json
    import subprocess
    import sys

    pytest.importorskip("daft", reason="daft (the engines extra, in make test's lock) is not installed")
    from bench.sql.remote import compact

    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    ingest_into([str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)
    assert compact(remote.Remote(s3), tmp_path) > 0
    code = f"""
import gc, json, daft
from daft.io import IOConfig, S3Config
io = IOConfig(s3=S3Config(endpoint_url={moto!r}, region_name="us-east-1", use_ssl=False, key_id="test", access_key="test"))
counts = {{t: daft.read_deltalake(f"{s3}/tables/{{t}}", io_config=io).count_rows() for t in {list(TABLE_NAMES)!r}}}
counts["runs at version 1"] = daft.read_deltalake("{s3}/tables/runs", io_config=io, version=1).count_rows()
gc.collect()
print(json.dumps(counts))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = bench_counts(s3)
    assert json.loads(done.stdout) == {**counts, "runs at version 1": 20} and counts["runs"] == 29  # version 1: tf_cnn


def _recipe(readme: str) -> list[str]:
    """The README's recipe for a store on object storage: the committed state, then each read (a paragraph
    that begins with a comment)."""
    part = readme.split("**Reading a store on object storage without bench.**")[1]
    return re.split(r"\n\n(?=# )", part.split("```python\n")[1].split("```")[0].strip())


def test_each_paragraph_of_the_s3_recipe_exits_cleanly_in_a_fresh_interpreter(s3: str, moto: str) -> None:
    """The README's S3 recipe, as a user copies it: its first paragraph (the committed state) with each read
    after it on its own, and the whole, 20 times each in a fresh interpreter whose environment holds only the
    keys: every run exits 0 and prints the counts bench sql gives."""
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from bench.sql.remote import compact

    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    ingest_into([str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)
    compact(remote.Remote(s3), Path(os.environ["BENCH_CACHE"]))
    readme = (ROOT / "README.md").read_text().replace("http://127.0.0.1:9000", moto)
    readme = readme.replace("127.0.0.1:9000", moto.removeprefix("http://")).replace("bucket/prefix", s3.removeprefix("s3://"))
    state, pyarrow_read, duckdb_read, polars_read, daft_read = _recipe(readme)
    runs, steps = (bench_counts(s3)[t] for t in ("runs", "steps"))
    per_model = run_sql(Path(s3), "SELECT model, count(*) AS runs FROM runs GROUP BY model ORDER BY model")[1]
    scripts = {"pyarrow": ([pyarrow_read], "runs.num_rows", runs),
               "duckdb": ([pyarrow_read, duckdb_read], "per_model", [tuple(r) for r in per_model]),
               "polars": ([polars_read], "steps", steps),
               "daft": ([daft_read], "daft_runs", runs),
               "whole": ([pyarrow_read, duckdb_read, polars_read, daft_read], "(runs.num_rows, steps, daft_runs)",
                         (runs, steps, runs))}
    try:
        import daft  # noqa: F401
    except ImportError:  # the engines extra (make test's lock); the other sets run the rest
        scripts = {k: v for k, v in scripts.items() if k not in ("daft", "whole")}
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")}

    def run(name: str) -> tuple[str, int, str]:
        reads, show, _ = scripts[name]
        code = "\n\n".join([state, *reads]) + f"\nprint(repr({show}))\n"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        return name, done.returncode, done.stdout.strip() or done.stderr[-500:]

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, [name for name in scripts for _ in range(20)]))
    assert [(name, code) for name, code, _ in results if code != 0] == []
    for name, _, out in results:
        assert out == repr(scripts[name][2]), name


def test_a_writer_stopped_before_its_projection_is_caught_up_by_the_next(s3: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    with monkeypatch.context() as m:  # the second writer stops right after its commit point
        m.setattr(projection, "project", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            ingest_into([str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)
    store = remote.Remote(s3)
    assert store.state().version == 2 and projection.projected(store) == 1
    assert bench_counts(s3)["runs"] == 29 and delta_counts(s3)["runs"] == 20  # a committed state, one behind

    from typer.testing import CliRunner

    from bench.runner.cli import app

    out = CliRunner().invoke(app, ["ingest", "--check", "--store", s3])
    assert out.exit_code == 0 and "Delta logs hold commits version 1 at the newest, not 2" in out.output

    ingest_into([str(LOGS / "mxnet")], s3, workers=0, skip_globs=SKIP)  # the next writer
    assert projection.projected(store) == store.state().version == 3
    assert delta_counts(s3) == bench_counts(s3)


def test_a_store_without_logs_gets_them_on_its_first_write_and_late_projectors_change_nothing(s3: str) -> None:
    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    store = remote.Remote(s3)
    old = store.state()
    for table in TABLE_NAMES:  # as the layout before the projection left it: plain Parquet folders
        store.fs.delete_dir_contents(store.path(f"{table}/_delta_log"), missing_dir_ok=True)
    store.fs.delete_dir_contents(store.path(projection.PROJECTED), missing_dir_ok=True)
    assert projection.projected(store) == -1 and bench_counts(s3)["runs"] == 20  # read in place until then

    ingest_into([str(LOGS / "caffe")], s3, workers=0, skip_globs=SKIP)  # the first write converts it
    new = store.state()
    assert projection.projected(store) == new.version == 2
    assert _seqs(s3, "runs") == [-1, 2] and delta_counts(s3) == bench_counts(s3)
    # a writer that read its state before (the older one) or as the last one did, and projects late: nothing
    first = projection.project(store, new)
    assert projection.project(store, old) == first == projection.project(store, new)
    assert _seqs(s3, "runs") == [-1, 2]
    from deltalake import DeltaTable

    runs = DeltaTable(f"{s3}/tables/runs", storage_options=store.options)
    assert projection.version_at(runs, 2) == 1 and projection.version_at(runs, 1) is None  # its log begins at 2


def test_a_damaged_table_log_is_named_by_check_and_made_again_by_compact(s3: str) -> None:
    """A cut object of one table's Delta log (the data, the commits table and bench's reads unharmed): the next
    ingest commits and says the log cannot be read and what mends it, `--check` exits 1 naming the table, and
    `--compact` sets the log aside and makes it again at the committed state."""
    import boto3
    import pyarrow.fs as pafs
    from typer.testing import CliRunner

    from bench.runner.cli import app

    ingest_into([str(LOGS / "tf_cnn")], s3, workers=0, skip_globs=SKIP)
    bucket, prefix = s3.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3")
    log = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/tables/runs/_delta_log/")["Contents"])
    client.put_object(Bucket=bucket, Key=log[-1], Body=b'{"add": {"path": "runs-')  # its newest version, cut
    cli = CliRunner()
    out = cli.invoke(app, ["ingest", str(LOGS / "caffe"), "--store", s3, "--exclude", "*.json"])
    assert out.exit_code == 0, out.output
    assert "table runs's Delta log cannot be read (DeltaError: " in out.output
    assert "The ingest is committed" in out.output and "`bench ingest --compact` sets the damaged log aside" in out.output
    assert bench_counts(s3)["runs"] == 29  # bench reads through the commits table

    out = cli.invoke(app, ["ingest", "--check", "--store", s3])
    assert out.exit_code == 1 and "table runs's Delta log cannot be read (DeltaError: " in out.output, out.output
    assert len([line for line in out.output.splitlines() if "Delta log cannot be read" in line]) == 1

    out = cli.invoke(app, ["ingest", "--compact", "--store", s3])
    assert out.exit_code == 0 and "table runs's Delta log could not be read" in out.output, out.output
    assert "made again at commits version 4" in out.output  # the compaction's state (its two commits after the ingests)
    store = remote.Remote(s3)
    assert delta_counts(s3) == bench_counts(s3) and projection.projected(store) == store.state().version
    assert projection.damaged_logs(store) == {}
    aside = store.fs.get_file_info(pafs.FileSelector(store.path(projection.DAMAGED), recursive=True))
    assert sorted(i.base_name for i in aside if i.type == pafs.FileType.File) == [k.rsplit("/", 1)[-1] for k in log]
    assert cli.invoke(app, ["ingest", "--check", "--store", s3]).exit_code == 0


#: An ingest into the store at argv[3] of argv[4:], SIGKILLed at the argv[2]th table its projection brings up
#: (argv[1] "table": before it; "made": right after the table's empty log is made on S3, before its files are
#: added).
CONVERSION_KILLER = """
import os, signal, sys
from deltalake import DeltaTable
from bench.sql import projection
where, n, count = sys.argv[1], int(sys.argv[2]), [0]

def killed(call, after):
    def hooked(*args, **kwargs):
        if after and not str(args[0]).startswith("s3://"):  # the writer's local staging store
            return call(*args, **kwargs)
        count[0] += 1
        if count[0] == n and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        out = call(*args, **kwargs)
        if count[0] == n and after:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    return hooked

if where == "table":
    projection._project_table = killed(projection._project_table, False)
else:
    DeltaTable.create = killed(DeltaTable.create, True)
from bench.ingest.remote_ingest import ingest_into
ingest_into(sys.argv[4:], sys.argv[3], workers=0, skip_globs=("*.json",))
"""


@pytest.mark.slow
def test_a_conversion_killed_midway_leaves_committed_logs_and_the_next_write_ends_it(s3: str, tmp_path: Path) -> None:
    """A store of the layout before the logs, converted by an ingest SIGKILLed while it makes the tables' logs:
    the ingest is committed, each table's log is its committed state or empty (made, not yet brought up) or
    absent, and the next write brings every table to the committed state."""
    import os
    import signal
    import subprocess
    import sys

    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    last = len(TABLE_NAMES)
    for i, (where, n) in enumerate((("table", 1), ("table", 5), ("table", last), ("made", 1), ("made", last))):
        url = f"{s3}{i}"
        ingest_into([str(LOGS / "tf_cnn")], url, workers=0, skip_globs=SKIP)
        store = remote.Remote(url)
        for table in TABLE_NAMES:  # as the layout before the projection left it
            store.fs.delete_dir_contents(store.path(f"{table}/_delta_log"), missing_dir_ok=True)
        store.fs.delete_dir_contents(store.path(projection.PROJECTED), missing_dir_ok=True)
        proc = subprocess.run([sys.executable, "-c", CONVERSION_KILLER, where, str(n), url, str(LOGS / "caffe")],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)})
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        counts = bench_counts(url)
        assert counts["runs"] == 29 and projection.projected(store) == -1, (where, n)  # committed, not yet marked
        made = 0
        for table in TABLE_NAMES:
            try:
                dt = DeltaTable(f"{url}/tables/{table}", storage_options=store.options)
            except TableNotFoundError:
                continue
            made += 1
            rows = delta_rows_of(store.fs, dt)
            assert rows in (counts[table], 0), (where, n, table, rows)
        assert made == (n - 1 if where == "table" else n), (where, n, made)
        ingest_into([str(LOGS / "mxnet")], url, workers=0, skip_globs=SKIP)  # the next write
        assert projection.projected(store) == store.state().version and delta_counts(url) == bench_counts(url)
