"""A damaged store still answers: a truncated or deleted file, or a table whose Delta log cannot be read,
is one line naming it and the fix while the rest answers; ``--check`` also finds a flipped bit; and
``--rebuild`` restores every run, whatever was damaged, the sources table included."""

from __future__ import annotations

import json
import re
from pathlib import Path

from logtools import tf_cnn_log, total_of
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql import delta, deltalog
from bench.sql.layout import SCHEMA_VERSION

runner = CliRunner()


def _two_batches(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two ingests (two batches) of 2 logs each; the 4 totals, written by hand into the logs' seeds."""
    texts = []
    for k, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        for i in range(2):
            text = tf_cnn_log(10, seed=10 * k + i)
            (tmp_path / folder / f"{i}.log").write_text(text)
            texts.append(text)
    st = tmp_path / "st"
    ingest([str(tmp_path / "a")], st, workers=0)
    ingest([str(tmp_path / "b")], st, workers=0)
    return st, texts


def _totals(st: Path) -> tuple[int, list[float], str]:
    result = runner.invoke(app, ["sql", "SELECT images_per_sec FROM runs ORDER BY 1", "--store", str(st),
                                 "--format", "json"])
    return result.exit_code, [r["images_per_sec"] for r in json.loads(result.stdout)], result.stderr


def _file_of(st: Path, seq: int, table: str = "runs") -> Path:
    """The ``table`` file that commit ``seq`` (0: the first ingest) added."""
    (row,) = [r for r in delta.commit_rows(st, ["checksums"]) if r["seq"] == seq]
    (key,) = [k for k, _ in row["checksums"] if k.startswith(f"{table}/")]
    return delta.table_path(st, table) / key.split("/", 1)[1]


def _check(st: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["ingest", "--check", "--store", str(st)])
    return result.exit_code, result.output


def _rebuild_restores(st: Path, texts: list[str]) -> None:
    rebuilt = runner.invoke(app, ["ingest", "--rebuild", "--store", str(st)])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "not restored" not in rebuilt.output
    assert _totals(st) == (0, sorted(total_of(t) for t in texts), "")
    assert _check(st) == (0, f"store {st}: every file matches its recorded checksum\n")


def test_a_truncated_runs_file_is_left_out_with_one_line_and_rebuild_restores_it(tmp_path: Path) -> None:
    st, texts = _two_batches(tmp_path)
    everything = sorted(total_of(t) for t in texts)
    assert _totals(st)[:2] == (0, everything)
    damaged = _file_of(st, 1)
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])

    code, totals, err = _totals(st)
    assert code == 0 and totals == sorted(total_of(t) for t in texts[:2])  # ingest a still answers
    (line,) = err.strip().splitlines()
    assert f"runs/{damaged.name}" in line and "where its commit recorded" in line and "--rebuild" in line
    code, out = _check(st)
    assert code == 1 and damaged.name in out
    _rebuild_restores(st, texts)


def test_a_deleted_runs_file_is_reported_and_rebuild_restores_it(tmp_path: Path) -> None:
    """Was: a deleted batch directory, one run gone, --check said sound and --rebuild could not restore it."""
    st, texts = _two_batches(tmp_path)
    damaged = _file_of(st, 0)
    damaged.unlink()
    code, totals, err = _totals(st)
    assert code == 0 and totals == sorted(total_of(t) for t in texts[2:])
    assert f"runs/{damaged.name} is damaged (it is missing)" in err
    code, out = _check(st)
    assert code == 1 and f"runs/{damaged.name} is damaged (it is missing)" in out
    _rebuild_restores(st, texts)


