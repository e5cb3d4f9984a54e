"""The official TensorFlow benchmark sheet of 2017, read back from 64 logs.

``fixtures/official-2017/make_logs.py`` writes one tf_cnn_benchmarks log (TF 1.1 / benchmarks 9165a70
output) per published figure; its table is checked against ``../shared/reference/tf-official-2017.csv``
when that file is present. The logs are ingested with ``PATTERN`` into a temporary store, then every
figure and the sheet's summary values are checked with plain SQL over ``runs`` and ``steps``, not the
curated views of ``sql/`` (those have their own given/expect tests). Expected values are computed here
by hand from the published figures, and the sheet's rounded values are written out.
"""

from __future__ import annotations

import csv
import importlib.util
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from bench.analytics.results import first
from bench.ingest.pipeline import IngestSummary, ingest
from bench.sql.store import table_files

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "fixtures" / "official-2017"
SHEET_CSV = REPO.parent / "shared" / "reference" / "tf-official-2017.csv"
PATTERN = "{source}/{host}/{dataset}-{data}-{precision}/{model}-bs{batch_size_per_device}-{num_gpus}gpus.log"
#: host (from the path) -> (GPU as the sheet names it, device_model as TF names it)
MACHINES = {"dgx1": ("P100", "Tesla P100-SXM2-16GB"), "gce-k80x8": ("K80", "Tesla K80")}
Key = tuple[int, str, str, str, int]  # batch per GPU, data, model, GPU (P100 / K80), num_devices

# The configuration of a run, and the ok runs' throughput: the first CTE of every query below.
OK = """
WITH ok AS (
    SELECT model, data, batch_size_per_device AS batch, device_model, num_devices, images_per_sec
    FROM runs WHERE status = 'ok'
)"""
# Speedup and efficiency against the smallest GPU count of each configuration.
SCALING = OK + """, base AS (
    SELECT model, data, batch, device_model, min(num_devices) AS base_gpus,
           arg_min(images_per_sec, num_devices) AS base_ips
    FROM ok GROUP BY model, data, batch, device_model
), scaling AS (
    SELECT ok.*, images_per_sec / base_ips AS speedup,
           images_per_sec / base_ips / (num_devices::DOUBLE / base_gpus) AS efficiency
    FROM ok JOIN base USING (model, data, batch, device_model)
)
"""


def _load_make_logs() -> ModuleType:
    """fixtures/official-2017/make_logs.py as a module (its folder is no package)."""
    spec = importlib.util.spec_from_file_location("official_2017_make_logs", FOLDER / "make_logs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


make_logs = _load_make_logs()


def _script_figures() -> dict[Key, float]:
    return {(b, data, model, gpu, n): float(x)
            for b, data, model, gpu, xs in make_logs.FIGURES for n, x in zip((1, 2, 4, 8), xs, strict=True)}


def _csv_figures() -> dict[Key, float] | None:
    """The seed sheet read with the csv module (None when ../shared is absent)."""
    if not SHEET_CSV.is_file():
        return None
    with SHEET_CSV.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].startswith("#")]
    assert rows[0] == ["batch_size", "dataset", "model", "gpu", "gpus1", "gpus2", "gpus4", "gpus8"]
    return {(int(b), data, model, gpu, n): float(x)
            for b, data, model, gpu, *xs in rows[1:] for n, x in zip((1, 2, 4, 8), xs, strict=True)}


def _published() -> dict[Key, float]:
    """The figures to compute expectations from: the CSV when present, else the script's copy."""
    return _csv_figures() or _script_figures()


@dataclass
class Ingested:
    summary: IngestSummary
    con: duckdb.DuckDBPyConnection
    store: Path


