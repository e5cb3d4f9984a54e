"""``bench sweep``: plan validation, expansion arithmetic (checked by hand), the shipped plans, and the real
sweep loop against a fake trainer (a Python one-liner printing tf_cnn output; one cell exits 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.runner import progress, sweep
from bench.runner.cli import app
from bench.runner.commands.shared import has_result, ingest_runs
from bench.sql.errors import BenchError

PLANS = Path(__file__).resolve().parents[2] / "fixtures" / "plans"


def plan(**over):
    """A small valid plan document with ``over`` merged in (tables replaced whole)."""
    doc = {"name": "t", "matrix": {"model": ["trivial"], "num_gpus": [1, 2], "batch_size": [8, 16]},
           "trainer": {"device": "cpu", "num_batches": 20}, "launcher": {"telemetry_interval_s": 0}}
    doc.update(over)
    return sweep.parse_plan(doc)


# --- expansion -----------------------------------------------------------------------------------------


def test_cell_count_is_product_times_repetitions():
    p = plan(matrix={"model": ["a", "b"], "num_gpus": [1, 2, 4], "batch_size": [32, 64],
                     "precision": ["fp32", "fp16"]}, repetitions=3)
    cells = sweep.expand(p)
    assert len(cells) == 2 * 3 * 2 * 2 * 3
    assert [c.index for c in cells] == list(range(1, 73))
    assert [c.repeat for c in cells[:4]] == [1, 2, 3, 1]
    # last matrix key (in MATRIX_KEYS order) varies fastest, repetitions innermost
    assert [c.factors["precision"] for c in cells[:6]] == ["fp32"] * 3 + ["fp16"] * 3
    assert cells[0].key == cells[1].key != cells[3].key


def test_weak_scaling_keeps_per_device_batch():
    cells = sweep.expand(plan(matrix={"model": ["m"], "num_gpus": [1, 2, 4], "batch_size": [32]}))
    assert [(c.batch_size, c.global_batch) for c in cells] == [(32, 32), (32, 64), (32, 128)]
    assert [c.spec.batch_size for c in cells] == [32, 32, 32]
    assert [c.num_batches for c in cells] == [20, 20, 20]


def test_strong_scaling_divides_global_batch_and_skips_remainders():
    cells = sweep.expand(plan(scaling="strong", matrix={"model": ["m"], "num_gpus": [1, 2, 3, 4], "batch_size": [256]}))
    assert [c.batch_size for c in cells] == [256, 128, None, 64]
    assert [c.global_batch for c in cells] == [256, 256, None, 256]
    assert cells[2].spec is None
    assert cells[2].skip_reason == "global batch 256 does not divide over 3 devices"


def test_total_samples_sets_iterations_by_hand():
    # strong: global 100 -> per device 100, 50; 1000 / 100 = 10 iterations each; 3 GPUs: 100/3 skipped
    p = plan(scaling="strong", total_samples=1000, trainer={"device": "cpu"},
             matrix={"model": ["m"], "num_gpus": [1, 2, 3], "batch_size": [100]})
    assert [(c.batch_size, c.num_batches) for c in sweep.expand(p)] == [(100, 10), (50, 10), (None, None)]
    # weak: 64 per device; 1280 / 64 = 20, 1280 / 128 = 10, 1280 / 256 = 5; batch 48: 1280 / 48 not whole
    p = plan(total_samples=1280, trainer={}, matrix={"model": ["m"], "num_gpus": [1, 2, 4], "batch_size": [64, 48]})
    got = [(c.factors["num_gpus"], c.batch_size, c.num_batches, c.skip_reason) for c in sweep.expand(p)]
    assert got[0] == (1, 64, 20, None)
    assert got[2] == (2, 64, 10, None)
    assert got[4] == (4, 64, 5, None)
    assert got[1] == (1, None, None, "total_samples 1280 is not a multiple of global batch 48")


def test_cell_spec_and_tags():
    c = sweep.expand(plan())[3]
    assert c.key == "model=trivial,num_gpus=2,batch_size=16,num_batches=20"
    assert dict(c.spec.tags) == {"sweep": "t", "cell": c.key}
    assert (c.spec.model, c.spec.num_gpus, c.spec.batch_size, c.spec.device, c.spec.launcher, c.spec.np) == (
        "trivial", 2, 16, "cpu", "local", None)


def test_horovod_cells_run_one_process_per_gpu():
    p = plan(matrix={"model": ["resnet50"], "num_gpus": [4], "nodes": [1, 2], "batch_size": [128],
                     "variable_update": ["horovod"]},
             launcher={"launcher": "horovodrun", "hosts": ["a", "b"], "gloo": True})
    s1, s2 = (c.spec for c in sweep.expand(p))
    assert (s1.np, s1.hosts, s1.num_gpus, s1.gloo) == (4, "a:4", 1, True)
    assert (s2.np, s2.hosts) == (8, "a:4,b:4")
    assert sweep.expand(p)[1].global_batch == 128 * 8


@pytest.mark.parametrize(("over", "key"), [
    ({"scalling": "weak"}, "'scalling'"),
    ({"scaling": "linear"}, "scaling"),
    ({"matrix": {"model": ["m"], "num_gpus": [], "batch_size": [8]}}, "matrix.num_gpus"),
    ({"matrix": {"model": ["m"], "num_gpus": [1], "batch_size": [8], "gpus": [1]}}, "matrix.gpus"),
    ({"matrix": {"model": ["m"], "num_gpus": [1]}}, "matrix.batch_size"),
    ({"matrix": {"model": ["m"], "num_gpus": [0], "batch_size": [8]}}, "matrix.num_gpus"),
    ({"matrix": {"model": ["m"], "num_gpus": [1], "batch_size": [8], "data_format": ["nchw"]}}, "matrix.data_format"),
    ({"matrix": {"model": ["m"], "num_gpus": [1], "batch_size": [8], "data": ["real"]}}, "trainer.data_dir"),
    ({"matrix": {"model": ["m"], "num_gpus": [1], "batch_size": [8], "nodes": [1, 2]}}, "matrix.nodes"),
    ({"trainer": {"num_batchs": 3}}, "trainer.'num_batchs'"),
    ({"trainer": {"num_batches": 3}, "total_samples": 100}, "total_samples"),
    ({"launcher": {"launcher": "ssh"}}, "launcher.launcher"),
    ({"repetitions": 0}, "repetitions"),
    ({"repetitions": "2"}, "repetitions"),
])
def test_invalid_plans_name_the_key(over, key):
    with pytest.raises(BenchError) as err:
        plan(**over)
    assert key in str(err.value)


def test_load_plan_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("scaling = \n")
    with pytest.raises(BenchError, match="not valid TOML"):
        sweep.load_plan(bad)
    with pytest.raises(BenchError, match="cannot read plan"):
        sweep.load_plan(tmp_path / "missing.toml")


# --- shipped plans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "count"), [("dell-p100-2016", 3), ("tf-official-2017", 32),
                                             ("dell-ready-ai-resnet50", 8), ("cpu-smoke", 4)])
def test_shipped_plans_expand(name, count):
    p = sweep.load_plan(PLANS / f"{name}.toml")
    cells = sweep.expand(p)
    assert p.name == name
    assert len(cells) == count
    assert all(c.skip_reason is None for c in cells)


def test_dell_p100_gives_4000_2000_1000_iterations():
    cells = sweep.expand(sweep.load_plan(PLANS / "dell-p100-2016.toml"))
    got = [(c.factors["num_gpus"], c.spec.batch_size, c.global_batch, c.spec.num_batches) for c in cells]
    assert got == [(1, 64, 64, 4000), (2, 64, 128, 2000), (4, 64, 256, 1000)]
    assert {c.spec.model for c in cells} == {"inception3"}


def test_tf_official_cells_by_hand():
    cells = sweep.expand(sweep.load_plan(PLANS / "tf-official-2017.toml"))
    first, last = cells[0].spec, cells[-1].spec
    assert (first.model, first.batch_size, first.data_dir, first.num_gpus) == ("inception3", 32, None, 1)
    assert (last.model, last.batch_size, last.num_gpus, last.data_dir) == ("resnet50", 64, 8, "/data/imagenet/tfrecords")
    assert {c.spec.variable_update for c in cells} == {"parameter_server"}
    assert {c.spec.data_format for c in cells} == {"NCHW"}
    assert sorted({c.factors["num_gpus"] for c in cells}) == [1, 2, 4, 8]


def test_dell_ready_ai_cells_by_hand():
    cells = sweep.expand(sweep.load_plan(PLANS / "dell-ready-ai-resnet50.toml"))
    c = cells[2]  # nodes 2, fp32
    assert (c.factors["nodes"], c.factors["precision"], c.global_batch) == (2, "fp32", 1024)
    assert (c.spec.launcher, c.spec.np, c.spec.hosts, c.spec.num_gpus) == ("mpirun", 8, "node01:4,node02:4", 1)
    assert (c.spec.variable_update, c.spec.batch_size) == ("horovod", 128)
    assert cells[-1].spec.np == 32


def test_cpu_smoke_cells_by_hand():
    cells = sweep.expand(sweep.load_plan(PLANS / "cpu-smoke.toml"))
    s = cells[2].spec  # 2 logical devices, first repetition
    assert (s.model, s.device, s.num_gpus, s.data_format, s.variable_update) == ("trivial", "cpu", 2, "NHWC", "replicated")
    assert (cells[2].repeat, cells[3].repeat, s.batch_size, s.num_batches) == (1, 2, 8, 10)


# --- progress ------------------------------------------------------------------------------------------


def test_eta_from_finished_runs():
    assert progress.eta_s([], 3) is None
    assert progress.eta_s([2.0, 4.0], 3) == pytest.approx(9.0)
    assert progress.format_eta(None) == "?"
    assert progress.format_eta(3725.2) == "1:02:06"


# --- the real loop, fake trainer -----------------------------------------------------------------------

FAKE = r"""
import os, sys
a = sys.argv
opt = lambda name: a[a.index(name) + 1]
b, g = int(opt('--batch-size')), int(opt('--num-gpus'))
if g == 2 and b == 16 and not os.path.exists(a[1]):
    print('crash in cell g2 b16'); sys.exit(1)
