"""bench.runner.amd_health: an AMD node's GPUs in run.json, from a stand-in ``amd-smi`` on PATH that prints what
amd-smi's source writes for each query (ROCm/amdsmi commit 0ceca28: ``amdsmi_commands.py``'s static, metric and
bad-pages dictionaries, ``amdsmi_logger.py``'s JSON list of one object per GPU; the ``{"gpu_data": [...]}``
wrapper of later releases and the text values of releases before units, such as ``"32 GT/s"``)."""

from __future__ import annotations

import json
import math
import os
import stat
import time
from pathlib import Path

import pytest

from bench.ingest.run_dirs import run_details
from bench.runner import rundir
from bench.runner.amd_health import gpu_facts

STATIC = {"gpu_data": [  # ROCm 7's wrapper; values with units
    {"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "vendor_id": "0x1002", "device_id": "0x74a1"},
     "bus": {"bdf": "0000:0c:00.0", "max_pcie_width": 16, "max_pcie_speed": {"value": 32, "unit": "GT/s"},
             "pcie_interface_version": "Gen 5", "slot_type": "OAM"},
     "driver": {"name": "amdgpu", "version": "6.8.5"}, "vram": {"type": "HBM", "size": {"value": 196592, "unit": "MB"}}},
    {"gpu": 1, "asic": {"market_name": "AMD Instinct MI300X"},
     "bus": {"bdf": "0000:22:00.0", "max_pcie_width": 16, "max_pcie_speed": {"value": 32, "unit": "GT/s"}},
     "driver": {"name": "amdgpu", "version": "6.8.5"}, "vram": {"size": {"value": 196592, "unit": "MB"}}},
]}
METRIC = [  # the bare list of ROCm 6; GPU 1's link trained down to Gen4 x8 and it counts ECC errors
    {"gpu": 0, "pcie": {"width": 16, "speed": {"value": 32, "unit": "GT/s"}, "bandwidth": "N/A", "replay_count": 0},
     "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0, "total_deferred_count": 0}},
    {"gpu": 1, "pcie": {"width": 8, "speed": {"value": 16, "unit": "GT/s"}, "bandwidth": "N/A", "replay_count": 57},
     "ecc": {"total_correctable_count": 12, "total_uncorrectable_count": 1, "total_deferred_count": "N/A"}},
]
TOPOLOGY = [  # amd-smi topology --json (its CHANGELOG's ROCm 6.1.1 format); GPU 1 says its XGMI link is down
    {"gpu": 0, "bdf": "0000:0c:00.0", "links": [
        {"gpu": 0, "bdf": "0000:0c:00.0", "weight": 0, "link_status": "ENABLED", "link_type": "SELF", "num_hops": 0},
        {"gpu": 1, "bdf": "0000:22:00.0", "weight": 15, "link_status": "ENABLED", "link_type": "XGMI", "num_hops": 1}]},
    {"gpu": 1, "bdf": "0000:22:00.0", "links": [
        {"gpu": 0, "bdf": "0000:0c:00.0", "weight": 15, "link_status": "DISABLED", "link_type": "XGMI", "num_hops": 1},
        {"gpu": 1, "bdf": "0000:22:00.0", "weight": 0, "link_status": "ENABLED", "link_type": "SELF", "num_hops": 0}]},
]
PAGES = [
    {"gpu": 0, "retired": "No bad pages found.", "pending": "No bad pages found."},
    {"gpu": 1, "retired": [{"page_address": "0x1f000", "page_size": 4096, "status": "RESERVED"},
                           {"page_address": "0x2f000", "page_size": 4096, "status": "RESERVED"}],
     "pending": {"page_address": "0x3f000", "page_size": 4096, "status": "PENDING"}},  # one page: no list
]


def _stand_ins(bin_dir: Path, answers: dict[str, object]) -> None:
    """An ``amd-smi`` printing ``answers[subcommand]`` as JSON (exit 2 for one not given), and an ``nvidia-smi``
    that fails, as on a node without NVIDIA's driver that still has the tool."""
    bin_dir.mkdir()
    cases = "".join(f"  {sub}) cat <<'EOF'\n{json.dumps(doc, indent=4)}\nEOF\n  ;;\n" for sub, doc in answers.items())
    for name, text in {"amd-smi": f'#!/bin/sh\ncase "$1" in\n{cases}  *) exit 2;;\nesac\n',
                       "nvidia-smi": "#!/bin/sh\necho 'NVIDIA-SMI has failed'; exit 9\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755 | stat.S_IEXEC)


def test_an_amd_node_records_its_gpus_links_ecc_and_bad_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_ins(tmp_path / "bin", {"static": STATIC, "metric": METRIC, "bad-pages": PAGES, "topology": TOPOLOGY})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    gpus, topology, banner = rundir.gpu_facts()
    assert (topology, banner) == (None, None)
    assert gpus == [
        {"name": "AMD Instinct MI300X", "driver_version": "6.8.5", "memory_total_mib": 196592.0,
         "pcie.link.gen.current": 5, "pcie.link.gen.max": 5, "pcie.link.width.current": 16, "pcie.link.width.max": 16,
         "pcie.replay_count": 0, "ecc.total_correctable_count": 0, "ecc.total_uncorrectable_count": 0,
         "ecc.total_deferred_count": 0, "bad_pages.retired": 0, "bad_pages.pending": 0,
         "xgmi.links_active": 1, "xgmi.links_inactive": 0},
        {"name": "AMD Instinct MI300X", "driver_version": "6.8.5", "memory_total_mib": 196592.0,
         "pcie.link.gen.current": 4, "pcie.link.gen.max": 5, "pcie.link.width.current": 8, "pcie.link.width.max": 16,
         "pcie.replay_count": 57, "ecc.total_correctable_count": 12, "ecc.total_uncorrectable_count": 1,
         "ecc.total_deferred_count": None, "bad_pages.retired": 2, "bad_pages.pending": 1,
         "xgmi.links_active": 0, "xgmi.links_inactive": 1}]
    details = run_details({"gpus": gpus})  # what the store keeps of them: the node's link at its maximum
    assert (details["gpu_driver"], details["pcie_gen"], details["pcie_width"], details["gpu_count"]) == \
        ("6.8.5", "5", "16", "2")
    assert json.loads(details["gpus"])[1]["bad_pages.pending"] == 1  # bench fleet compares it GPU by GPU


def test_older_amd_smi_text_values_and_a_failing_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before units (ROCm 6.1.0) a speed is text, ``"16 GT/s"``; a query amd-smi refuses (bad-pages here, as
    with some firmware) leaves its fields None, and the GPU keeps what the others said."""
    static = [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI250X"},
               "bus": {"max_pcie_width": 16, "max_pcie_speed": "16 GT/s"}, "driver": {"version": "6.3.6"},
               "vram": {"size": "65520 MB"}}]
    metric = [{"gpu": 0, "pcie": {"width": "N/A", "speed": "N/A", "replay_count": "N/A"}, "ecc": {}}]
    _stand_ins(tmp_path / "bin", {"static": static, "metric": metric})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    gpus, _, _ = rundir.gpu_facts()
    assert gpus == [{"name": "AMD Instinct MI250X", "driver_version": "6.3.6", "memory_total_mib": 65520.0,
                     "pcie.link.gen.current": None, "pcie.link.gen.max": 4, "pcie.link.width.current": None,
                     "pcie.link.width.max": 16, "pcie.replay_count": None, "ecc.total_correctable_count": None,
                     "ecc.total_uncorrectable_count": None, "ecc.total_deferred_count": None,
                     "bad_pages.retired": None, "bad_pages.pending": None}]


@pytest.mark.parametrize("output", ["", "not json", "{}", '{"gpu_data": "N/A"}', "[1, 2]", '[{"gpu": "0"}]'])
def test_amd_smi_output_that_names_no_gpu_records_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        output: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd-smi").write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n")
    (bin_dir / "amd-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert rundir.gpu_facts() == (None, None, None)


def test_a_warning_printed_before_the_json_is_skipped() -> None:
    from bench.runner.amd_health import gpu_rows

    rows = gpu_rows('WARNING: User is missing the following required groups: render\n[{"gpu": 0, "asic": {}}]')
    assert rows == {0: {"gpu": 0, "asic": {}}}
    assert gpu_facts({"gpu": 0}, {}, {})["name"] is None


SAMPLE = [  # amd-smi metric --usage --power --clock --temperature --mem-usage --pcie --json, ROCm 6.2 era
    {"gpu": 0, "usage": {"gfx_activity": {"value": 97, "unit": "%"}, "umc_activity": {"value": 41, "unit": "%"}},
     "power": {"socket_power": {"value": 702, "unit": "W"}, "gfx_voltage": "N/A", "throttle_status": "UNTHROTTLED"},
     "clock": {"gfx_0": {"clk": {"value": 2098, "unit": "MHz"}, "min_clk": {"value": 500, "unit": "MHz"}},
               "mem_0": {"clk": {"value": 1300, "unit": "MHz"}}},
     "temperature": {"edge": "N/A", "hotspot": {"value": 71, "unit": "C"}, "mem": {"value": 58, "unit": "C"}},
     "mem_usage": {"total_vram": {"value": 196592, "unit": "MB"}, "used_vram": {"value": 151220, "unit": "MB"}},
     "pcie": {"width": 16, "speed": {"value": 32, "unit": "GT/s"}, "replay_count": 0},
     "throttle": {"accumulation_counter": 2938164, "ppt_accumulated": 1620552, "prochot_violation_status": "NOT ACTIVE",
                  "ppt_violation_status": "ACTIVE", "socket_thermal_violation_status": "NOT ACTIVE",
                  "vr_thermal_violation_status": "NOT ACTIVE", "hbm_thermal_violation_status": "ACTIVE",
                  "ppt_violation_activity": {"value": 55, "unit": "%"}}},
    {"gpu": 1, "usage": {"gfx_activity": {"value": 88, "unit": "%"}}, "power": {"socket_power": "N/A"},
     "clock": {"gfx_0": {"clk": "N/A"}}, "temperature": {"edge": {"value": 64, "unit": "C"}, "hotspot": "N/A"},
     "mem_usage": {"used_vram": {"value": 151220, "unit": "MB"}}, "pcie": {"width": 16, "speed": {"value": 8, "unit": "GT/s"}}},
]


def test_the_telemetry_loop_samples_amd_gpus_as_nvidia_smi_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample is one amd-smi query written as nvidia-smi's telemetry CSV: the ingest reads its utilisation,
    power and the PCIe link under load (GPU 1's trained down to Gen3) as it reads nvidia-smi's."""
    from bench.ingest.formats import telemetry
    from bench.ingest.gpu_load import links_and_throttle
    from bench.runner.launch import Telemetry

    _stand_ins(tmp_path / "bin", {"metric": SAMPLE})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "nvidia-smi" else str(tmp_path / "bin" / name))
    t = Telemetry(tmp_path / "telemetry.csv", 0.2)
    t.start()
    time.sleep(1.0)
    t.stop()
    lines = (tmp_path / "telemetry.csv").read_text().splitlines()
    assert lines[0] == "timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], " \
                       "clocks.sm [MHz], pcie.link.gen.current, pcie.link.width.current, amd.violations.active"
    assert len(lines) >= 5 and len(lines) % 2 == 1  # the header, then both GPUs' rows each sample
    assert lines[1].split(", ")[1:] == ["0", "97 %", "151220 MiB", "71", "702 W", "2098 MHz", "5", "16",
                                        "0x0000000000000012"]  # ppt (0x2) and hbm_thermal (0x10)
    assert lines[2].split(", ")[1:] == ["1", "88 %", "151220 MiB", "64", "[N/A]", "[N/A]", "3", "16", "[N/A]"]
    assert telemetry.sniff("\n".join(lines)[:4096])
    cols = telemetry.parse_lines(lines, source="t").telemetry.take()
    assert (cols["utilization_pct"][0], cols["power_w"][0]) == (97.0, 702.0) and math.isnan(cols["power_w"][1])
    assert links_and_throttle(lines) == {0: {"pcie_link_gen": 5, "pcie_link_width": 16,
                                             "throttle": {"ppt": 1.0, "hbm_thermal": 1.0}},
                                         1: {"pcie_link_gen": 3, "pcie_link_width": 16}}


def test_an_amd_smi_without_throttle_is_sampled_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """amd-smi before ROCm 6.3 rejects ``--throttle`` (argparse: exit 2): the loop asks without it."""
    from bench.runner.launch import Telemetry

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "amd-smi").write_text("#!/bin/sh\ncase \"$*\" in *--throttle*) exit 2;; esac\n"
                                     f"cat <<'EOF'\n{json.dumps(SAMPLE[1:])}\nEOF\n")
    (bin_dir / "amd-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "nvidia-smi" else str(bin_dir / name))
    t = Telemetry(tmp_path / "telemetry.csv", 0.2)
    t.start()
    time.sleep(0.5)
    t.stop()
    lines = (tmp_path / "telemetry.csv").read_text().splitlines()
    assert lines[0].endswith("pcie.link.width.current") and len(lines) >= 3
    assert lines[1].split(", ")[1:] == ["1", "88 %", "151220 MiB", "64", "[N/A]", "[N/A]", "3", "16"]


def test_bench_run_on_an_amd_node_is_ingested_with_its_gpus_and_their_load(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole way: bench run's launcher on a node whose amd-smi answers as above, then the ingest. The store
    keeps every GPU's facts (bench fleet compares them GPU by GPU) and each GPU's summary under load: its PCIe
    link (GPU 1's trained down) and amd-smi's violations by name."""
    import sys

    from bench.runner import launch
    from bench.runner.commands.shared import has_result, ingest_runs
    from bench.runner.spec import RunSpec

    metric = [{**m, **t} for m, t in zip(METRIC, SAMPLE, strict=True)]  # one answer for both metric queries
    _stand_ins(tmp_path / "bin", {"static": STATIC, "metric": metric, "bad-pages": PAGES, "topology": TOPOLOGY})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    program = "import time; time.sleep(0.8); print('total images/sec: 123.45')"
    out = launch.execute(RunSpec(), tmp_path / "logs", trainer=(sys.executable, "-c", program),
                         telemetry_interval_s=0.1, result_check=has_result)
    doc = json.loads((out.run_dir / "run.json").read_text())
    assert [(g["name"], g["pcie.link.width.current"], g["bad_pages.pending"]) for g in doc["gpus"]] == \
        [("AMD Instinct MI300X", 16, 0), ("AMD Instinct MI300X", 16, 1)]  # SAMPLE's link, in both answers
    assert ingest_runs([out.run_dir], tmp_path / "store")[out.run_dir.name]["status"] == "ok"
    from bench.sql.read import connect

    details = dict(connect(tmp_path / "store").execute("SELECT details FROM runs").fetchone()[0])
    assert (details["gpu_driver"], details["gpu_count"], details["pcie_gen"]) == ("6.8.5", "2", "5")
    load = {g["gpu"]: g for g in json.loads(details["gpu_load"])}
    assert (load[0]["pcie_link_gen"], load[1]["pcie_link_gen"], load[0]["throttle"]) == \
        (5, 3, {"ppt": 1.0, "hbm_thermal": 1.0})
    assert load[0]["power_mean_w"] == 702.0 and load[1]["utilization_mean_pct"] == 88.0
