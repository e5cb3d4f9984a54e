"""bench report on the official TensorFlow 2017 sheet: the sheet's blocks as tables (images/s,
speedup, efficiency; P100/K80, synthetic/real, batch 64/32 speedups, resnet50/inception3 with medians),
the Dell-style figures, the files written, the HTML opened in headless Chromium. Expected values are
computed here from ../shared/reference/tf-official-2017.csv (or the fixture script's copy of it)."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import typer
from logtools import child
from typer.testing import CliRunner

from bench.analytics.report.build import Options, build_report, write_report
from bench.analytics.report.html import render_html
from bench.analytics.report.model import Report, Section, Table, format_value
from bench.runner.commands.report_cmd import report_command
from bench.sql.read import connect

from .test_official_2017 import FOLDER, PATTERN, _published, make_logs

approx = pytest.approx
P100, K80 = "Tesla P100-SXM2-16GB", "Tesla K80"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Path]:
    from bench.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("report")
    ingest([str(FOLDER / make_logs.SOURCE)], root / "store", path_patterns=[PATTERN], workers=0)
    report = build_report(connect(root / "store"), Options(title="TF 2017 <sheet>", equivalence=0.05, max_families=8))
    write_report(report, root / "out")
    return report, root / "out"


def _table(report: Report, title_part: str) -> Table:
    found = [t for s in report.sections for t in s.tables if title_part in t.title]
    assert len(found) == 1, [t.title for s in report.sections for t in s.tables]
    return found[0]


def _col(t: Table, prefix: str) -> list[float]:
    (col,) = [c for c in t.frame.columns if c.startswith(prefix)]
    return list(t.frame[col])


def test_family_tables_are_the_sheets_images_speedup_and_efficiency(written: tuple[Report, Path]) -> None:
    report, _ = written
    fig = _published()
    name = "model=inception3, data=synthetic, batch_size_per_device=64"
    ips = _table(report, f"Throughput (images/s): {name}")
    assert list(ips.frame["GPUs"]) == [1, 2, 4, 8]
    assert _col(ips, f"device_model={P100}") == [fig[64, "synthetic", "inception3", "P100", n] for n in (1, 2, 4, 8)]
    assert _col(ips, f"device_model={K80}") == [30, 58, 116, 227]  # written out from the sheet
    speedup = _table(report, f"Speedup (×): {name}")
    assert _col(speedup, f"device_model={P100}") == approx([1.0, 2.0, 596 / 142, 1131 / 142])
    eff = _table(report, f"Scaling efficiency (%): {name}")
    assert _col(eff, f"device_model={P100}")[2] == approx(100 * 596 / 142 / 4)  # 104.93%: superlinear, kept
    assert eff.texts()[2][list(eff.frame.columns).index(f"device_model={P100} [%]")] == "104.9"
    # each number links to the runs of its configuration point: one run per point here
    assert all(len(ids) == 1 for ids in ips.cell_runs.values()) and len(ips.cell_runs) == 8


def _row_medians(t: Table) -> dict[int, float]:
    return dict(zip(t.frame["GPUs"], t.frame["median [×]"], strict=True))


def test_p100_over_k80_and_model_ratio_tables_with_medians(written: tuple[Report, Path]) -> None:
    report, _ = written
    fig = _published()
    gpu = _table(report, f"images_per_sec (images/s): device_model {P100} / {K80}")
    assert list(gpu.frame["GPUs"]) == [1, 2, 4, 8] and gpu.frame.shape[1] == 1 + 8 + 1  # 8 configurations + median
    for n, med in _row_medians(gpu).items():
        by_hand = statistics.median(x / fig[(*k[:3], "K80", n)] for k, x in fig.items() if k[3] == "P100" and k[4] == n)
        assert med == approx(by_hand, rel=1e-12)
    summary = _table(report, "Ratios A / B")
    rows = {(r["factor"], r["metric"]): r for r in summary.frame.to_dict("records")}
    assert (rows["device_model", "images_per_sec"]["pairs (count)"], round(rows["device_model", "images_per_sec"]["median (×)"], 2)) == (32, 4.40)
    assert round(rows["model", "images_per_sec"]["median (×)"], 2) == 1.61
    assert rows["model", "images_per_sec"]["A"] == "resnet50"  # the faster value is A
    low, high = rows["device_model", "images_per_sec"]["geomean 95% CI low (×)"], rows["device_model", "images_per_sec"]["geomean 95% CI high (×)"]
    assert low < rows["device_model", "images_per_sec"]["geomean (×)"] < high
    assert rows["device_model", "images_per_sec"]["equivalent within ±margin"] == "no (±5.0%)"  # 4.4× is no tie


def test_synthetic_over_real_and_batch_speedup_ratios(written: tuple[Report, Path]) -> None:
    report, _ = written
    fig = _published()
    data = _table(report, "images_per_sec (images/s): data synthetic / real")
    assert [round(m, 2) for m in _row_medians(data).values()] == [1.00, 1.00, 1.01, 1.02]
    batch = _table(report, "speedup (×): batch_size_per_device 64 / 32")
    assert list(batch.frame["GPUs"]) == [2, 4, 8]  # the baseline (1 / 1) is left out

    def s(b: int, k: tuple[str, str, str], n: int) -> float:
        return fig[(b, *k, n)] / fig[(b, *k, 1)]
    keys = {k[1:4] for k in fig}
    for n, med in _row_medians(batch).items():
        assert med == approx(statistics.median(s(64, k, n) / s(32, k, n) for k in keys), rel=1e-12)


def test_dell_style_figures_and_files(written: tuple[Report, Path]) -> None:
    report, out = written
    figures = [f for s in report.sections for f in s.figures]
    assert report.sections[0].title == "Findings" and figures[0].slug == "leaderboard-figure"
    family = [f for f in figures if f.slug.startswith("fig-")]
    assert len(family) == 8 * 3  # 8 families × (throughput, speedup, efficiency), not one per run
    assert sum(f.slug.startswith("per-gpu") for f in figures) == 2  # inception3, resnet50 across P100/K80
    assert all(f.svg.startswith(b"<?xml") and b"<svg" in f.svg[:1000] for f in figures)
    assert (out / "report.md").read_text().count("![") == len(figures)
    assert len(list((out / "figures").glob("*.svg"))) == len(figures)
    prov = pd.read_csv(out / "tables" / "provenance.csv")
    assert len(prov) == 64 and prov["sha256 (prefix)"].str.len().eq(12).all()
    html = (out / "report.html").read_text()
    assert "TF 2017 &lt;sheet&gt;" in html and "<script" not in html
    # nothing fetched: anchors, data: URIs, and figures past the page's inline budget as files beside it
    assert not re.search(r'(src|href)="(?!#|data:|figures/[\w-]+\.svg")', html)
    assert len(html) <= 2_000_000
    assert html.count('id="run-') == 64 and re.search(r'<a href="#run-[0-9a-f]{16}-0" title="runs: ', html)


def test_text_from_the_store_is_escaped_and_null_is_a_dash() -> None:
    t = Table("provenance", "p", pd.DataFrame({"run_id": ["r<1>"], "source": ['<img src=x onerror="alert(1)">'],
                                                "images/s": [float("nan")]}))
    html = render_html(Report("t", "s", [Section("P", tables=[t])]))
    assert "<img src=x" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert 'id="run-r&lt;1&gt;"' in html and "<td class=\"n\">—</td>" in html
    assert (format_value(None), format_value(0.0, ".1f"), format_value(float("nan"))) == ("—", "0.0", "—")


def test_command_writes_and_reports_user_errors(written: tuple[Report, Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(report_command)
    store = written[1].parent / "store"
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["--store", str(store), "--where", "num_devices = 8 AND model = 'resnet50'",
                                   "--out", str(out), "--max-figures", "1"])
    assert res.exit_code == 0, res.output
    *findings, path = res.output.strip().splitlines()
    assert path == str(out / "report.html")
    # the leaderboard: P100 / K80 for resnet50 at 8 GPUs on synthetic data (like for like: the sheet's real-data
    # rows measure the input pipeline too), the sheet's 2 rows (2 batch sizes)
    fig = _published()
    ratios = [fig[k] / fig[(*k[:3], "K80", k[4])] for k in fig
              if k[2] == "resnet50" and k[3] == "P100" and k[4] == 8 and k[1] == "synthetic"]
    assert len(ratios) == 2
    geomean = float(pd.Series(ratios).prod() ** 0.5)
    assert findings[0].startswith(f"1. In training at 8 devices, synthetic data, Tesla P100-SXM2-16GB is {geomean:.2f}x "
                                  "Tesla K80 (geometric mean over 2 workloads")
    assert len(pd.read_csv(out / "tables" / "provenance.csv")) == 8  # 2 data × 2 batch × 2 GPUs at 8 GPUs
    res = CliRunner().invoke(app, ["--store", str(store), "--where", "no_such_column = 1", "--out", str(out)])
    assert res.exit_code != 0 and "--where" in str(res.exception)
    res = CliRunner().invoke(app, ["--store", str(store), "--where", "num_devices = 3", "--out", str(out)])
    assert res.exit_code != 0 and "no run matches" in str(res.exception)


def test_report_opens_in_headless_chromium(written: tuple[Report, Path], tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian package `chromium`)")
    url = (written[1] / "report.html").resolve().as_uri()
    shot = tmp_path / "report.png"
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    run = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,4000", url],
                         capture_output=True, text=True, timeout=120)
    assert "Uncaught" not in run.stderr and "ERROR:CONSOLE" not in run.stderr, run.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG")
    shutil.copy(shot, "/tmp/report-shot.png")
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    inline = re.findall(r'<figure id="([\w-]+)"[^>]*><svg ', dom)
    linked = re.findall(r'<a href="figures/([\w-]+)\.svg"', dom)
    assert len(inline) + len(linked) == sum(len(s.figures) for s in written[0].sections) and len(inline) > 0
    assert all((written[1] / "figures" / f"{slug}.svg").is_file() for slug in linked)
    assert "<img" not in dom and "<?xml" not in dom  # SVG inline, its text selectable and searchable
    axis_labels = re.findall(r"<text[^>]*>([^<]*)</text>", dom)
    assert any("images/s" in t for t in axis_labels)
    headings = re.findall(r"<h2[^>]*>([^<]*)</h2>", dom)
    assert headings[0] == "Findings" and "Method" in headings  # the findings come first


def test_point_runs_come_in_one_order_whatever_the_group_by_returns(tmp_path: Path) -> None:
    """A figure lists its points' runs in ``point_runs`` order: a parallel GROUP BY gave its groups in a
    different order from run to run, and with them the report's bytes."""
    from analytics_speed import make_store

    from bench.analytics.report import select as sel

    make_store(tmp_path / "st", 20_000, steps_per_run=1)
    con = connect(tmp_path / "st")
    con.execute("SET threads = 4")
    sel.select_runs(con, None)
    runs = sel.point_runs(con)
    assert len(runs) > 500
    assert list(runs) == sorted(runs, key=lambda k: tuple((v is None, v) for v in k))
    assert all(list(ids) == sorted(ids) for ids in runs.values())


