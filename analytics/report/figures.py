"""``bench report``: the figures, drawn once per configuration family (never once per run) with the
functions of bench.analytics.plots, plus the cross-system throughput-per-device bars and one trace.

Choices it makes:
- Per family: the throughput bars (training time on a second axis), the speedup (ideal line, USL fit)
  and the efficiency figure: the Dell-style set. At most ``max_families`` families get figures (their
  tables are always complete); the report says which were left out.
- Throughput per device across systems: one horizontal bar figure per (model, precision) whose
  configurations span 2+ device models or systems: images/s divided by the device count, one bar per
  configuration and device count (the question "which system is fastest per device" is read across bars).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.analytics import plot_data, plots
from bench.analytics.plots import new_figure, varying_labels, wrap
from bench.analytics.report.drawing import Renderer
from bench.analytics.report.family_tables import label_of
from bench.analytics.report.model import Figure, slugify

if TYPE_CHECKING:
    from collections.abc import Sequence

    import duckdb
    import pandas as pd

    from bench.analytics.scaling_laws import ConfigFit

MAX_SERIES = 12  #: series drawn in one family figure (the fastest); the tables hold every one


def family_figures(con: duckdb.DuckDBPyConnection, name: str, family: pd.DataFrame, points: pd.DataFrame,
                   run_ids: tuple[str, ...], fits: Sequence[ConfigFit] | None = None,
                   renderer: Renderer | None = None) -> list[Figure]:
    """Throughput, speedup and efficiency figures of one family (``points``: report.tables.scaling_points
    of its configurations; series labelled by ``family['series']``); speedup and efficiency only when a
    series spans two device counts or more. Empty when no point has a value. ``fits``: scaling_laws.fit of
    ``con`` (the USL curves), computed here when not given; ``renderer``: where they are drawn (here by
    default)."""
    renderer = renderer or Renderer()

    df = points.merge(family[["config_id", "series"]], on="config_id").rename(columns={"series": "label"})
    if df["images_per_sec"].notna().sum() == 0:
        return []
    labels = df.groupby("label")["images_per_sec"].max().sort_values(ascending=False).index.tolist()
    note = ""
    if len(labels) > MAX_SERIES:  # a legend of dozens of systems squeezes the axes to nothing
        df = df[df["label"].isin(set(labels[:MAX_SERIES]))]
        note = f" (the {MAX_SERIES} fastest of {len(labels)} series; every one is in the tables)"
    df = df.sort_values(["label", "num_devices"], kind="stable").reset_index(drop=True)
    ids = ", ".join("'" + c.replace("'", "''") + "'" for c in df["config_id"].unique())
    usl = plot_data.usl_frame(con, df, where=f"config_id IN ({ids})", fits=fits)
    out = []
    kinds: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [("throughput", plots.throughput, (df,))]
    if df.groupby("label")["num_devices"].nunique().max() > 1:  # else every speedup is 1: nothing to show
        kinds += [("speedup", plots.speedup, (df, usl)), ("efficiency", plots.efficiency, (df,))]
    for kind, draw, args in kinds:
        out.append(Figure(f"fig-{slugify(name, 100)}-{kind}", f"{kind.capitalize()}: {name}{note}",
                          renderer.svg(draw, *args, title=name), run_ids))
    return out


def per_device_frame(configs: pd.DataFrame, points: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, frame) per (model, precision) spanning 2+ device models or systems: label, num_devices,
    images_per_device (images/s per device = images/s / device count); points without a value are left out."""

    out = []
    keys = [c for c in ("model", "precision") if c in configs.columns]
    spread = [c for c in configs.columns if c == "device_model" or c.startswith("tag:")]
    for key, g in configs.groupby(keys, sort=True, dropna=False):
        if len(g) < 2 or not spread or g[spread].astype(str).drop_duplicates().shape[0] < 2:
            continue
        among = [c for c in g.columns if c not in ("config_id", *keys)]  # what the figure compares first
        among.sort(key=lambda c: (c not in ("device_model", "tag:system"), c != "device_model"))
        lab = g.assign(label=label_of(g, among))
        df = points.merge(lab[["config_id", "label"]], on="config_id").dropna(subset=["images_per_sec"])
        if df.empty:
            continue
        df = df.assign(images_per_device=df["images_per_sec"] / df["num_devices"])
        values = key if isinstance(key, tuple) else (key,)
        # a value the logs never gave is left out of the title (an MLPerf log names no precision: not "nan")
        title = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True) if not plot_data.is_null(v)) or "every run"
        out.append((title, df[["config_id", "label", "num_devices", "images_per_device"]]))
    return out


def per_device_figure(df: pd.DataFrame, title: str, noun: str = "device") -> Any:
    """Horizontal bars of images/s per device (``noun``: GPU, TPU, ...): one row per configuration (fastest
    per device on top), one bar per device count in it. ``df``: one frame of :func:`per_device_frame`."""

    order = df.groupby("label")["images_per_device"].max().sort_values().index.tolist()
    counts = sorted(df["num_devices"].unique())
    height = 0.8 / len(counts)
    short, shared = varying_labels(order, 60)  # what tells the rows apart, wrapped, never cut
    per_row = max(0.28 * max(1, len(counts) / 2), 0.05 + 0.13 * max(t.count("\n") + 1 for t in short))
    fits = max(1, int((MAX_FIGURE_INCHES - 1.5) / per_row))
    left_out = max(0, len(order) - fits)
    order, short = order[left_out:], short[left_out:]  # the fastest that fit in MAX_FIGURE_INCHES; all in the table
    df = df[df["label"].isin(order)]
    fig = new_figure(10.0, 1.5 + per_row * len(order))
    ax = fig.add_subplot()
    for j, n in enumerate(counts):
        sub = df[df["num_devices"] == n]
        ys = [order.index(lbl) + (j - (len(counts) - 1) / 2) * height for lbl in sub["label"]]
        ax.barh(ys, sub["images_per_device"], height=height, label=f"{int(n)} {noun}")
    ax.set_yticks(range(len(order)), short, fontsize=7)
    ax.set_xlabel(f"throughput per {noun} (images/s per {noun})")
    ax.set_xlim(left=0)  # a rate: the bars start at zero
    ax.set_ylabel("configuration")
    more = f" (the fastest {len(order)}; {left_out} more in the table)" if left_out else ""
    each = f"; each: {shared}" if shared else ""
    ax.set_title(wrap(f"Throughput per {noun}: {title}{more}{each}", 90), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", linestyle=":", alpha=0.5)
    return fig


#: The tallest a figure is drawn (inches; 25 in = 1,800 pt): a page, not a scroll.
MAX_FIGURE_INCHES = 25.0


def trace_figure(con: duckdb.DuckDBPyConnection, run_id: str | None, renderer: Renderer | None = None) -> Figure | None:
    """The ``trace`` figure of ``run_id``, or by default of the first selected run (by run_id) that has
    both steps and telemetry; None when there is no such run. Raises BenchError for an unknown run_id."""
    renderer = renderer or Renderer()

    if run_id is None:
        run_id = plot_data.traced_run(con, None)
        if run_id is None:
            return None
    steps, telemetry = plot_data.trace_frames(con, f"run_id = '{run_id.replace(chr(39), chr(39) * 2)}'")
    return Figure(slugify(f"trace-{run_id}"), f"Trace of run {run_id}: throughput per interval and GPU telemetry",
                  renderer.svg(plots.trace, steps, telemetry), (run_id,))