def test_a_flipped_bit_is_found_by_check_and_rebuild_restores_the_value(tmp_path: Path) -> None:
    """Was: one bit flipped in a runs file's data page changed a throughput, and --check said sound."""
    st, texts = _two_batches(tmp_path)
    damaged = _file_of(st, 1)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 3] ^= 0x10
    damaged.write_bytes(bytes(data))
    code, out = _check(st)
    assert code == 1
    first, *rest = out.strip().splitlines()
    assert f"store file runs/{damaged.name} does not match the SHA-256 recorded" in first
    assert len(rest) == 2 and all("gave 1 run(s) of which the store holds none" in line for line in rest)
    _rebuild_restores(st, texts)


def test_a_lost_or_empty_sources_file_still_rebuilds_every_run(tmp_path: Path) -> None:
    """Was: an empty sources.parquet made --rebuild crash with KeyError 'member' on every retry. The
    commits table keeps each commit's sources, so a rebuild finds them without the sources table."""
    import pyarrow.parquet as pq

    from bench.sql.schema import TABLES

    st, texts = _two_batches(tmp_path)
    _file_of(st, 0, "sources").unlink()
    pq.write_table(TABLES["sources"].empty_table(), _file_of(st, 1, "sources"))
    assert _check(st)[0] == 1
    _rebuild_restores(st, texts)


def test_a_table_whose_delta_log_is_unreadable_is_named_and_rebuilt(tmp_path: Path) -> None:
    st, texts = _two_batches(tmp_path)
    for log in (delta.table_path(st, "runs") / "_delta_log").glob("*.json"):
        log.write_text("not json\n")
    code, totals, err = _totals(st)
    assert code == 0 and totals == [] and "store table runs is damaged" in err
    assert _check(st)[0] == 1
    _rebuild_restores(st, texts)
    assert list((st / "damaged").glob("runs-*"))  # the damaged table is kept aside, not deleted


def test_a_store_of_an_older_schema_is_refused_with_one_line(tmp_path: Path) -> None:
    st, _ = _two_batches(tmp_path)
    meta = st / "STORE.json"
    meta.write_text(re.sub(r'"schema_version": \d+', '"schema_version": 4', meta.read_text()))
    refused = runner.invoke(app, ["sql", "SELECT 1", "--store", str(st)])
    assert refused.exit_code == 1 and "written by schema 4, this bench reads schema 6" in refused.output
    assert SCHEMA_VERSION == 6


def test_a_store_that_is_a_file_or_read_only_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    (tmp_path / "file").write_text("x")
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(tmp_path / "file")])
    assert result.exit_code == 2 and "is a file" in result.output  # a bad --store value: a usage error
    assert "Traceback" not in result.output


