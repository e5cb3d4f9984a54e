"""bench report on the Lambda corpus: throughput per GPU for resnet50 fp16 and fp32 across
all systems, and one trace with temperatures (thermal/1 telemetry joined to throughput/1 by tags, on
the steps' clock). Skips when ../shared/corpus is absent; expected values come from plain SQL."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest import LAMBDA_TARBALL
from logtools import figure_problems, print_to_pdf

from bench.analytics import plot_data
from bench.analytics.report.build import Options, build_report
from bench.sql.read import connect

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.fixture
def store(lambda_store: Path) -> Path:
    return lambda_store


def test_throughput_per_gpu_across_systems_and_a_trace(store: Path) -> None:
    where = "model = 'resnet50' AND mode = 'train'"
    report = build_report(connect(store), Options(where=where, max_families=0))
    (sec,) = [s for s in report.sections if s.title == "Throughput per GPU across systems"]
    assert sorted(f.caption for f in sec.figures) == ["Throughput per GPU: model=resnet50, precision=fp16",
                                                      "Throughput per GPU: model=resnet50, precision=fp32"]
    (fp16,) = [t for t in sec.tables if t.title.endswith("precision=fp16")]
    n_configs = connect(store).execute(f"""
        SELECT count(DISTINCT config_id) FROM configs
        WHERE {where} AND precision = 'fp16' AND images_per_sec IS NOT NULL""").fetchall()[0][0]
    assert len(fp16.frame) == n_configs > 20  # every system with an ok run
    # one value checked by hand through SQL: the fastest 1-GPU per-GPU rate
    best = connect(store).execute(f"""SELECT max(images_per_sec / num_devices) FROM runs
        WHERE {where} AND precision = 'fp16' AND num_devices = 1 AND status = 'ok'""").fetchall()[0][0]
    assert fp16.frame["1 GPU [images/s per GPU]"].max() == pytest.approx(best)
    (trace,) = [s for s in report.sections if s.title == "Trace"]
    assert b"<svg" in trace.figures[0].svg[:1000]


def test_lambda_telemetry_joins_by_tags_on_the_steps_clock(store: Path) -> None:
    con = connect(store)
    run_id, system, t_first = con.execute("""
        SELECT r.run_id, r.tags['system'], min(s.timestamp) FROM runs r JOIN steps s USING (run_id)
        WHERE r.model = 'resnet50' AND r.precision = 'fp16' AND r.num_devices = 2 AND r.mode = 'train'
          AND r.tags['system'] = 'Gold_6230-GeForce_RTX_2080_Ti_NVLink_trt_TF1_15'
        GROUP BY ALL""").fetchall()[0]
    steps, tel = plot_data.trace_frames(con, where=f"run_id = '{run_id}'")
    # the thermal file of the same directory, read independently: GPUs 0 and 1 (the run's two), on the
    # steps' clock (sample time - first step time)
    src = con.execute("SELECT replace(source, '/throughput/', '/thermal/') FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]
    want = con.execute("""SELECT epoch(timestamp) - ?, avg(temperature_c) FROM telemetry
        WHERE source = ? AND gpu_index < 2 GROUP BY ALL ORDER BY 1""", [t_first, src]).fetchall()
    assert len(tel) == len(want) > 10 and system
    assert list(tel["elapsed_s"]) == pytest.approx([w[0] for w in want])
    assert list(tel["temperature_c"]) == pytest.approx([w[1] for w in want])
    assert tel["temperature_c"].min() > 60  # busy GPUs only: the 6 idle ones sit near 38 °C
    assert tel["elapsed_s"].iloc[0] < 0 <= steps["x"].iloc[0]  # sampling starts before the first step


def test_the_leaderboard_ranks_every_device_model(store: Path) -> None:
    """Lambda's 1-GPU training runs hold 15 device models; the leaderboard ranked 5, chosen by how often they
    were measured, and the A100-PCIE (2.9x the RTX 2080 Ti) was missing without a word."""
    where = "num_devices = 1 AND mode = 'train'"
    report = build_report(connect(store), Options(where=where, max_families=0))
    (table,) = [t for s in report.sections for t in s.tables if t.slug == "leaderboard"]
    devices = {r[0] for r in connect(store).execute(f"""SELECT DISTINCT device_model FROM configs
        WHERE {where} AND images_per_sec > 0 AND device_model IS NOT NULL""").fetchall()}
    baseline = table.frame.columns[1].removeprefix("x ").removesuffix(" (geometric mean)")
    assert len(devices) == 15 and set(table.frame["device"]) | {baseline} == devices
    ranked = table.frame[table.frame["workloads (n)"] > 0]
    assert list(ranked.iloc[:, 1]) == sorted(ranked.iloc[:, 1], reverse=True)  # the fastest first
    assert list(table.frame.columns[:2]) == ["device", f"x {baseline} (geometric mean)"]
    a100 = ranked[ranked["device"] == "A100-PCIE-40GB"].iloc[0]
    assert baseline == "GeForce RTX 2080 Ti" and a100.iloc[1] == pytest.approx(2.87, abs=0.01)
    assert {"fp16 (geometric mean)", "fp32 (geometric mean)"} <= set(table.frame.columns)
    said = [f.text for f in report.findings if f.kind == "leaderboard"]
    assert said[0].startswith("In training at 1 device, synthetic data, A100-PCIE-40GB is 2.87x GeForce RTX 2080 Ti")
    assert said[-1].endswith("The leaderboard table ranks 12 more device models.")


def test_the_leaderboard_names_what_differs_and_leaves_a_suspect_pair_out(store: Path) -> None:
    """The A100-SXM4 (TensorFlow 2.3.0 on every run) was ranked against the RTX 2080 Ti's 1.15 and
    2.2 with an empty note, over real-data workloads too, its mean pulled by a vgg16 fp16 run at 70 images/s
    (ratio 0.17x) that nothing flagged; the V100-SXM2 (8-GPU runs only) was in no board without a word."""
    from bench.analytics import leaderboard as lb
    from bench.analytics.report.select import select_runs

    con = connect(store)
    select_runs(con, None)
    scopes = dict(lb.board_scopes(con))
    assert list(scopes)[:4] == [f"training at {n} device{'s' if n > 1 else ''}, synthetic data" for n in (1, 2, 4, 8)]
    board = lb.leaderboard(con, None, None, scopes["training at 1 device, synthetic data"], "training at 1 device")
    assert board is not None and board.baseline == "GeForce RTX 2080 Ti"
    note = board.notes["A100-SXM4-40GB"]
    assert note.startswith("framework_version 2.3.0 vs 1.15.3 in 9 of 11 pairs, vs 2.2.0 in 2 of 11 pairs")
    assert note.endswith("1 suspect pair left out (vgg16 fp16 synthetic 0.17x)")
    (odd,) = board.suspects["A100-SXM4-40GB"]
    member = "7742-1xA100-SXM4-40GB_TF2_3.logs/syn-replicated-fp16-1gpus/vgg16-448/throughput/1"
    with tarfile.open(LAMBDA_TARBALL) as tar:
        total = float(re.findall(rb"total images/sec: ([0-9.]+)", tar.extractfile(member).read())[-1])  # type: ignore[union-attr]
    assert odd.a_value == pytest.approx(total) and odd.a_value < 0.2 * odd.b_value
    kept = lb.leaderboard(con, None, None, scopes["training at 1 device, synthetic data"], "", keep_suspects=True)
    (a100,) = [r for r in kept.results if r.a == "A100-SXM4-40GB"]  # type: ignore[union-attr]
    (now,) = [r for r in board.results if r.a == "A100-SXM4-40GB"]
    assert a100.summary.n == now.summary.n + 1 and a100.summary.geomean < now.summary.geomean
    assert board.notes["Quadro RTX 8000"] == "framework_version 2.2.0 vs 1.15.3 in 2 of 12 pairs"
    # XLA, from the systems' names, is named like the framework version: every RTX 2080 Ti run the PCIe A100 is
    # paired with comes from a system named ..._XLA_..., none of the A100's
    (pcie,) = [r for r in board.results if r.a == "A100-PCIE-40GB"]
    systems = [p.differs["system"] for p in pcie.pairs]  # type: ignore[index]
    assert len(systems) == 12 and all("_XLA" not in a and "_XLA" in b for a, b in systems), systems
    assert board.notes["A100-PCIE-40GB"].startswith("XLA off vs on in 12 of 12 pairs; framework_version 1.15.4")
    assert dict(board.absent)["Tesla V100-SXM2-16GB"].startswith("not in this scope (training at 8 devices only)")
    eight = lb.leaderboard(con, None, None, scopes["training at 8 devices, synthetic data"], "")
    assert "Tesla V100-SXM2-16GB" in {str(r.a) for r in eight.results} | {eight.baseline}  # type: ignore[union-attr]


def test_every_run_joins_its_configuration(store: Path) -> None:
    """report_runs said it computed config_id "exactly as in configs" but left the bookkeeping tags in: 0 of
    Lambda's 3,930 ok runs' config_id was one `configs` has. Both now read sql/run_configs.sql."""
    con = connect(store)
    n, missing = con.execute("""SELECT count(*), count(*) FILTER (WHERE config_id NOT IN (SELECT config_id FROM configs))
                                FROM report_runs""").fetchall()[0]
    assert n == con.execute("SELECT count(*) FROM runs").fetchall()[0][0] > 3900 and missing == 0
    # and the counts agree: every run is counted once, at its configuration's scale point
    assert con.execute("SELECT sum(n_runs) FROM configs").fetchall()[0][0] == n


def test_the_first_screen_answers_what_people_ask(store: Path, tmp_path: Path) -> None:
    """On the whole store the findings opened with 30 rows of alexnet inference scaling. The first screen
    (1280 x 900 in headless Chromium) now says which GPU trains fastest, how each scales to 8 GPUs and what
    fp16 buys, in that order."""
    import shutil
    import subprocess

    from bench.analytics.report.build import write_report

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian package `chromium`)")
    report = build_report(connect(store), Options())
    write_report(report, tmp_path / "r")
    url = (tmp_path / "r" / "report.html").resolve().as_uri()
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]
    subprocess.run([*flags, f"--screenshot={tmp_path / 'first.png'}", url], capture_output=True, timeout=120, check=True)
    assert (tmp_path / "first.png").read_bytes().startswith(b"\x89PNG")
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    items = [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", dom.split('<ol class="findings">')[1].split("</ol>")[0])]
    assert items[0].startswith("In training at 1 device, synthetic data, A100-PCIE-40GB is 2.87x GeForce RTX 2080 Ti")
    kinds = ["leaderboard" if " is " in t and "x " in t and "scales" not in t else
             "scaling" if "scales training to 8 devices" in t else "fp16" if "fp16 gives" in t else "other"
             for t in items]
    first = [kinds.index(k) for k in ("leaderboard", "scaling", "fp16")]
    assert first == sorted(first) and first[-1] < 7


def test_the_default_trace_shows_telemetry_sampled_while_its_run_stepped(store: Path) -> None:
    """Tags alone name two runs for one thermal file (a folder's training and inference runs share them): the
    trace took a file sampled 15 minutes before its run. The one it shows now overlaps the run's steps."""
    steps, tel = plot_data.trace_frames(connect(store))
    assert steps["x_unit"].iloc[0] == "s" and len(tel) > 5
    assert tel["elapsed_s"].min() > -120 and tel["elapsed_s"].max() < steps["x"].max() + 120
    assert tel["temperature_c"].max() > tel["temperature_c"].min() + 5  # the GPU warms while it trains


def test_every_lambda_thermal_file_joins_the_log_of_its_own_folder(store: Path) -> None:
    """Checked against what the join does not use: the folder (a thermal/1 file's run is its folder's
    throughput/1 log) and the step stamps. Every link names the log of the file's own folder; every file left
    unlinked has no run in its folder that stepped while it was sampled (a failed run, a missing log, or
    samples that stop before the steps begin), and nearly all are linked."""
    con = connect(store)
    n, own, files = con.execute("""
        SELECT count(*), count(*) FILTER (WHERE r.source = replace(l.source, '/thermal/', '/throughput/')),
               (SELECT count(DISTINCT source) FROM telemetry)
        FROM telemetry_links l JOIN runs r USING (run_id)""").fetchall()[0]
    assert n == own > 0.99 * files
    # the README's count, the files counted in the tarball itself
    said = re.search(r"([\d,]+) of ([\d,]+) thermal files join the log of their own folder", README)
    assert said and (n, files) == (int(said.group(1).replace(",", "")), int(said.group(2).replace(",", "")))
    with tarfile.open(LAMBDA_TARBALL, mode="r|gz") as tar:
        assert files == sum(1 for m in tar if m.isfile() and "/thermal/" in m.name)
    overlapping = con.execute("""
        WITH unlinked AS (SELECT * FROM telemetry_links WHERE source_sha256 NOT IN
                              (SELECT source_sha256 FROM telemetry_links WHERE run_id IS NOT NULL)),
             span AS (SELECT run_id, min(timestamp) AS a, max(timestamp) AS b FROM steps GROUP BY ALL)
        SELECT count(*) FROM unlinked u JOIN runs r ON r.source = replace(u.source, '/thermal/', '/throughput/')
        JOIN span ON span.run_id = r.run_id
        WHERE epoch(u.first_at) <= span.b + 60 AND epoch(u.last_at) >= span.a - 60""").fetchall()[0][0]
    assert overlapping == 0
    # the view gives every sample of a linked file its run, and only those
    assert con.execute("""SELECT count(*) FILTER (WHERE run_id IS NULL), count(*) FILTER (WHERE source_sha256 NOT IN
                              (SELECT source_sha256 FROM telemetry_links WHERE run_id IS NOT NULL))
                          FROM telemetry""").fetchall()[0] == con.execute(
        "SELECT count(*), count(*) FROM all_telemetry WHERE source_sha256 NOT IN "
        "(SELECT source_sha256 FROM telemetry_links WHERE run_id IS NOT NULL)").fetchall()[0]


def test_the_lambda_report_prints_whole_with_figures_a_reader_can_read(store: Path, tmp_path: Path) -> None:
    """Printed from Chromium, the leaderboard's note column (the not-like-for-like caveats) and the scaling
    table's systems were cut at the page's right edge, and folded sections and the figures linked past the
    page's budget were not printed. Now no word reaches past a page's edge, every leaderboard note of every
    scope and every figure's title is in the PDF's text, and the provenance table says where its rows are
    instead of filling pages. Each figure is at most 1,800 pt tall, with no two tick labels alike."""
    import csv
    import html as html_module

    from bench.analytics.report.build import write_report

    html = write_report(build_report(connect(store), Options()), tmp_path / "r")
    pages, printed, beyond = print_to_pdf(html, tmp_path / "r.pdf")
    assert beyond == [] and 8 <= pages <= 120, (pages, beyond[:10])
    text = re.sub(r"\s+", "", printed)  # a sentence wrapped anywhere is still found
    notes = {row["note"] for board in (tmp_path / "r" / "tables").glob("leaderboard*.csv")
             for row in csv.DictReader(board.read_text().splitlines())} - {""}
    assert len(notes) > 20 and [n for n in notes if re.sub(r"\s+", "", n) not in text] == []
    assert "rows, not printed: tables/provenance.csv" in re.sub(r"\s+", " ", (tmp_path / "r" / "report.html").read_text())
    svgs = sorted((tmp_path / "r" / "figures").glob("*.svg"))
    linked = re.findall(r'<img class="paper" src="figures/([^"]+)\.svg"', html.read_text())
    assert len(svgs) > 10 and linked  # some figures are past the page's budget: linked on screen, drawn on paper
    for svg in svgs:
        svg_text = svg.read_text()
        title = max((html_module.unescape(t) for t in re.findall(r"<text[^>]*>([^<]+)</text>", svg_text)), key=len)
        assert re.sub(r"\s+", "", title) in text, (svg.name, title)
        height = float(re.search(r'<svg[^>]*height="([0-9.]+)pt"', svg_text).group(1))  # type: ignore[union-attr]
        assert height <= 1800, (svg.name, height)
        for axis in svg_text.split('<g id="matplotlib.axis_')[1:]:  # each axis of each subplot
            groups = re.findall(r'<g id="[xy]tick_\d+">.*?<g id="text_\d+">(.*?)</g>', axis, re.S)
            ticks = [" ".join(re.findall(r"<text[^>]*>([^<]*)</text>", g)) for g in groups]  # a label's lines
            assert len(ticks) == len(set(ticks)), (svg.name, ticks)


def test_every_lambda_figure_reads(store: Path) -> None:
    """The per-GPU charts cut their labels in the middle ("system=Gold_6230...se, variant=inference (2)"),
    and the throughput charts' labels of twelve systems ran into each other. Every figure is measured as
    it is saved: no tick labels or names that overlap, no label cut, no note over data, no title or legend
    past the figure's edge."""
    assert figure_problems(store) == {}


def test_a_device_measured_on_one_system_per_count_still_has_its_scaling(store: Path) -> None:
    """The per-device scaling table left out the Quadro RTX 6000, whose 1, 2 and 4 GPUs are three
    LambdaCloud instances. Its curves are joined across them (same TensorFlow 1.15.3), and it says so."""
    from bench.analytics.report.findings_section import _scaling_by_device_table
    from bench.analytics.report.select import select_runs

    con = connect(store)
    select_runs(con, None)
    table = _scaling_by_device_table(con)
    assert table is not None
    row = table.frame[table.frame["device"] == "Quadro RTX 6000"].iloc[0]
    assert row["systems"] == "joined across 3 systems (TensorFlow 1.15.3, without XLA)" and row["largest count"] == 4
    assert row["efficiency vs (devices)"] == "1" and 0 < row["median efficiency [%]"] <= 110
    own = table.frame[table.frame["systems"] == ""]
    assert "GeForce RTX 2080 Ti" in set(own["device"]) and "Quadro RTX 6000" not in set(own["device"])


def test_a_device_with_curves_of_its_own_also_shows_its_other_systems_joined(store: Path) -> None:
    """The A100-SXM4-40GB's 95% at 8 GPUs came from its one XLA system's curves; its four one-count systems
    without XLA (7742-1x ... 7742-8xA100-SXM4-40GB_TF2_3) scale resnet50 fp16 at 50%, and nothing said so.
    Now the table has their joined curves in a row of its own, and the finding says both. Expected: every
    curve computed here from the runs (mean of the ok runs per system and count, efficiency = 8-GPU / 1-GPU
    / 8), its median and range."""
    import statistics

    from bench.analytics.findings import scaling_findings
    from bench.analytics.report.findings_section import _scaling_by_device_table
    from bench.analytics.report.select import select_runs

    con = connect(store)

    def efficiencies(systems: str) -> Any:
        """Efficiency at 8 GPUs against 1 of each training workload, from the runs' own means."""
        df = con.execute(f"""SELECT model, precision, batch_size_per_device AS b, data, dataset,
                                    coalesce(tags['variant'], '') AS variant, num_devices AS n,
                                    avg(images_per_sec) AS ips
                             FROM runs WHERE device_model = 'A100-SXM4-40GB' AND mode = 'train' AND status = 'ok'
                               AND tags['system'] {systems} GROUP BY ALL""").df()
        wide = df.pivot_table(index=["model", "precision", "b", "data", "dataset", "variant"], columns="n",
                              values="ips")
        return (wide[8] / wide[1] / 8).dropna()

    eff, mine = efficiencies("NOT LIKE '%XLA%'"), efficiencies("LIKE '%XLA%'")
    assert len(eff) == 36 and round(eff.loc["resnet50", "fp16", 448, "synthetic"].iloc[0], 3) == 0.498
    assert len(mine) == 36
    select_runs(con, None)
    table = _scaling_by_device_table(con)
    assert table is not None
    rows = table.frame[table.frame["device"] == "A100-SXM4-40GB"]
    own = rows[rows["systems"] == ""].iloc[0]
    joined = rows[rows["systems"] == "joined across 4 other systems (TensorFlow 2.3.0, without XLA)"].iloc[0]
    assert own["median efficiency [%]"] == pytest.approx(100 * statistics.median(mine)) and joined["curves"] == 36
    assert joined["median efficiency [%]"] == pytest.approx(100 * statistics.median(eff))
    assert (joined["lowest [%]"], joined["highest [%]"]) == pytest.approx((100 * eff.min(), 100 * eff.max()))
    (text,) = [f.text for f in scaling_findings(con, "x", most=3) if f.text.startswith("A100-SXM4-40GB")]
    assert "all on TensorFlow 2.3.0 with XLA; joined across 4 other systems (TensorFlow 2.3.0, without XLA): " \
           f"{statistics.median(eff):.0%} at 8 devices (median of 36 curves)" in text
