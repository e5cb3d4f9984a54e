"""bench fleet on simulated fleets (benchmarks/fleet_sim.py): every faulty host flagged with the right fact or
GPU, no healthy host flagged; its statistics against hand arithmetic; the bad input it must survive."""

from __future__ import annotations

import csv
import importlib.util
import json
import random
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from logtools import figure_problems
from typer.testing import CliRunner

from bench.runner.cli import app
from bench.sql.read import connect

_SPEC = importlib.util.spec_from_file_location("fleet_sim", Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_sim.py")
assert _SPEC is not None and _SPEC.loader is not None
fleet_sim = importlib.util.module_from_spec(_SPEC)
sys.modules["fleet_sim"] = fleet_sim
_SPEC.loader.exec_module(fleet_sim)

runner = CliRunner()


def bench(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def simulated(root: Path, **kw: object) -> tuple[Path, dict[str, dict[str, object]]]:
    truth = fleet_sim.generate(root / "runs", **kw)
    code, out = bench("ingest", str(root / "runs"), "--store", str(root / "store"))
    assert code == 0, out
    return root / "store", truth


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, object]], Path]:
    root = tmp_path_factory.mktemp("fleet")
    store, truth = simulated(root)
    return store, truth, root / "runs"


def test_every_faulty_host_is_flagged_with_its_fault_and_no_healthy_one(fleet: tuple[Path, dict, Path], tmp_path: Path) -> None:
    store, truth, _ = fleet
    assert sorted(f["kind"] for f in truth.values()) == sorted(fleet_sim.FAULTS * 2)
    code, out = bench("fleet", "--store", str(store), "--json", "--fail", "--junit", str(tmp_path / "fleet.xml"))
    assert code == 1, out
    found = json.loads(out)
    score = fleet_sim.score(found["outliers"], truth)
    assert score == {"found": sorted(truth), "explained": sorted(truth), "false": []}
    for o in found["outliers"]:
        fault = truth[o["host"]]
        # 10% slower (1/1.1 - 1 = -9.1%) give or take the host's own 1% noise
        assert -0.14 < o["relative_difference"] < -0.05
        lo, hi = o["ci95"]
        assert lo < o["relative_difference"] < hi and hi - lo < 0.05
        assert o["gpu"] == fault["gpu"]  # the hot GPU by its index; None where the fault is the node's
        if fault["kind"] == "hot_gpu":
            said = {t["metric"] for t in o["telemetry"] if t["gpu"] == fault["gpu"]}
            # a throttled GPU also draws less (fleet_sim's hot GPU: about 540 W against its node's 610 W)
            assert said == {"sm_clock_mean_mhz", "temperature_max_c", "power_mean_w"}, o["telemetry"]
            assert not o["differs"]
        elif fault["kind"] == "old_driver":
            assert o["differs"] == {"gpu_driver": {"host": "535.104.05", "peers": "550.90.07", "peers_sharing": 62,
                                                   "peers_with_fact": 63, "also_on_unflagged": 0}}
            assert o["telemetry"] == []
        elif fault["kind"] == "power_cap":
            assert o["differs"]["gpu_power_limit_w"]["host"] == "500.0"
            share = [t for t in o["telemetry"] if t["metric"] == "at_power_limit_share"]
            assert share and share[0]["gpu"] is None and share[0]["value"] == 1.0
        else:
            assert o["differs"]["gpu_clocks_applications_sm_mhz"]["host"] == "1410.0"
    xml = ET.parse(tmp_path / "fleet.xml").getroot()[0]
    assert (xml.get("tests"), xml.get("failures")) == ("64", "8")
    assert sorted(c.get("name") for c in xml if c.find("failure") is not None) == sorted(truth)


def test_the_text_names_each_host_its_difference_and_why(fleet: tuple[Path, dict, Path]) -> None:
    store, truth, _ = fleet
    code, out = bench("fleet", "--store", str(store))
    assert code == 0, out  # without --fail, flagged hosts are a finding, not an error
    hot = next(h for h, f in truth.items() if f["kind"] == "hot_gpu")
    line = next(ln for ln in out.splitlines() if f"FLAGGED {hot}," in ln)
    assert f"GPU {truth[hot]['gpu']}: mean SM clock under load 1" in line and "max temperature 9" in line
    assert "8 host(s) flagged" in out


