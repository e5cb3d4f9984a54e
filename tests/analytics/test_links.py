"""nccl-tests against the physical limit, and in the fleet: bus bandwidth beside the
nominal rate of the link the run's facts name (NVLinks from `nvidia-smi topo -m`, the GPU's PCIe link, the
network port ibstat lists), a node with a slow link flagged with the link fact that sets it apart, and
multi-node runs compared as host sets, the node common to the slow sets named. Every expected figure is
worked out here from the rates the data sheets give (sql/link_rates.sql) and the busbw the logs print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logtools import bench_run_dir as run_dir
from logtools import nccl_log
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql.read import connect

NV18 = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"
PCIE = "\tGPU0\tGPU1\nGPU0\t X \tPXB\nGPU1\tPXB\t X \n"


def test_bus_bandwidth_beside_the_links_nominal_rate(tmp_path: Path) -> None:
    run_dir(tmp_path / "nv", "nv1", nccl_log("nv1", 360.0), topology=NV18)
    run_dir(tmp_path / "pcie", "pc1", nccl_log("pc1", 25.2), topology=PCIE, pcie=(4, 16))
    (tmp_path / "bare.log").write_text(nccl_log("bare1", 180.0))
    ingest([str(tmp_path)], tmp_path / "st", workers=0)
    got = {r[0]: r[1:] for r in connect(tmp_path / "st").execute(
        "SELECT host, message_bytes, busbw_gb_s, link, nominal_gb_s, of_nominal, why FROM nccl_links").fetchall()}
    # H100 SXM: NVLink 4, 25 GB/s per link and direction (900 GB/s over 18 links, both directions) x 18 = 450
    assert got["nv1"][:5] == (4194304, 360.0, "NVLink 4 x 18", 450.0, pytest.approx(0.8))
    # PCIe 4.0 x16: 16 GT/s x 128/130 / 8 = 1.969 GB/s per lane, x 16 = 31.5 GB/s; 25.2 / 31.5 = 0.8
    assert got["pc1"][2:5] == ("PCIe 4.0 x16", pytest.approx(31.504), pytest.approx(25.2 / 31.504))
    assert got["bare1"][2:] == (None, None, None, "the run's facts name no link (nvidia-smi topo -m and the PCIe "
                                                  "link in its run.json)")


def test_the_node_with_a_slow_link_is_flagged_with_its_link_fact(tmp_path: Path) -> None:
    """Five nodes, three nights each; node03's GPUs sit on a PCIe link at x8 where the others' are x16, and
    give half the others' bus bandwidth."""
    for h in range(5):
        for night in range(3):
            bw = (24.0 if h != 3 else 12.0) * (1.0, 1.002, 0.998)[night]
            run_dir(tmp_path / f"node{h:02d}-{night}", f"node{h:02d}", nccl_log(f"node{h:02d}", bw), topology=PCIE,
                    pcie=(4, 16 if h != 3 else 8), n=night)
    ingest([str(tmp_path)], tmp_path / "st", workers=0)
    result = CliRunner().invoke(app, ["fleet", "--metric", "throughput", "--json", "--store", str(tmp_path / "st")])
    assert result.exit_code == 0, result.output
    (outlier,) = json.loads(result.stdout)["outliers"]
    assert (outlier["host"], outlier["kind"]) == ("node03", "slower")
    assert outlier["relative_difference"] == pytest.approx(-0.5, abs=0.005)
    assert outlier["differs"]["pcie_width"] == {"host": "8", "peers": "16", "peers_sharing": 4, "peers_with_fact": 4,
                                                "also_on_unflagged": 0}
    assert outlier["reason"].startswith("pcie_width 8 (peers: 16, 4 of 4); gpus.pcie_width_max 8.0")


def test_multi_node_runs_are_compared_as_host_sets_and_the_common_node_named(tmp_path: Path) -> None:
    """Two-node all_reduce_perf over every pair of five nodes, twice; each pair with node03 is at 60%."""
    nodes = [f"node{h:02d}" for h in range(5)]
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    for a, b in pairs:
        for night in range(2):
            bw = (40.0 if "node03" not in (a, b) else 24.0) * (1.0, 1.002)[night]
            log = nccl_log(a, bw).replace(f"on {b:>10}", "")  # the ranks' lines: 0-3 on a, 4-7 on b
            lines = log.splitlines()
            for i, line in enumerate(lines):
                if "Rank  " in line and int(line.split("Rank")[1].split()[0]) >= 4:
                    lines[i] = line.replace(f"on {a:>10}", f"on {b:>10}")
            (tmp_path / f"{a}-{b}-{night}.log").write_text("\n".join(lines) + "\n")
    ingest([str(tmp_path)], tmp_path / "st", workers=0)
    assert connect(tmp_path / "st").execute("SELECT DISTINCT num_nodes FROM runs").fetchall() == [(2,)]
    result = CliRunner().invoke(app, ["fleet", "--metric", "throughput", "--json", "--store", str(tmp_path / "st")])
    found = json.loads(result.stdout)
    flagged = sorted(o["host"] for o in found["outliers"])
    assert flagged == sorted("+".join(sorted(p)) for p in pairs if "node03" in p)  # the 4 sets with node03
    assert all(o["reason"].startswith("node node03 is in every flagged host set and in none of the others")
               for o in found["outliers"])


def test_the_nightly_gate_fails_when_a_nodes_bus_bandwidth_drops(tmp_path: Path) -> None:
    """node01's all_reduce_perf every night for 12 nights; from night 10 its busbw is 20% lower: `bench check`
    on the last three nights fails that series (exit 1) and passes the nights before."""
    for night in range(12):
        bw = (360.0 if night < 9 else 288.0) * (1.0, 1.003, 0.997)[night % 3]
        run_dir(tmp_path / f"night{night:02d}", "node01", nccl_log("node01", bw), topology=NV18, day=f"2026-11-{night + 1:02d}")
    ingest([str(tmp_path)], tmp_path / "st", workers=0)
    gate = ["check", "--metric", "throughput", "--store", str(tmp_path / "st")]
    result = CliRunner().invoke(app, [*gate, "--where", "started_at >= '2026-11-10'"])
    assert result.exit_code == 1, result.output
    assert "all_reduce_perf" in result.output and "-20.0%" in result.output, result.output
    assert "with no recorded change on the machine" in result.output  # busbw figures are not facts of the machine
    earlier = CliRunner().invoke(app, [*gate, "--where", "started_at >= '2026-11-07' AND started_at < '2026-11-10'"])
    assert earlier.exit_code == 0, earlier.output
