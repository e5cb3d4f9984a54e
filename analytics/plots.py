"""The figures of ``bench plot``: one function per kind, a tidy DataFrame in, a matplotlib Figure out.

Frames come from bench.analytics.plot_data. Figures are drawn with the Agg backend (no display needed)
and saved by :func:`save` only. Points are joined by a line only within a series (one configuration
across device counts, one curve across batch sizes, one run across time); bars and heatmap cells are not.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.analytics import plot_data
from bench.analytics.render import WHOLE, shown_figure, shown_xml
from bench.sql.errors import BenchError, UsageError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg", ".pdf")
SPEEDUP_YLABEL = "speedup (× baseline throughput)"


#: The widest a figure may be made, in inches: within 2,400 px at the 150 dpi `bench plot` writes (a
#: screen's width), with room for what a tight save adds around it (render.WHOLE: rotated labels, pads).
MAX_WIDTH_IN = 15.5


def new_figure(width: float = 7.0, height: float = 4.5) -> Any:
    """A new Figure on the Agg canvas (no pyplot, so no global state and no display), at most MAX_WIDTH_IN
    wide."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(min(width, MAX_WIDTH_IN), height), layout="constrained")


#: More series than this and the legend moves outside the axes, to the right, where it hides no data.
LEGEND_INSIDE_MAX = 6


#: Labels are wrapped at this many characters: a configuration's label can name a dozen factors (150
#: characters of the Lambda archive's systems), and as one line it took all the room of the axes.
LABEL_WIDTH = 40


def wrap(label: str, width: int = LABEL_WIDTH) -> str:
    """``label`` on lines of at most ``width`` characters (a longer word stays whole)."""
    import textwrap

    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False, break_long_words=False)) or label


def varying_labels(labels: list[str], width: int = LABEL_WIDTH) -> tuple[list[str], str]:
    """``labels`` ("k=v, k=v, ...") told apart by what varies among them, each wrapped at ``width``, never cut:
    the parts every label shares are taken out and returned, joined, for the title. Labels still alike are
    numbered."""
    parts = [label.split(", ") for label in labels]
    shared = [p for p in parts[0] if all(p in q for q in parts[1:])] if len(parts) > 1 else []
    out = [wrap(", ".join(p for p in q if p not in shared) or "(alike)", width) for q in parts]
    seen: dict[str, int] = {}
    for i, text in enumerate(out):
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:
            out[i] = f"{text} ({seen[text]})"
    return out, ", ".join(shared)


def _crowded(labels: list[str]) -> bool:
    """Whether a legend of these labels would cover the data inside the axes: many entries, or long ones."""
    return len(labels) > LEGEND_INSIDE_MAX or any(len(label) > LABEL_WIDTH for label in labels)


def _legend(ax: Any, n_entries: int, loc: str = "best") -> None:
    """The axes' legend, labels wrapped: inside (``loc``) for a few short entries, else outside on the right
    in one or two columns (the figure's constrained layout makes room for it)."""
    handles, labels = ax.get_legend_handles_labels()
    crowded = _crowded(labels)
    labels = [wrap(label) for label in labels]
    if not crowded:
        ax.legend(handles, labels, fontsize=7, loc=loc)
        return
    ncols = 1 if n_entries <= 24 else 2
    ax.legend(handles, labels, fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              ncols=ncols)
    # the figure grows to hold the legend: 6-pt lines with their spacing, plus the title and margins
    lines = sum(label.count("\n") + 1 for label in labels)
    needed = (lines / ncols + len(labels) / ncols * 0.5) * 6 * 1.25 / 72 + 1.0
    fig = ax.figure
    if needed > fig.get_figheight():
        fig.set_figheight(needed)


