"""Every file of the shared corpus, end to end: detected as the format its folder names, parsed with no
parser error, and the Lambda tarball ingested through the real pipeline with its path pattern."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.ingest.parse import parse_bytes
from bench.ingest.pipeline import ingest
from bench.sql.store import table_files

# corpus folder -> the format its files are (the two MLPerf result files in mxnet/ are MLPerf logs
# that embed Speedometer lines; see the corpus README)
FOLDER_FORMAT = {
    "caffe": "caffe", "caffe_time": "caffe_time", "chainer": "convnet", "dllogger": "dllogger",
    "horovod": "horovod", "mlperf": "mlperf", "mxnet": "mxnet", "neon": "convnet",
    "tensorflow_legacy": "convnet", "theano": "convnet", "torch7": "convnet",
}
LAMBDA_PATTERNS = [
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/throughput/{repeat}",
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus-{mode_dir}/{model}-{batch_size_per_device}/throughput/{repeat}",
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/thermal/{repeat}",
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus-{mode_dir}/{model}-{batch_size_per_device}/thermal/{repeat}",
]


def test_every_corpus_file_is_detected_as_its_format(corpus: Path) -> None:
    checked = 0
    for folder, fmt in FOLDER_FORMAT.items():
        for f in sorted((corpus / folder).iterdir()):
            parsed = parse_bytes(f.read_bytes(), source=str(f))
            want = "mlperf" if f.name.startswith("mlperf-") else fmt
            assert parsed.format == want, f.name
            assert not [p for p in parsed.result.problems if p.kind == "parser_error"], f.name
            assert parsed.result.runs, f"{f.name}: no run found"
            checked += 1
    assert checked == 42  # the 45 corpus files minus README.md, PROVENANCE.md and the Lambda tarball


def _read(store: Path, table: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in table_files(store, table)], promote_options="default")


@pytest.mark.slow
def test_lambda_tarball_through_the_pipeline(corpus: Path, tmp_path: Path) -> None:
    tarball = corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
    summary = ingest([str(tarball)], tmp_path / "st", path_patterns=LAMBDA_PATTERNS)
    listing = subprocess.run(["tar", "tzf", str(tarball)], capture_output=True, text=True, check=True).stdout
    members = [m for m in listing.splitlines() if not m.endswith("/")]
    assert summary.files_seen == len(members) == 7674
    runs = _read(tmp_path / "st", "runs").to_pylist()
    assert len(runs) == sum(m.endswith("/throughput/1") for m in members) == 3949
    assert summary.problems_by_kind.get("parser_error", 0) == 0
    # the logs never print precision: every run gets it from its directory name
    assert {r["precision"] for r in runs} == {"fp16", "fp32"}
    assert all(dict(r["tags"])["repeat"] == "1" for r in runs)
    # failed runs are rows with NULL metrics, never 0 and never dropped
    assert all(r["images_per_sec"] is None for r in runs if r["status"] != "ok")
    assert all(r["images_per_sec"] > 0 for r in runs if r["status"] == "ok")
    telemetry = _read(tmp_path / "st", "telemetry")
    thermal_members = sum(m.endswith("/thermal/1") for m in members)
    assert len(set(telemetry["source"].to_pylist())) == thermal_members == 3680
    # a thermal file and its throughput log share the tags that join them
    tagged = telemetry.filter(pa.compute.is_valid(telemetry["tags"]))
    assert tagged.num_rows == telemetry.num_rows