print('TensorFlow:  2.15\nModel:       trivial\nDataset:     imagenet (synthetic)\nMode:        training')
print('SingleSess:  False\nBatch size:  %d global\n             %d per device' % (b * g, b))
print('Num batches: 20\nNum epochs:  0.01\nDevices:     %r' % ['/cpu:%d' % i for i in range(g)])
print('NUMA bind:   False\nData format: NHWC\nOptimizer:   sgd\nVariables:   replicated\n==========')
print('Running warm up\nDone warm up\nStep\tImg/sec\ttotal_loss')
print('1\timages/sec: 100.0 +/- 0.0 (jitter = 0.0)\t2.303')
print('10\timages/sec: 101.0 +/- 1.0 (jitter = 2.0)\t2.250')
print('20\timages/sec: 102.0 +/- 0.5 (jitter = 1.9)\t2.201')
print('-' * 64 + '\ntotal images/sec: %.2f\n' % (100.0 * b * g / 8) + '-' * 64)
"""


def test_sweep_records_a_failed_cell_goes_on_and_resume_reruns_it(tmp_path):
    flag = tmp_path / "fixed"
    trainer = (sys.executable, "-c", FAKE, str(flag))
    p, out, store = plan(), tmp_path / "logs", tmp_path / "store"
    lines: list[str] = []
    results = sweep.run_sweep(p, sweep.expand(p), out, store, trainer=trainer,
                              reporter=progress.PlainReporter(lines.append), result_check=has_result, ingest=ingest_runs)
    assert [r.status for r in results] == ["ok", "ok", "ok", "failed"]
    assert sweep.exit_code(results) == 1
    assert [r.images_per_sec for r in results] == [100.0, 200.0, 200.0, None]
    failed = json.loads((results[3].run_dir / "run.json").read_text())
    assert (failed["status"], failed["exit_code"]) == ("failed", 1)
    assert failed["tags"] == {"sweep": "t", "cell": results[3].cell.key, "repeat": "1"}
    record = json.loads(next(out.glob("sweep-t-*.json")).read_text())
    assert record["schema_version"] == 1
    assert [(c["status"], Path(c["run_dir"]).name) for c in record["cells"]] == [
        (r.status, r.run_dir.name) for r in results]
    assert lines[0] == "sweep: 4 run(s) to launch"
    assert lines[4].startswith("[4/4] #4 model=trivial,num_gpus=2,batch_size=16,num_batches=20 r1: failed")
    assert len(list(out.glob("*/run.json"))) == 4

    flag.touch()  # the failing cell now succeeds; --resume must launch only it
    again = sweep.run_sweep(p, sweep.expand(p), out, store, resume=True, trainer=trainer,
                            reporter=progress.PlainReporter(lines.append), result_check=has_result, ingest=ingest_runs)
    assert [r.status for r in again] == ["resumed", "resumed", "resumed", "ok"]
    assert again[3].images_per_sec == 400.0  # 100 x 16 x 2 / 8
    assert len(list(out.glob("*/run.json"))) == 5
    assert sweep.exit_code(again) == 0


def test_skipped_cells_are_not_launched_and_do_not_fail(tmp_path):
    p = plan(scaling="strong", matrix={"model": ["m"], "num_gpus": [3], "batch_size": [16]})
    results = sweep.run_sweep(p, sweep.expand(p), tmp_path / "logs", tmp_path / "store",
                              trainer=(sys.executable, "-c", "raise SystemExit(1)"),
                              reporter=progress.PlainReporter(lambda m: None), result_check=has_result,
                              ingest=ingest_runs)
    assert [r.status for r in results] == ["skipped"]
    assert sweep.exit_code(results) == 0
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").glob("*/run.json"))


def test_exit_code_rules():
    c = sweep.expand(plan())[0]
    assert sweep.exit_code([sweep.CellResult(c, "ok"), sweep.CellResult(c, "resumed")]) == 0
    assert sweep.exit_code([sweep.CellResult(c, "ok"), sweep.CellResult(c, "timeout")]) == 1
    assert sweep.exit_code([sweep.CellResult(c, "interrupted"), sweep.CellResult(c, "not_run")]) == 130


# --- CLI -----------------------------------------------------------------------------------------------


def test_cli_dry_run_prints_table_and_launches_nothing(tmp_path):
    out = tmp_path / "logs"
    res = CliRunner().invoke(app, ["sweep", str(PLANS / "dell-p100-2016.toml"), "--dry-run", "--out", str(out),
                                   "--store", str(tmp_path / "store")])
    assert res.exit_code == 0, res.output
    assert "sweep dell-p100-2016: 3 cells (weak scaling)" in res.output
    assert "4000" in res.output and "2000" in res.output and "1000" in res.output
    assert not out.exists() and not (tmp_path / "store").exists()


def test_cli_invalid_plan_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[matrix]\nmodel = ["m"]\nnum_gpus = []\nbatch_size = [8]\n')
    res = CliRunner().invoke(app, ["sweep", str(bad), "--dry-run"])
    assert res.exit_code == 1
    assert "Error: plan key matrix.num_gpus must be a non-empty list" in res.output


def test_cli_help():
    res = CliRunner().invoke(app, ["sweep", "--help"])
    assert res.exit_code == 0
    assert "--resume" in res.output and "Example:" in res.output
