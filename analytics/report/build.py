"""``bench report``: selection -> sections -> writers.

:func:`build_report` narrows a store connection to the selection and builds the report as plain data
(report.model: tables of unformatted numbers with the runs behind each, figures as SVG bytes);
:func:`write_report` writes it into a folder: ``report.html`` (one self-contained file: CSS inline, SVGs
as data: URIs, no script, no network), ``report.md`` with ``figures/*.svg`` beside it, and every table
as ``tables/<slug>.csv``. Section order: findings, (an MLPerf selection's scores), selection, changes over
time (series with enough runs), families (the
most informative first), ratios, scaling laws, flagged runs, throughput per device across systems, MLPerf,
trace, method, provenance. The page is bounded: long lists show their head, and the rest goes to CSV only
(``Section.detail``), which the page says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics.compare import CompareCache, compare
from bench.analytics.plot_data import device_noun
from bench.analytics.report import family_tables as tab
from bench.analytics.report import figures as figs
from bench.analytics.report import select as sel
from bench.analytics.report.changes_section import changes_section
from bench.analytics.report.drawing import DEFAULT_WORKERS, Renderer
from bench.analytics.report.figures import trace_figure
from bench.analytics.report.findings_section import findings_section, method_section
from bench.analytics.report.fleet_section import fleet_section
from bench.analytics.report.html import render_html
from bench.analytics.report.md import render_md, unique_slugs, write_assets
from bench.analytics.report.mlperf_section import mlperf_sections
from bench.analytics.report.model import Figure, Report, Section, Table, slugify
from bench.analytics.report.utilisation_section import utilisation_section
from bench.analytics.results import first
from bench.analytics.scaling_laws import fit
from bench.sql.errors import BenchError
from bench.sql.read import connect

if TYPE_CHECKING:
    from collections.abc import Sequence

    import duckdb

    from bench.analytics.scaling_laws import ConfigFit


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
    max_families: int = 3  # families drawn (--max-figures); SHOWN_FAMILIES get their tables on the page
    mlperf_compare: tuple[str, str, str] | None = None  # (factor, A, B) of the MLPerf speedup table
    #: Told each stage as it begins ("the scaling curves"): bench report's progress line on a terminal.
    progress: Callable[[str], None] | None = None
    baseline: str | None = None  # the device model of the leaderboard's baseline [default: the most measured]
    keep_suspects: bool = False  # --keep-suspects: suspect pairs stay in the leaderboard's means (leaderboard.py)

#: What report.html shows of long lists; the rest is in tables/*.csv (the page says so).
SHOWN_FAMILIES = 12
SHOWN_PER_DEVICE = 2
SHOWN_RATIOS = 6
SHOWN_FLAGS = 50
SHOWN_FITS = 40
SHOWN_RUNS = 300  # provenance rows on the page


def build_report(con: duckdb.DuckDBPyConnection, opts: Options, renderer: Renderer | None = None) -> Report:
    """The report of the runs of ``con`` (report.select.connect-style views) selected by ``opts.where``.

    Changes ``con`` (the selection replaces the view ``runs``). Raises BenchError for a bad --where, an
    empty selection, a bad --equivalence or an unknown --trace run. ``renderer``: where the figures are
    drawn (report.render; here by default).
    """
    renderer = renderer or Renderer()

    say = opts.progress or (lambda stage: None)
    say("selecting the runs")
    n = sel.select_runs(con, opts.where, opts.ignore)
    configs = tab.configs_frame(con)
    labels = tab.config_labels(configs)
    runs = sel.point_runs(con)
    mlperf, mlperf_found = mlperf_sections(con, opts.equivalence, opts.mlperf_compare, renderer)
    cache = CompareCache()  # compare's rows and results, shared by the findings and the ratio tables
    # an MLPerf selection leads with its scores (its ResNet logs also give images/s: those sections follow)
    lead = bool(mlperf) and bool(first(con, "SELECT bool_and(format = 'mlperf') FROM runs")[0])  # type: ignore[index]
    say("changes over time and the fleet")
    over_time, changed = changes_section(con, renderer)
    fleet, fleet_found = fleet_section(con, renderer)
    limits, limits_found = utilisation_section(con)
    say("the findings and the leaderboards")
    findings, found = findings_section(con, opts.baseline, cache, renderer, mlperf_found, mlperf_first=lead,
                                       changes=[*changed, *fleet_found, *limits_found], keep_suspects=opts.keep_suspects)
    selection = Section("Selection", [sel.describe(opts.where, n)], [sel.summary_table(con), sel.status_table(con)])
    throughput = bool(len(configs)) and bool(first(con, "SELECT 1 FROM _configs WHERE images_per_sec > 0 LIMIT 1"))
    # the sections with figures are built first, so the renderer's workers draw while the tables compute
    families, per_device, ratios, laws = [], [], [], []
    if throughput:  # without images/s (only times to train), the throughput sections are left out
        say("the scaling laws and the families")
        fits = fit(con)  # once: the scaling-law table and every family's USL curve read it
        families = _family_sections(con, configs, runs, opts.max_families, fits.fits, renderer)
        per_device = _per_device_sections(configs, con, renderer)
    trace = _trace_sections(con, opts.trace, renderer)
    if throughput:
        say("the ratio tables")
        ratios = _ratio_section(con, configs, runs, opts.equivalence, cache)
        laws = _shown(Section("Scaling laws"), [tab.fits_table(fits, labels, runs)], SHOWN_FITS)
    flagged = _shown(Section("Flagged runs"), [sel.flags_table(con, labels)], SHOWN_FLAGS)
    sections = [findings, *(mlperf if lead else []), selection, *over_time, *fleet, *limits, *families, *ratios, *laws, *flagged, *per_device,
                *([] if lead else mlperf), *trace]
    method = method_section()
    sections.append(method)
    sections += _provenance(con, labels, sections)
    opened = {id(findings), id(selection), id(method), *(id(s) for s in (mlperf if lead else []))}
    for s in sections:  # the rest is one click away in report.html (and not printed): the first pages answer
        s.folded = s.level == 2 and id(s) not in opened
    _say_what_is_left_out(findings, sections)
    return Report(opts.title, sel.describe(opts.where, n), sections, found)


def _shown(sec: Section, tables: list[Table], max_rows: int) -> list[Section]:
    """``sec`` with its tables cut to ``max_rows`` rows, and a detail section with them whole (CSV only)."""
    cut = [t for t in tables if len(t.frame) > max_rows]
    for t in tables:
        if len(t.frame) > max_rows:
            t = Table(t.slug, t.title, t.frame.head(max_rows), t.formats, t.cell_runs,
                      [*t.notes, f"The first {max_rows} of {len(t.frame)} rows; all of them: tables/{t.slug}-all.csv."])
        sec.tables.append(t)
    whole = [Table(f"{t.slug}-all", t.title, t.frame, t.formats) for t in cut]
    return [sec, *([Section(f"{sec.title}: every row", tables=whole, detail=True)] if whole else [])]


def _provenance(con: duckdb.DuckDBPyConnection, labels: dict[str, str], sections: list[Section]) -> list[Section]:
    """The provenance rows of the runs the shown numbers link to; every run's row in tables/provenance-all.csv."""
    full = sel.provenance_table(con, labels)
    linked = {ids[0] for s in sections if not s.detail for t in s.tables for ids in t.cell_runs.values() if ids}
    frame = full.frame[full.frame["run_id"].isin(linked)].head(SHOWN_RUNS).reset_index(drop=True)
    shown = Table(full.slug, full.title, frame, reference=True)
    text = ["A number above links to the first of its runs here (the runs of one configuration point are "
            f"adjacent). {len(frame)} of the {len(full.frame)} selected runs are here; a number whose run is not "
            "has no link; tables/provenance-all.csv lists every run."]
    return [Section("Provenance", text, [shown]),
            Section("Provenance: every run", tables=[Table("provenance-all", full.title, full.frame)], detail=True)]