@pytest.fixture(scope="module")
def sheet(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """The 64 logs ingested once; ``runs`` / ``steps`` views straight over the store's Parquet files,
    so this test does not depend on the curated views that are written alongside it."""
    store = tmp_path_factory.mktemp("official-2017") / "store"
    summary = ingest([str(FOLDER / make_logs.SOURCE)], store, path_patterns=[PATTERN], workers=0)
    con = duckdb.connect()
    for table in ("runs", "steps"):
        files = [str(f) for f in table_files(store, table)]
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({files!r})")
    return Ingested(summary, con, store)


def test_script_table_is_the_published_sheet() -> None:
    sheet = _csv_figures()
    if sheet is None:
        pytest.skip(f"seed sheet not present at {SHEET_CSV} (read from ../shared)")
    assert len(sheet) == 64
    assert _script_figures() == sheet


def test_committed_logs_are_what_make_logs_writes() -> None:
    expected = make_logs.render_all()
    files = [p for p in (FOLDER / make_logs.SOURCE).rglob("*") if p.is_file()]
    on_disk = {p.relative_to(FOLDER).as_posix(): p.read_text() for p in files}
    assert sorted(on_disk) == sorted(expected)
    stale = [rel for rel, text in expected.items() if on_disk[rel] != text]
    assert not stale, f"rerun fixtures/official-2017/make_logs.py: {stale[:3]}"
    assert len(expected) == 64 and max(len(t) for t in expected.values()) < 8000  # a few KB each


def test_ingest_finds_64_ok_runs_and_no_problem(sheet: Ingested) -> None:
    s = sheet.summary
    assert (s.files_parsed, s.runs_added, s.unrecognized) == (64, 64, 0)
    assert s.runs_by_status == {"ok": 64}
    assert s.problems_by_kind == {}  # no path/log conflict, no unreadable line
    assert s.steps_added == 64 * 11  # steps 1, 10, 20, ..., 100


def test_each_run_carries_its_published_figure(sheet: Ingested) -> None:
    rows = sheet.con.execute(
        "SELECT host, data, model, batch_size_per_device, num_devices, images_per_sec FROM runs").fetchall()
    got = {(b, data, model, MACHINES[host][0], n): x for host, data, model, b, n, x in rows}
    assert len(rows) == len(got) == 64
    assert got == _script_figures()
    if (csv_figures := _csv_figures()) is not None:
        assert got == csv_figures


def test_each_run_says_what_the_sheet_says(sheet: Ingested) -> None:
    rows = sheet.con.execute("""
        SELECT DISTINCT framework, framework_version, mode, dataset, precision, data_format, variable_update,
               all_reduce, num_nodes, global_batch_size = batch_size_per_device * num_devices, tags['source']
        FROM runs""").fetchall()
    assert rows == [("tensorflow", "1.1", "train", "imagenet", "fp32", "NCHW", "parameter_server",
                     None, 1, True, "tf-official-2017")]
    counts = sheet.con.execute("""
        SELECT data, model, batch_size_per_device, num_devices, count(*) FROM runs GROUP BY ALL""").fetchall()
    expected = [(d, m, b, n, 2) for d in ("real", "synthetic") for m in ("inception3", "resnet50")
                for b in (32, 64) for n in (1, 2, 4, 8)]  # one P100 run and one K80 run each
    assert sorted(counts) == sorted(expected)


def test_device_model_comes_from_the_tf_1_1_device_block(sheet: Ingested) -> None:
    """TF 1.1 prints ``name: <GPU>`` on its own line and ``Creating TensorFlow device (/gpu:0) ->
    (device: 0, name: <GPU>, pci bus id: ...)``: the model must be read from that era's block too."""
    rows = sheet.con.execute("SELECT host, device_model, count(*) FROM runs GROUP BY ALL ORDER BY host").fetchall()
    assert rows == [("dgx1", "Tesla P100-SXM2-16GB", 32), ("gce-k80x8", "Tesla K80", 32)]


def test_step_lines_agree_with_the_total(sheet: Ingested) -> None:
    rows = sheet.con.execute("""
        WITH last AS (SELECT run_id, max(step) AS step, count(*) AS n FROM steps GROUP BY run_id)
        SELECT r.images_per_sec, s.images_per_sec, l.n, r.num_steps, r.images_per_sec_mean,
               r.images_per_sec_stderr, r.images_per_sec_jitter
        FROM runs r JOIN last l ON l.run_id = r.run_id
        JOIN steps s ON s.run_id = r.run_id AND s.step = l.step""").fetchall()
    assert len(rows) == 64
    for total, last_mean, n, num_steps, mean, stderr, jitter in rows:
        assert (n, num_steps) == (11, 100)
        assert total <= last_mean <= total * 1.005  # step times exclude inter-step overhead
        assert mean == pytest.approx(total, rel=0.01)
        assert 0 <= stderr <= jitter


def test_speedup_and_efficiency_of_inception3_bs64_synthetic_p100(sheet: Ingested) -> None:
    rows = sheet.con.execute(SCALING + """
        SELECT num_devices, speedup, efficiency FROM scaling
        WHERE model = 'inception3' AND batch = 64 AND data = 'synthetic' AND device_model ILIKE '%P100%'
        ORDER BY num_devices""").fetchall()
    by_gpus = {n: (speedup, eff) for n, speedup, eff in rows}
    assert sorted(by_gpus) == [1, 2, 4, 8]
    fig = {n: _published()[64, "synthetic", "inception3", "P100", n] for n in (1, 4, 8)}
    assert by_gpus[8][0] == pytest.approx(fig[8] / fig[1], rel=1e-12)
    assert round(by_gpus[8][0], 2) == 7.96  # 1131 / 142
    assert by_gpus[4][1] == pytest.approx(fig[4] / fig[1] / 4, rel=1e-12)
    assert round(100 * by_gpus[4][1], 2) == 104.93  # superlinear, kept above 100%


def test_median_efficiency_at_8_gpus_over_the_16_configurations(sheet: Ingested) -> None:
    query = SCALING + "SELECT count(*), median(efficiency) FROM scaling WHERE num_devices = 8"
    n, median = first(sheet.con, query)  # type: ignore[misc]
    fig = _published()
    by_hand = statistics.median(fig[k] / fig[(*k[:4], 1)] / 8 for k in fig if k[4] == 8)
    assert n == 16
    assert median == pytest.approx(by_hand, rel=1e-12)
    assert round(100 * median, 2) == 93.02  # (93.02% + 93.03%) / 2: the 8th and 9th of 16


def _pairs(factor: str, a: str, b: str) -> str:
    """SQL of ``pairs``: ratio A/B of ok runs that agree on every other factor and num_devices."""
    others = ", ".join(c for c in ("model", "data", "batch", "device_model") if c != factor)
    return OK + f""", a AS (SELECT * FROM ok WHERE {factor} ILIKE '%{a}%'),
    b AS (SELECT * FROM ok WHERE {factor} ILIKE '%{b}%'),
    pairs AS (SELECT num_devices, a.images_per_sec / b.images_per_sec AS ratio
              FROM a JOIN b USING ({others}, num_devices))
    """


def _by_hand(position: int, a: str, b: str, num_devices: int | None = None) -> tuple[int, float]:
    """(n, median) of figure(A) / figure(B) over pairs equal in every other key position."""
    fig = _published()
    ratios = [x / fig[(*k[:position], b, *k[position + 1:])] for k, x in fig.items()
              if k[position] == a and num_devices in (None, k[4])]
    return len(ratios), statistics.median(ratios)


def test_p100_over_k80_median_over_32_pairs(sheet: Ingested) -> None:
    query = _pairs("device_model", "P100", "K80") + "SELECT count(*), median(ratio) FROM pairs"
    n, median = first(sheet.con, query)  # type: ignore[misc]
    assert (n, median) == (32, pytest.approx(_by_hand(3, "P100", "K80")[1], rel=1e-12))
    assert round(median, 2) == 4.40


def test_resnet50_over_inception3_median(sheet: Ingested) -> None:
    query = _pairs("model", "resnet50", "inception3") + "SELECT count(*), median(ratio) FROM pairs"
    n, median = first(sheet.con, query)  # type: ignore[misc]
    assert (n, median) == (32, pytest.approx(_by_hand(2, "resnet50", "inception3")[1], rel=1e-12))
    assert round(median, 2) == 1.61


def test_synthetic_over_real_medians_per_gpu_count(sheet: Ingested) -> None:
    rows = sheet.con.execute(_pairs("data", "synthetic", "real") + """
        SELECT num_devices, count(*), median(ratio) FROM pairs GROUP BY num_devices ORDER BY num_devices""").fetchall()
    assert [(g, n) for g, n, _ in rows] == [(1, 8), (2, 8), (4, 8), (8, 8)]
    for g, _, median in rows:
        assert median == pytest.approx(_by_hand(1, "synthetic", "real", g)[1], rel=1e-12)
    assert [round(m, 2) for *_, m in rows] == [1.00, 1.00, 1.01, 1.02]


# -- the same sheet through the product: the curated views and bench.analytics.compare ------------------


def test_scaling_view_reproduces_every_speedup_and_efficiency_of_the_sheet(sheet: Ingested) -> None:
    from bench.sql.read import connect

    rows = connect(sheet.store).execute("""
        SELECT batch_size_per_device, data, model, device_model, num_devices, baseline_devices, speedup, efficiency,
               superlinear
        FROM scaling""").fetchall()
    fig = _published()
    gpu = {model: short for short, model in MACHINES.values()}
    assert len(rows) == 64
    for b, data, model, device_model, n, base, speedup, eff, superlinear in rows:
        key = (b, data, model, gpu[device_model])
        assert base == 1
        assert speedup == pytest.approx(fig[(*key, n)] / fig[(*key, 1)], rel=1e-12)
        assert eff == pytest.approx(fig[(*key, n)] / fig[(*key, 1)] / n, rel=1e-12)
        assert superlinear == (eff > 1)


@pytest.mark.parametrize(
    ("factor", "a", "b", "where", "want_n", "want_median"),
    [
        ("device_model", "P100", "K80", None, 32, 4.40),
        ("model", "resnet50", "inception3", None, 32, 1.61),
        ("data", "synthetic", "real", "num_devices = 1", 8, 1.00),
        ("data", "synthetic", "real", "num_devices = 2", 8, 1.00),
        ("data", "synthetic", "real", "num_devices = 4", 8, 1.01),
        ("data", "synthetic", "real", "num_devices = 8", 8, 1.02),
    ],
)
def test_compare_reproduces_the_sheets_ratio_medians(
    sheet: Ingested, factor: str, a: str, b: str, where: str | None, want_n: int, want_median: float
) -> None:
    from bench.analytics.compare import compare
    from bench.sql.read import connect

    result = compare(connect(sheet.store), factor, a, b, where=where)
    assert (result.summary.n, round(result.summary.median, 2)) == (want_n, want_median)
