"""The tidy frames that ``bench plot`` draws: one pandas DataFrame per kind, read from the store's views.

Each function takes a DuckDB connection with the views it names (``bench.sql.read.connect``) and
a ``where`` (a SQL boolean expression over that view's columns). Series are labelled by the factors
that vary in the selection, ``by`` first (see :func:`add_labels`); a factor that is the same for every
row says nothing about a line and is left out of its label.

Choices it makes:
- ``trace`` draws one run: the first (by run_id) run of ``runs`` matching ``where`` that has step rows and
  telemetry (its own, or a telemetry file joined to it at ingest), else the first with step rows.
- Its series is what ``run_stats`` reads: the per-interval rates of the run's lowest rank in step order;
  the warm-up cut is ``run_stats.mser5`` on that series (the same function, not a copy), none below
  ``run_stats.MIN_INTERVALS`` intervals. x is seconds since the first interval when every interval has
  a timestamp, else the step number (the unit is then "step").
- Telemetry is averaged over the run's GPUs per sample (one line, not one per GPU): the samples of
  gpu_index < num_gpus when the run's GPU count is known (a Lambda thermal file samples every GPU of the
  machine; the idle ones would pull a 2-GPU run's 78 °C down to 48 °C), else every GPU.
- A telemetry row belongs to the run its run_id names in the ``telemetry`` view: its own, or, for a file
  that names no run (Lambda ``thermal/1`` beside ``throughput/1``), the run bench.sql.links joined it
  to at ingest by tags and time.
- Telemetry time is put on the steps' clock: seconds since the first step's timestamp, from the sample's
  own timestamp (so samples before training started are at negative times). Only when the steps or the
  samples carry no timestamp is the sample's elapsed_s used as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.analytics.compare import compare
from bench.analytics.query import view_error
from bench.analytics.results import first
from bench.analytics.run_stats import MIN_INTERVALS, mser5
from bench.analytics.scaling_laws import fit
from bench.sql.errors import BenchError, UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import duckdb
    import pandas as pd

    from bench.analytics.scaling_laws import ConfigFit

#: Factors a series label may name, in the order they are written.
LABEL_FACTORS = (
    "model", "device_type", "device_model", "framework", "framework_version", "dataset", "data", "mode", "precision",
    "data_format", "variable_update", "all_reduce", "batch_size_per_device",
)
#: How a device type is written in labels; several types (or none known) are "device".
DEVICE_NOUNS = {"gpu": "GPU", "tpu": "TPU", "ipu": "IPU", "hpu": "HPU", "npu": "NPU", "cpu": "CPU"}
_SCALING_COLS = (
    "config_id, num_devices, num_nodes, n_runs, n_ok, images_per_sec, ci95_low, ci95_high, wall_time_s, "
    "baseline_devices, baseline_images_per_sec, speedup, efficiency, superlinear"
)


def device_noun(df: pd.DataFrame) -> str:
    """"GPU", "TPU", ... when every row of ``df`` with a device_type has the same one, else "device"."""
    kinds = set(df["device_type"].dropna()) if "device_type" in df.columns else set()
    return DEVICE_NOUNS.get(next(iter(kinds)), "device") if len(kinds) == 1 else "device"


def _query(con: duckdb.DuckDBPyConnection, sql: str, what: str, where: str | None) -> pd.DataFrame:
    """``sql`` over the view ``what`` as a DataFrame; a DuckDB error becomes ``store.view_error``'s user error."""
    import duckdb

    try:
        return con.sql(sql).df()
    except duckdb.Error as e:
        raise view_error(e, what, where) from e


def _where(where: str | None) -> str:
    return f"({where})" if where else "true"


