"""``bench report``: the table frames of the configuration families, the ratio tables and the scaling-law
fits. Pure functions over a connection narrowed by ``report.select.select_runs``.

Choices it makes:
- A *family* is the configurations that agree on :data:`FAMILY_FACTORS` (model, dataset, data, mode,
  precision, variable update, batch size per device); its *series* differ in the rest (device model,
  framework, data format, all-reduce, tags such as the system). A family table is laid out like the
  published sheet: rows are device counts, columns are the family's series.
- Ratio tables: for each factor of :data:`RATIO_FACTORS` with 2+ values in the selection. With two
  values, A is the one with the higher mean images/s, so ratios read "A is x× B" as on the sheet;
  with more, B is the value with the most configurations and each other value (up to
  :data:`MAX_RATIO_VALUES`, most configurations first) is an A. ``batch_size_per_device`` gets a
  speedup ratio table too (the sheet's "batch 64 vs 32" block compares speedups).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics.compare_text import summary_text
from bench.analytics.plot_data import device_noun, is_null, shown
from bench.analytics.report.model import Table, slugify
from bench.analytics.selection import FACTORS

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from bench.analytics.compare import CompareResult
    from bench.analytics.scaling_laws import FitReport

FAMILY_FACTORS = ("model", "dataset", "data", "mode", "precision", "variable_update", "batch_size_per_device")
RATIO_FACTORS = ("device_model", "model", "data", "batch_size_per_device", "variable_update")
MAX_RATIO_VALUES = 6
UNITS = {"images_per_sec": "images/s", "speedup": "×", "efficiency": "%"}
FORMATS = {"images_per_sec": ".1f", "speedup": ".2f", "efficiency": ".1f"}
PointRuns = dict[tuple[Any, ...], tuple[str, ...]]


def configs_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per configuration of the selection: config_id, every factor, and one ``tag:KEY`` column per
    tag key (tags without `repeat`); sorted by config_id."""
    import pandas as pd

    cols = ", ".join(FACTORS)
    rows = con.sql(f"SELECT DISTINCT ON (config_id) config_id, {cols}, tags FROM _configs "
                   "ORDER BY config_id").to_arrow_table().to_pylist()
    for r in rows:
        for k, v in dict(r.pop("tags") or {}).items():
            r[f"tag:{k}"] = v
    return pd.DataFrame(rows, columns=None if rows else ["config_id", *FACTORS])


def label_of(df: pd.DataFrame, among: list[str], fallback: str = "model") -> list[str]:
    """Per row, ``name=value`` of the columns of ``among`` whose value varies across ``df`` (tag columns
    written without their ``tag:`` prefix); the ``fallback`` column's value when none varies."""
    present = [c for c in among if c in df.columns]
    varying = [c for c in present if df[c].astype(str).nunique(dropna=False) > 1]
    if not varying:
        return [shown(v) or "—" for v in df[fallback]] if fallback in df.columns else ["all"] * len(df)
    rows = [[shown(v) for v in row] for row in df[varying].itertuples(index=False)]
    out = [", ".join(f"{c.removeprefix('tag:')}={v}" for c, v in zip(varying, row, strict=True) if v is not None)
           for row in rows]
    seen = [out.count(label) > 1 for label in out]  # equal without their NULLs: say the NULL ("variant=—")
    return [", ".join(f"{c.removeprefix('tag:')}={'—' if v is None else v}" for c, v in zip(varying, row, strict=True))
            if twice else label for label, row, twice in zip(out, rows, seen, strict=True)]


def runs_by_config(runs: PointRuns) -> dict[str, tuple[str, ...]]:
    """config_id -> the run_ids of all its points, in ``runs``' order."""
    out: dict[str, list[str]] = {}
    for (cid, _, _), ids in runs.items():
        out.setdefault(cid, []).extend(ids)
    return {cid: tuple(ids) for cid, ids in out.items()}


def _tag_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith("tag:")]


def config_labels(configs: pd.DataFrame) -> dict[str, str]:
    """config_id -> the factors and tags that vary across the whole selection."""
    return dict(zip(configs["config_id"], label_of(configs, [*FACTORS, *_tag_columns(configs)]), strict=True))


