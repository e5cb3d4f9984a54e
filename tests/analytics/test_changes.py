"""bench changes, bench check and the report's "Changes over time" on 120 nightly run folders
(tests/nightly.py: a driver update on night 60 slows resnet50 by 7% and not vgg16; vgg16 is throttled on
night 90), and on the input that does not fit a series."""

from __future__ import annotations

import datetime
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from logtools import figure_problems
from typer.testing import CliRunner

from bench.runner.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import nightly

runner = CliRunner()


def bench(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nightly")
    nightly.write_nights(root / "runs", node08=False)
    code, out = bench("ingest", str(root / "runs"), "--store", str(root / "store"))
    assert code == 0, out
    return root / "store"


def test_changes_finds_the_driver_update_and_calls_the_throttled_night_an_outlier(nights: Path) -> None:
    code, out = bench("changes", "--store", str(nights), "--json")
    assert code == 0, out
    found = json.loads(out)
    assert len(found["changes"]) == 1
    change = found["changes"][0]
    assert change["series"]["model"] == "resnet50" and change["series"]["system"] == "gpu-node07"
    assert change["at"].startswith("2026-10-01")  # night 60, the first on the new driver
    assert change["what_changed"] == {"gpu_driver": ["570.86.15", "580.159.04"]}
    assert change["slower"] and change["ci95"][0] < change["change"] < change["ci95"][1]
    assert change["ci95"][0] < -0.07 + 0.006 and change["ci95"][1] > -0.07 - 0.006  # the 7% made, within noise
    assert change["before"]["n"] == 60 and change["after"]["n"] == 60 and change["p_value"] < 1e-10
    assert [(o["series"]["model"], o["at"][:10]) for o in found["outliers"]] == [("vgg16", "2026-10-31")]
    assert -0.33 < found["outliers"][0]["change"] < -0.27
    code, text = bench("changes", "--store", str(nights))
    line = next(x for x in text.splitlines() if x.startswith("slower"))
    assert "resnet50 b64 fp16 on host gpu-node07: -" in line and "from 2026-10-01" in line
    assert line.endswith("when gpu_driver changed 570.86.15 -> 580.159.04")


def test_check_fails_the_new_runs_at_5_percent_and_passes_them_at_10(nights: Path, tmp_path: Path) -> None:
    new = "started_at >= '2026-10-01'"
    code, out = bench("check", "--store", str(nights), "--where", new, "--junit", str(tmp_path / "j.xml"))
    assert code == 1, out
    regression = [x for x in out.splitlines() if x.startswith("REGRESSION")]
    assert len(regression) == 1 and "resnet50" in regression[0] and "gpu_driver changed 570.86.15 -> 580.159.04" in regression[0]
    assert any(x.startswith("ok vgg16") for x in out.splitlines())
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["resnet50 b64 fp16 on host gpu-node07"]
    code, out = bench("check", "--store", str(nights), "--where", new, "--threshold", "0.10", "--json")
    assert code == 0, out
    result = json.loads(out)
    assert result["passed"] and [v["status"] for v in result["verdicts"]] == ["ok", "ok"]
    # an explicit baseline: the old driver's nights
    code, out = bench("check", "--store", str(nights), "--where", new,
                      "--baseline-where", "details['gpu_driver'] = '570.86.15'", "--json")
    assert code == 1 and json.loads(out)["verdicts"][0]["n_baseline"] == 60


def test_a_regression_fails_every_morning_until_someone_accepts_it(nights: Path, tmp_path: Path) -> None:
    """The gate's reference was "the runs since the last change": 60 nights after the driver update, the last
    night passed. It stays the level before the update until `bench changes --accept` moves it."""
    store = tmp_path / "store"
    shutil.copytree(nights, store)  # the decisions file is the store's: the module's store stays as it was
    last = ["check", "--store", str(store), "--where", "started_at >= '2026-11-29'"]
    code, out = bench(*last)
    assert code == 1 and out.startswith("REGRESSION resnet50"), out
    change = json.loads(bench("changes", "--store", str(store), "--json")[1])["changes"][0]
    code, out = bench("changes", "--store", str(store), "--accept", change["run_id"])
    assert code == 2 and "--why is required" in out
    code, out = bench("changes", "--store", str(store), "--accept", change["run_id"], "--why", "580 driver: expected",
                      "--by", "ana")
    assert code == 0 and out.startswith(f"accepted resnet50 b64 fp16 on host gpu-node07: the level from run {change['run_id']}")
    code, out = bench(*last, "--json")
    assert code == 0, out
    verdict = next(v for v in json.loads(out)["verdicts"] if v["series"]["model"] == "resnet50")
    # the new level less tonight's run and the two nights before it (they may start a level not yet confirmed)
    assert verdict["status"] == "ok" and verdict["n_baseline"] == 57
    assert verdict["accepted"]["by"] == "ana" and verdict["accepted"]["why"] == "580 driver: expected"
    code, out = bench("changes", "--store", str(store))
    assert "[accepted by ana on " in next(x for x in out.splitlines() if x.startswith("slower"))
    assert any(x.startswith("accepted resnet50") and "580 driver: expected" in x for x in out.splitlines())
    # taken back: the regression fails again; both decisions stay in the store's history
    code, out = bench("changes", "--store", str(store), "--unaccept", change["run_id"], "--why", "driver rolled back")
    assert code == 0 and out.startswith("unaccepted resnet50"), out
    assert bench(*last)[0] == 1
    lines = [json.loads(x) for x in (store / "decisions.jsonl").read_text().splitlines()]
    assert [(d["action"], d["run_id"]) for d in lines] == [("accept", change["run_id"]), ("unaccept", change["run_id"])]
    code, out = bench("changes", "--store", str(store), "--unaccept", change["run_id"], "--why", "twice")
    assert code == 2 and "is not accepted" in out
    code, out = bench("changes", "--store", str(store), "--accept", "no-such-run", "--why", "x")
    assert code == 2 and "not in the store" in out


def test_no_runs_tonight_is_its_own_exit_code_and_names_the_series_that_expected_runs(nights: Path, tmp_path: Path
                                                                                     ) -> None:
    code, out = bench("check", "--store", str(nights), "--where", "started_at >= '2027-01-01'",
                      "--junit", str(tmp_path / "j.xml"))
    assert code == 3, out  # not 0 (passed), not 2 (a bad argument)
    assert out.splitlines()[0].startswith("no run matches --where: nothing to judge")
    missing = [x for x in out.splitlines() if x.startswith("MISSING")]
    assert len(missing) == 2 and all("it last ran 2026-11-29" in x for x in missing)
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("2", "2", "0")
    # one series ran tonight, the other did not: the missing one is named, and exit 3
    code, out = bench("check", "--store", str(nights), "--where", "started_at >= '2026-11-29' AND model = 'vgg16'")
    assert code == 3 and [x.split(":")[0] for x in out.splitlines() if x.startswith("MISSING")] == [
        "MISSING resnet50 b64 fp16 on host gpu-node07"], out


@pytest.mark.parametrize(("args", "message"), [
    (["--threshold", "1.5"], "--threshold 1.5"),
    (["--threshold", "0"], "--threshold 0"),
    (["--fail-on", "everything"], "--fail-on"),
    (["--baseline-where", "model = 'alexnet'"], "--baseline-where"),
    (["--where", "no_such_column = 1"], "no_such_column"),
])
def test_check_bad_arguments_exit_2_with_one_line(nights: Path, args: list[str], message: str) -> None:
    base = {"--where": "started_at >= '2026-10-01'"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    res = runner.invoke(app, ["check", "--store", str(nights), *[x for kv in base.items() for x in kv]])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_the_report_shows_the_change(nights: Path, tmp_path: Path) -> None:
    code, out = bench("report", "--store", str(nights), "--out", str(tmp_path / "r"), "--workers", "0")
    assert code == 0, out
    assert "got 6." in out.splitlines()[0] or "got 7." in out.splitlines()[0]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Changes over time" in md and "when gpu_driver changed 570.86.15 -> 580.159.04" in md
    svg = (tmp_path / "r" / "figures" / "fig-change-resnet50-b64-fp16-on-host-gpu-node07.svg").read_text()
    assert "580.159.04" in svg
    rows = (tmp_path / "r" / "tables" / "change-outliers.csv").read_text().splitlines()
    assert len(rows) == 2 and "vgg16" in rows[1] and "2026-10-31" in rows[1]
    assert figure_problems(nights) == {}  # what changed is said clear of the points (it covered them)


def _folders(root: Path, values: list[float | None], host: str = "h1", model: str = "resnet50",
             tags: dict[str, str] | None = None, same_start: bool = False) -> None:
    """Run folders of ``model`` on ``host``, one per value (None: a failed run)."""
    for i, v in enumerate(values):
        folder = root / f"{model}-{host}-{i:03d}"
        nightly_meta = {"schema_version": 1, "run_id": f"r-{model}-{host}-{i}", "status": "ok" if v else "failed",
                        "exit_code": 0 if v else 1,
                        "started_at": f"2026-09-{1 + (0 if same_start else i % 28):02d}T0{i // 28}:00:00+00:00",
                        "host": {"hostname": host}, "tags": tags or {},
                        "spec": {"model": model, "batch_size": 64, "num_gpus": 8, "precision": "fp16"},
                        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "driver_version": "570.86.15"}] * 8}
        if v:  # the run's time: 50 steps of 512 images at the rate
            nightly_meta["wall_time_s"] = 50 * 512 / v
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps(nightly_meta))
        (folder / "output.log").write_text(nightly.log_text(model, v) if v else "Traceback (most recent call last):\n")