def add_labels(df: pd.DataFrame, by: str | None = None, factors: tuple[str, ...] = LABEL_FACTORS) -> pd.DataFrame:
    """``df`` with a ``label`` column: ``factor=value`` of the ``factors`` that vary across its rows, ``by``
    first (always written when given). A selection where nothing varies is labelled by its model.

    Raises BenchError when ``by`` is not one of ``factors``.
    """
    if by is not None and by not in factors:
        raise UsageError(f"unknown factor {by!r} for --by; choose one of: {', '.join(factors)}")
    present = [c for c in factors if c in df.columns]
    varying = [c for c in present if df[c].astype(str).nunique(dropna=False) > 1]
    names = ([by] if by else []) + [c for c in varying if c != by]
    if not names:
        names = [c for c in ("model",) if c in df.columns]
    out = df.copy()
    if not names:
        out["label"] = "all"
        return out
    out["label"] = [", ".join(f"{n}={_text(v)}" for n, v in zip(names, row, strict=True))
                    for row in df[names].itertuples(index=False)]
    return _tags_apart(out)


def _tags_apart(df: pd.DataFrame) -> pd.DataFrame:
    """Labels that two configurations share get the tags that tell them apart ("variant=distortions"), so
    that a legend names every series apart (a tag absent from one of them is written "variant=NULL")."""
    if "tags" not in df.columns or "config_id" not in df.columns:
        return df
    ids = df.groupby("label")["config_id"].nunique()
    shared = set(ids[ids > 1].index)
    if not shared:
        return df
    tags = [dict(t) if t is not None and not isinstance(t, float) else {} for t in df["tags"]]
    keys = sorted({k for t, label in zip(tags, df["label"], strict=True) if label in shared for k in t})
    varying = [k for k in keys if len({t.get(k) for t, label in zip(tags, df["label"], strict=True) if label in shared}) > 1]
    df = df.copy()
    df["label"] = [label + "".join(f", {k}={_text(t.get(k))}" for k in varying) if label in shared else label
                   for label, t in zip(df["label"], tags, strict=True)]
    return df


def _text(value: object) -> str:
    """A factor value as a label writes it: NULL (None, NaN, pandas NA) as "NULL", never "nan"."""
    return shown(value) or "NULL"


def shown(value: object) -> str | None:
    """A factor value as text, or None for a value the logs never gave (None, NaN, pandas NA: never the
    word "nan", which pandas 3 hands through ``astype(str)`` as a float). An integer column with NULLs
    arrives as floats: 64.0 is written 64."""
    if is_null(value):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def is_null(value: object) -> bool:
    """Whether ``value`` is a NULL as pandas or DuckDB hands it over: None, a float NaN, pandas NA or NaT."""
    import pandas as pd

    if value is None:
        return True
    if isinstance(value, str | bytes | dict | list | tuple):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like value is not one NULL
        return False


def scaling_frame(con: duckdb.DuckDBPyConnection, where: str | None = None, by: str | None = None) -> pd.DataFrame:
    """One row per configuration and scale point of the view ``scaling`` (rows with a device count):
    config_id, label, the factors, num_devices, num_nodes, n_runs, n_ok, images_per_sec, ci95_low/high
    (images/s), wall_time_s (s), baseline_devices, baseline_images_per_sec, speedup, efficiency, superlinear.
    Sorted by label, num_devices. Feeds the speedup, efficiency and throughput plots."""
    sql = (f"SELECT {', '.join(LABEL_FACTORS)}, tags, {_SCALING_COLS} FROM scaling "
           f"WHERE {_where(where)} AND num_devices > 0 ORDER BY config_id, num_devices, num_nodes")
    df = add_labels(_query(con, sql, "scaling", where), by)
    return df.sort_values(["label", "config_id", "num_devices"], kind="stable").reset_index(drop=True)


