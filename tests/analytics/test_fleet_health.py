"""bench fleet on a simulated fleet whose runs record what bench.runner.gpu_health reads (PCIe link, ECC errors,
row remaps, throttle reasons): each fault is named by what sets its GPU apart, as nvidia-smi names it."""

from __future__ import annotations

import json
from pathlib import Path

import fleet_sim  # benchmarks/ (tests/conftest.py)
from typer.testing import CliRunner

from bench.runner.cli import app

KINDS = (*fleet_sim.FAULTS, *fleet_sim.HEALTH_FAULTS)


def test_a_trained_down_link_and_pending_row_remaps_are_named_on_their_gpu(tmp_path: Path) -> None:
    truth = fleet_sim.generate(tmp_path / "runs", hosts=48, faults=6, kinds=KINDS, health=True, seed=1)
    assert sorted(f["kind"] for f in truth.values()) == sorted(KINDS)
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(tmp_path / "runs"), "--store", str(tmp_path / "st")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["fleet", "--store", str(tmp_path / "st"), "--json"])
    assert res.exit_code == 0, res.output
    outliers = json.loads(res.stdout)["outliers"]
    assert fleet_sim.score(outliers, truth) == {"found": sorted(truth), "explained": sorted(truth), "false": []}
    by_kind = {truth[o["host"]]["kind"]: o for o in outliers}
    link, remap = by_kind["pcie_link"], by_kind["row_remaps"]
    gpu = truth[link["host"]]["gpu"]
    # Gen3 under load where the fleet's GPUs run Gen5; at the start of each run every idle link said Gen1
    assert f"GPU {gpu}: mean utilisation under load 85 % (its node's others 98 %, fleet 98 %), " \
           "PCIe link under load Gen3 x16 (fleet Gen5 x16)" in link["reason"]
    assert link["differs"] == {}
    gpu = truth[remap["host"]]["gpu"]
    assert remap["gpus"] == [gpu]
    assert remap["differs"][f"gpu{gpu}.remapped_rows.pending"] == {
        "host": "Yes", "peers": "No", "peers_sharing": 47, "peers_with_fact": 47, "also_on_unflagged": 0}
    assert remap["differs"][f"gpu{gpu}.remapped_rows.uncorrectable"]["host"] == "2"
    # the throttle reasons the faults set (0x2, 0x4 on every GPU; 0x20 on the hot one), where healthy GPUs touch
    # their power limit in 5% of samples: below the 25% that sets a GPU apart
    reasons = {kind: {(t["gpu"], t["metric"]) for t in o["telemetry"] if t["metric"].startswith("throttle.")}
               for kind, o in by_kind.items()}
    hot = truth[by_kind["hot_gpu"]["host"]]["gpu"]
    assert reasons == {"app_clocks": {(None, "throttle.applications_clocks_setting")},
                       "power_cap": {(None, "throttle.sw_power_cap")}, "hot_gpu": {(hot, "throttle.sw_thermal_slowdown")},
                       "old_driver": set(), "pcie_link": set(), "row_remaps": set()}
    assert "all 8 GPUs: " in by_kind["power_cap"]["reason"]
    assert "throttled by sw_power_cap in 100% of its samples under load (fleet: 0% of GPUs that often)" \
        in by_kind["power_cap"]["reason"]
