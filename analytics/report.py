"""``bench report``: selection -> sections -> writers.

:func:`build_report` narrows a store connection to the selection and builds the report as plain data
(report_model: tables of unformatted numbers with the runs behind each, figures as PNG bytes);
:func:`write_report` writes it into a folder: ``report.html`` (one self-contained file: CSS inline, PNGs
as data: URIs, no script, no network), ``report.md`` with ``figures/*.png`` beside it, and every table
as ``tables/<slug>.csv``. Section order: selection, families, ratios, scaling laws, flagged runs,
throughput per device across systems, trace, provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics import report_figures as figs
from bench.analytics import report_select as sel
from bench.analytics import report_tables as tab
from bench.analytics.compare import compare
from bench.analytics.plot_data import device_noun
from bench.analytics.report_figures import trace_figure
from bench.analytics.report_html import render_html
from bench.analytics.report_md import render_md, unique_slugs, write_assets
from bench.analytics.report_mlperf import mlperf_sections
from bench.analytics.report_model import Figure, Report, Section, Table, png_bytes, slugify
from bench.analytics.store import connect
from bench.ingest.errors import BenchError

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Options:
    """What to report. ``where``: SQL over ``runs``; ``equivalence``: margin (0.05 = ±5%) of the TOST on
    every ratio; ``trace``: run_id of the trace figure (default: the first run with telemetry);
    ``max_families``: families that get figures (tables cover all)."""

    where: str | None = None
    ignore: tuple[str, ...] = ()  # --ignore: factors or tags taken out of the configuration identity
    title: str = "Benchmark report"
    equivalence: float | None = None
    trace: str | None = None
    max_families: int = 12
    mlperf_compare: tuple[str, str, str] | None = None  # (factor, A, B) of the MLPerf speedup table


def build_report(con: duckdb.DuckDBPyConnection, opts: Options) -> Report:
    """The report of the runs of ``con`` (report_select.connect-style views) selected by ``opts.where``.

    Changes ``con`` (the selection replaces the view ``runs``). Raises BenchError for a bad --where, an
    empty selection, a bad --equivalence or an unknown --trace run.
    """

    n = sel.select_runs(con, opts.where, opts.ignore)
    configs = tab.configs_frame(con)
    labels = tab.config_labels(configs)
    runs = sel.point_runs(con)
    sections = [Section("Selection", [sel.describe(opts.where, n)], [sel.summary_table(con), sel.status_table(con)])]
    sections += _family_sections(con, configs, runs, opts.max_families)
    sections.append(_ratio_section(con, configs, runs, opts.equivalence))
    sections.append(Section("Scaling laws", tables=[tab.fits_table(con, labels, runs)]))
    sections.append(Section("Flagged runs", tables=[sel.flags_table(con, labels)]))
    sections += _per_device_sections(configs, con)
    sections += mlperf_sections(con, opts.equivalence, opts.mlperf_compare)
    sections += _trace_sections(con, opts.trace)
    sections.append(Section("Provenance", ["Every number above links to the first of its runs here; the runs "
                                           "of one configuration point are adjacent."],
                            [sel.provenance_table(con, labels)]))
    return Report(opts.title, sel.describe(opts.where, n), sections)


def _family_sections(con: duckdb.DuckDBPyConnection, configs: object, runs: dict, max_families: int) -> list[Section]:
    """One section per configuration family: its three tables, and its three figures for the first
    ``max_families`` families that have a value."""

    out = [Section("Configuration families", ["A family is the configurations that agree on model, data, "
                                              "precision, variable update and batch size per device; its columns "
                                              "are the device models, systems and other settings that differ."])]
    drawn = 0
    fams = tab.families(configs)  # type: ignore[arg-type]
    for name, fam in fams:
        points = tab.scaling_points(con, list(fam["config_id"]))
        sec = Section(name, tables=tab.family_tables(name, fam, points, runs), level=3)
        if drawn < max_families:
            ids = tuple(r for (cid, _, _), rs in runs.items() if cid in set(fam["config_id"]) for r in rs)
            sec.figures = figs.family_figures(con, name, fam, points, ids)
            drawn += bool(sec.figures)
        out.append(sec)
    if len(fams) > drawn and drawn >= max_families:
        out[0].paragraphs.append(f"Figures are drawn for the first {max_families} of {len(fams)} families "
                                 "(raise --max-figures for more); every family has its tables.")
    return out


def _ratio_section(con: duckdb.DuckDBPyConnection, configs: object, runs: dict, margin: float | None) -> Section:
    """The ratio tables of every factor that varies (report_tables.ratio_plan) and their summary."""

    results, tables = [], []
    for factor, a, b, metric in tab.ratio_plan(con):
        res = compare(con, factor, str(a), str(b), metric=metric, equivalence=margin)
        if res.pairs:
            results.append(res)
            tables.append(tab.ratio_table(res, configs, runs))  # type: ignore[arg-type]
    text = ["Rows are device counts, columns the matched configurations (equal in everything but the factor); "
            "each row ends with its median. Speedup ratios leave out the baseline device count (1 / 1)."]
    if not results:
        text = ["No factor among device model, model, data, batch size and variable update varies with matched pairs."]
    return Section("Ratios", text, ([tab.ratio_summary_table(results)] if results else []) + tables)


def _per_device_sections(configs: object, con: duckdb.DuckDBPyConnection) -> list[Section]:
    """Throughput per device across device models / systems, one figure and table per (model, precision);
    "device" is written as the selection's one device type (GPU, TPU, ...) when it has one."""
    import pandas as pd

    points = tab.scaling_points(con, list(configs["config_id"]))  # type: ignore[index]
    frames = figs.per_device_frame(configs, points)  # type: ignore[arg-type]
    if not frames:
        return []
    noun = device_noun(configs)  # type: ignore[arg-type]
    sec = Section(f"Throughput per {noun} across systems")
    for title, df in frames:
        fig = figs.per_device_figure(df, title, noun)
        slug = slugify(f"per-{noun.lower()}-{title}")
        sec.figures.append(Figure(slug, f"Throughput per {noun}: {title}", png_bytes(fig)))
        fig.clear()
        wide = df.pivot_table(index="label", columns="num_devices", values="images_per_device", aggfunc="first")
        wide.columns = [f"{int(c)} {noun} [images/s per {noun}]" for c in wide.columns]
        wide = wide.reset_index().rename(columns={"label": "configuration"})
        sec.tables.append(Table(slug, f"Throughput per {noun} (images/s per {noun}): {title}",
                                pd.DataFrame(wide), dict.fromkeys(wide.columns[1:], ".1f")))
    return [sec]


def _trace_sections(con: duckdb.DuckDBPyConnection, run_id: str | None) -> list[Section]:

    fig = trace_figure(con, run_id)
    return [] if fig is None else [Section("Trace", ["Per-interval throughput of one run with its warm-up cut, "
                                                     "and its GPUs' mean temperature on the same clock."],
                                           figures=[fig])]


def write_report(report: Report, out: Path) -> Path:
    """Write report.html, report.md, figures/*.png and tables/*.csv into ``out``; returns report.html.
    Raises BenchError when ``out`` cannot be written."""

    unique_slugs(report)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_assets(report, out)
        (out / "report.md").write_text(render_md(report), encoding="utf-8")
        html = out / "report.html"
        html.write_text(render_html(report), encoding="utf-8")
    except OSError as e:
        raise BenchError(f"cannot write the report into {out}: {e.strerror or e}") from e
    return html


def make_report(store: Path, out: Path, opts: Options) -> Path:
    """Build the report of ``store`` and write it into ``out``; returns the path of report.html."""

    return write_report(build_report(connect(store), opts), out)