def _say_what_is_left_out(findings: Section, sections: list[Section]) -> None:
    detail = [t for s in sections if s.detail for t in s.tables]
    if detail:
        findings.paragraphs.append(
            f"This page shows what says the most; {len(detail)} more tables (families with fewer runs, every "
            "ratio table, every flagged run, every run's provenance) are in tables/*.csv beside it, with "
            "report.md. Narrow the selection with --where to see one family's figures here.")


def _family_sections(con: duckdb.DuckDBPyConnection, configs: object, runs: dict, max_figures: int,
                     fits: Sequence[ConfigFit], renderer: Renderer) -> list[Section]:
    """The SHOWN_FAMILIES most informative configuration families (training first, then by device models x
    device counts x runs), each with its tables, the first ``max_figures`` with figures too; every family's points in one CSV
    table (tables/families-all.csv). A family measured at one device count has no speedup or efficiency
    table."""
    import pandas as pd

    out = [Section("Configuration families", ["A family is the configurations that agree on model, data, "
                                              "precision, variable update and batch size per device; its columns "
                                              "are the device models, systems and other settings that differ."])]
    fams = tab.families(configs)  # type: ignore[arg-type]
    points = tab.scaling_points(con, list(configs["config_id"])) if fams else None  # type: ignore[index]
    ranked, every = [], []
    for name, fam in fams:
        pts = points[points["config_id"].isin(set(fam["config_id"]))]  # type: ignore[index]
        score = fam["device_model"].nunique(dropna=False) * max(1, pts["num_devices"].nunique()) * int(pts["n_runs"].sum())
        training = "mode" in fam.columns and bool((fam["mode"] == "train").any())  # what people ask first
        ranked.append((not training, -score, name, fam, pts))
        every.append(pts.merge(fam[["config_id", "series"]], on="config_id").assign(family=name))
    ranked.sort(key=lambda r: (r[0], r[1], r[2]))
    by_config = tab.runs_by_config(runs)
    for i, (_, _, name, fam, pts) in enumerate(ranked[:SHOWN_FAMILIES]):
        sec = Section(name, tables=tab.family_tables(name, fam, pts, runs), level=3)
        if i < max_figures:
            ids = tuple(r for cid in fam["config_id"] for r in by_config.get(cid, ()))
            sec.figures = figs.family_figures(con, name, fam, pts, ids, fits, renderer)
        out.append(sec)
    if len(ranked) > SHOWN_FAMILIES:
        out[0].paragraphs.append(f"The {SHOWN_FAMILIES} of {len(ranked)} families with the most device models, device "
                                 f"counts and runs are shown (the first {max_figures} with figures: --max-figures); "
                                 "every family's points are in tables/families-all.csv.")
    if every:
        frame = pd.concat(every, ignore_index=True)[["family", "series", "num_devices", "num_nodes", "n_runs", "n_ok",
                                                     "images_per_sec", "ci95_low", "ci95_high", "speedup", "efficiency"]]
        out.append(Section("Configuration families: every point", detail=True,
                           tables=[Table("families-all", "Every family's configuration points", frame)]))
    return out


