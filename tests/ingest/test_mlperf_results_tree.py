"""MLPerf Training v1.0's results repository, ingested whole: the results tree's tags, and `mlperf_scores`
against MLCommons' own result summarizer (fixtures/mlperf/summarizer-v1.0.csv and its provenance)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import CORPUS

from bench.ingest.pipeline import ingest
from bench.sql.read import connect

EXPECTED = Path(__file__).resolve().parents[2] / "fixtures" / "mlperf" / "summarizer-v1.0.csv"
#: Where bench and the summarizer disagree, and why: nowhere. Dell's DSS8440 dlrm folder holds 5 result files
#: of which result_0, _2, _3 and _4 are the same bytes; the summarizer averages the copies, and bench, which
#: stored such a content once (2 runs: too few for an olympic mean), now keeps a result file at each place
#: of the results tree, with a warning (bench.ingest.pipeline).
KNOWN: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tarball = CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz"
    if not tarball.exists():
        pytest.skip(f"{tarball} is not present (tests read the third-party corpus from ../shared)")
    root = tmp_path_factory.mktemp("mlperf") / "st"
    ingest([str(tarball)], root)
    return root


@pytest.fixture(scope="module")
def scores(store: Path) -> dict[tuple[str, str, str], tuple]:
    con = connect(store)
    rows = con.sql("SELECT submitter, system, benchmark, score_min, verdict, round, division, n_runs, num_nodes, "
                   "num_devices, device_type FROM mlperf_scores").fetchall()
    return {r[:3]: r[3:] for r in rows}


def test_every_summarizer_score_is_bench_score_to_1e_4(scores: dict[tuple[str, str, str], tuple]) -> None:
    with EXPECTED.open() as fh:
        expected = {(r["submitter"], r["system"], r["benchmark"]): float(r["score_min"]) for r in csv.DictReader(fh)}
    assert len(expected) == 120
    agree = [k for k, v in expected.items() if scores.get(k, (None,))[0] == pytest.approx(v, rel=1e-4)]
    assert sorted(set(expected) - set(agree)) == sorted(KNOWN)
    for key, verdict in KNOWN.items():
        assert scores[key][:2] == (None, verdict)


def test_the_readme_row_of_round_1_0(scores: dict[tuple[str, str, str], tuple], store: Path) -> None:
    """The README's table row for v1.0: result files (counted in the tarball), sets scored, and the
    summarizer's scores bench matches (the test above)."""
    import re
    import tarfile

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    row = re.search(r"^\| v1\.0 \| ([\d,]+) \| (\d+) of (\d+) \(.*?\) \| (\d+) of (\d+) \|", readme, re.M)
    assert row is not None
    files, scored, sets, matched, summarized = (int(g.replace(",", "")) for g in row.groups())
    with tarfile.open(CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz", mode="r|gz") as tar:
        assert files == sum(1 for m in tar if m.isfile() and re.search(r"/results/[^/]+/[^/]+/result_\d+\.txt$", m.name))
    assert files == connect(store).execute("SELECT count(*) FROM runs WHERE format = 'mlperf'").fetchall()[0][0]
    assert (scored, sets) == (sum(v[1] == "scored" for v in scores.values()), len(scores))
    assert (matched, summarized) == (120 - len(KNOWN), 120)


def test_the_tree_names_round_division_submitter_system_and_benchmark(
        scores: dict[tuple[str, str, str], tuple]) -> None:
    row = scores[("NVIDIA", "dgxa100_n100_ngc21.05_mxnet", "unet3d")]  # its logs start after 256 KiB of output
    assert row[1:5] == ("scored", "1.0", "closed", 40)
    assert {r[2] for r in scores.values()} == {"1.0"}


def test_devices_come_from_the_system_descriptions_as_the_summarizer_counts_them(
        scores: dict[tuple[str, str, str], tuple]) -> None:
    """num_nodes and num_devices against the summarizer's number_of_nodes and accelerators_count (its host
    processors for Intel's CPU-only systems, whose devices are their sockets); every scored row has them."""
    with EXPECTED.open() as fh:
        expected = list(csv.DictReader(fh))
    for r in expected:
        got = scores[(r["submitter"], r["system"], r["benchmark"])]
        devices = r["host_processors_count"] if got[-1] == "cpu" else r["accelerators_count"]
        assert (got[-3], got[-2]) == (int(r["number_of_nodes"]), int(devices)), r
    kinds = {(k[0], v[-1]) for k, v in scores.items()}
    assert {("Google", "tpu"), ("Graphcore", "ipu"), ("Habana", "hpu"), ("PCL", "npu"), ("Intel", "cpu"),
            ("NVIDIA", "gpu")} <= kinds


def test_scaling_over_time_to_train_is_the_ratio_of_the_summarizers_scores(store: Path) -> None:
    """Google's TensorFlow ResNet on 64, 2048 and 3456 TPU chips: speedup = score(64) / score(N), the
    scores as the summarizer printed them (fixtures/mlperf/summarizer-v1.0.csv)."""
    with EXPECTED.open() as fh:
        minutes = {r["system"]: float(r["score_min"]) for r in csv.DictReader(fh)
                   if r["submitter"] == "Google" and r["benchmark"] == "resnet"}
    got = connect(store).sql("""SELECT num_devices, speedup, efficiency FROM mlperf_scaling
        WHERE submitter = 'Google' AND benchmark = 'resnet' AND framework = 'tensorflow' ORDER BY num_devices""").fetchall()
    base = minutes["tpu-v4-128-TF"]
    assert [r[0] for r in got] == [64, 2048, 3456]
    assert got[1][1:] == (pytest.approx(base / minutes["tpu-v4-4096-TF"], rel=1e-4),
                          pytest.approx(base / minutes["tpu-v4-4096-TF"] / 32, rel=1e-4))
    assert got[2][1] == pytest.approx(base / minutes["tpu-v4-6912-TF"], rel=1e-4)


def test_the_report_has_an_mlperf_section_of_scores_speedups_and_time_to_train(store: Path) -> None:
    """bench report on the tree: one score row per result set, each linked to its runs; the speedup table
    of --mlperf-compare submitter:Supermicro:NVIDIA holds the summarizer's own scores of both sides; the
    log-log figure."""
    from bench.analytics.report.build import Options, build_report

    with EXPECTED.open() as fh:
        summarized = list(csv.DictReader(fh))
    report = build_report(connect(store), Options(mlperf_compare=("submitter", "Supermicro", "NVIDIA")))
    (sec,) = [s for s in report.sections if s.title == "MLPerf Training"]
    scores, speedup = sec.tables
    assert len(scores.frame) == connect(store).execute("SELECT count(*) FROM mlperf_scores").fetchall()[0][0] >= 120
    assert all(scores.cell_runs[(i, "score [min]")] for i in range(len(scores.frame)))
    for _, row in speedup.frame.iterrows():
        a, b = row["A: Supermicro"], row["B: NVIDIA"]
        for who, minutes in (("Supermicro", a), ("NVIDIA", b)):
            assert any(r["submitter"] == who and r["benchmark"] == row["benchmark"]
                       and float(r["score_min"]) == pytest.approx(minutes, rel=1e-4) for r in summarized)
        assert row["speedup of A over B [×]"] == pytest.approx(b / a)
    assert len(speedup.frame) >= 3 and b"<svg" in sec.figures[0].svg[:1000]


RCP = Path(__file__).resolve().parents[2] / "fixtures" / "mlperf" / "summarizer-v1.0-rcp.csv"


def test_scaling_json_in_a_later_ingest_gives_the_summarizers_rcp_scaled_scores(store: Path, tmp_path: Path) -> None:
    """The summarizer's second pass reads the scaling.json files its RCP checker wrote in the first
    (fixtures/mlperf/summarizer-v1.0-rcp.csv: the factors it wrote, the scores it then printed). The same
    factors, ingested into a copy of the store after its logs, give those scores to 1e-4, and say so."""
    with RCP.open() as fh:
        rows = list(csv.DictReader(fh))
    tree = tmp_path / "training_results_v1.0"
    for r in rows:
        if r["scaling_factor"]:
            folder = tree / r["submitter"] / "results" / r["system"] / r["benchmark"]
            folder.mkdir(parents=True)
            (folder / "scaling.json").write_text(json.dumps({"scaling_factor": float(r["scaling_factor"])}))
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    ingest([str(tree)], copy)
    got = {r[:3]: r[3:] for r in connect(copy).execute(
        "SELECT submitter, system, benchmark, score_min, score_rule FROM mlperf_scores").fetchall()}
    scaled = [r for r in rows if r["scaling_factor"]]
    assert len(scaled) == 16
    for r in rows:
        key = (r["submitter"], r["system"], r["benchmark"])
        if key in KNOWN:
            continue
        assert got[key][0] == pytest.approx(float(r["score_min"]), rel=1e-4), key
        assert got[key][1] == ("olympic x scaling.json" if r["scaling_factor"] else "olympic")


def test_byte_identical_result_files_of_two_systems_are_scored_in_both_places(tmp_path: Path) -> None:
    """MLPerf v5.1 holds Dell's XE9680L result files copied byte for byte under the XE9780 system's folder:
    the summarizer scores both systems. Here one v1.0 Dell result set is copied under a second system name;
    both are scored, with a warning row per copied file, and ingesting the tree again adds nothing."""
    import tarfile

    tarball = CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"MLPerf v1.0 results not present at {tarball} (read from ../shared)")
    system = "XE8545x4A100-SXM-80GB"
    with tarfile.open(tarball) as tar:
        names = [m for m in tar.getnames() if m == f"training_results_v1.0/Dell/systems/{system}.json"
                 or m.startswith(f"training_results_v1.0/Dell/results/{system}/resnet/result_")]
        tar.extractall(tmp_path, members=[tar.getmember(n) for n in names], filter="data")
    dell = tmp_path / "training_results_v1.0" / "Dell"
    shutil.copytree(dell / "results" / system, dell / "results" / f"{system}-COPY")
    shutil.copy(dell / "systems" / f"{system}.json", dell / "systems" / f"{system}-COPY.json")
    summary = ingest([str(tmp_path / "training_results_v1.0")], tmp_path / "store", workers=0)
    assert summary.problems_by_kind.get("warning") == 5 and summary.duplicates_skipped == 0
    con = connect(tmp_path / "store")
    got = con.execute("SELECT system, score_min FROM mlperf_scores WHERE benchmark = 'resnet' ORDER BY system").fetchall()
    assert [g[0] for g in got] == [system, f"{system}-COPY"] and got[0][1] == got[1][1] is not None
    again = ingest([str(tmp_path / "training_results_v1.0")], tmp_path / "store", workers=0)
    assert again.runs_added == 0 and again.problems_by_kind == {}