def test_what_does_not_fit_a_series_is_said(tmp_path: Path) -> None:
    _folders(tmp_path / "runs", [1000.0, 1001.0, None, 999.0])  # too short, and a failed run
    _folders(tmp_path / "runs", [1000.0 + i for i in range(8)], host="h2", model="vgg16", same_start=True)
    _folders(tmp_path / "runs", [500.0] * 4, host="a", model="alexnet", tags={"system": "dgx"})
    _folders(tmp_path / "runs", [500.0] * 4, host="b", model="alexnet", tags={"system": "dgx"})
    store = str(tmp_path / "store")
    assert bench("ingest", str(tmp_path / "runs"), "--store", store)[0] == 0
    code, out = bench("changes", "--store", store, "--json")
    assert code == 0, out
    found = json.loads(out)
    short = {t["series"]["model"]: t["n"] for t in found["too_short"]}
    assert short == {"resnet50": 3}
    assert [(r["status"], r["reason"]) for r in found["left_out"]] == [("failed", "status failed")]
    notes = " ".join(found["notes"])
    assert "2 hosts (a, b)" in notes and "alexnet" in notes  # one system tag over two hosts: said
    assert "7 runs share their order value" in notes  # vgg16's eight runs all started at one time
    # an --order-by column with NULLs: those runs are left out and listed
    code, out = bench("changes", "--store", store, "--order-by", "tags['build']", "--json")
    reasons = Counter(r["reason"] for r in json.loads(out)["left_out"])
    assert code == 0 and reasons == {"status failed": 1, "no value of tags['build']": 19}
    code, out = bench("changes", "--store", store, "--order-by", "nonsense(")
    assert code == 2 and "--order-by" in out
    code, out = bench("changes", "--store", store, "--where", "model = 'alexnet' AND host = 'nowhere'")
    assert code == 2 and "selects no run" in out