def test_a_baseline_that_names_no_device_is_a_usage_error(written: tuple[Report, Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(report_command)
    store = written[1].parent / "store"
    res = CliRunner().invoke(app, ["--store", str(store), "--baseline", "H100", "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and "--baseline 'H100' matches 0 device models" in str(res.exception)
    res = CliRunner().invoke(app, ["--store", str(store), "--baseline", "P100", "--json", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    first = doc["findings"][0]
    # training at 1 GPU (the sheet's four counts tie: the fewest), synthetic data: 4 workloads, K80 / P100 = 1 / 4.30
    assert first["kind"] == "leaderboard"
    assert first["text"].startswith("In training at 1 device, synthetic data, Tesla K80 is 0.23x Tesla P100-SXM2-16GB")
    assert first["n"] == 4 and first["ci95"][0] < first["value"] < first["ci95"][1]


def test_figures_drawn_by_workers_are_the_bytes_drawn_here(written: tuple[Report, Path], tmp_path: Path) -> None:
    """The fast path (report.render's spawned workers draw while the tables compute) gives the plain path's
    bytes: every figure, and the written files."""
    from bench.analytics.report.build import make_report

    store = written[1].parent / "store"
    opts = Options(title="TF 2017 <sheet>", equivalence=0.05, max_families=8)
    plain, plain_html = make_report(store, tmp_path / "plain", opts, workers=0)
    fast, fast_html = make_report(store, tmp_path / "fast", opts, workers=2)
    figures = [(f.slug, f.svg) for s in plain.sections for f in s.figures]
    assert len(figures) > 20 and all(isinstance(f.image, bytes) for s in plain.sections for f in s.figures)
    assert figures == [(f.slug, f.svg) for s in fast.sections for f in s.figures]
    assert plain_html.read_bytes() == fast_html.read_bytes()
    assert [p.read_bytes() for p in sorted((tmp_path / "plain" / "figures").iterdir())] == \
           [p.read_bytes() for p in sorted((tmp_path / "fast" / "figures").iterdir())]


def test_findings_keep_every_kind_when_there_are_too_many() -> None:
    from bench.analytics.findings import MAX_FINDINGS, Finding, keep

    kinds = ["leaderboard"] * 8 + ["scaling"] * 3 + ["effect"] * 2 + ["trust"] * 2
    found = [Finding(k, f"{k} {i}", None, None, 1, "x") for i, k in enumerate(kinds)]
    kept = keep(found)
    assert len(kept) == MAX_FINDINGS == 10
    # the longest kind gives way first; every kind keeps its first sentences, in their order
    assert [f.text for f in kept] == ["leaderboard 0", "leaderboard 1", "leaderboard 2", "scaling 8", "scaling 9",
                                      "scaling 10", "effect 11", "effect 12", "trust 13", "trust 14"]
    assert keep(found[:5]) == found[:5]


def _dies_in_a_worker() -> object:
    """A drawing whose worker process dies (as one that cannot start does); here it draws."""
    import multiprocessing
    import os

    if multiprocessing.parent_process() is not None:
        os._exit(1)
    from bench.analytics.plots import new_figure

    fig = new_figure(2, 2)
    fig.add_subplot().plot([0, 1], [1, 0])
    return fig


def test_a_figure_whose_worker_died_is_drawn_here() -> None:
    from bench.analytics.report.drawing import Renderer

    with Renderer(0) as here:
        plain = here.svg(_dies_in_a_worker)
    with Renderer(1) as pool:
        pending = pool.svg(_dies_in_a_worker)
        assert not isinstance(pending, bytes) and pending.result() == plain
        assert isinstance(pool.svg(_dies_in_a_worker), bytes)  # the broken pool is not used again


@pytest.mark.slow
@pytest.mark.parametrize("when", ["starting", "drawing"])
def test_ctrl_c_stops_bench_report_with_one_line(tmp_path: Path, when: str) -> None:
    """Ctrl-C early in `bench report` printed a drawing worker's KeyboardInterrupt traceback. The terminal
    sends SIGINT to the whole process group: the report says one line and exits 130, its workers say nothing.
    Sent once the report has read the store, or as soon as its folders appear (its workers then draw): a
    fixed 3 s came after the end of the whole report on a fast machine, a fixed 0.8 s before bench had
    finished its imports on a loaded one."""
    import os
    import signal
    import sys
    import time

    from analytics_speed import make_store

    make_store(tmp_path / "st", 5_000, steps_per_run=1)
    (tmp_path / "st" / ".verified.json").unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.runner", "report", "--store", str(tmp_path / "st"), "--out",
            str(tmp_path / "r"), "--workers", "1"]
    with child(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        # the report has started once it has checked the store's files (it records them in .verified.json),
        # and draws once its folders appear: events, not times (a loaded machine took seconds to import bench)
        started = tmp_path / "st" / ".verified.json" if when == "starting" else tmp_path / "r" / "figures"
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert started.exists() and not (tmp_path / "r" / "report.html").exists()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines() == [f"Interrupted: no report written to {tmp_path / 'r'}."], err


def test_a_one_run_report_renders_and_says_nothing_it_does_not_know(tmp_path: Path) -> None:
    """A store of one run: the report still opens in headless Chromium, with no "None" or "nan" in its text,
    and its first lines say what it cannot answer; so does a store whose only run failed."""
    from logtools import tf_cnn_log

    from bench.analytics.report.build import make_report
    from bench.ingest.pipeline import ingest

    log = tf_cnn_log(40)
    (tmp_path / "failed.log").write_text(log[: log.index("total images/sec")] + "Traceback (most recent call last):\n"
                                         "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM\n")
    ingest([str(tmp_path / "failed.log")], tmp_path / "bad", workers=0)
    _, html = make_report(tmp_path / "bad", tmp_path / "rb", Options(), workers=0)
    first = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.read_text().split('<h2 id="sec-selection"')[0]))
    assert "1 of 1 runs did not end ok" in first and "No run of this selection has a result" in first
    (tmp_path / "one.log").write_text(log)
    ingest([str(tmp_path / "one.log")], tmp_path / "st", workers=0)
    _, html = make_report(tmp_path / "st", tmp_path / "r", Options(), workers=0)
    text = html.read_text()
    visible = re.sub(r"<[^>]+>", " ", text.split("<body>", 1)[-1])
    assert not re.search(r"\b(None|nan|NaN)\b", visible), re.findall(r".{40}\b(?:None|nan|NaN)\b.{40}", visible)[:3]
    first = visible.split("Findings", 2)[2].split("Selection")[0]  # the Findings section
    assert "One device model in this selection (not named by its logs): no device leaderboard." in first
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian package `chromium`)")
    run = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          f"--screenshot={tmp_path / 'one.png'}", "--window-size=1280,2000", html.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert "Uncaught" not in run.stderr and "ERROR:CONSOLE" not in run.stderr, run.stderr[-2000:]
    assert (tmp_path / "one.png").read_bytes().startswith(b"\x89PNG")


def test_a_ctrl_c_while_workers_are_spawned_is_held_not_lost() -> None:
    """A Ctrl-C that came while the drawing workers were spawned was ignored by `bench report` itself (the
    report then ran to its end): it is now held, and raised once the workers are started (or at once, where
    another thread of the process takes it). Python's own handler is set for the test (an earlier test may
    have left another), and the raise is waited for with no bound on when it comes but the deadline."""
    import os
    import signal
    import time

    from bench.analytics.report.drawing import _ctrl_c_ignored

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _ctrl_c_ignored():  # a thread of this process that does not block SIGINT may take it at once
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the handler runs at the main thread's next bytecode
                time.sleep(0.01)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_scaling_finding_names_the_device_type_when_the_model_is_unknown() -> None:
    """CPU runs of no device model (a bench sweep on the CPU): the finding and the table say "CPU (model
    unknown)", not a blank; a named GPU keeps its name. Efficiencies by hand from the sweep's run means:
    ((4454.98 + 5043.16) / 2) / ((3112.30 + 2982.08) / 2) / 2 = 0.779; (180 / 100) / 2 = 0.90."""
    import duckdb
    from logtools import runs_table

    from bench.analytics import findings
    from bench.sql.views import register_views

    base = {"framework": "tensorflow", "model": "trivial", "data": "synthetic", "mode": "train", "precision": "fp32",
            "batch_size_per_device": 8, "num_nodes": 1, "status": "ok"}
    runs = [{**base, "device_type": "cpu", "device_model": None, "num_devices": n, "images_per_sec": ips,
             "tags": {"repeat": r}}
            for n, r, ips in ((1, "1", 3112.30), (1, "2", 2982.08), (2, "1", 4454.98), (2, "2", 5043.16))]
    runs += [{**base, "device_type": "gpu", "device_model": "Tesla P100", "num_devices": n, "images_per_sec": ips,
              "tags": {}} for n, ips in ((1, 100.0), (2, 180.0))]
    con = duckdb.connect()
    con.register("runs", runs_table(runs))
    register_views(con, ["run_configs", "configs", "scaling"])
    con.execute("CREATE TEMP TABLE _scaling AS SELECT * FROM scaling")
    texts = sorted(f.text for f in findings.scaling_findings(con, "t"))
    assert texts == ["CPU (model unknown) scales training to 2 devices at 78% efficiency (median; one curve, 1 model, "
                     "4 runs; all on TensorFlow).",  # two repeats at each count; no version logged
                     "Tesla P100 scales training to 2 devices at 90% efficiency (median; one curve, 1 model, 2 runs; "
                     "all on TensorFlow)."]


def test_the_leaderboard_groups_pairs_whose_logs_name_no_precision_under_a_header_that_says_so() -> None:
    """MLPerf logs name no precision: their pairs form the group "precision not logged" (the table's header
    was "?"). Geometric means by hand: fp16 sqrt(2 x 8) = 4; unlogged 3."""
    from bench.analytics import leaderboard as lb
    from bench.analytics.compare import CompareResult, Pair
    from bench.analytics.ratio_stats import summarize

    pairs = tuple(Pair({"precision": prec}, 8, r, 1.0, r) for prec, r in (("fp16", 2.0), ("fp16", 8.0), (None, 3.0)))
    res = CompareResult("device_model", "A", "B", "images_per_sec", pairs, (), summarize([p.ratio for p in pairs]))
    got = {k: round(s.geomean, 9) for k, s in lb.by_precision(res).items()}
    assert got == {"fp16": 4.0, "precision not logged": 3.0}