def usl_frame(con: duckdb.DuckDBPyConnection, scaling: pd.DataFrame, where: str | None = None,
              points: int = 50, fits: Sequence[ConfigFit] | None = None) -> pd.DataFrame:
    """The fitted USL speedup curve of each configuration of ``scaling`` that ``scaling_laws.fit`` fits
    (4+ device counts, so that the law is tested): config_id, label, num_devices (float, from the baseline to the largest measured
    count), usl_speedup. S(N) = n / (1 + a(n-1) + b n(n-1)), n = N / baseline_devices; points where the
    denominator is not positive are left out. ``fits``: the fits of ``con`` when the caller has them already
    (``where`` is then unused)."""
    import numpy as np
    import pandas as pd

    labels = dict(zip(scaling["config_id"], scaling["label"], strict=False))
    rows: list[dict[str, Any]] = []
    if fits is None:
        fits = fit(con, where=_where(where) + " AND num_devices > 0").fits
    for cf in fits:
        if cf.config_id not in labels:
            continue
        f = cf.fit
        if not f.testable:  # the curve passes through the points whatever the law: it shows nothing
            continue
        gpus = np.linspace(f.baseline_devices, max(f.device_counts), points)
        n = gpus / f.baseline_devices
        denom = 1 + f.alpha.estimate * (n - 1) + f.beta.estimate * n * (n - 1)
        for g, x, d in zip(gpus, n, denom, strict=True):
            if d > 0:
                rows.append({"config_id": cf.config_id, "label": labels[cf.config_id],
                             "num_devices": float(g), "usl_speedup": float(x / d)})
    return pd.DataFrame(rows, columns=["config_id", "label", "num_devices", "usl_speedup"])


def minibatch_frame(con: duckdb.DuckDBPyConnection, where: str | None = None, by: str | None = None) -> pd.DataFrame:
    """One row per point of the view ``minibatch``: curve_id, label (factors varying across curves, and
    num_devices when it varies), batch_size_per_device, ms_per_image, forward_ms_per_image (ms), oom,
    n_runs, n_ok. Sorted by label, batch size."""
    sql = (f"SELECT {', '.join(c for c in LABEL_FACTORS if c != 'batch_size_per_device')}, curve_id, "
           "num_devices, batch_size_per_device, ms_per_image, forward_ms_per_image, oom, n_runs, n_ok "
           f"FROM minibatch WHERE {_where(where)} ORDER BY curve_id, batch_size_per_device")
    df = _query(con, sql, "minibatch", where)
    # the batch size is the x axis of a curve, not a label
    df = add_labels(df, by, tuple(c for c in LABEL_FACTORS if c != "batch_size_per_device"))
    if df["num_devices"].astype(str).nunique() > 1:
        df["label"] = df["label"] + ", num_devices=" + df["num_devices"].astype(str)
    return df.sort_values(["label", "curve_id", "batch_size_per_device"], kind="stable").reset_index(drop=True)