def test_a_time_is_lower_is_better(tmp_path: Path) -> None:
    from bench.analytics.changes import METRICS

    assert METRICS["time_to_train_s"] and METRICS["wall_time_s"] and not METRICS["images_per_sec"]
    rates = [1000.0] * 10 + [800.0] * 10  # slower runs take longer: wall_time_s goes up
    _folders(tmp_path / "runs", [r * (1 + 0.001 * (i % 3)) for i, r in enumerate(rates)])
    store = str(tmp_path / "store")
    assert bench("ingest", str(tmp_path / "runs"), "--store", store)[0] == 0
    code, out = bench("changes", "--store", store, "--metric", "wall_time_s", "--json")
    assert code == 0, out
    change = json.loads(out)["changes"]
    assert len(change) == 1 and change[0]["change"] > 0 and change[0]["slower"]


def test_a_commit_tag_does_not_split_a_series_and_a_system_tag_does(tmp_path: Path) -> None:
    from bench.sql.read import connect
    from bench.sql.views import register_views

    for i in range(8):  # a commit per night, and two repeats of each: still one series
        for r in range(2):
            _folders(tmp_path / "runs" / f"{i}-{r}", [1000.0 + i + r], tags={"commit": f"abc{i}", "study": "x"})
    for system in ("dgx1", "dgx2", "dgx3"):
        _folders(tmp_path / "runs" / system, [900.0] * 4, host=system, model="vgg16", tags={"system": system, "study": "x"})
    store = tmp_path / "store"
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(store))[0] == 0
    con = connect(store)
    register_views(con, ["run_configs"])
    got = dict(con.execute("SELECT model, count(DISTINCT series_id) FROM run_configs GROUP BY model").fetchall())
    assert got == {"resnet50": 1, "vgg16": 3}
    tags = con.execute("SELECT DISTINCT series_tags FROM run_configs WHERE model = 'resnet50'").fetchall()
    assert len(tags) == 1 and "commit" not in tags[0][0] and tags[0][0]["study"] == "x"
    # the configuration keeps the commit (8 configurations); the series sets it aside
    assert con.execute("SELECT count(DISTINCT config_id) FROM run_configs WHERE model = 'resnet50'").fetchone() == (8,)
    code, out = bench("changes", "--store", str(store), "--order-by", "tags['commit']", "--json")
    assert code == 0 and not json.loads(out)["too_short"]


