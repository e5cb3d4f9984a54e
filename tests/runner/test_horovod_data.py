"""``--variable-update horovod`` with ``--data-dir``: every rank reads its own shard of the TFRecord files.

Real 2-rank Gloo runs on a generated TFRecord set (2 files of 32 random JPEGs): ``bench run --launcher
horovodrun`` training on it (ingested as real data, run.json recording the counted epoch), and a script that
checks each rank's batches come from its own file only. Skips without Horovod next to ``sys.executable``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from logtools import bench_run_ok, run_concurrently

BIN = Path(sys.executable).parent

SHARD = """
import json, sys, horovod.tensorflow as hvd, tensorflow as tf
from types import SimpleNamespace
from bench.runner.train import hvd as mode
from bench.runner.train.data import train_files
from bench.runner.train.models import SPECS
hvd.init()
files = train_files(sys.argv[1])
feature = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
by_file = [sorted({int(tf.io.parse_single_example(r, feature)["image/class/label"])
                   for r in tf.data.TFRecordDataset(f)}) for f in files]
args = SimpleNamespace(data_dir=sys.argv[1], batch_size=16, data_format="NHWC", decode_threads=1)
next_batch = mode.rank_input(tf, SPECS["trivial"], args, hvd.rank(), hvd.size())
seen = sorted({int(x) for _ in range(4) for x in next_batch()[1].numpy()})
print("SHARD", hvd.rank(), json.dumps({"seen": seen, "files": by_file}), flush=True)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]:
    pytest.importorskip("horovod.tensorflow")
    horovodrun, bench = BIN / "horovodrun", BIN / "bench"
    if not horovodrun.exists() or not bench.exists():
        pytest.skip(f"no horovodrun or bench command next to {sys.executable}")
    tmp = tmp_path_factory.mktemp("hvd-data")
    made = subprocess.run([sys.executable, "-m", "bench.runner.train.data", "--make-tfrecords", str(tmp / "records"),
                           "--images", "64", "--size", "32", "--shards", "2"], capture_output=True, timeout=60)
    assert made.returncode == 0, made.stderr[-2000:]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TF_CPP_MIN_LOG_LEVEL": "2"}
    argvs = {
        "bench": [str(bench), "run", "--launcher", "horovodrun", "--np", "2", "--gloo", "--model", "trivial",
                  "--device", "cpu", "--variable-update", "horovod", "--batch-size", "4", "--num-epochs", "1",
                  "--display-every", "4", "--num-warmup-batches", "1", "--data-format", "NHWC",
                  "--data-dir", str(tmp / "records"), "--telemetry-interval", "0",
                  "--out", str(tmp / "logs"), "--store", str(tmp / "store")],
        "shard": [str(horovodrun), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "-c", SHARD,
                  str(tmp / "records")],
    }
    return run_concurrently(argvs, env, tmp)


@pytest.mark.slow
def test_each_rank_reads_only_its_own_file(runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]) -> None:
    proc, _ = runs["shard"]
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    found = {int(r): json.loads(doc) for r, doc in re.findall(rb"<stdout>:SHARD (\d) (\{.*\})$", proc.stdout, re.M)}
    assert set(found) == {0, 1}
    for rank, other in ((0, 1), (1, 0)):
        seen, files = set(found[rank]["seen"]), found[rank]["files"]
        assert len(seen) >= 8  # 4 batches of 16 out of 32 records
        assert seen <= set(files[rank])
        assert not seen <= set(files[other])


@pytest.mark.slow
def test_bench_run_horovod_on_real_data_counts_the_epoch_and_ingests(
        runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]) -> None:
    run_dir, log, row = bench_run_ok(runs)
    for rank in (0, 1):  # 1 epoch of 64 images at 2 ranks x 4: 8 steps, on every rank
        assert f"[{rank}]<stdout>:Num batches: 8\n".encode() in log
        assert f"[{rank}]<stdout>:Dataset:     imagenet\n".encode() in log
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["epoch_images"] == {"count": 64, "source": "counted"}
    assert (row["status"], row["data"], row["num_ranks"], row["global_batch_size"], row["num_steps"]) == (
        "ok", "real", 2, 8, 8)
