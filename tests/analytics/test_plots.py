"""bench plot: the tidy frames (plot_data) and the figures (plots) on small hand-made runs/steps tables,
checked on the axes' data and labels; and the command on the official 2017 sheet ingested once.

Expected values are computed by hand in the comments from the given rows."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import matplotlib
import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from bench.analytics import plot_data, plots
from bench.runner.commands.plot_cmd import plot_command
from bench.sql.errors import BenchError
from bench.sql.schema import RUNS, STEPS, TELEMETRY
from bench.sql.views import register_views

matplotlib.use("Agg")
approx = pytest.approx


def _run(run_id: str, gpu: str, n: int, ips: float | None, status: str = "ok", **kw: Any) -> dict[str, Any]:
    return {"run_id": run_id, "framework": "tensorflow", "model": "resnet50", "data": "synthetic",
            "batch_size_per_device": kw.pop("batch", 64), "device_type": "gpu", "device_model": gpu, "num_devices": n, "num_nodes": 1,
            "images_per_sec": ips, "status": status, **kw}


# P100: 1 GPU twice (100, 110: mean 105), 2 GPUs 200, 4 GPUs 380 plus a failed 4-GPU run (never a zero).
# K80: measured from 2 GPUs up (50, then 90 at 4): its baseline is 2 GPUs.
RUNS_ROWS = [
    _run("p1a", "P100", 1, 100.0, wall_time_s=600.0),
    _run("p1b", "P100", 1, 110.0, wall_time_s=620.0),
    _run("p2", "P100", 2, 200.0, wall_time_s=330.0),
    _run("p4", "P100", 4, 380.0, wall_time_s=170.0),
    _run("p4x", "P100", 4, None, status="failed"),
    _run("k2", "K80", 2, 50.0),
    _run("k4", "K80", 4, 90.0),
]


def _con(rows: list[dict[str, Any]], views: list[str], steps: pa.Table | None = None,
         telemetry: pa.Table | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("runs", pa.Table.from_pylist(rows, schema=RUNS))
    con.register("steps", steps if steps is not None else STEPS.empty_table())
    con.register("telemetry", telemetry if telemetry is not None else TELEMETRY.empty_table())
    register_views(con, views)
    return con


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return _con(RUNS_ROWS, ["run_configs", "configs", "scaling"])


def _line(ax: Any, label: str) -> Any:
    found = [ln for ln in ax.get_lines() if ln.get_label() == label]
    assert len(found) == 1, [ln.get_label() for ln in ax.get_lines()]
    return found[0]


def test_labels_name_only_the_varying_factors(con: duckdb.DuckDBPyConnection) -> None:
    df = plot_data.scaling_frame(con)
    assert sorted(set(df["label"])) == ["device_model=K80", "device_model=P100"]
    # --by puts a constant factor first, still followed by the varying one
    df = plot_data.scaling_frame(con, by="model")
    assert sorted(set(df["label"])) == ["model=resnet50, device_model=K80", "model=resnet50, device_model=P100"]
    with pytest.raises(BenchError, match="unknown factor"):
        plot_data.scaling_frame(con, by="colour")


def test_two_series_equal_but_for_a_tag_are_named_apart() -> None:
    """`bench plot speedup` showed "data=real, mode=inference" twice in one legend (the variant tag
    dropped). Labels that two configurations share now say the tags that differ, NULL included."""
    rows = [_run("a1", "P100", 1, 100.0), _run("a2", "P100", 2, 190.0),
            _run("b1", "P100", 1, 80.0, tags={"variant": "distortions"}), _run("b2", "P100", 2, 150.0, tags={"variant": "distortions"}),
            _run("k1", "K80", 1, 30.0), _run("k2", "K80", 2, 55.0)]
    df = plot_data.scaling_frame(_con(rows, ["run_configs", "configs", "scaling"]))
    assert sorted(set(df["label"])) == ["device_model=K80", "device_model=P100, variant=NULL",
                                        "device_model=P100, variant=distortions"]
    fig = plots.speedup(df, plot_data.usl_frame(_con(rows, ["run_configs", "configs", "scaling"]), df))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(legend) == len(set(legend))


def test_speedup_lines_ideal_and_baseline_text(con: duckdb.DuckDBPyConnection) -> None:
    df = plot_data.scaling_frame(con)
    fig = plots.speedup(df, plot_data.usl_frame(con, df))
    ax = fig.axes[0]
    p100 = _line(ax, "device_model=P100")
    assert list(p100.get_xdata()) == [1, 2, 4]
    assert list(p100.get_ydata()) == approx([1.0, 200 / 105, 380 / 105])  # the failed run is not a zero
    k80 = _line(ax, "device_model=K80")
    assert list(k80.get_xdata()) == [2, 4]
    assert list(k80.get_ydata()) == approx([1.0, 90 / 50])
    ideal = _line(ax, "ideal (linear)")
    assert list(ideal.get_xdata()) == [1.0, 4.0] and list(ideal.get_ydata()) == [1.0, 4.0]
    # P100's 3 GPU counts give USL's 2 parameters nothing to test them with, K80's 2 are not fitted: no curve
    assert not [ln for ln in ax.get_lines() if ln.get_label().startswith("USL fit")]
    texts = "\n".join(t.get_text() for t in ax.texts)
    assert "device_model=P100: baseline 1 GPU = 105.0 images/s" in texts
    assert "device_model=K80: baseline 2 GPU = 50.0 images/s" in texts
    assert ax.get_xlabel() == "GPUs (count)"
    assert ax.get_ylabel() == "speedup (× baseline throughput)"


def test_efficiency_in_percent_with_the_100_line_unclamped() -> None:
    rows = [_run("a1", "P100", 1, 100.0), _run("a2", "P100", 2, 210.0), _run("a4", "P100", 4, 360.0)]
    fig = plots.efficiency(plot_data.scaling_frame(_con(rows, ["run_configs", "configs", "scaling"])))
    ax = fig.axes[0]
    line = _line(ax, "model=resnet50")  # nothing varies: labelled by the model
    assert list(line.get_ydata()) == approx([100.0, 105.0, 90.0])  # 210/100/2 = 105%: superlinear, kept
    assert list(_line(ax, "100% (linear scaling)").get_ydata()) == [100.0, 100.0]
    assert ax.get_ylabel() == "scaling efficiency (%)"


def test_throughput_bars_ci_and_training_time(con: duckdb.DuckDBPyConnection) -> None:
    fig = plots.throughput(plot_data.scaling_frame(con))
    ax, ax2 = fig.axes[0], fig.axes[1]
    heights = {c.get_label(): [b.get_height() for b in c] for c in ax.containers if hasattr(c, "patches")}
    # groups in label order: K80 (0), P100 (1); K80 has no 1-GPU point, so no bar
    assert heights["1 GPU"] == approx([105.0])
    assert heights["2 GPU"] == approx([50.0, 200.0])
    assert heights["4 GPU"] == approx([90.0, 380.0])
    # 95% CI of the 1-GPU mean: t(0.975, 1) * sd / sqrt(2), sd of (100, 110) = sqrt(50)
    half = 12.706205 * math.sqrt(50) / math.sqrt(2)
    bars_1 = next(c for c in ax.containers if c.get_label() == "1 GPU")
    err = bars_1.errorbar.lines[2][0].get_segments()[0]
    assert [y for _, y in err] == approx([105.0 - half, 105.0 + half])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["device_model=K80", "device_model=P100"]
    assert ax.get_ylabel() == "throughput (images/s)"
    time = _line(ax2, "training time")  # only P100 knows its wall time: 610 = mean(600, 620)
    assert list(time.get_ydata()) == approx([610.0, 330.0, 170.0])
    assert ax2.get_ylabel() == "training time (s)"


def test_ratio_heatmap_cells_from_compare(con: duckdb.DuckDBPyConnection) -> None:
    df, title = plot_data.ratio_frame(con, "device_model", "P100", "K80")
    fig = plots.ratio(df, title)
    ax = fig.axes[0]
    # pairs at 2 GPUs: 200/50 = 4; at 4 GPUs: 380/90 = 4.222 (P100 1-GPU has no K80 partner)
    assert sorted(t.get_text() for t in ax.texts) == ["4.00×", "4.22×"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]
    assert "median 4.11×" in fig.get_suptitle()  # median of 4 and 4.222 = 4.111
    assert ax.get_xlabel() == "GPUs (count)"


def test_minibatch_curve_forward_and_oom_marked() -> None:
    rows = [
        _run("m32", "P100", 1, None, batch=32, forward_backward_ms=64.0, forward_ms=16.0),  # 2 ms, 0.5 ms
        _run("m64", "P100", 1, None, batch=64, forward_backward_ms=96.0, forward_ms=32.0),  # 1.5, 0.5
        _run("m128", "P100", 1, None, batch=128, status="oom"),
    ]
    fig = plots.minibatch(plot_data.minibatch_frame(_con(rows, ["minibatch"])))
    ax = fig.axes[0]
    fb = _line(ax, "model=resnet50 (fwd+bwd)")
    assert list(fb.get_xdata()) == [32, 64] and list(fb.get_ydata()) == approx([2.0, 1.5])
    assert list(_line(ax, "model=resnet50 (forward)").get_ydata()) == approx([0.5, 0.5])
    oom = _line(ax, "model=resnet50: out of memory")
    assert list(oom.get_xdata()) == [128] and oom.get_linestyle() == "None"
    assert ax.get_ylabel() == "time per image (ms)"
    assert ax.get_xlabel() == "batch size per GPU (images)"


def _steps(rates: list[float], t0: float = 1000.0) -> pa.Table:
    n = len(rates)
    return pa.Table.from_pylist(
        [{"run_id": "r1", "step": 10 * (i + 1), "rank": 0, "interval_images_per_sec": r,
          "timestamp": t0 + 2.0 * i, "line_no": i} for i, r in enumerate(rates)]
        # rank 1 must be ignored, as run_stats does
        + [{"run_id": "r1", "step": 10, "rank": 1, "interval_images_per_sec": 1.0, "line_no": n}],
        schema=STEPS)


def test_trace_warmup_cut_and_temperature() -> None:
    # 5 slow intervals then 15 steady ones: MSER-5 cuts the first batch of 5
    rates = [20.0, 40.0, 60.0, 80.0, 90.0] + [100.0, 101.0, 99.0, 100.0, 100.0] * 3
    tel = pa.Table.from_pylist(
        [{"run_id": "r1", "sample_index": s, "gpu_index": g, "elapsed_s": float(s), "temperature_c": 60.0 + s + g}
         for s in range(3) for g in range(2)], schema=TELEMETRY)
    con = _con([_run("r1", "P100", 2, 100.0)], [], steps=_steps(rates), telemetry=tel)
    steps, telemetry = plot_data.trace_frames(con)
    fig = plots.trace(steps, telemetry)
    ax, ax2 = fig.axes
    series = _line(ax, "images/s per interval")
    assert list(series.get_xdata()) == approx([2.0 * i for i in range(20)])
    assert list(series.get_ydata()) == rates
    assert list(_line(ax, "warm-up cut (MSER-5)").get_xdata()) == [10.0, 10.0]  # 6th interval, t = 10 s
    assert ax.get_xlabel() == "time since first interval (s)"
    temp = _line(ax2, "GPU temperature (°C, nvidia-smi)")
    assert list(temp.get_ydata()) == approx([60.5, 61.5, 62.5])  # mean of the two GPUs per sample
    with pytest.raises(BenchError, match="no run with step rows"):
        plot_data.trace_frames(con, where="run_id = 'nope'")


def test_trace_of_untimed_steps_puts_host_cpu_telemetry_on_its_own_clock() -> None:
    """The trace plotted telemetry seconds on a "step (count)" axis and called the host's CPU busy share
    "GPU utilisation (%)". Steps without stamps are on a step axis; the samples get a panel on seconds."""
    rates = [100.0, 101.0, 99.0, 100.0, 100.0] * 4
    tel = pa.Table.from_pylist(
        [{"run_id": "r1", "sample_index": s, "gpu_index": None, "elapsed_s": 5.0 * s, "utilization_pct": 90.0 + s}
         for s in range(4)], schema=TELEMETRY)
    steps_rows = _steps(rates).to_pylist()
    for row in steps_rows:
        row["timestamp"] = None
    con = _con([_run("r1", "cpu", 1, 100.0)], [], steps=pa.Table.from_pylist(steps_rows, schema=_steps(rates).schema),
               telemetry=tel)
    steps, telemetry = plot_data.trace_frames(con)
    fig = plots.trace(steps, telemetry)
    top, below = fig.axes
    assert top.get_xlabel() == "step (count)"
    assert below.get_xlabel() == "time since the first telemetry sample (s)"
    cpu = _line(below, "CPU busy (%, host /proc/stat)")
    assert list(cpu.get_xdata()) == [0.0, 5.0, 10.0, 15.0] and list(cpu.get_ydata()) == [90.0, 91.0, 92.0, 93.0]
    assert not [ln for ax in fig.axes for ln in ax.get_lines() if "GPU" in str(ln.get_label())]


def test_save_formats(tmp_path: Path, con: duckdb.DuckDBPyConnection) -> None:
    fig = plots.make_figure(con, "efficiency")
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        assert plots.save(fig, tmp_path / f"f{suffix}").read_bytes().startswith(magic)
    with pytest.raises(BenchError, match="must end in"):
        plots.save(fig, tmp_path / "f.jpg")
    with pytest.raises(BenchError, match="needs --by"):
        plots.make_figure(con, "ratio")
    with pytest.raises(BenchError, match="with --where"):
        plots.make_figure(con, "speedup", where="no_such_column = 1")


@pytest.fixture(scope="module")
def official_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench.ingest.pipeline import ingest

    from .test_official_2017 import FOLDER, PATTERN, make_logs

    store = tmp_path_factory.mktemp("official-2017") / "store"
    ingest([str(FOLDER / make_logs.SOURCE)], store, path_patterns=[PATTERN], workers=0)
    return store


def test_command_on_the_official_sheet(official_store: Path, tmp_path: Path) -> None:
    from bench.sql.read import connect

    app = typer.Typer()
    app.command()(plot_command)
    out = tmp_path / "speedup.svg"
    where = "model = 'inception3' AND data = 'synthetic' AND batch_size_per_device = 64"
    res = CliRunner().invoke(app, ["speedup", "--where", where, "--by", "device_model", "--out", str(out),
                                   "--store", str(official_store)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(out) and out.read_bytes().startswith(b"<?xml")
    # Published P100 inception3 bs64 synthetic: 142, 284, 596, 1131 images/s on 1, 2, 4, 8 GPUs
    ax = plots.make_figure(connect(official_store), "speedup", where=where, by="device_model").axes[0]
    line = _line(ax, "device_model=Tesla P100-SXM2-16GB")
    assert list(line.get_xdata()) == [1, 2, 4, 8]
    assert list(line.get_ydata()) == approx([1.0, 284 / 142, 596 / 142, 1131 / 142], rel=1e-3)
    assert "device_model=Tesla K80: baseline 1 GPU = 30.0 images/s" in ax.texts[0].get_text()
    res = CliRunner().invoke(app, ["ratio", "--store", str(official_store)])
    assert res.exit_code != 0 and "needs --by" in str(res.exception)


def test_bench_help_does_not_import_matplotlib() -> None:
    code = "import sys, bench.runner.commands.plot_cmd; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_twenty_series_keep_their_legend_outside_and_rate_axes_start_at_zero() -> None:
    """20 configurations (batch sizes 1-20, precision NULL in half of them): the legend sits right of the
    axes, labels say NULL (never nan), and the throughput, speedup and efficiency axes start at 0."""
    import pandas as pd

    from bench.analytics import plots
    from bench.analytics.plot_data import add_labels

    rows = []
    for b in range(1, 21):
        for n in (1, 2, 4):
            rate = 100.0 * b * n * 0.9
            rows.append({"config_id": f"c{b}", "model": "resnet50", "batch_size_per_device": float(b),
                         "precision": None if b % 2 else "fp32", "num_devices": n, "num_nodes": 1,
                         "images_per_sec": rate, "ci95_low": rate - 5, "ci95_high": rate + 5, "wall_time_s": None,
                         "baseline_devices": 1, "baseline_images_per_sec": 90.0 * b,
                         "speedup": rate / (90.0 * b), "efficiency": rate / (90.0 * b) / n})
    df = add_labels(pd.DataFrame(rows))
    assert "precision=NULL" in df["label"].iloc[0] and not df["label"].str.contains("nan").any()
    assert df["label"].iloc[0].endswith("batch_size_per_device=1")  # 1, not 1.0
    for fig in (plots.speedup(df), plots.efficiency(df), plots.throughput(df)):
        ax = fig.axes[0]
        assert ax.get_ylim()[0] == 0
        legend = ax.get_legend()
        anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
        if len(legend.get_texts()) > plots.LEGEND_INSIDE_MAX:
            assert anchor.x0 > 1.0  # right of the axes


LONG = [f"GeForce RTX 2080 Ti with a system name as long as the Lambda archive's, number {i} " + "x" * 60
        for i in range(4)]


@pytest.mark.parametrize("draw", ["throughput", "speedup", "efficiency"])
def test_configurations_with_labels_of_150_characters_leave_the_axes_their_room(draw: str) -> None:
    """Such labels (the Lambda archive's systems) were drawn on one line: matplotlib warned that the
    axes had collapsed to nothing, and the report's figure showed no data."""
    import io
    import warnings

    rows = [_run(f"r{i}{n}", gpu, n, 100.0 * n * (1 + i / 10)) for i, gpu in enumerate(LONG) for n in (1, 2)]
    df = plot_data.scaling_frame(_con(rows, ["run_configs", "configs", "scaling"]))
    fig = getattr(plots, draw)(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied because axes sizes collapsed"
        fig.savefig(io.BytesIO(), format="png")
    box = fig.axes[0].get_position()
    assert box.width > 0.3 and box.height > 0.3  # of the figure


def test_a_family_at_one_device_count_has_no_speedup_or_efficiency_figure() -> None:
    from bench.analytics.report import figures as report_figures

    rows = [_run("a", "P100", 1, 100.0), _run("b", "K80", 1, 40.0)]
    con = _con(rows, ["run_configs", "configs", "scaling"])
    df = plot_data.scaling_frame(con)
    family = df[["config_id"]].drop_duplicates().assign(series=["P100", "K80"])
    figures = report_figures.family_figures(con, "resnet50", family, df.drop(columns="label"), ())
    assert [f.caption.split(":")[0] for f in figures] == ["Throughput"]


def test_usl_curve_is_drawn_where_the_points_test_the_law() -> None:
    rows = [_run(f"a{n}", "P100", n, v) for n, v in ((1, 100.0), (2, 190.0), (4, 350.0), (8, 600.0))]
    con = _con(rows, ["run_configs", "configs", "scaling"])
    df = plot_data.scaling_frame(con)
    usl = plot_data.usl_frame(con, df)
    assert usl["num_devices"].iloc[0] == approx(1.0) and usl["usl_speedup"].iloc[0] == approx(1.0)
    assert usl["num_devices"].iloc[-1] == approx(8.0) and 5.0 < usl["usl_speedup"].iloc[-1] < 7.0  # measured 6.0


@pytest.mark.parametrize("kind", ["speedup", "efficiency", "throughput", "ratio"])
def test_every_figure_fits_a_screen_with_its_legend_inside(official_store: Path, kind: str, tmp_path: Path) -> None:
    """`bench plot throughput` on the demo store made an 11,070-px-wide image, and long legends ran off the
    figure. At the 150 dpi `bench plot` writes, no figure is wider than 2,400 px, and every legend lies
    within the figure."""
    import struct

    from bench.sql.read import connect

    con = connect(official_store)
    extra = {"by": "gpu_model", "a": "Tesla P100-SXM2-16GB", "b": "Tesla K80"} if kind == "ratio" else {}
    fig = plots.make_figure(con, kind, **extra)
    png = plots.save(fig, tmp_path / "f.png").read_bytes()
    (width,) = struct.unpack(">I", png[16:20])
    assert width <= 2400, (kind, width)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            ext = legend.get_window_extent(renderer)
            assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, kind