def _ratio_section(con: duckdb.DuckDBPyConnection, configs: object, runs: dict, margin: float | None,
                   cache: CompareCache) -> list[Section]:
    """The ratio tables of every factor that varies (report.tables.ratio_plan) and their summary; the first
    SHOWN_RATIOS tables on the page, the others in CSV."""

    results, tables = [], []
    ids = tab.config_ids(configs)  # type: ignore[arg-type]
    for factor, a, b, metric in tab.ratio_plan(con):
        res = compare(con, factor, str(a), str(b), metric=metric, equivalence=margin, cache=cache)
        if res.pairs:
            results.append(res)
            tables.append(tab.ratio_table(res, ids, runs))
    text = ["Rows are device counts, columns the matched configurations (equal in everything but the factor); "
            "each row ends with its median. Speedup ratios leave out the baseline device count (1 / 1)."]
    if not results:
        text = ["No factor among device model, model, data, batch size and variable update varies with matched pairs."]
    shown = Section("Ratios", text, ([tab.ratio_summary_table(results)] if results else []) + tables[:SHOWN_RATIOS])
    rest = tables[SHOWN_RATIOS:]
    return [shown, *([Section("Ratios: the other tables", tables=rest, detail=True)] if rest else [])]


def _per_device_sections(configs: object, con: duckdb.DuckDBPyConnection, renderer: Renderer) -> list[Section]:
    """Throughput per device across device models / systems, one figure and table per (model, precision);
    "device" is written as the selection's one device type (GPU, TPU, ...) when it has one."""
    import pandas as pd

    points = tab.scaling_points(con, list(configs["config_id"]))  # type: ignore[index]
    frames = figs.per_device_frame(configs, points)  # type: ignore[arg-type]
    if not frames:
        return []
    noun = device_noun(configs)  # type: ignore[arg-type]
    sec = Section(f"Throughput per {noun} across systems")
    rest = Section(f"Throughput per {noun}: the other models and precisions", detail=True)
    frames = sorted(frames, key=lambda f: -len(f[1]))  # the most configurations first
    for i, (title, df) in enumerate(frames):
        slug = slugify(f"per-{noun.lower()}-{title}")
        if i < SHOWN_PER_DEVICE:
            sec.figures.append(Figure(slug, f"Throughput per {noun}: {title}",
                                      renderer.svg(figs.per_device_figure, df, title, noun)))
        wide = df.pivot_table(index="label", columns="num_devices", values="images_per_device", aggfunc="first")
        wide.columns = [f"{int(c)} {noun} [images/s per {noun}]" for c in wide.columns]
        wide = wide.reset_index().rename(columns={"label": "configuration"})
        (sec if i < SHOWN_PER_DEVICE else rest).tables.append(
            Table(slug, f"Throughput per {noun} (images/s per {noun}): {title}", pd.DataFrame(wide),
                  dict.fromkeys(wide.columns[1:], ".1f")))
    if rest.tables:
        sec.paragraphs.append(f"The {SHOWN_PER_DEVICE} of {len(frames)} (model, precision) groups with the most "
                              "configurations; the others' tables are in tables/*.csv.")
    return [sec, *([rest] if rest.tables else [])]


def _trace_sections(con: duckdb.DuckDBPyConnection, run_id: str | None, renderer: Renderer) -> list[Section]:

    fig = trace_figure(con, run_id, renderer)
    return [] if fig is None else [Section("Trace", ["Per-interval throughput of one run with its warm-up cut, "
                                                     "and its GPUs' mean temperature on the same clock."],
                                           figures=[fig])]


def write_report(report: Report, out: Path) -> Path:
    """Write report.html, report.md, figures/*.svg and tables/*.csv into ``out``; returns report.html.
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


def make_report(store: Path, out: Path, opts: Options, workers: int = DEFAULT_WORKERS) -> tuple[Report, Path]:
    """Build the report of ``store`` and write it into ``out``, its figures drawn by ``workers`` processes
    while it computes its tables (0: in this process); returns the report and the path of report.html."""

    with Renderer(workers) as renderer:
        report = build_report(connect(store), opts, renderer)
        (opts.progress or (lambda stage: None))("drawing the figures and writing the report")
        return report, write_report(report, out)