def test_a_read_only_store_is_one_line_for_ingest_and_still_answers_queries(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        import pytest

        pytest.skip("root writes into read-only directories; the permission check cannot fail as root")
    st, texts = _two_batches(tmp_path)
    (tmp_path / "c.log").write_text(tf_cnn_log(10, seed=99))
    for path in [st, *st.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        result = runner.invoke(app, ["ingest", str(tmp_path / "c.log"), "--store", str(st)])
        assert result.exit_code == 1 and "cannot write to the store" in result.output
        assert _totals(st)[:2] == (0, sorted(total_of(t) for t in texts))
    finally:
        for path in [st, *st.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_store_the_writer_may_not_write_into_is_one_error_line(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same as the read-only test, for root (which may write anywhere): the store's scratch directory
    cannot be made, as on a read-only mount."""
    import errno

    st, _ = _two_batches(tmp_path)
    (tmp_path / "c.log").write_text(tf_cnn_log(10, seed=99))
    real_mkdir = Path.mkdir

    def refuse(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.name == "_tmp":
            raise PermissionError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    result = runner.invoke(app, ["ingest", str(tmp_path / "c.log"), "--store", str(st)])
    assert result.exit_code == 1 and "cannot write to the store" in result.output and "Read-only" in result.output


def test_sixty_flipped_bits_in_a_runs_file_never_change_an_answer_silently(tmp_path: Path) -> None:
    """Without the recorded checksums, 48 of 60 such flips changed an answer with no warning (a run read 120.31 images/s instead of
    3034.19) and 11 a failed query. Now every read checks the file's bytes against the SHA-256 its commit
    recorded: a damaged file is left out with one warning naming it, and the query still runs."""
    import random

    st, texts = _two_batches(tmp_path)
    good = _totals(st)
    assert good[0] == 0 and good[2] == "" and len(good[1]) == 4
    damaged = _file_of(st, 1)
    original = damaged.read_bytes()
    rng = random.Random(41)
    for _ in range(60):
        data = bytearray(original)
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        damaged.write_bytes(bytes(data))
        code, totals, err = _totals(st)
        assert code == 0, err  # never a failed query
        assert totals == sorted(total_of(t) for t in texts[:2]), (at, totals)  # the other batch's runs, unchanged
        (line,) = err.strip().splitlines()
        assert f"runs/{damaged.name}" in line and "SHA-256" in line and "--rebuild" in line
    damaged.write_bytes(original)  # put back: its bytes match again, and it is read again
    assert _totals(st) == good


def test_readers_list_from_the_log_the_files_deltalake_lists(tmp_path: Path) -> None:
    """Readers list each table's files from its Delta log (the newest checkpoint, then the JSON commits
    after it) without importing deltalake: on a store past its first checkpoints, compacted (files removed)
    and ingested into again, the listing is deltalake's own at every table's committed version."""
    from bench.sql.compact import compact
    from bench.sql.store import StoreWriter

    st = tmp_path / "st"
    for k in range(14):
        (tmp_path / f"{k}.log").write_text(tf_cnn_log(10, seed=k))
        ingest([str(tmp_path / f"{k}.log")], st, workers=0)
        if k == 11:
            with StoreWriter(st) as w:
                assert compact(w) > 0
    snap = delta.snapshot(st)
    assert snap is not None and snap.versions["runs"] > 10
    assert any((delta.table_path(st, "runs") / "_delta_log").glob("*.checkpoint.parquet"))
    for table in snap.versions:
        replayed = deltalog.replay_log(delta.table_path(st, table), table, upto=snap.versions[table], checkpoint=True)
        assert replayed.complete and not replayed.unmatched and replayed.version == snap.versions[table], table
        mine = sorted((f.path, f.size, f.rows) for f in replayed.files)
        theirs = sorted((f.path, f.size, f.rows) for f in delta.files(st, table, snap))
        assert mine == theirs, table
    assert len(delta.files(st, "runs", snap, from_log=True)) == 3  # 1 compacted + 2 since


def test_an_empty_tables_view_has_the_types_its_arrow_schema_gives(tmp_path: Path) -> None:
    """An empty table's view is typed from its Delta log's schema (no pyarrow import on the read path): the
    same DuckDB types, column for column, as the Arrow schema bench writes it with; and `bench sql` on a
    sound store imports neither pyarrow nor deltalake."""
    import subprocess
    import sys

    from bench.sql import read
    from bench.sql.schema import TABLES

    (tmp_path / "one.log").write_text(tf_cnn_log(10))
    st = tmp_path / "st"
    ingest([str(tmp_path / "one.log")], st, workers=0)
    for table, schema in TABLES.items():
        fields = deltalog.log_schema(delta.table_path(st, table))
        assert fields is not None, table
        assert [(f["name"], read._delta_type(f["type"])) for f in fields] == [(f.name, read._sql_type(f.type)) for f in schema]
    code = ("import sys; from pathlib import Path; from bench.analytics.query import run_sql; "
            f"print(run_sql(Path({str(st)!r}), 'SELECT count(*) FROM runs, score_scales')[1]); "
            "print(sorted(m for m in ('pyarrow', 'deltalake', 'pandas', 'numpy') if m in sys.modules))")
    for _ in range(2):  # the first read verifies the commits file with pyarrow, and remembers it
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split("\n")[:2] == ["[(0,)]", "[]"], out