@pytest.mark.parametrize(("noise", "size", "seed"), [(0.005, 0.05, 2), (0.02, 0.15, 3)])
def test_other_noise_levels_and_fault_sizes(tmp_path: Path, noise: float, size: float, seed: int) -> None:
    store, truth = simulated(tmp_path, noise=noise, fault_size=size, seed=seed)
    code, out = bench("fleet", "--store", str(store), "--json")
    assert code == 0, out
    score = fleet_sim.score(json.loads(out)["outliers"], truth)
    assert score == {"found": sorted(truth), "explained": sorted(truth), "false": []}


def test_a_healthy_fleet_passes_the_gate(tmp_path: Path) -> None:
    store, _ = simulated(tmp_path, hosts=16, faults=0, runs=2, seed=4)
    code, out = bench("fleet", "--store", str(store), "--fail")
    assert code == 0, out
    assert "no host flagged (slowest: node" in out


def _write(root: Path, host: str, rates: list[float], *, gpu: str = fleet_sim.GPU, status: str = "ok") -> None:
    rng = random.Random(host)
    for i, rate in enumerate(rates):
        d = root / f"{host}-{i}-{gpu[-4:]}"
        fleet_sim.write_run(d, host, rate, None, 2, datetime(2026, 11, 2, tzinfo=UTC) + timedelta(hours=i), rng)
        if gpu != fleet_sim.GPU or status != "ok":
            doc = json.loads((d / "run.json").read_text())
            for g in doc["gpus"]:
                g["name"] = gpu
            if status != "ok":
                doc.update(status=status, exit_code=1)
                (d / "output.log").write_text("Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n")
            (d / "run.json").write_text(json.dumps(doc))


def test_the_statistics_by_hand(tmp_path: Path) -> None:
    # host levels (median of 2 runs): 101, 100, 100, 99, 81. log levels: 4.61512, 4.60517, 4.60517, 4.59512,
    # 4.39445; median 4.60517 (100); absolute deviations 0.00995, 0, 0, 0.01005, 0.21072 -> MAD 0.00995;
    # robust SD 1.4826 x 0.00995 = 0.014752; slow's z = (4.39445 - 4.60517) / 0.014752 = -14.28, and it is
    # 81 / 100 - 1 = -19% off; h4's z is -0.010050 / 0.014752 = -0.68 (not flagged)
    for host, rates in {"h1": [100, 102], "h2": [99, 101], "h3": [100, 100], "h4": [98, 100], "slow": [80, 82]}.items():
        _write(tmp_path / "runs", host, rates)
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json")
    assert code == 0, out
    found = json.loads(out)
    (w,) = found["workloads"]
    assert w["median"] == pytest.approx(100) and w["robust_sd"] == pytest.approx(0.014752, rel=1e-3)
    levels = {h["host"]: h for h in w["hosts"]}
    assert levels["h1"]["level"] == 101 and levels["h4"]["z"] == pytest.approx(-0.681, abs=0.002)
    (o,) = found["outliers"]
    assert o["host"] == "slow" and o["relative_difference"] == pytest.approx(-0.19)
    assert o["z"] == pytest.approx(-14.28, abs=0.01)
    assert o["ci95"][0] < -0.19 < o["ci95"][1]