def families(configs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(family label, its configurations with a ``series`` label column) per family, in label order: a
    series is labelled, as :func:`label_of` would within its family, by the columns that vary there
    (whether one varies is found for every family by one groupby, not per family)."""
    import pandas as pd

    keys = [c for c in FAMILY_FACTORS if c in configs.columns]
    # a Series, not a list: pandas reads a one-element list as a list of keys
    family = pd.Series(label_of(configs, keys), index=configs.index)
    series_cols = [c for c in configs.columns if c not in (*keys, "config_id")]
    text = configs[series_cols].astype(str)
    varies = text.groupby(family, sort=False).nunique(dropna=False) > 1  # one row per family
    out = []
    for name, index in sorted(text.groupby(family, sort=False).groups.items()):
        g = configs.loc[index]
        varying = [c for c in series_cols if varies.at[name, c]]
        if not varying:
            models = g["device_model"] if "device_model" in g.columns else [None] * len(g)
            # a device model the logs never named (a CPU run) is not a name: "None" would read as one
            series = ["all" if pd.isna(v) else str(v) for v in models]
        else:
            series = [", ".join(f"{c.removeprefix('tag:')}={shown(v)}" for c, v in zip(varying, row, strict=True)
                                if not is_null(v))
                      for row in g[varying].itertuples(index=False)]
        out.append((str(name), g.assign(series=series)))
    return out


def scaling_points(con: duckdb.DuckDBPyConnection, config_ids: list[str]) -> pd.DataFrame:
    """The ``scaling`` rows of ``config_ids`` (device count > 0), sorted by config, device count, nodes."""
    ids = ", ".join("'" + c.replace("'", "''") + "'" for c in config_ids) or "NULL"
    return con.sql(f"""SELECT config_id, num_devices, num_nodes, n_runs, n_ok, images_per_sec, ci95_low, ci95_high,
                              wall_time_s, baseline_devices, baseline_images_per_sec, speedup, efficiency, superlinear
                       FROM _scaling WHERE config_id IN ({ids}) AND num_devices > 0
                       ORDER BY config_id, num_devices, num_nodes""").df()


def family_tables(name: str, family: pd.DataFrame, points: pd.DataFrame, runs: PointRuns) -> list[Table]:
    """The family's images/s, speedup and efficiency (%) tables (images/s alone when the family was measured
    at one device count): rows = device counts, ascending (with the node count when it varies), columns =
    series; a number links to the runs of its configuration point."""
    pts = points.merge(family[["config_id", "series"]], on="config_id").sort_values(
        ["num_devices", "num_nodes"], kind="stable")  # rows by device count, whatever the series' order
    head = f"{device_noun(family)}s"  # the row header: GPUs, TPUs, ... or devices
    many_nodes = pts["num_nodes"].astype(str).nunique() > 1
    pts[head] = [f"{int(g)} ({n} nodes)" if many_nodes else int(g) for g, n in zip(pts["num_devices"], pts["num_nodes"], strict=True)]
    pts["efficiency"] = pts["efficiency"] * 100.0
    tables = []
    metrics: tuple[tuple[str, str], ...] = (("images_per_sec", "Throughput"), ("speedup", "Speedup"),
                                            ("efficiency", "Scaling efficiency"))
    if pts["num_devices"].nunique() < 2:  # one device count: every speedup would be 1
        metrics = metrics[:1]
    for metric, what in metrics:
        unit = UNITS[metric]
        pts["column"] = pts["series"] + f" [{unit}]"
        wide = pts.pivot_table(index=head, columns="column", values=metric, aggfunc="first", dropna=False, sort=False)
        order = list(dict.fromkeys(pts["column"]))
        wide = wide.reindex(columns=order).reset_index()
        wide.columns.name = None
        cell_runs = {}
        for _, p in pts.iterrows():
            i = int((wide[head] == p[head]).to_numpy().nonzero()[0][0])
            cell_runs[(i, p["column"])] = runs.get((p["config_id"], p["num_devices"], p["num_nodes"]), ())
        base = "" if metric == "images_per_sec" else " (baseline: each series' smallest device count)"
        tables.append(Table(f"{slugify(name, 100)}-{metric}", f"{what} ({unit}): {name}{base}", wide,
                            dict.fromkeys(order, FORMATS[metric]), cell_runs))
    return tables


def ratio_plan(con: duckdb.DuckDBPyConnection) -> list[tuple[str, Any, Any, str]]:
    """(factor, A, B, metric) of every ratio table (see module doc), factors in RATIO_FACTORS order."""
    plan = []
    for factor in RATIO_FACTORS:
        rows = con.execute(f"""SELECT {factor}, count(DISTINCT config_id), avg(images_per_sec) FROM _configs
                               WHERE {factor} IS NOT NULL GROUP BY ALL""").fetchall()
        if len(rows) < 2:
            continue
        if len(rows) == 2:
            a, b = sorted(rows, key=lambda r: -(r[2] or 0.0))
            pairs = [(a[0], b[0])]
        else:
            ranked = sorted(rows, key=lambda r: (-r[1], r[2] or 0.0, str(r[0])))
            pairs = [(r[0], ranked[0][0]) for r in ranked[1:MAX_RATIO_VALUES + 1]]
        metrics = ["images_per_sec", "speedup"] if factor == "batch_size_per_device" else ["images_per_sec"]
        plan += [(factor, a, b, m) for a, b in pairs for m in metrics]
    return plan


def ratio_table(res: CompareResult, ids: dict[tuple[Any, ...], str], runs: PointRuns) -> Table:
    """One compare result laid out like the sheet: rows = device counts, columns = matched configurations
    (the other factors that vary among the pairs), each row ending with its median; the summary (n,
    median, geometric mean with its 95% CI, equivalence) is the table's note. ``ids``:
    :func:`config_ids` of the selection."""
    import pandas as pd

    rows = [{**{k: v for k, v in p.config.items() if k in FACTORS},
             **{f"tag:{k}": v for k, v in p.config["tags"].items()}, "_count": p.num_devices, "ratio": p.ratio}
            for p in res.pairs]
    df = pd.DataFrame(rows)
    head = f"{device_noun(df)}s"  # the row header: GPUs, TPUs, ... or devices
    df = df.rename(columns={"_count": head})
    df["column"] = label_of(df, [c for c in df.columns if c not in (head, "ratio")]) if rows else []
    wide = df.pivot_table(index=head, columns="column", values="ratio", aggfunc="first", sort=False) if rows \
        else pd.DataFrame({head: []}).set_index(head)
    wide = wide.reindex(columns=list(dict.fromkeys(df.get("column", [])))).sort_index()
    wide["median"] = wide.median(axis=1)
    wide = wide.rename(columns=lambda c: f"{c} [×]").reset_index()
    wide.columns.name = None
    cell_runs = {}
    for p, col in zip(res.pairs, df.get("column", []), strict=True):
        i = int((wide[head] == p.num_devices).to_numpy().nonzero()[0][0])
        cell_runs[(i, f"{col} [×]")] = tuple(
            rid for side in (res.a, res.b)
            for rid in runs.get((ids.get(_key({**p.config, res.factor: side})), p.num_devices, p.config["num_nodes"]), ()))
    title = f"Ratio of {res.metric} ({UNITS[res.metric]}): {res.factor} {res.a} / {res.b}"
    notes = [summary_text(res.summary).replace("\n", "; ")]
    if res.unmatched:
        notes.append(f"{len(res.unmatched)} configuration point(s) without a usable partner are not in the table.")
    return Table(slugify(f"ratio-{res.metric}-{res.factor}-{res.a}-{res.b}"), title, wide,
                 {c: ".2f" for c in wide.columns if c != head}, cell_runs, notes)


def _key(cfg: dict[str, Any]) -> tuple[Any, ...]:
    tags = cfg.get("tags") or {}
    return (*(cfg.get(f) for f in FACTORS), tuple(sorted(tags.items())))


def config_ids(configs: pd.DataFrame) -> dict[tuple[Any, ...], str]:
    """Configuration key (factors, sorted tags) -> config_id, to find the runs of a compare pair."""
    tags = _tag_columns(configs)
    out = {}
    for r in configs.to_dict("records"):
        cfg = {f: (None if is_null(r.get(f)) else r.get(f)) for f in FACTORS}
        cfg["tags"] = {t[4:]: r[t] for t in tags if not is_null(r[t])}
        out[_key(cfg)] = r["config_id"]
    return out


def ratio_summary_table(results: list[CompareResult]) -> Table:
    """One row per ratio table: factor, A, B, metric, pairs, median, geometric mean, its 95% CI, and the
    equivalence verdict and TOST p-value when one was asked for (else "—")."""
    import pandas as pd

    rows = []
    for r in results:
        s, eq = r.summary, r.summary.equivalence
        rows.append({"factor": r.factor, "A": r.a, "B": r.b, "metric": r.metric, "pairs (count)": s.n,
                     "median (×)": s.median, "geomean (×)": s.geomean, "geomean 95% CI low (×)": s.ci95_low,
                     "geomean 95% CI high (×)": s.ci95_high,
                     "equivalent within ±margin": None if eq is None else f"{eq.verdict} (±{eq.margin:.1%})",
                     "TOST p": None if eq is None else eq.p_value})
    cols = ["factor", "A", "B", "metric", "pairs (count)", "median (×)", "geomean (×)", "geomean 95% CI low (×)",
            "geomean 95% CI high (×)", "equivalent within ±margin", "TOST p"]
    fmt = {c: ".3f" for c in cols if "(×)" in c} | {"TOST p": ".3g"}
    return Table("ratio-summary", "Ratios A / B: median and geometric mean with its 95% CI",
                 pd.DataFrame(rows, columns=cols), fmt)


def fits_table(report: FitReport, labels: dict[str, str], runs: PointRuns) -> Table:
    """Amdahl and USL fits (scaling_laws.fit) of every configuration with 3+ device counts: estimates with
    their Student-t 95% CIs (— where undefined: 0 residual degrees of freedom), R², USL peak (devices).
    ``report``: scaling_laws.fit of the selection."""
    import pandas as pd

    rows = []
    for c in report.fits:
        f = c.fit
        row: dict[str, Any] = {"configuration": labels.get(c.config_id, str(c.config_id)),
                               "device counts": ", ".join(map(str, f.device_counts))}
        for name, e in (("Amdahl s", f.serial_fraction), ("USL α", f.alpha), ("USL β", f.beta)):
            row[name] = e.estimate
            row[f"{name} 95% CI low"], row[f"{name} 95% CI high"] = e.ci95_low, e.ci95_high
        row["Amdahl R²"], row["USL R²"], row["USL peak (devices)"] = f.amdahl_r2, f.usl_r2, f.peak_devices
        row["note"] = "; ".join(f.notes + (("superlinear beyond its CI",) if f.superlinear else ()))
        rows.append(row)
    df = pd.DataFrame(rows)
    ids = {labels.get(c.config_id, str(c.config_id)): c.config_id for c in report.fits}
    by_config = runs_by_config(runs)
    cell_runs = {}
    for i, label in enumerate(df.get("configuration", [])):
        mine = by_config.get(ids[label], ())
        cell_runs.update({(i, col): mine for col in df.columns if col not in ("configuration", "device counts")})
    notes = [f"{len(report.skipped)} configuration(s) with fewer than 3 device counts are not fitted."] if report.skipped else []
    notes.append("Speedups are relative to each configuration's smallest device count (n = devices / baseline); "
                 "R² is on the speedup scale; s, α and β are held >= 0 as the laws define them (a held one has no "
                 "CI); with 3 device counts USL passes through every point, so the law is not tested.")
    return Table("scaling-laws", "Scaling-law fits: Amdahl serial fraction and USL (95% CIs)", df,
                 dict.fromkeys([c for c in df.columns if c != "note"], ".3g"), cell_runs, notes)
