"""MLPerf system descriptions: counts as strings, CPU-only systems, missing and bad fields, not JSON.
Every input is hand-written here; the expected values are read off it."""

from __future__ import annotations

import json
from pathlib import Path

from bench.ingest.formats import mlperf_system
from bench.ingest.parse import parse_bytes
from bench.ingest.pipeline import ingest
from bench.sql.store import table_files

GPU = {"submitter": "Acme", "division": "closed", "status": "available", "system_name": "Box 8xA100",
       "number_of_nodes": "2", "accelerators_per_node": "8", "accelerator_model_name": "NVIDIA A100-SXM4-80GB",
       "host_processor_model_name": "AMD EPYC 7742", "host_processors_per_node": "2", "framework": "MXNet 21.05"}


def _one(doc: object) -> tuple[list, list[tuple[str, str]]]:
    parsed = parse_bytes(json.dumps(doc, indent=1).encode(), source="x.json")
    return parsed.result.systems, [(p.kind, p.message) for p in parsed.result.problems]


def test_counts_given_as_strings_are_counts_and_nothing_is_a_problem() -> None:
    systems, problems = _one(GPU)
    assert problems == []  # no final newline in a JSON document is not a cut line
    (s,) = systems
    assert (s.num_nodes, s.accelerators_per_node, s.host_processors_per_node) == (2, 8, 2)
    assert (s.system_name, s.device_model, s.availability, s.framework) == (
        "Box 8xA100", "A100-SXM4-80GB", "available", "MXNet 21.05")
    assert s.details == {"accelerator_model_name": "NVIDIA A100-SXM4-80GB"}  # as submitted


def test_missing_and_bad_fields_are_problems_and_null() -> None:
    doc = {k: v for k, v in GPU.items() if k != "accelerator_model_name"} | {"number_of_nodes": "two",
                                                                             "accelerators_per_node": -8}
    systems, problems = _one(doc)
    (s,) = systems
    assert (s.num_nodes, s.accelerators_per_node, s.device_model) == (None, None, None)
    assert problems == [("missing_field", "the system description has no accelerator_model_name"),
                        ("bad_line", "number_of_nodes 'two' is not a count; stored as NULL"),
                        ("bad_line", "accelerators_per_node -8 is not a count; stored as NULL")]


def test_not_json_and_not_an_object() -> None:
    text = '{"system_name": "x", "accelerators_per_node": "8",\n  oops'
    parsed = parse_bytes(text.encode(), source="x.json", fmt="mlperf_system")
    assert parsed.result.systems == [] and [p.kind for p in parsed.result.problems] == ["bad_line"]
    result = mlperf_system.parse_lines(["[1, 2]"], source="x")
    assert result.systems == [] and "not an object" in result.problems[0].message


def test_the_systems_table_counts_devices_and_cpu_sockets(tmp_path: Path) -> None:
    """In a results tree: 2 nodes x 8 GPUs = 16 gpu devices; a CPU-only system (0 accelerators per node)
    trains on its sockets: 4 nodes x 2 = 8 cpu devices of the host processor's model."""
    cpu = GPU | {"system_name": "CPU box", "number_of_nodes": 4, "accelerators_per_node": "0",
                 "accelerator_model_name": "N/A", "host_processor_model_name": "Intel Xeon Platinum 8380H"}
    folder = tmp_path / "training_results_v9.9" / "Acme" / "systems"
    folder.mkdir(parents=True)
    (folder / "box.json").write_text(json.dumps(GPU))
    (folder / "cpubox.json").write_text(json.dumps(cpu))
    ingest([str(tmp_path / "training_results_v9.9")], tmp_path / "st", workers=0)
    import pyarrow.parquet as pq

    rows = sorted((r for f in table_files(tmp_path / "st", "systems") for r in pq.read_table(f).to_pylist()),
                  key=lambda r: r["system"])
    assert [(r["round"], r["submitter"], r["system"], r["num_devices"], r["device_type"], r["device_model"])
            for r in rows] == [("9.9", "Acme", "box", 16, "gpu", "A100-SXM4-80GB"),
                               ("9.9", "Acme", "cpubox", 8, "cpu", "Intel Xeon Platinum 8380H")]


def test_one_device_however_its_submitter_spells_it() -> None:
    """The spellings of MLPerf Training v1.0's systems (case, the vendor, SXM for SXM4, a power limit): one
    device model each, the submitted name and the power limit kept in details."""
    names = {"NVIDIA A100-PCIE-40GB (250W)": ("A100-PCIe-40GB", "250"), "NVIDIA A100-PCIe-40GB (250W)": ("A100-PCIe-40GB", "250"),
             "NVIDIA A100-PCIE-40GB": ("A100-PCIe-40GB", None), "A100-SXM4-40GB": ("A100-SXM4-40GB", None),
             "NVIDIA A100-SXM-80GB (400W)": ("A100-SXM4-80GB", "400"), "NVIDIA A100-SXM4-80GB (500W)": ("A100-SXM4-80GB", "500"),
             "Graphcore IPU GC200": ("Graphcore IPU GC200", None), "Ascend 910 Pro A": ("Ascend 910 Pro A", None)}
    for submitted, (model, power) in names.items():
        (s,), problems = _one(GPU | {"accelerator_model_name": submitted})
        assert (s.device_model, s.details.get("accelerator_power_w"), s.details["accelerator_model_name"]) == \
            (model, power, submitted) and problems == []

