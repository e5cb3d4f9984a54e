"""One run, one record: a ``bench run`` directory's run goes by run.json's ``run_id`` in every
view (runs, steps, telemetry, telemetry_links), so the id `bench run` printed finds it in the store. Any other
run goes by its log's SHA-256 prefix and run index, as the tables key it.

Expected values are read by hand from fixtures/runs/hand-ok-2gpu (fixtures/README.md, section runs): run.json's
run_id, 4 step lines (L22-L25), and fixtures/logs/telemetry/nvidia-smi-query.csv's 4 samples.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from bench.ingest.pipeline import ingest
from bench.sql.read import connect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OK = FIXTURES / "runs" / "hand-ok-2gpu"
TELEMETRY_CSV = FIXTURES / "logs" / "telemetry" / "nvidia-smi-query.csv"
NAME = "20261121T201503Z-resnet50-b64-g2-r2-3f9a"  # hand-ok-2gpu/run.json "run_id"


def _run_dir(at: Path, extra_log: str = "") -> Path:
    shutil.copytree(OK, at)
    shutil.copy(TELEMETRY_CSV, at / "telemetry.csv")
    if extra_log:
        with (at / "output.log").open("a") as f:
            f.write(extra_log)
    return at


def _one(con: object, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()  # type: ignore[attr-defined]


def test_a_bench_run_directory_goes_by_run_jsons_id_in_every_view(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path / "r1")
    plain = tmp_path / "plain" / "output.log"  # the same log without its run.json: a third-party log
    plain.parent.mkdir()
    shutil.copy(OK / "output.log", plain)
    plain.write_text(plain.read_text() + "\n")  # other content, or it is a duplicate of the run dir's log
    ingest([str(run_dir), str(plain)], tmp_path / "st", workers=0)
    con = connect(tmp_path / "st")
    plain_id = hashlib.sha256(plain.read_bytes()).hexdigest()[:16] + "-0"
    assert sorted(_one(con, "SELECT run_id FROM runs")) == sorted([(NAME,), (plain_id,)])
    assert _one(con, "SELECT run_id, count(*) FROM steps GROUP BY ALL ORDER BY 1") == sorted([(NAME, 4), (plain_id, 4)])
    assert _one(con, "SELECT run_id, count(*) FROM telemetry GROUP BY ALL") == [(NAME, 4)]
    # a query by the id `bench run` printed joins all three
    assert _one(con, f"SELECT r.images_per_sec, count(DISTINCT s.step), count(DISTINCT t.timestamp) FROM runs r "
                     f"JOIN steps s USING (run_id) JOIN telemetry t USING (run_id) WHERE run_id = '{NAME}' "
                     "GROUP BY ALL") == [(1465.31, 4, 4)]


def test_two_runs_that_claim_one_id_keep_their_own(tmp_path: Path) -> None:
    """A run directory copied and its log then changed: two runs, two records, never merged under one id."""
    ingest([str(_run_dir(tmp_path / "a")), str(_run_dir(tmp_path / "b", "\n"))], tmp_path / "st", workers=0)
    con = connect(tmp_path / "st")
    ids = [r for (r,) in _one(con, "SELECT run_id FROM runs")]
    assert len(set(ids)) == 2 and NAME not in ids
    assert sorted(_one(con, "SELECT count(*) FROM steps GROUP BY run_id")) == [(4,), (4,)]


def test_a_rewritten_log_keeps_its_name_and_only_its_new_steps(tmp_path: Path) -> None:
    """The log of a run directory changed after its ingest: the new version supersedes the old one, and the
    name stays with the current version only (4 steps, not 8)."""
    run_dir = _run_dir(tmp_path / "r1")
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    with (run_dir / "output.log").open("a") as f:
        f.write("\n")
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    con = connect(tmp_path / "st")
    assert _one(con, "SELECT run_id FROM runs") == [(NAME,)]
    assert _one(con, "SELECT count(*) FROM all_runs") == [(2,)]  # the old version is kept, out of the view
    assert _one(con, "SELECT run_id, count(*) FROM steps GROUP BY ALL") == [(NAME, 4)]


def test_run_names_is_made_once_where_the_queries_read_runs_and_stays_a_view_where_they_do_not(tmp_path: Path) -> None:
    """run_names reads every run's details: a temp table once per connection for queries of runs (a view would
    read them again at each mention), a view for a query of the problems alone (a table there is work wasted).
    Either way the names are the same."""
    ingest([str(_run_dir(tmp_path / "r1"))], tmp_path / "st", workers=0)
    kinds = {}
    for reads in (None, "SELECT run_id FROM runs", "select count(*) from steps", "SELECT * FROM telemetry_links",
                  "select count(*) from problems", "SELECT kind FROM problems WHERE line_no > 3"):
        con = connect(tmp_path / "st", reads=reads)
        (kind,), = _one(con, "SELECT table_type FROM information_schema.tables WHERE table_name = 'run_names'")
        kinds[reads] = kind
        assert _one(con, "SELECT name FROM run_names") == [(NAME,)]
    assert kinds == {None: "LOCAL TEMPORARY", "SELECT run_id FROM runs": "LOCAL TEMPORARY",
                     "select count(*) from steps": "LOCAL TEMPORARY", "SELECT * FROM telemetry_links": "LOCAL TEMPORARY",
                     "select count(*) from problems": "VIEW", "SELECT kind FROM problems WHERE line_no > 3": "VIEW"}
