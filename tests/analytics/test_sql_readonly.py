"""`bench sql` is read-only and confined to the store: every statement that is not a query
is refused with one line and exit 2 before anything runs, a query cannot read a file outside the store, and
nothing is written anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.ingest.pipeline import ingest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "hf_trainer" / "real_bert_tiny_b8.log"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ro") / "st"
    ingest([str(FIXTURE)], root)
    return root


def bench_sql(store: Path, query: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.runner", "sql", query, "--store", str(store)],
                          capture_output=True, text=True, timeout=120, check=False)


def files_of(*roots: Path) -> set[Path]:
    return {p for root in roots for p in root.rglob("*")}


@pytest.mark.parametrize(("statement", "kind"), [
    ("COPY (SELECT 1) TO '{out}/copied.csv'", "COPY"),
    ("COPY (SELECT '{{}}') TO '{store}/decisions.jsonl' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '')", "COPY"),
    ("ATTACH '{out}/attached.db'", "ATTACH"),
    ("EXPORT DATABASE '{out}/exported'", "EXPORT"),
    ("PRAGMA profile_output = '{out}/profile.txt'", "SET"),
    ("SET enable_external_access = true", "SET"),
    ("INSTALL httpfs", "LOAD"),
    ("LOAD httpfs", "LOAD"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("SELECT 1; COPY (SELECT 1) TO '{out}/second.csv'", "COPY"),
])
def test_a_statement_that_is_not_a_query_is_refused(store: Path, tmp_path: Path, statement: str, kind: str) -> None:
    before = files_of(store, tmp_path)
    done = bench_sql(store, statement.format(out=tmp_path, store=store))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (f"Error: bench sql runs queries only and never writes; {kind} statements are "
                                   "refused (to keep a result, redirect --format csv or json to a file)")
    assert files_of(store, tmp_path) == before  # nothing written, nowhere


def test_a_query_cannot_read_outside_the_store(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    done = bench_sql(store, f"SELECT * FROM read_csv('{outside}')")
    assert done.returncode == 2 and done.stderr.startswith("Error: bench sql reads only the store's own files: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_queries_still_answer(store: Path) -> None:
    done = bench_sql(store, "WITH r AS (SELECT * FROM runs) SELECT count(*) AS n, min(status) FROM r")
    assert done.returncode == 0 and "│ 1 " in done.stdout and "ok" in done.stdout
    assert bench_sql(store, "DESCRIBE runs").returncode == 0
    assert bench_sql(store, "EXPLAIN SELECT * FROM steps").returncode == 0
    assert bench_sql(store, "SELECT count(*) FROM configs").returncode == 0  # a curated view