def _series(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per configuration (config_id, else label), in the frame's order."""
    key = "config_id" if "config_id" in df.columns else "label"
    return [(str(g["label"].iloc[0]), g) for _, g in df.groupby(key, sort=False)]


def _baseline(g: pd.DataFrame) -> str | None:
    """A configuration's baseline device count and absolute throughput, as text; None without one."""
    base = g.dropna(subset=["baseline_images_per_sec"])
    if base.empty:
        return None
    r = base.iloc[0]
    return f"baseline {int(r['baseline_devices'])} {plot_data.device_noun(g)} = {r['baseline_images_per_sec']:.1f} images/s"


def _style(i: int) -> dict[str, Any]:
    """Series i's marker and line style: colours repeat every 10 series, so the marker and dash change."""
    return {"marker": "osD^v"[(i // 10) % 5], "linestyle": ("-", "-.", (0, (1, 1)))[(i // 50) % 3]}


def speedup(df: pd.DataFrame, usl: pd.DataFrame | None = None) -> Figure:
    """Speedup against device count: one marked line per configuration (points with a speedup), the ideal
    line y = x / smallest baseline, the USL fit (dashed) per configuration in ``usl``, and each
    baseline's absolute throughput written in the lower right. ``df``: plot_data.scaling_frame."""
    pts = df.dropna(subset=["speedup"])
    if pts.empty:
        raise BenchError("no configuration has a speedup to plot: none has ok runs at two device counts or more "
                         "(one measured at a single count has nothing to be scaled against)")
    series = _series(pts)
    many = _crowded([label for label, _ in series])  # then each baseline goes into its legend entry, not over the data
    fig = new_figure(12.0 if many else 7.0, 4.5)  # room on the right for the legend
    ax = fig.add_subplot()
    base = float(pts["baseline_devices"].min())
    top = float(pts["num_devices"].max())
    ax.plot([base, top], [1.0, top / base], color="grey", linestyle=":", label="ideal (linear)")
    for i, (label, g) in enumerate(series):
        note = _baseline(g)
        shown = f"{label} ({note})" if many and note else label
        (line,) = ax.plot(g["num_devices"], g["speedup"], label=shown, **_style(i))
        if usl is not None and not usl.empty:
            curve = usl[usl["config_id"] == g["config_id"].iloc[0]]
            if not curve.empty:
                ax.plot(curve["num_devices"], curve["usl_speedup"], linestyle="--", color=line.get_color(),
                        label=f"USL fit: {label}")
    ax.set_xlabel(f"{plot_data.device_noun(df)}s (count)")
    ax.set_ylabel(SPEEDUP_YLABEL)
    ax.set_title("Speedup")
    ax.set_xticks(sorted(pts["num_devices"].unique()))
    if not many:
        text = "\n".join(wrap(f"{label}: {note}", 60) for label, g in series if (note := _baseline(g)))
        ax.text(0.98, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.set_ylim(bottom=0)
    _legend(ax, len(ax.get_legend_handles_labels()[1]), loc="upper left")
    return fig


def efficiency(df: pd.DataFrame) -> Figure:
    """Scaling efficiency (speedup / device multiple) in percent against device count, one marked line per
    configuration, with the 100% line; never clamped. ``df``: plot_data.scaling_frame."""
    pts = df.dropna(subset=["efficiency"])
    if pts.empty:
        raise BenchError("no configuration has an efficiency to plot: none has ok runs at two device counts or more "
                         "(one measured at a single count has nothing to be scaled against)")
    fig = new_figure(10.0 if len(_series(pts)) > LEGEND_INSIDE_MAX else 7.0, 4.5)
    ax = fig.add_subplot()
    ax.axhline(100.0, color="grey", linestyle=":", label="100% (linear scaling)")
    for i, (label, g) in enumerate(_series(pts)):
        ax.plot(g["num_devices"], g["efficiency"] * 100.0, label=label, **_style(i))
    ax.set_xlabel(f"{plot_data.device_noun(df)}s (count)")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title("Scaling efficiency")
    ax.set_xticks(sorted(pts["num_devices"].unique()))
    ax.set_ylim(bottom=0)
    _legend(ax, len(ax.get_legend_handles_labels()[1]))
    return fig


def throughput(df: pd.DataFrame) -> Figure:
    """Images/s bars: one group per configuration, one bar per device count in it; 95% CI error bars where
    the point has repetitions (ci95 known); training time (wall_time_s, mean of ok runs) as a marked
    line per configuration on a second axis when any is known. Failed points (no mean) get no bar."""
    fig = new_figure(max(7.0, 1.2 * df["label"].nunique() + 3), 4.5)
    ax = fig.add_subplot()
    groups = _series(df)
    counts = sorted(df["num_devices"].dropna().unique())
    width = 0.8 / max(len(counts), 1)
    ax2 = ax.twinx() if df["wall_time_s"].notna().any() else None
    for j, n in enumerate(counts):
        _bars(ax, groups, n, (j - (len(counts) - 1) / 2) * width, width, plot_data.device_noun(df))
    if ax2 is not None:
        labelled = False
        for i, (_, g) in enumerate(groups):
            t = g.dropna(subset=["wall_time_s"])
            if t.empty:
                continue
            xs = [i + (counts.index(n) - (len(counts) - 1) / 2) * width for n in t["num_devices"]]
            ax2.plot(xs, t["wall_time_s"], color="black", marker="s", markersize=4,
                     label=None if labelled else "training time")  # one legend entry for all groups
            labelled = True
        ax2.set_ylabel("training time (s)")
        ax2.legend(fontsize=7, loc="upper right")
    crowded = len(groups) > 12  # at most MAX_WIDTH_IN wide: many groups stand their labels upright
    labels, shared = varying_labels([label for label, _ in groups], 70 if crowded else 30)  # upright: few lines
    ax.set_xticks(range(len(groups)), labels, rotation=90 if crowded else 20,
                  ha="center" if crowded else "right", fontsize=5 if crowded else 7)
    ax.set_ylabel("throughput (images/s)")
    each = f"\n(each: {shared})" if shared else ""
    ax.set_title(wrap(f"Throughput per {plot_data.device_noun(df)} count{each}", 90), fontsize=8)
    ax.set_ylim(bottom=0)  # a rate: bars and their error bars start at zero
    if ax2 is not None:
        ax2.set_ylim(bottom=0)
    _legend(ax, len(counts), loc="upper left")
    return fig


def _bars(ax: Any, groups: list[tuple[str, pd.DataFrame]], n: float, shift: float, width: float, noun: str) -> None:
    """The bars of device count ``n``, one per group that has a mean there, at group index + ``shift``;
    a 95% CI error bar where the point has one (repetitions), none elsewhere."""
    import numpy as np

    xs, ys, lo, hi = [], [], [], []
    for i, (_, g) in enumerate(groups):
        for _, row in g[(g["num_devices"] == n) & g["images_per_sec"].notna()].iterrows():
            xs.append(i + shift)
            ys.append(row["images_per_sec"])
            has_ci = np.isfinite(row["ci95_low"]) and np.isfinite(row["ci95_high"])
            lo.append(row["images_per_sec"] - row["ci95_low"] if has_ci else 0.0)
            hi.append(row["ci95_high"] - row["images_per_sec"] if has_ci else 0.0)
    # lists, not a (2, n) array: matplotlib's first-finite probe warns on one-element rows
    err = [lo, hi] if any(lo) or any(hi) else None
    ax.bar(xs, ys, width=width, yerr=err, capsize=3, label=f"{int(n)} {noun}")


def ratio(df: pd.DataFrame, title: str = "ratio") -> Figure:
    """Heatmap of A/B ratios: configurations (rows) × device count (columns), each cell labelled ``4.73×``;
    an empty cell is a configuration not measured (or not paired) at that count. Colours are on a log
    scale centred on 1 (A = B). ``df``: plot_data.ratio_frame."""
    import numpy as np
    from matplotlib.colors import LogNorm

    grid = df.pivot_table(index="label", columns="num_devices", values="ratio", aggfunc="first")
    fig = new_figure(max(5.0, 1.0 * grid.shape[1] + 4), max(2.5, 0.4 * grid.shape[0] + 1.5))
    ax = fig.add_subplot()
    vals = grid.to_numpy(dtype=float)
    span = float(np.nanmax(np.abs(np.log(vals)))) or 0.1
    im = ax.imshow(vals, cmap="RdBu_r", norm=LogNorm(np.exp(-span), np.exp(span)), aspect="auto")
    for (i, j), v in np.ndenumerate(vals):
        if np.isfinite(v):
            dark = abs(np.log(v)) > span / 2  # white on the saturated end of the colour map
            ax.text(j, i, f"{v:.2f}×", ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(grid.shape[1]), [str(int(c)) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), list(grid.index), fontsize=7)
    ax.set_xlabel(f"{plot_data.device_noun(df)}s (count)")
    ax.set_ylabel("configuration")
    fig.suptitle(title, fontsize=9)  # over the whole figure: the row labels widen it
    from matplotlib.ticker import FuncFormatter

    bar = fig.colorbar(im, ax=ax, label="ratio A / B (×)")
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}×"))  # not LogNorm's 4×10⁰
    bar.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.2g}×"))
    return fig


def minibatch(df: pd.DataFrame) -> Figure:
    """ms per image against batch size per device: forward+backward (solid) and forward (dashed, where
    logged), one line per curve; batch sizes that ran out of memory are marked with an × on the x axis
    (they have no time), never dropped. ``df``: plot_data.minibatch_frame."""
    fig = new_figure()
    ax = fig.add_subplot()
    for label, g in _series(df.rename(columns={"curve_id": "config_id"})):
        ok = g.dropna(subset=["ms_per_image"])
        (line,) = ax.plot(ok["batch_size_per_device"], ok["ms_per_image"], marker="o", label=f"{label} (fwd+bwd)")
        fwd = g.dropna(subset=["forward_ms_per_image"])
        if not fwd.empty:
            ax.plot(fwd["batch_size_per_device"], fwd["forward_ms_per_image"], marker="o", linestyle="--",
                    color=line.get_color(), label=f"{label} (forward)")
        oom = g[g["oom"].fillna(False).astype(bool)]
        if not oom.empty:
            ax.plot(oom["batch_size_per_device"], [0.0] * len(oom), linestyle="none", marker="x", markersize=9,
                    color=line.get_color(), label=f"{label}: out of memory")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"batch size per {plot_data.device_noun(df)} (images)")
    ax.set_ylabel("time per image (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("Mini-batch efficiency")
    _legend(ax, len(ax.get_legend_handles_labels()[1]))
    return fig


#: The telemetry a trace shows, first found first: (column of plot_data.trace_frames, label saying what
#: measured it).
TRACE_TELEMETRY = (("temperature_c", "GPU temperature (°C, nvidia-smi)"),
                   ("gpu_utilization_pct", "GPU utilisation (%, nvidia-smi)"),
                   ("cpu_utilization_pct", "CPU busy (%, host /proc/stat)"))


def trace(steps: pd.DataFrame, telemetry: pd.DataFrame | None = None) -> Figure:
    """One run's per-interval throughput over time (seconds where the log stamps its steps, else steps), the
    warm-up cut as a vertical line at the first steady interval, and its telemetry (TRACE_TELEMETRY: GPU
    temperature, else GPU utilisation, else the host's CPU busy share), each labelled by what measured it:
    on a second y axis when both are on the seconds clock, else in a panel of its own below, on its own
    clock. ``steps``, ``telemetry``: plot_data.trace_frames."""
    unit = str(steps["x_unit"].iloc[0]) if len(steps) else "step"
    shown = None
    if telemetry is not None and not telemetry.empty:
        for col, label in TRACE_TELEMETRY:
            t = telemetry.dropna(subset=["elapsed_s", col]) if col in telemetry else telemetry.iloc[0:0]
            if not t.empty:
                shown = (t, col, label)
                break
    below = shown is not None and unit != "s"  # two clocks: never one axis for steps and seconds
    fig = new_figure(7.0, 6.0 if below else 4.5)
    ax, ax_t = (fig.subplots(2, 1) if below else (fig.add_subplot(), None))
    ax.plot(steps["x"], steps["interval_images_per_sec"], marker=".", label="images/s per interval")
    steady = steps[~steps["warmup"]]
    if steps["warmup"].any() and not steady.empty:
        ax.axvline(float(steady["x"].iloc[0]), color="red", linestyle="--", label="warm-up cut (MSER-5)")
    ax.set_xlabel("time since first interval (s)" if unit == "s" else "step (count)")
    ax.set_ylabel("throughput (images/s)")
    top = float(steps["interval_images_per_sec"].max()) if len(steps) else 0.0
    ax.set_ylim(0, top * 1.3 if top > 0 else None)  # room above the line for the legends
    ax.set_title(f"Run {steps['run_id'].iloc[0]}" if len(steps) else "Run")
    ax.legend(fontsize=7, loc="lower right")
    if shown is not None:
        t, col, label = shown
        other = ax_t if ax_t is not None else ax.twinx()
        other.plot(t["elapsed_s"], t[col], color="tab:orange", label=label)
        other.set_ylabel(label)
        if ax_t is not None:
            ax_t.set_xlabel("time since the first telemetry sample (s)")
        other.legend(fontsize=7, loc="upper right")
    return fig


def save(fig: Figure, out: Path) -> Path:
    """Write ``fig`` to ``out`` (format from its suffix: .png, .svg or .pdf); returns ``out``.
    Raises BenchError for another suffix or an unwritable path."""
    if out.suffix.lower() not in FORMATS:
        raise UsageError(f"--out must end in {', '.join(FORMATS)}, got {out.name!r}")
    shown_figure(fig)
    try:
        fig.savefig(out, dpi=150, **WHOLE)
        if out.suffix.lower() == ".svg":  # tick labels are made while drawing, after shown_figure
            out.write_bytes(shown_xml(out.read_bytes()))
    except OSError as e:
        raise BenchError(f"cannot write {out}: {e.strerror or e}") from e
    return out


KINDS = ("speedup", "efficiency", "throughput", "ratio", "minibatch", "trace")


def make_figure(con: Any, kind: str, where: str | None = None, by: str | None = None,
                a: str | None = None, b: str | None = None) -> Figure:
    """The figure of ``kind`` (one of :data:`KINDS`) over the views on ``con``, rows filtered by ``where``.
    ``by``: the factor written first in series labels; for ``ratio`` the compared factor, with values
    ``a`` (numerator) and ``b``. Raises BenchError for an unknown kind or missing ratio options."""

    if kind in ("speedup", "efficiency", "throughput"):
        df = plot_data.scaling_frame(con, where, by)
        if df.empty:
            raise BenchError("no configuration with a device count matches" + (f" --where {where!r}" if where else ""))
        if kind == "speedup":
            return speedup(df, plot_data.usl_frame(con, df, where))
        return efficiency(df) if kind == "efficiency" else throughput(df)
    if kind == "ratio":
        if not (by and a and b):
            raise UsageError("plot ratio needs --by FACTOR --a VALUE --b VALUE, e.g. --by device_model --a P100 --b K80")
        return ratio(*plot_data.ratio_frame(con, by, a, b, where))
    if kind == "minibatch":
        df = plot_data.minibatch_frame(con, where, by)
        if df.empty:
            raise BenchError("no minibatch point matches" + (f" --where {where!r}" if where else ""))
        return minibatch(df)
    if kind == "trace":
        return trace(*plot_data.trace_frames(con, where))
    raise UsageError(f"unknown plot kind {kind!r}; choose one of: {', '.join(KINDS)}")
