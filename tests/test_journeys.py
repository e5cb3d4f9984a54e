"""The README's journeys, end to end through the real CLI (``python -m bench.runner``, as the `bench`
script runs it), each on a fresh store: the bundled trainer's ``bench run`` then sql and report, and a
``bench sweep`` of the CPU smoke plan then resume, scaling, compare and report. Expected numbers are read
from the logs themselves (their ``total images/sec`` lines), never from bench's output."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from logtools import figure_problems

REPO = Path(__file__).resolve().parents[1]
TOTAL = re.compile(r"^total images/sec: ([0-9.]+)$", re.M)


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.runner", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=REPO)


def sql(store: Path, query: str) -> list[dict]:
    res = bench("sql", "--store", str(store), "--format", "json", query)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_bench_run_with_telemetry_then_sql_compare_and_report(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow", reason="the bundled trainer needs TensorFlow (make test installs it)")
    store, out = tmp_path / "store", tmp_path / "logs"
    res = bench("run", "--model", "trivial", "--device", "cpu", "--batch-size", "8", "--num-batches", "20",
                "--display-every", "5", "--telemetry-interval", "0.2", "--repeat", "2", "--store", str(store),
                "--out", str(out))
    assert res.returncode == 0, res.stderr
    totals = sorted(float(TOTAL.search(p.read_text())[1]) for p in out.glob("*/output.log"))  # type: ignore[index]
    rows = sql(store, "SELECT images_per_sec, status, model, device_type, "
                      "(SELECT count(*) FROM telemetry t WHERE t.run_id = r.run_id) AS samples FROM runs r ORDER BY 1")
    assert [r["images_per_sec"] for r in rows] == pytest.approx(totals)
    assert all(r["status"] == "ok" and r["model"] == "trivial" and r["device_type"] == "cpu" for r in rows)
    assert all(r["samples"] >= 1 for r in rows)  # run-linked telemetry: what broke the report on DuckDB 2.0
    (cfg,) = sql(store, "SELECT n_ok, images_per_sec FROM configs")  # the two repeats: one configuration
    assert cfg["n_ok"] == 2 and cfg["images_per_sec"] == pytest.approx(statistics.mean(totals))
    res = bench("compare", "--store", str(store), "--factor", "device_model", "--a", "x", "--b", "y")
    assert res.returncode == 2 and "matches no value of device_model" in res.stderr
    res = bench("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "report" / "report.html").is_file()


@pytest.mark.slow
def test_bench_sweep_then_resume_scaling_and_report(tmp_path: Path) -> None:
    """cpu-smoke: trivial model on 1 and 2 logical CPU devices, twice each. The cells' tags are bookkeeping,
    so the four runs form one configuration with a 1-to-2 device scaling curve."""
    pytest.importorskip("tensorflow", reason="the bundled trainer needs TensorFlow (make test installs it)")
    store, out, plan = tmp_path / "store", tmp_path / "logs", "fixtures/plans/cpu-smoke.toml"
    res = bench("sweep", plan, "--store", str(store), "--out", str(out))
    assert res.returncode == 0, res.stderr
    by_devices: dict[int, list[float]] = {1: [], 2: []}
    for run_json in out.glob("*/run.json"):
        devices = json.loads(run_json.read_text())["spec"]["num_gpus"]
        by_devices[devices].append(float(TOTAL.search((run_json.parent / "output.log").read_text())[1]))  # type: ignore[index]
    assert [len(v) for v in by_devices.values()] == [2, 2]
    speedup = statistics.mean(by_devices[2]) / statistics.mean(by_devices[1])

    rows = sql(store, "SELECT config_id, num_devices, speedup, efficiency FROM scaling ORDER BY num_devices")
    assert [r["num_devices"] for r in rows] == [1, 2] and rows[0]["config_id"] == rows[1]["config_id"]
    assert rows[1]["speedup"] == pytest.approx(speedup) and rows[1]["efficiency"] == pytest.approx(speedup / 2)
    # one identity: every run's config_id in report_runs is the configuration configs has (the sweep's
    # bookkeeping tags, cell and sweep, split report_runs' ids before)
    assert sql(store, "SELECT count(*) AS n, count(DISTINCT config_id) AS ids, count(*) FILTER (WHERE config_id "
                      "NOT IN (SELECT config_id FROM configs)) AS missing FROM report_runs") == [{"n": 4, "ids": 1, "missing": 0}]

    res = bench("sweep", plan, "--store", str(store), "--out", str(out), "--resume", "--dry-run")
    assert "--resume: 4 of 4 cells already have an ok run in the store" in res.stdout
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "#  --resume: 4 of 4 cells already have an ok run in the store" in readme  # as the README quotes it
    res = bench("compare", "--store", str(store), "--factor", "device_model", "--a", "NULL", "--b", "x",
                "--where", "tags['sweep'] = 'cpu-smoke'")  # a tag in --where, as in every command
    assert res.returncode == 2 and "matches no value" in res.stderr
    res = bench("fit", "--store", str(store), "--where", "tags['sweep'] = 'cpu-smoke'")
    assert res.returncode == 1 and "fewer than 3 device counts" in res.stdout  # nothing fitted: nothing to answer
    res = bench("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    assert figure_problems(store) == {}
    # the sweep's folder ingested again, as a user might: its runs are already in the store, and the sweep's
    # own record (sweep-cpu-smoke-<stamp>.json) is known, not a log of an unknown format
    res = bench("ingest", str(out), "--store", str(store), "--json")
    summary = json.loads(res.stdout)
    assert res.returncode == 0 and summary["runs_added"] == 0, res.stdout
    assert sql(store, "SELECT format, n_runs FROM sources WHERE source LIKE '%sweep-cpu-smoke-%.json'") == \
           [{"format": "bench_sweep", "n_runs": 0}]
    assert sql(store, "SELECT count(*) AS n FROM problems WHERE kind = 'unrecognized_format'") == [{"n": 0}]


@pytest.mark.slow
def test_make_demo(tmp_path: Path) -> None:
    """The README's first command, as it runs: ingest the bundled fixtures, the summary, a compare and the
    report; the compare's median is the published sheet's "P100 is 4.40x K80" at 8 GPUs (4.476 here: the
    8 pairs at 8 GPUs, whose median is (4.47 + 4.48) / 2 from the sheet's rows)."""
    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        pytest.skip("make demo uses the project's .venv; this run is in another environment")
    res = subprocess.run(["make", "demo"], cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "n=8  median 4.476x" in res.stdout
    # the leaderboard ranks training at the most measured device count (1 GPU, the fewest of four tied), on
    # synthetic data (like for like): the sheet's 4 synthetic ratios at 1 GPU, 142/30, 219/52, 128/29.3 and
    # 195/49.5, have the geometric mean 4.30, the t-interval of their logs 3.81-4.86 (t 3.182, 3 degrees of
    # freedom) and the median (4.2115 + 4.3686) / 2 = 4.29
    assert ("1. In training at 1 device, synthetic data, Tesla P100-SXM2-16GB is 4.30x Tesla K80 (geometric mean "
            "over 4 workloads, 95% CI 3.81-4.86; median 4.29x)") in res.stdout
    assert (REPO / "bench-report" / "report.html").is_file()
