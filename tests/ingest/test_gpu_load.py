"""The PCIe link and throttle reasons under load that bench.ingest.gpu_load reads from an nvidia-smi telemetry
CSV: samples below the load bound are left out, a link or mask the driver did not report is no value."""

from __future__ import annotations

from bench.ingest.gpu_load import links_and_throttle

HEADER = ("timestamp, index, utilization.gpu [%], pcie.link.gen.current, pcie.link.width.current, "
          "clocks_event_reasons.active")


def test_the_link_under_load_is_the_most_common_and_idle_samples_do_not_count() -> None:
    lines = [HEADER,
             "2026/11/21 10:00:00.000, 0, 0 %, 1, 16, 0x0000000000000001",  # idle: Gen1, gpu_idle
             "2026/11/21 10:00:00.000, 1, 0 %, 1, 16, 0x0000000000000001",
             "2026/11/21 10:00:01.000, 0, 97 %, 4, 16, 0x0000000000000004",
             "2026/11/21 10:00:01.000, 1, 97 %, 3, 8, 0x000000000000000C",  # power cap and hw slowdown
             "2026/11/21 10:00:02.000, 0, 98 %, 4, 16, 0x0000000000000000",
             "2026/11/21 10:00:02.000, 1, 98 %, 3, 8, 0x0000000000000008",
             "2026/11/21 10:00:03.000, 0, 99 %, 3, 16, [N/A]",  # one sample at Gen3; a mask not reported
             "2026/11/21 10:00:03.000, 1, 99 %, [N/A], [N/A], 0x0000000000000008",
             "2026/11/21 10:00:04.000, 1, 99 %, 3, 8"]  # cut short: not a sample
    assert links_and_throttle(lines) == {
        0: {"pcie_link_gen": 4, "pcie_link_width": 16, "throttle": {"sw_power_cap": 0.5}},
        1: {"pcie_link_gen": 3, "pcie_link_width": 8, "throttle": {"sw_power_cap": 0.3333, "hw_slowdown": 1.0}}}


def test_a_file_without_the_fields_gives_nothing() -> None:
    assert links_and_throttle(["timestamp, index, utilization.gpu [%]", "2026/11/21 10:00:00.000, 0, 97 %"]) == {}
    assert links_and_throttle([]) == {}
    # Lambda's thermal lines and a header without GPU indices: no GPU to give a link to
    assert links_and_throttle(["1510000000, 120.5, 64, 65,"]) == {}
    assert links_and_throttle(["timestamp, pcie.link.gen.current", "2026/11/21 10:00:00.000, 4"]) == {}
