"""No step row without its run: a parser that raises mid-run leaves its unfinished run as an ``invalid`` row
(its steps kept), and the overflow that made Caffe and MLPerf parsers raise is gone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bench.analytics.results import rows
from bench.ingest.parse import run_parser
from bench.ingest.pipeline import ingest
from bench.ingest.records import ParseResult, Run
from bench.sql.read import connect

REPO = Path(__file__).resolve().parents[2]


def test_a_parser_that_raises_mid_run_leaves_that_run_invalid_with_its_steps() -> None:
    result = ParseResult()

    def parse() -> None:
        result.steps.add(0, 1, images_per_sec=10.0)
        result.runs.append(Run(run_index=0, format="fake", status="ok", images_per_sec=10.0))
        result.steps.add(1, 1, images_per_sec=20.0)
        result.steps.add(1, 2, images_per_sec=21.0)
        raise OverflowError("cannot convert float infinity to integer")

    run_parser(SimpleNamespace(NAME="fake"), parse, result)  # type: ignore[arg-type]
    assert [(r.run_index, r.status) for r in result.runs] == [(0, "ok"), (1, "invalid")]
    assert "cannot convert float infinity" in (result.runs[1].status_detail or "")
    assert result.runs[1].images_per_sec is None
    assert [p.kind for p in result.problems] == ["parser_error"]
    assert result.steps.run_indices() == {0, 1}


def test_huge_numbers_in_caffe_and_mlperf_logs_are_refused_not_raised(tmp_path: Path) -> None:
    src = (REPO / "fixtures" / "logs" / "mlperf" / "mllog_mxnet_speedometer.log").read_text()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "speedometer.log").write_text(src.replace("Node[0]", "Node[99999999999999999999999999]", 1))
    caffe = (REPO / "fixtures" / "logs" / "caffe" / "hand_gpu_oom_after_steps.log").read_text()
    assert "Iteration 40 (2 iter/s, 10s/20 iters)" in caffe  # 1e308 x 1e308 overflowed the image count
    (logs / "caffe.log").write_text(caffe.replace("Iteration 40 (2 iter/s, 10s/20 iters)",
                                                  "Iteration 40 (1e308 iter/s, 1e308s/20 iters)"))
    ingest([str(logs)], tmp_path / "store", workers=0)
    con = connect(tmp_path / "store")
    assert rows(con, "SELECT count(*) FROM all_problems WHERE kind = 'parser_error'") == [(0,)]
    assert rows(con, "SELECT count(*) FROM all_steps WHERE run_id NOT IN (SELECT run_id FROM all_runs)") == [(0,)]