def test_bad_input_is_said_not_flagged(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for host in ("a1", "a2", "a3"):
        _write(runs, host, [100, 101])
    _write(runs, "one-run", [100.5])  # its level is its one run
    _write(runs, "all-failed", [100, 100], status="failed")
    _write(runs, "lonely-a100", [60, 61], gpu="NVIDIA A100-SXM4-80GB")  # the only host of its model
    assert bench("ingest", str(runs), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json", "--fail")
    found = json.loads(out)
    assert code == 1  # the host whose every run failed is not qualified
    assert [(o["host"], o["kind"], o["relative_difference"]) for o in found["outliers"]] == [("all-failed", "failed", None)]
    assert "all 2 runs failed (2 failed)" in found["outliers"][0]["reason"]
    assert any("2 device models" in n and "own model only" in n for n in found["notes"])
    by_model = {w["key"]["device_model"]: w for w in found["workloads"]}
    assert not by_model["NVIDIA A100-SXM4-80GB"]["compared"]
    assert "run on 1 host" in by_model["NVIDIA A100-SXM4-80GB"]["note"]
    h100 = {h["host"]: h for h in by_model[fleet_sim.GPU]["hosts"]}
    assert h100["one-run"]["n_runs"] == 1 and h100["one-run"]["level"] == 100.5
    assert h100["all-failed"]["level"] is None and h100["all-failed"]["n_failed"] == 2
    code, out = bench("fleet", "--store", str(tmp_path / "store"))
    assert "not compared: run on 1 host with an ok run" in out and "all-failed: all 2 runs failed" in out


def test_telemetry_summaries_are_stored_once_at_ingest(fleet: tuple[Path, dict, Path]) -> None:
    store, truth, runs = fleet
    hot = next(h for h, f in truth.items() if f["kind"] == "hot_gpu")
    gpu = truth[hot]["gpu"]
    run_dir = runs / f"{hot}-r0"
    with open(run_dir / "telemetry.csv") as fh:  # by hand from the CSV: the samples at 50% utilisation or more
        rows = [[c.strip() for c in r] for r in csv.reader(fh)][1:]
    loaded = [r for r in rows if int(r[1]) == gpu and float(r[2].rstrip(" %")) >= 50]
    clocks = [float(r[6].split()[0]) for r in loaded]
    temps = [float(r[4]) for r in loaded]
    con = connect(store)
    (details,) = con.execute("SELECT details FROM runs WHERE source LIKE ?", [f"%{hot}-r0/output.log"]).fetchone()
    summaries = {s["gpu"]: s for s in json.loads(details["gpu_load"])}
    assert sorted(summaries) == list(range(8))
    s = summaries[gpu]
    assert s["samples"] == len(loaded) == fleet_sim.SAMPLES - 2
    assert s["sm_clock_mean_mhz"] == pytest.approx(sum(clocks) / len(clocks), abs=0.01)
    assert s["sm_clock_min_mhz"] == min(clocks) and s["temperature_max_c"] == max(temps)
    assert s["power_limit_w"] == 700.0 and s["at_power_limit_share"] == 0.0
    assert json.loads(details["gpus"])[gpu]["enforced_power_limit_w"] == 700.0


def test_telemetry_without_gpu_indices_names_no_gpu(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for host, rate in {"h1": 100, "h2": 101, "h3": 99, "h4": 100, "slow": 80}.items():
        _write(runs, host, [rate])
    for d in runs.glob("slow-*"):  # nvidia-smi queried without index: its lines cannot be told apart by GPU
        (d / "telemetry.csv").write_text("timestamp, utilization.gpu [%], power.draw [W], clocks.sm [MHz]\n"
                                         "2026/11/02 00:00:01.000, 90 %, 600 W, 1400 MHz\n"
                                         "2026/11/02 00:00:01.000, 95 %, 640 W, 1950 MHz\n")
    assert bench("ingest", str(runs), "--store", str(tmp_path / "store"))[0] == 0
    con = connect(tmp_path / "store")
    rows = con.execute("SELECT host, status, details['gpu_load'] IS NULL FROM runs ORDER BY host").fetchall()
    assert rows[-1] == ("slow", "ok", True) and not any(r[2] for r in rows[:-1])
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json", "--fail")
    assert code == 1, out
    (o,) = json.loads(out)["outliers"]
    assert (o["host"], o["gpu"], o["telemetry"]) == ("slow", None, [])
    assert "no per-GPU telemetry summary" in o["reason"]


def test_a_bad_threshold_and_an_empty_selection_are_usage_errors(fleet: tuple[Path, dict, Path]) -> None:
    store, _, _ = fleet
    code, out = bench("fleet", "--store", str(store), "--threshold", "2")
    assert code == 2 and "--threshold 2" in out
    code, out = bench("fleet", "--store", str(store), "--where", "host = 'nosuch'")
    assert code == 2 and "selects no run" in out


def test_the_report_has_a_fleet_section_naming_the_flagged_hosts(fleet: tuple[Path, dict, Path], tmp_path: Path) -> None:
    store, truth, _ = fleet
    code, out = bench("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert code == 0, out
    md = (tmp_path / "report" / "report.md").read_text()
    findings = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    for host, fault in truth.items():
        line = next(ln for ln in findings.splitlines() if f" {host} is " in ln)
        assert "slower than the median host" in line and "95% CI" in line
        if fault["kind"] == "hot_gpu":
            assert f"GPU {fault['gpu']}: mean SM clock under load" in line
    assert "## Fleet" in md and "64 hosts ran 1 workload(s)" in md
    svg = (tmp_path / "report" / "figures" / "fig-fleet.svg").read_text()
    assert all(host in svg for host in truth)
    flagged = (tmp_path / "report" / "tables" / "fleet-flagged.csv").read_text().splitlines()
    assert len(flagged) == 1 + len(truth)
    assert figure_problems(store) == {}  # the flagged hosts' names do not run into each other ("node018node052")


def test_a_lower_is_better_metric_flags_the_longer_host(tmp_path: Path) -> None:
    # fleet_sim writes wall_time_s = 100 batches x 256 images x 2 GPUs / rate + 20 s. Host levels (median of
    # 2 runs): h1 (532 + 522) / 2 = 527.0, h2 (537.17 + 527.05) / 2 = 532.11, h3 532.0, h4 (542.45 + 532) / 2
    # = 537.22, slow (660 + 644.39) / 2 = 652.20; the median host is h2 (532.11), and slow is
    # 532.11 / 652.20 - 1 = -18.4% (slower, as lower is better)
    def wall(rate: float) -> float:
        return 100 * 256 * 2 / rate + 20

    rates = {"h1": [100, 102], "h2": [99, 101], "h3": [100, 100], "h4": [98, 100], "slow": [80, 82]}
    for host, r in rates.items():
        _write(tmp_path / "runs", host, r)
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json", "--metric", "wall_time_s")
    assert code == 0, out
    found = json.loads(out)
    levels = {h: (wall(r[0]) + wall(r[1])) / 2 for h, r in rates.items()}
    assert found["lower_is_better"] is True
    assert found["workloads"][0]["median"] == pytest.approx(levels["h2"], rel=1e-6)
    (o,) = found["outliers"]
    assert o["host"] == "slow" and o["relative_difference"] == pytest.approx(levels["h2"] / levels["slow"] - 1, rel=1e-6)
    assert o["relative_difference"] == pytest.approx(-0.184, abs=0.001)


def test_the_z_bound_grows_with_the_fleet() -> None:
    from bench.analytics.fleet import z_bound_for

    # normal quantiles from a table: z(0.99995) = 3.8906, z(0.999995) = 4.4172; below 215 hosts, 3.5 holds
    assert [round(z_bound_for(n), 3) for n in (3, 64, 200)] == [3.5, 3.5, 3.5]
    assert z_bound_for(1000) == pytest.approx(3.8906, abs=1e-4) and z_bound_for(10_000) == pytest.approx(4.4172, abs=1e-4)


def _retag(root: Path, host: str, tags: dict[str, str], cpu: str | None = None) -> None:
    for d in root.glob(f"{host}-*"):
        doc = json.loads((d / "run.json").read_text())
        doc["tags"] = {**doc.get("tags", {}), **tags}
        if cpu:
            doc["host"]["cpu_model"] = cpu
        (d / "run.json").write_text(json.dumps(doc))


def test_a_rack_tag_is_a_fact_of_the_host_not_a_split_and_a_shared_fact_is_no_cause(tmp_path: Path) -> None:
    """12 hosts, 4 a rack: with rack=rNN splitting peers, each rack of 4 was its own fleet and every flagged host
    was printed once a rack. Now the 12 are one fleet (rack is said to be a host's fact); the slow host (81 of
    100) is flagged once; its CPU, which two unflagged hosts have too, is said not to be a cause."""
    runs = tmp_path / "runs"
    hosts = [f"h{i:02d}" for i in range(11)] + ["slow"]
    for i, host in enumerate(hosts):
        _write(runs, host, [80, 82] if host == "slow" else [100 + i % 3, 101 - i % 2])
        _retag(runs, host, {"rack": f"r{i // 4}", "study": "burn-in"},
               cpu="Intel Xeon 8480+" if host in ("slow", "h00", "h05") else None)
    assert bench("ingest", str(runs), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json")
    found = json.loads(out)
    (w,) = found["workloads"]
    assert code == 0 and w["n_hosts"] == 12 and w["key"]["tags"]["study"] == "burn-in" and "rack" not in w["key"]["tags"]
    assert any(n.startswith("tag rack: one value per host") for n in found["notes"])
    (o,) = found["outliers"]
    assert o["host"] == "slow" and o["differs"]["cpu_model"]["also_on_unflagged"] == 2
    assert o["reason"] == ("no fact or telemetry summary sets it apart from its peers (not causes, since unflagged "
                           "peers share them: cpu_model Intel Xeon 8480+ (2 unflagged))")


def test_a_hosts_interval_is_of_its_median_and_finite_with_two_runs(tmp_path: Path) -> None:
    """The level is a median, and its interval was the mean's: a host 10% slow on 2 of its 5 runs (a fault
    that started late) had its level in no interval of its own. A host of 2 runs 30% apart was held to t with
    1 degree of freedom (12.7): [-41%, +46%]; now the pooled degrees of freedom, and not flagged, since its
    interval is not clear of the fleet's median. By hand: the fleet's median host is 100; 'late' has median 100
    (relative 0), 'noisy' 85 (-15%)."""
    runs = tmp_path / "runs"
    for i in range(6):
        _write(runs, f"h{i}", [100, 100, 101, 99, 100][i % 5:] + [100, 100, 101, 99, 100][:i % 5])
    _write(runs, "late", [100, 100, 100, 90, 90])
    _write(runs, "noisy", [70, 100])
    assert bench("ingest", str(runs), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json")
    found = json.loads(out)
    hosts = {h["host"]: h for h in found["workloads"][0]["hosts"]}
    late, noisy = hosts["late"], hosts["noisy"]
    assert late["relative"] == pytest.approx(0.0) and late["ci95"][0] < 0 < late["ci95"][1]
    lo, hi = noisy["ci95"]
    assert noisy["relative"] == pytest.approx(-0.15) and lo < -0.15 < hi and -0.6 < lo and hi < 0.3
    assert code == 0 and found["outliers"] == []


def _driver(root: Path, host: str, driver: str) -> None:
    for d in root.glob(f"{host}-*"):
        doc = json.loads((d / "run.json").read_text())
        for g in doc["gpus"]:
            g["driver_version"] = driver
        (d / "run.json").write_text(json.dumps(doc))


def test_a_slow_group_is_one_finding_and_does_not_hide_another_hosts_fault(tmp_path: Path) -> None:
    """19 of 64 hosts on a new driver 6% slower, and one other host 5.1% slow on its own: host by host, the
    group widens the robust SD the hosts are judged against. Now the group is one finding (19 hosts, by hand:
    levels 94 + jitter against 100 + the same jitter: -6.0%, the other slow host left out of that comparison),
    and the other host is judged against the 44 hosts of no group (median 100): -5.1%."""
    runs = tmp_path / "runs"
    jitter = [-1.0, -0.5, 0.0, 0.5, 1.0]
    for i in range(64):
        host = f"n{i:02d}"
        base = 94.0 if i < 19 else 94.9 if i == 40 else 100.0
        rate = base + jitter[i % 5] * (base != 94.9)
        _write(runs, host, [rate, rate])
        if i < 19:
            _driver(runs, host, "575.51.03")
    assert bench("ingest", str(runs), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json", "--fail")
    found = json.loads(out)
    assert code == 1
    (g,) = found["groups"]
    assert g["hosts"] == [f"n{i:02d}" for i in range(19)] and ["gpu_driver", "575.51.03"] in g["facts"]
    # the other faulty host stands apart on its own: left out of the group's comparison, judged after
    assert g["relative_difference"] == pytest.approx(94 / 100 - 1, abs=0.001) and (g["n_others"], g["left_out"]) == (44, 1)
    assert g["ci95"][0] < -0.06 < g["ci95"][1] < 0 and g["p_value"] < 0.05 / g["candidates"]
    (o,) = found["outliers"]
    assert o["host"] == "n40" and o["relative_difference"] == pytest.approx(-0.051, abs=0.001)
    code, text = bench("fleet", "--store", str(tmp_path / "store"))
    assert f"SLOWER GROUP 19 hosts with gpu_driver 575.51.03 are {-g['relative_difference']:.1%} slower than the 44 " \
           "others" in text and "1 host that stands apart on its own left out" in text
    code, _ = bench("fleet", "--store", str(tmp_path / "store"), "--junit", str(tmp_path / "f.xml"))
    failures = ET.parse(tmp_path / "f.xml").getroot().iter("failure")
    assert sorted(f.get("type") or "" for f in failures) == ["slow group", "slower"]


def test_a_fault_that_starts_late_is_found_in_the_recent_window(tmp_path: Path) -> None:
    """12 hosts x 30 nights, one host 10% slower from night 20: over the whole history its median (20 healthy
    nights of 30) hides it; judged on the last 7 days (the default), it is flagged, and the note says how many
    older runs were left out (by hand: the window starts 7 days before the newest run, night 29 at minute 11,
    so nights 23-29 and night 22's one run at minute 11: 85 of 360 runs, 275 left out)."""
    rng = random.Random(1)
    for h in range(12):
        host = f"h{h:02d}"
        for n in range(30):
            rate = 2950 * (1 + rng.gauss(0, 0.003)) * (0.9 if host == "h03" and n >= 20 else 1)
            fleet_sim.write_run(tmp_path / "runs" / f"{host}-{n}", host, rate, None, 2,
                                datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n, minutes=h), rng)
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json")
    found = json.loads(out)
    assert code == 0 and [o["host"] for o in found["outliers"]] == ["h03"] and found["workloads"][0]["n_runs"] == 85
    assert any("275 older runs left out (--days 0 takes every run)" in n for n in found["notes"])
    code, out = bench("fleet", "--store", str(tmp_path / "store"), "--json", "--days", "0")
    assert code == 0 and json.loads(out)["outliers"] == [] and json.loads(out)["workloads"][0]["n_runs"] == 360


def test_a_one_gpu_nodes_setting_is_the_nodes_and_a_flag_names_every_gpu() -> None:
    """A 1-GPU host on an old driver was printed as 'GPU 0: ... gpu0.driver_version ...; gpu_driver ...': the
    node-wide fact is said once, as the node's, with no GPU named. A finding about GPUs 2 and 6 names both."""
    from bench.analytics.fleet_model import FleetRun, Outlier
    from bench.analytics.fleet_text import outlier_line
    from bench.analytics.fleet_why import Peers, explain

    def run(host: str, driver: str) -> FleetRun:
        return FleetRun(f"r-{host}", host, "ok", 100.0, {"gpu_driver": driver}, None,
                        json.dumps([{"name": "H100", "driver_version": driver}]))

    by_host = {h: [run(h, "535.104.05" if h == "old" else "550.90.07")] for h in ("old", "a", "b", "c")}
    o = explain(Outlier("old", None, "slower", "w", -0.1, (-0.12, -0.08), -5.0, 90.0, 100.0, 1), Peers(by_host, {"old"}))
    assert (o.gpu, list(o.differs)) == (None, ["gpu_driver"])
    assert outlier_line(o).startswith("old: -10.0% [-12.0%, -8.0%] vs the median host, robust z -5.0; gpu_driver 535")
    o.gpu, o.gpus = 2, [2, 6]
    assert outlier_line(o).startswith("old, GPUs 2, 6: -10.0%")


def test_a_flagged_host_says_since_when_and_a_degrading_one_says_so(tmp_path: Path) -> None:
    """12 hosts x 30 nights: h03 10% slower from night 20 (2026-10-21), h07 0.6% slower a night from night 10
    (-11.4% by night 29). Each flagged host's own series says when: a step, or steps in a row (a slide)."""
    rng = random.Random(1)
    for h in range(12):
        host = f"h{h:02d}"
        for n in range(30):
            f = 0.9 if host == "h03" and n >= 20 else 1 - 0.006 * max(0, n - 10) if host == "h07" else 1.0
            fleet_sim.write_run(tmp_path / "runs" / f"{host}-{n}", host, 2950 * (1 + rng.gauss(0, 0.003)) * f, None, 2,
                                datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n, minutes=h), rng)
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    found = {o["host"]: o for o in json.loads(bench("fleet", "--store", str(tmp_path / "store"), "--json")[1])["outliers"]}
    assert sorted(found) == ["h03", "h07"]
    late, slide = found["h03"]["since"], found["h07"]["since"]
    assert (late["kind"], late["from"][:10], round(late["change"], 2)) == ("slower", "2026-10-21", -0.10)
    assert found["h03"]["reason"].startswith("slower since 2026-10-21: -10.")
    assert slide["kind"] == "degrading" and slide["steps"] >= 2 and "2026-10-11" <= slide["from"][:10] <= "2026-10-21"
    assert -0.12 < slide["change"] < -0.07 and found["h07"]["reason"].startswith("degrading: slower in ")


def test_the_readmes_rollout_example(tmp_path: Path) -> None:
    """The README's slow-group line is what `benchmarks/fleet_sim.py --group 19` (seed 1, 1% noise) gives, and
    every faulty host of that fleet is still flagged with its fault."""
    import re

    store, truth = simulated(tmp_path, group=19)
    rollout = json.loads(fleet_sim.truth_path(tmp_path / "runs").read_text())["group"]
    found = json.loads(bench("fleet", "--store", str(store), "--json")[1])
    (g,) = found["groups"]
    assert g["hosts"] == rollout and ["gpu_driver", fleet_sim.NEW_DRIVER] in g["facts"]
    assert fleet_sim.score(found["outliers"], truth)["explained"] == sorted(truth)
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    said = re.search(r"`SLOWER GROUP 19 hosts with gpu_driver 575\.51\.03 are ([\d.]+)% slower than the (\d+) others", readme)
    assert said and (float(said.group(1)), int(said.group(2))) == (round(-100 * g["relative_difference"], 1), g["n_others"])


def test_a_tag_that_splits_workloads_splits_a_hosts_history(tmp_path: Path) -> None:
    """Each host runs two suites a night (tag ``suite``: a, at 1.3x the rate, and b); h03's suite b is 10% slower
    from night 20, its suite a steady. The history of h03's flagged workload is its suite b runs only: mixed with
    suite a's, night by night, no step would be found (or one of the wrong size)."""
    rng = random.Random(2)
    for h in range(8):
        host = f"h{h:02d}"
        for n in range(30):
            for suite, scale in (("a", 1.3), ("b", 1.0)):
                f = 0.9 if host == "h03" and suite == "b" and n >= 20 else 1.0
                d = tmp_path / "runs" / f"{host}-{n}-{suite}"
                at = datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n, minutes=h + (30 if suite == "b" else 0))
                fleet_sim.write_run(d, host, 2950 * scale * (1 + rng.gauss(0, 0.003)) * f, None, 2, at, rng)
                doc = json.loads((d / "run.json").read_text())
                doc["tags"] = {"suite": suite}
                (d / "run.json").write_text(json.dumps(doc))
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    (o,) = json.loads(bench("fleet", "--store", str(tmp_path / "store"), "--json")[1])["outliers"]
    assert o["host"] == "h03" and "suite=b" in o["workload"]
    assert (o["since"]["kind"], o["since"]["from"][:10], round(o["since"]["change"], 2)) == ("slower", "2026-10-21", -0.10)


def test_a_degrading_host_says_the_telemetry_that_went_with_it(tmp_path: Path) -> None:
    """12 hosts x 30 nights; h07 0.6% slower a night from night 10, its GPU 1 throttling hot from night 10
    (fleet_sim's hot GPU: about 1500 MHz at 92 °C where its runs before had 1975 MHz at 64 °C): the slide is said
    with that GPU's trend, from the first 5 runs of the level before the slide (the slide is resolved from
    night 16; its own first nights are hot already) to its 5 newest."""
    rng = random.Random(1)
    for h in range(12):
        host = f"h{h:02d}"
        for n in range(30):
            f = 1 - 0.006 * max(0, n - 10) if host == "h07" else 1.0
            fault = {"kind": "hot_gpu", "gpu": 1} if host == "h07" and n >= 10 else None
            fleet_sim.write_run(tmp_path / "runs" / f"{host}-{n}", host, 2950 * (1 + rng.gauss(0, 0.003)) * f, fault, 2,
                                datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n, minutes=h), rng)
    assert bench("ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "store"))[0] == 0
    (o,) = json.loads(bench("fleet", "--store", str(tmp_path / "store"), "--json")[1])["outliers"]
    assert o["host"] == "h07" and o["since"]["kind"] == "degrading"
    trend = o["since"]["trend"]
    assert trend.startswith("GPU 1: mean SM clock under load 19") and "-> 15" in trend, trend
    assert "max temperature 6" in trend and "-> 9" in trend and "GPU 0" not in trend
    assert f"in all; {trend}; " in o["reason"]