def test_check_fails_a_series_whose_new_runs_all_failed(tmp_path: Path) -> None:
    _folders(tmp_path / "runs", [1000.0 + i % 3 for i in range(10)] + [None, None])  # the last two nights failed
    store = str(tmp_path / "store")
    assert bench("ingest", str(tmp_path / "runs"), "--store", store)[0] == 0
    code, out = bench("check", "--store", store, "--where", "status <> 'ok'", "--json")
    verdicts = json.loads(out)["verdicts"]
    assert code == 1 and [(v["status"], v["n_candidates"]) for v in verdicts] == [("failed", 2)]
    code, out = bench("check", "--store", store, "--where", "started_at >= '2026-09-09'")  # one ok, two failed
    assert code == 0 and out.startswith("ok resnet50"), out


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_load_series_fetches_by_column_what_fetchall_gives_in_any_time_zone(nights: Path, zone: str) -> None:
    """load_series ordered by start time without facts fetches by column through numpy and makes the times aware
    itself; ordered by an expression it takes fetchall's rows. Both must give the same points, the times in the
    connection's zone as DuckDB gives them (New York changes its offset in the nights' span; Kolkata is +05:30)."""
    from bench.analytics.changes import load_series
    from bench.sql.read import connect

    def points(order_by: str | None) -> list[tuple[object, ...]]:
        con = connect(nights)
        con.execute(f"SET TimeZone = '{zone}'")
        return [(s.series_id, p.run_id, p.started_at, p.started_at.utcoffset(), p.value)
                for s in load_series(con, "images_per_sec", order_by, facts=False) for p in s.points]

    by_column, by_row = points(None), points("started_at")
    assert len(by_column) > 200
    assert by_column == by_row
    offsets = {o for *_, o, _v in by_column}
    assert offsets == ({datetime.timedelta(0)} if zone == "UTC" else
                       {datetime.timedelta(hours=5, minutes=30)} if zone == "Asia/Kolkata" else
                       {datetime.timedelta(hours=-4), datetime.timedelta(hours=-5)})


def test_ties_count_the_runs_sharing_the_order_value_of_the_run_before(nights: Path) -> None:
    """Ordered by month, every run after a month's first ties with the one before it: a series' ties are its
    points less its months (counted here from the start times, not from load_series' own order values)."""
    import gc

    from bench.analytics.changes import load_series
    from bench.sql.read import connect

    gc.enable()
    series = load_series(connect(nights), "images_per_sec", "date_trunc('month', started_at AT TIME ZONE 'UTC')", facts=False)
    assert gc.isenabled()  # the collector, off while the points are made, is back on
    assert len(series) >= 2
    for s in series:
        months = {(p.started_at.year, p.started_at.month) for p in s.points}
        assert len(months) >= 3
        assert s.ties == len(s.points) - len(months) > 0
    # one order value for every run: neighbouring series meet on it, and no tie is counted across their boundary
    series = load_series(connect(nights), "images_per_sec", "'the same'", facts=False)
    assert [s.ties for s in series] == [len(s.points) - 1 for s in series]
    gc.disable()
    try:
        load_series(connect(nights), "images_per_sec", None, facts=False)
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