def trace_frames(con: duckdb.DuckDBPyConnection, where: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(intervals, telemetry) of one run (see module doc for which run and x).

    intervals: run_id, x, x_unit ("s" or "step"), interval_images_per_sec (images/s), warmup (bool).
    telemetry: elapsed_s (s), and per sample temperature_c and gpu_utilization_pct (means over the GPUs,
    nvidia-smi's rows) and cpu_utilization_pct (the host's rows, gpu_index NULL); empty when the run has none.
    The run is :func:`traced_run`'s, else the first with step rows. Raises BenchError when no run matching
    ``where`` has step rows.
    """
    import numpy as np

    run_id = traced_run(con, where)
    if run_id is None:  # no run has telemetry: the first with step rows
        pick = (f"SELECT run_id FROM runs WHERE {_where(where)} AND run_id IN (SELECT DISTINCT run_id FROM steps) "
                "ORDER BY run_id LIMIT 1")
        found = _query(con, pick, "runs", where)
        if found.empty:
            raise BenchError("no run with step rows matches" + (f" --where {where!r}" if where else " (the store has none)"))
        run_id = str(found["run_id"].iloc[0])
    # The series of run_stats: finite interval rates of the lowest rank, in step order.
    steps = con.execute("""
        SELECT run_id::VARCHAR AS run_id, step, timestamp, interval_images_per_sec
        FROM steps WHERE run_id = ? AND isfinite(interval_images_per_sec)
        QUALIFY rank IS NOT DISTINCT FROM min(rank) OVER ()
        ORDER BY step NULLS LAST, line_no NULLS LAST""", [run_id]).df()
    timed = steps["timestamp"].notna().all() and len(steps) > 0
    steps["x"] = steps["timestamp"] - steps["timestamp"].iloc[0] if timed else steps["step"].astype(float)
    steps["x_unit"] = "s" if timed else "step"
    rates = steps["interval_images_per_sec"].to_numpy(dtype=np.float64)
    cut = mser5(rates) if len(rates) >= MIN_INTERVALS else 0
    steps["warmup"] = np.arange(len(steps)) < cut
    t0 = float(steps["timestamp"].iloc[0]) if timed else None
    telemetry = _run_telemetry(con, run_id, t0)
    cols = ["run_id", "x", "x_unit", "interval_images_per_sec", "warmup"]
    return steps[cols], telemetry[["elapsed_s", "temperature_c", "gpu_utilization_pct", "cpu_utilization_pct"]]


def traced_run(con: duckdb.DuckDBPyConnection, where: str | None) -> str | None:
    """The first run (by run_id) matching ``where`` with step rows and telemetry (its own, or a telemetry
    file joined to it at ingest: bench.sql.links). None when no such run has both."""
    found = first(con, f"""SELECT min(run_id) FROM runs WHERE ({_where(where)}) AND run_id IN (SELECT run_id FROM steps)
                           AND run_id IN (SELECT run_id FROM telemetry)""")
    return None if not found or found[0] is None else str(found[0])


def _run_telemetry(con: duckdb.DuckDBPyConnection, run_id: str, t0: float | None) -> pd.DataFrame:
    """The run's telemetry per sample (see module doc): elapsed_s on the steps' clock when ``t0`` (epoch
    seconds of the first step) is known, temperature_c and utilization_pct averaged over its GPUs."""
    num_gpus = first(con, "SELECT num_gpus FROM runs WHERE run_id = ?", [run_id])
    clock = "epoch(timestamp) - ?" if t0 is not None else "NULL"
    return con.execute(f"""
        WITH t AS (
            SELECT * FROM telemetry
            WHERE run_id = ? AND (? IS NULL OR gpu_index IS NULL OR gpu_index < ?)
        )
        SELECT sample_index, coalesce(avg({clock}), avg(elapsed_s)) AS elapsed_s,
               avg(temperature_c) FILTER (WHERE gpu_index IS NOT NULL) AS temperature_c,
               avg(utilization_pct) FILTER (WHERE gpu_index IS NOT NULL) AS gpu_utilization_pct,
               avg(utilization_pct) FILTER (WHERE gpu_index IS NULL) AS cpu_utilization_pct
        FROM t GROUP BY sample_index ORDER BY sample_index""",
        [run_id, num_gpus[0] if num_gpus else None, num_gpus[0] if num_gpus else None,
         *([t0] if t0 is not None else [])]).df()


def ratio_frame(con: duckdb.DuckDBPyConnection, factor: str, a: str, b: str, where: str | None = None,
                metric: str = "images_per_sec") -> tuple[pd.DataFrame, str]:
    """The pairs of ``compare.compare`` as (frame, title): label (the other factors that vary across the
    pairs), device_type, num_devices, ratio (A / B, dimensionless); the title names factor, A, B, metric and the median."""
    import pandas as pd

    res = compare(con, factor, a, b, metric=metric, where=where)
    if not res.pairs:
        raise BenchError(f"no matched pairs of {factor} = {res.a!r} and {res.b!r}; see `bench compare`")
    df = pd.DataFrame([{**{k: v for k, v in p.config.items() if k in LABEL_FACTORS},
                        "num_devices": p.num_devices, "ratio": p.ratio} for p in res.pairs])
    df["device_type"] = [p.config.get("device_type") for p in res.pairs]  # None over a device factor
    df = add_labels(df)
    title = f"{metric}: {factor} {res.a} / {res.b} (median {res.summary.median:.2f}×, n = {res.summary.n})"
    return df[["label", "device_type", "num_devices", "ratio"]], title
