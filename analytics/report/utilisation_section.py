"""``bench report``'s "Against the physical limit": what today's trainers and nccl-tests measured, beside the
device's or the link's nominal peak, whenever the selection holds such runs.

- Model FLOPs utilisation: one row per configuration whose runs state their FLOP/s per device (Megatron,
  torchtitan, MaxText, DeepSpeed's profiler): its throughput in its own unit, the mean TFLOP/s per device,
  the device's dense peak in the run's precision (the view ``device_peaks``, its source named), MFU = the
  mean TFLOP/s / the peak, and the trainer's own MFU where it printed one (against a peak it chose).
- Bus bandwidth: one row per nccl-tests configuration and host (set): the mean busbw at the largest message
  size, the link the run's facts name and its nominal rate (the view ``nccl_links``), and busbw / nominal.
Where no peak applies, the row says why (never a guessed denominator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.analytics.findings import Finding
from bench.analytics.report.model import Section, Table
from bench.analytics.results import rows

if TYPE_CHECKING:
    import duckdb

MFU = "mfu"
BUSBW = "busbw-vs-link"

_MFU_SQL = """
SELECT rc.model, u.device_model, u.num_devices, u.precision, u.throughput_unit, avg(u.throughput) AS throughput,
       avg(u.tflops_per_device) AS tflops, CAST(any_value(u.peak_tflops) AS DOUBLE) AS peak, avg(u.mfu) AS mfu,
       avg(u.trainer_mfu) AS trainer_mfu, count(*) AS runs, any_value(u.peak_device) AS peak_device,
       coalesce(any_value(u.why), any_value(u.peak_source)) AS source_or_why, list(u.run_id ORDER BY u.run_id) AS ids
FROM utilisation u JOIN _run_configs rc USING (run_id)
GROUP BY rc.config_id, rc.model, u.device_model, u.num_devices, u.precision, u.throughput_unit
ORDER BY rc.model, u.device_model, u.num_devices, u.precision
"""

_BUSBW_SQL = """
SELECT rc.model AS test, coalesce(n.host, r.details['hosts'], r.details['node_names']) AS host, n.device_model,
       n.num_devices, n.num_nodes, n.message_bytes, avg(n.busbw_gb_s) AS busbw, any_value(n.link) AS link,
       any_value(n.nominal_gb_s) AS nominal, avg(n.of_nominal) AS of_nominal, any_value(n.why) AS why,
       count(*) AS runs, list(n.run_id ORDER BY n.run_id) AS ids
FROM nccl_links n JOIN _run_configs rc USING (run_id) JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY test, n.num_nodes, n.device_model, host
"""


def utilisation_section(con: duckdb.DuckDBPyConnection) -> tuple[list[Section], list[Finding]]:
    """The section and its findings (the lowest MFU and the lowest share of a link's rate); nothing when the
    selection has no run that states its FLOP/s and no nccl-tests run."""
    import pandas as pd

    from bench.sql.views import register_views

    register_views(con, ["utilisation", "nccl_links"])
    mfu, busbw = rows(con, _MFU_SQL), rows(con, _BUSBW_SQL)
    if not mfu and not busbw:
        return [], []
    sec = Section("Against the physical limit", ["Throughput as the trainers count it, beside the device's dense peak "
                  "(model FLOPs utilisation) and nccl-tests' bus bandwidth beside the nominal rate of the link the "
                  "run's facts name. The peaks and rates, with their data sheets: `bench sql \"select * from "
                  "device_peaks\"` and `... link_rates`. Where no peak applies, the row says why."])
    found = []
    if mfu:
        frame = pd.DataFrame([{"model": m, "device": d, "devices": n, "precision": p, "throughput": tp, "unit": u,
                               "TFLOP/s per device": tf, "peak TFLOP/s": pk, "MFU": f, "trainer's MFU": tm, "runs": k,
                               "peak of / why none": f"{pd_} ({src})" if pd_ and f is not None else src}
                              for m, d, n, p, u, tp, tf, pk, f, tm, k, pd_, src, _ in mfu])
        sec.tables.append(Table(MFU, "Model FLOPs utilisation (MFU = TFLOP/s per device / the device's dense peak)",
                                frame, {"throughput": ",.1f", "TFLOP/s per device": ".1f", "peak TFLOP/s": ".1f",
                                        "MFU": ".1%", "trainer's MFU": ".1%", "devices": ".0f"},
                                cell_runs={(i, "MFU"): tuple(r[-1]) for i, r in enumerate(mfu)},
                                notes=["The FLOP count is the trainer's own (Megatron and torchtitan: 6 x parameters "
                                       "per token plus attention's 12 x layers x hidden x sequence), so a mixture-of-"
                                       "experts model counts its active parameters only; a trainer's own MFU may use "
                                       "another peak."]))
        known = [r for r in mfu if r[8] is not None]
        if known:
            low = min(known, key=lambda r: r[8])
            found.append(Finding("utilisation", f"{low[0]} on {low[10]} run(s) of {low[2]} {low[1]} ({low[3]}) reaches "
                                 f"{low[8]:.1%} of the device's dense peak ({low[6]:.1f} of {low[7]:.1f} TFLOP/s).",
                                 low[8], None, low[10], MFU))
    if busbw:
        frame = pd.DataFrame([{"test": t, "host": h, "device": d, "devices": n, "nodes": nn, "message bytes": mb,
                               "busbw GB/s": b, "link": lk, "nominal GB/s": nom, "busbw / nominal": of, "runs": k,
                               "why no nominal": w or ""}
                              for t, h, d, n, nn, mb, b, lk, nom, of, w, k, _ in busbw])
        sec.tables.append(Table(BUSBW, "nccl-tests: bus bandwidth at the largest message size beside the link's "
                                "nominal rate", frame, {"busbw GB/s": ".1f", "nominal GB/s": ".1f",
                                                        "busbw / nominal": ".1%", "devices": ".0f", "nodes": ".0f",
                                                        "message bytes": ".0f"},
                                cell_runs={(i, "busbw GB/s"): tuple(r[-1]) for i, r in enumerate(busbw)},
                                notes=["Within a node the bound is NVLink (links x the per-link rate of the GPU's "
                                       "generation) where the GPUs are joined by it, else the GPU's PCIe link; across "
                                       "nodes, the fastest active network port (ibstat)."]))
        known = [r for r in busbw if r[9] is not None]
        if known:
            low = min(known, key=lambda r: r[9])
            found.append(Finding("utilisation", f"{low[0]} on {low[1]} reaches {low[9]:.1%} of its link's nominal rate "
                                 f"({low[6]:.1f} of {low[8]:.1f} GB/s, {low[7]}).", low[9], None, low[11], BUSBW))
    return [sec], found
