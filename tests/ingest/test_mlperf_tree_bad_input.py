"""An MLPerf results tree of 10,000 result files written here, with bad input: system
descriptions that are not JSON, lack fields or give counts as strings, a submitter without a systems
folder, duplicate result files and a log cut mid-line. Every expected score is worked out by construction:
run i of a set takes (base + i) minutes, so the olympic mean of 5 ok runs is base + 2."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.ingest.pipeline import ingest
from bench.sql.read import connect

SUBMITTERS, SYSTEMS, BENCHMARKS, RUNS = 10, 40, ("resnet", "bert", "ssd", "rnnt", "maskrcnn"), 5
T0 = 1_600_000_000_000  # ms


def _log(submitter: str, system: str, benchmark: str, minutes: float, *, cut: bool = False) -> str:
    lines = [
        {"key": "submission_org", "value": submitter, "time_ms": T0},
        {"key": "submission_platform", "value": system, "time_ms": T0},
        {"key": "submission_division", "value": "closed", "time_ms": T0},
        {"key": "submission_benchmark", "value": benchmark, "time_ms": T0},
        {"key": "global_batch_size", "value": 256, "time_ms": T0},
        {"key": "run_start", "value": None, "time_ms": T0 + 1000},
        {"key": "run_stop", "value": None, "time_ms": T0 + 1000 + round(minutes * 60_000),
         "metadata": {"status": "success"}},
    ]
    text = "".join(":::MLLOG " + json.dumps({"namespace": "", "event_type": "POINT_IN_TIME", "metadata": {}} | d)
                   + "\n" for d in lines)
    return text[: text.rindex(":::MLLOG") + 40] if cut else text  # cut inside the run_stop line


def _system(k: int, j: int) -> str:
    doc = {"submitter": f"S{k}", "division": "closed", "status": "available", "system_name": f"sys{j}",
           "number_of_nodes": str(1 + j % 4), "accelerators_per_node": "8" if j % 2 else 8,
           "accelerator_model_name": "NVIDIA A100-SXM4-80GB", "host_processor_model_name": "AMD EPYC 7742",
           "host_processors_per_node": 2, "framework": "PyTorch NVIDIA Release 21.05"}
    if (k, j) == (1, 1):
        return "{ not json"
    if (k, j) == (1, 2):
        del doc["number_of_nodes"], doc["accelerators_per_node"]
    return json.dumps(doc)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    root = tmp_path_factory.mktemp("mlperf_tree") / "training_results_v9.9"
    for k in range(SUBMITTERS):
        if k != 2:  # S2 has no systems folder
            (root / f"S{k}" / "systems").mkdir(parents=True)
        for j in range(SYSTEMS):
            if k != 2:
                (root / f"S{k}" / "systems" / f"sys{j}.json").write_text(_system(k, j))
            for b, bench in enumerate(BENCHMARKS):
                folder = root / f"S{k}" / "results" / f"sys{j}" / bench
                folder.mkdir(parents=True)
                for i in range(RUNS):
                    minutes = 10 * (1 + b) + j + i
                    log = _log(f"S{k}", f"sys{j}", bench, minutes, cut=(k, j, b, i) == (3, 3, 0, 4))
                    (folder / f"result_{i}.txt").write_text(log)
    (root / "S5" / "results" / "sys5" / "resnet" / "scaling.json").write_text('{"scaling_factor": 1.5}')
    (root / "S5" / "results" / "sys6" / "resnet" / "scaling.json").write_text('{"scaling_factor": ')  # cut
    dup = root / "S4" / "results" / "sys4" / "resnet"
    (dup / "result_4.txt").write_bytes((dup / "result_3.txt").read_bytes())  # the same bytes twice
    store = root.parent / "store"
    t = time.perf_counter()
    ingest([str(root)], store)
    return store, time.perf_counter() - t


def test_ten_thousand_result_files_give_every_score(tree: tuple[Path, float]) -> None:
    store, seconds = tree
    con = connect(store)
    n_files = con.execute("SELECT count(*) FROM sources").fetchall()[0][0]
    # result files (one a copy of another, stored at its own place), system JSONs (one submitter has none) and
    # two scaling.json
    assert n_files == SUBMITTERS * SYSTEMS * len(BENCHMARKS) * RUNS + (SUBMITTERS - 1) * SYSTEMS + 2
    rows = {r[:3]: r[3:] for r in con.execute(
        "SELECT submitter, system, benchmark, score_min, n_runs, n_ok, verdict, round FROM mlperf_scores").fetchall()}
    assert len(rows) == SUBMITTERS * SYSTEMS * len(BENCHMARKS)
    assert {r[-1] for r in rows.values()} == {"9.9"}  # the round from the tree's name
    # an untouched set: base + 2 minutes, e.g. S0 sys5 ssd: 10 * 3 + 5 + 2 = 37
    assert rows[("S0", "sys5", "ssd")][:4] == (pytest.approx(37.0), 5, 5, "scored")
    print(f"ingest of {n_files} files: {seconds:.1f} s")


def test_a_cut_log_is_a_failed_run_counted_as_the_slowest(tree: tuple[Path, float]) -> None:
    con = connect(tree[0])
    got = con.execute("SELECT score_min, n_runs, n_ok, verdict FROM mlperf_scores "
                      "WHERE submitter = 'S3' AND system = 'sys3' AND benchmark = 'resnet'").fetchall()
    # runs 13, 14, 15, 16 ok and the cut one (no run_stop) slowest: drop 13 and the cut run: mean(14, 15, 16)
    assert got == [(pytest.approx(15.0), 5, 4, "scored")]
    kinds = con.execute("SELECT DISTINCT kind FROM problems WHERE source LIKE '%S3/results/sys3/resnet/result_4.txt'")
    assert {k for (k,) in kinds.fetchall()} >= {"truncated"}


def test_a_scaling_json_scales_its_set_and_a_broken_one_is_a_problem(tree: tuple[Path, float]) -> None:
    con = connect(tree[0])
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT system, score_min, score_rule FROM mlperf_scores WHERE submitter = 'S5' AND benchmark = 'resnet' "
        "AND system IN ('sys5', 'sys6')").fetchall()}
    assert got["sys5"] == (pytest.approx((10 + 5 + 2) * 1.5), "olympic x scaling.json")  # 17 minutes x 1.5
    assert got["sys6"] == (pytest.approx(10 + 6 + 2), "olympic")  # its scaling.json is cut: unscaled
    kinds = {k for (k,) in con.execute("SELECT kind FROM problems WHERE source LIKE '%scaling.json'").fetchall()}
    assert kinds == {"bad_line"}


def test_a_copied_result_file_counts_at_its_place_with_a_warning(tree: tuple[Path, float]) -> None:
    con = connect(tree[0])
    got = con.execute("SELECT score_min, n_runs, n_ok FROM mlperf_scores "
                      "WHERE submitter = 'S4' AND system = 'sys4' AND benchmark = 'resnet'").fetchall()
    # runs 14, 15, 16, 17 and result_4 = result_3's bytes (17), as the summarizer reads the folder: drop 14
    # and one 17: mean(15, 16, 17) = 16
    assert got == [(pytest.approx(16.0), 5, 5)]
    (message,) = [m for (m,) in con.execute("SELECT message FROM problems WHERE kind = 'warning'").fetchall()]
    assert message.startswith("byte-identical to ") and "S4/results/sys4/resnet/result_3.txt" in message


def test_bad_system_descriptions_give_null_devices_never_a_crash(tree: tuple[Path, float]) -> None:
    con = connect(tree[0])
    devices = {(s, sy): (n, d) for s, sy, n, d in con.execute(
        "SELECT DISTINCT submitter, system, num_nodes, num_devices FROM mlperf_scores").fetchall()}
    assert devices[("S0", "sys3")] == (4, 32)  # "4" nodes and "8" per node given as strings: counts
    assert devices[("S0", "sys2")] == (3, 24)
    assert devices[("S1", "sys1")] == (None, None)  # not JSON: a problem, no devices
    assert devices[("S1", "sys2")] == (None, None)  # no counts in it
    assert devices[("S2", "sys0")] == (None, None)  # no systems folder at all
    problems = {k for (k,) in con.execute("SELECT kind FROM problems WHERE source LIKE '%/systems/%'").fetchall()}
    assert "unrecognized_format" not in problems and problems  # the bad JSON is a problem of its own kind


CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "mlperf"


def test_older_rounds_where_the_summarizer_crashes_get_a_score_or_a_verdict(tmp_path: Path) -> None:
    """mlperf-logging 4.1.68's summarizer dies on v0.6 and some v0.7 trees; bench reads them. One real
    result file per round (the corpus has no whole older round): each set is 'too few runs' (an olympic
    mean needs 3), with its round from the tree; five copies of a v0.6 set with their own stamps score."""
    files = {"0.6": "v0.6-google-tpuv3-32-resnet-result_0.txt", "0.7": "v0.7-google-tpuv4-16-tf-bert-result_0.txt"}
    if not all((CORPUS / f).is_file() for f in files.values()):
        pytest.skip(f"MLPerf corpus files not present under {CORPUS} (read from ../shared)")
    for rnd, name in files.items():
        folder = tmp_path / f"training_results_v{rnd}" / "Google" / "results" / "tpu" / name.split("-")[-2]
        folder.mkdir(parents=True)
        (folder / "result_0.txt").write_bytes((CORPUS / name).read_bytes())
    mll = [line for line in (CORPUS / files["0.6"]).read_text().splitlines() if ":::MLL " in line]
    five = tmp_path / "training_results_v0.6" / "G2" / "results" / "tpu" / "resnet"
    five.mkdir(parents=True)
    for i in range(5):  # run i: the real run with its stop moved i minutes later
        stop = next(line for line in mll if " run_stop:" in line)
        t = float(stop.split()[1])
        lines = [line if line is not stop else line.replace(stop.split()[1], f"{t + 60 * i:.3f}") for line in mll]
        (five / f"result_{i}.txt").write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    ingest([str(tmp_path / "training_results_v0.6"), str(tmp_path / "training_results_v0.7")], store)
    got = {(r[0], r[1]): r[2:] for r in connect(store).execute(
        "SELECT submitter, round, benchmark, score_min, n_runs, verdict FROM mlperf_scores").fetchall()}
    assert got[("Google", "0.6")] == ("resnet", None, 1, "too few runs")
    assert got[("Google", "0.7")] == ("bert", None, 1, "too few runs")
    # G2: times T, T+1, ..., T+4 minutes: olympic mean T + 2, T the corpus run's 2533.457 s (42.2243 min)
    assert got[("G2", "0.6")][0] == "resnet" and got[("G2", "0.6")][2:] == (5, "scored")
    assert got[("G2", "0.6")][1] == pytest.approx(2533.457 / 60 + 2, rel=1e-6)
