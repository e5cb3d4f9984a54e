"""bench.ingest.formats.host_metadata: a machine's Key<TAB>Value metadata (Lambda's <system>.logs/metadata),
and the runs below its folder taking its facts. Expected values are read off the hand-written lines below."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from bench.analytics.results import rows
from bench.ingest import registry
from bench.ingest.formats import host_metadata
from bench.ingest.pipeline import ingest
from bench.sql.read import connect

META = "Memory\t62.6676GB\nCPU\tThreadripper\nGPU 0\tGeForce RTX 3080\nGPU 1\tGeForce RTX 3080\nCUDA\tV11.1.74\n" \
       "Nvidia\t460.39\nTF\t1.15.4\nKernel\t5.4.0-52-generic\nPython\t3.6.9\n"
#: a tf_cnn_benchmarks log that says TensorFlow 1.15 and no GPU model (cut to what the parser needs)
LOG = ("TensorFlow:  1.15\nModel:       resnet50\nDataset:     imagenet (synthetic)\nMode:        training\n"
       "Batch size:  64 global\n             64 per device\nNum batches: 100\nNum epochs:  0.00\n"
       "Devices:     ['/gpu:0']\nData format: NCHW\nOptimizer:   sgd\nVariables:   replicated\n"
       "==========\nGenerating training model\nRunning warm up\nDone warm up\nStep\tImg/sec\ttotal_loss\n"
       "1\timages/sec: 300.1 +/- 0.0 (jitter = 0.0)\t7.8\n"
       "----------------------------------------------------------------\n"
       "total images/sec: {}\n----------------------------------------------------------------\n")


def test_detected_and_parsed() -> None:
    assert registry.detect(META) is host_metadata
    assert not host_metadata.sniff("GPU 0\tA100\n")  # no CUDA or TF line
    assert not host_metadata.sniff("Memory\t62GB\nsome words here\nGPU 0\tA100\nTF\t2.3\n")
    res = host_metadata.parse_lines(META.splitlines(), source="logs.tar::box-a.logs/metadata")
    (s,) = res.systems
    assert (s.system_name, s.num_nodes, s.accelerators_per_node, s.device_model) == ("box-a", 1, 2, "GeForce RTX 3080")
    assert (s.host_processor_model, s.framework) == ("Threadripper", "TensorFlow 1.15.4")
    assert s.details == {"memory": "62.6676GB", "cpu": "Threadripper", "cuda_version": "11.1.74", "gpu_driver": "460.39",
                         "kernel": "5.4.0-52-generic", "python_version": "3.6.9"}
    assert res.problems == []


def test_mixed_gpus_and_bad_lines_are_problems() -> None:
    res = host_metadata.parse_lines(["GPU 0\tA100", "GPU 1\tV100", "no tab here", "TF\t2.3.0"], source="x/metadata")
    assert [p.kind for p in res.problems] == ["bad_line", "conflict"] and res.systems[0].device_model == "A100"


def test_runs_below_its_folder_take_its_facts(tmp_path: Path) -> None:
    """Two folders hold the same metadata bytes (as Lambda's 7742-{1,2,4,8}xA100 do): each describes its own
    runs. The log's TensorFlow 1.15 is refined to the metadata's 1.15.4; a run elsewhere takes nothing."""
    tar_path = tmp_path / "logs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, text in (("box-a.logs/metadata", META), ("box-b.logs/metadata", META),
                           ("box-a.logs/run1/throughput/1", LOG.format(300.05)),
                           ("box-b.logs/run1/throughput/1", LOG.format(301.05)), ("other/throughput/1", LOG.format(302.05))):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    ingest([str(tar_path)], tmp_path / "st", workers=0)
    con = connect(tmp_path / "st")
    assert rows(con, "SELECT system FROM systems ORDER BY 1") == [("box-a",), ("box-b",)]
    got = rows(con, "SELECT split_part(source, '::', 2), framework_version, device_model, details['cuda_version'], "
                    "details['gpu_driver'] FROM runs ORDER BY 1")
    assert got == [("box-a.logs/run1/throughput/1", "1.15.4", "GeForce RTX 3080", "11.1.74", "460.39"),
                   ("box-b.logs/run1/throughput/1", "1.15.4", "GeForce RTX 3080", "11.1.74", "460.39"),
                   ("other/throughput/1", "1.15", None, None, None)]
