"""Given/expect tests of sql/utilisation.sql (and the peaks of sql/device_peaks.sql it reads) on a hand-made
runs table: MFU is the run's stated TFLOP/s per device over its device's dense peak in its precision, and a run
without a peak says why instead of getting a number."""

from __future__ import annotations

import duckdb
from logtools import runs_table

from bench.sql.views import register_views


def row(run_id: str, device: str | None, precision: str | None, tflops: str | None, **kw: object) -> dict:
    details = {"tflops_per_device": tflops} if tflops is not None else {}
    return {"run_id": run_id, "device_model": device, "device_type": "gpu", "num_devices": 8, "precision": precision,
            "throughput": 1000.0, "throughput_unit": "tokens/sec", "details": details | kw.pop("details", {}), **kw}


def test_mfu_against_the_dense_peak_or_why_not() -> None:
    con = duckdb.connect()
    con.register("runs", runs_table([
        row("sxm", "NVIDIA H100 80GB HBM3", "bf16", "494.75"),  # 494.75 / 989.5 = 0.5
        row("pcie", "NVIDIA H100 PCIe", "fp8", "756.5"),  # 756.5 / 1513 = 0.5: PCIe before the SXM pattern
        row("b200", "NVIDIA B200", "bf16", "853.65", details={"mfu_pct": "37.94"}),  # torchtitan's own: 2.25e15
        row("amp", "Tesla V100-SXM2-32GB", "amp", "62.5"),  # amp counts against fp16: 62.5 / 125
        row("nodev", None, "bf16", "100"),
        row("k80", "Tesla K80", "fp16", "2.0"),
        row("noprec", "NVIDIA A100-SXM4-40GB", None, "150"),
        row("fp32", "NVIDIA A100-SXM4-40GB", "fp32", "15"),
        row("failed", "NVIDIA H100 80GB HBM3", "bf16", "400", status="failed"),
        row("notflops", "NVIDIA H100 80GB HBM3", "bf16", None),
    ]))
    register_views(con, ["utilisation"])
    got = {r[0]: r[1:] for r in con.execute("SELECT run_id, peak_device, peak_tflops, mfu, trainer_mfu, why "
                                            "FROM utilisation").fetchall()}
    assert sorted(got) == ["amp", "b200", "fp32", "k80", "nodev", "noprec", "pcie", "sxm"]  # ok runs with TFLOP/s
    assert got["sxm"] == ("H100 SXM", 989.5, 0.5, None, None)
    assert got["pcie"] == ("H100 PCIe", 1513.0, 0.5, None, None)
    assert got["b200"][:2] == ("B200", 2250.0) and abs(got["b200"][2] - 0.3794) < 1e-9
    assert abs(got["b200"][3] - 0.3794) < 1e-9  # the trainer's MFU agrees: it used the same peak
    assert got["amp"][:3] == ("V100 SXM2", 125.0, 0.5)
    assert got["nodev"] == (None, None, None, None, "the run does not say its device")
    assert got["k80"] == (None, None, None, None, "no peak listed for this device")
    assert got["noprec"] == ("A100 SXM", None, None, None, "the run does not say its precision")
    assert got["fp32"] == ("A100 SXM", None, None, None, "no peak listed for this device in fp32")


def test_every_peak_names_its_document_and_one_value_per_device_and_precision() -> None:
    con = duckdb.connect()
    register_views(con, ["device_peaks"])
    rows = con.execute("SELECT device, precision, peak_tflops, source FROM device_peaks").fetchall()
    assert len({(d, p) for d, p, _, _ in rows}) == len(rows)
    assert all(v > 0 and "(" in src for _, _, v, src in rows)
    devices = {d for d, *_ in rows}
    assert devices >= {"H100 SXM", "H100 PCIe", "H200", "B200", "A100 SXM", "A100 PCIe", "L40S", "L4", "V100 SXM2",
                       "MI250X", "MI300X", "Gaudi 3", "TPU v4", "TPU v5e", "TPU v5p"}
