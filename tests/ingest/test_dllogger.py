"""NVIDIA DLLogger: tricky lines of both backends, and every corpus file of the format.

Corpus values were read from the logs with grep/awk (commands in fixtures/README.md, dllogger section),
not copied from the parser's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ingest.formats import dllogger
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult


def _parse(lines: list[str]) -> ParseResult:
    return dllogger.parse_lines(lines, source="test")


def _rec(ts: str, step: object, data: dict[str, object]) -> str:
    return "DLLL " + json.dumps({"timestamp": ts, "datetime": "x", "type": "LOG", "step": step, "data": data})


def _meta(metric: str, **meta: str) -> str:
    return "DLLL " + json.dumps({"timestamp": "1.0", "type": "METADATA", "metric": metric, "metadata": meta})


def test_sniff_both_backends_behind_a_short_prefix() -> None:
    assert dllogger.sniff('DLLL {"timestamp": "1"}')
    assert dllogger.sniff("x\nDLL 2020-06-20 01:16:39.766736 - (0, 50) total_ips : 6724.3")
    assert dllogger.sniff("[1,0]<stdout>:DLLL 2019-10-10 16:42:54.500902 - PARAMETER HP1 : 17 ")
    assert not dllogger.sniff("DLL load failed: the specified module could not be found")
    assert not dllogger.sniff("mydll 2020-06-20 loaded")


def test_stdout_items_with_and_without_units() -> None:
    res = _parse(["DLL 2021-01-01 00:00:00.000000 - (1, 2) loss : 3.5 nat acc : 0.5  total_ips : 100.0 img/s"])
    (row,) = res.steps.rows()
    assert (row["epoch"], row["step"], row["loss"], row["images_per_sec"]) == (1, 2, 3.5, 100.0)
    assert row["metrics"] == {"acc": 0.5}


def test_old_named_step_format_and_validation_substep() -> None:
    res = _parse(
        [
            "DLLL 2019-10-10 16:42:54.500902 - PARAMETER HP1 : 17 ",
            "DLLL 2019-10-10 16:42:54.501186 - Epoch: 0 Iteration: 3 Validation Iteration: 2  val.loss : 23.0 nat",
            "DLLL 2019-10-10 16:42:54.501188 - Epoch: 1  speed : 10.000 speeds/s",
        ]
    )
    rows = res.steps.rows()
    assert (rows[0]["epoch"], rows[0]["step"]) == (0, 3)
    assert rows[0]["metrics"] == {"validation_iteration": 2.0, "val.loss": 23.0}
    assert (rows[1]["epoch"], rows[1]["step"], rows[1]["metrics"]) == (1, None, {"speed": 10.0})
    run = res.runs[0]
    assert run.wall_time_s == pytest.approx(0.000286)
    assert run.images_per_sec is None and run.details["throughput_unit"] == "speeds/s"  # not images


def test_records_of_one_step_merge_and_repeated_names_split() -> None:
    res = _parse(
        [
            _rec("10.0", [0, 1], {"train.loss": 2.0, "train.total_ips": 5.0}),
            _rec("10.1", [0, 1], {"lr": 0.1}),
            _rec("11.0", 0, {"latency": 0.1}),
            _rec("11.5", 0, {"latency": 0.2}),
        ]
    )
    rows = res.steps.rows()
    assert len(rows) == 3
    assert rows[0]["metrics"] == {"lr": 0.1} and rows[0]["line_no"] == 1
    assert [(r["step"], r["epoch"]) for r in rows[1:]] == [(0, None), (0, None)]


def test_throughput_zero_before_warmup_is_not_a_measurement() -> None:
    lines = [
        _meta("train.total_ips", unit="img/s", type="THROUGHPUT"),
        _rec("100.0", [0, 1], {"train.total_ips": 0}),
        _rec("101.0", [0, 2], {"train.total_ips": 0}),
        _rec("102.0", [0, 3], {"train.total_ips": 300.0}),
        _rec("104.0", [0, 4], {"train.total_ips": 600.0}),
    ]
    res = _parse(lines)
    run = res.runs[0]
    # no summary: time-weighted rate of the measured intervals (1 s at 300, 2 s at 600) = 1500 / 3
    assert run.images_per_sec == pytest.approx(500.0)
    assert run.images_per_sec_mean == pytest.approx(450.0)
    assert [r["images_per_sec"] for r in res.steps.rows()] == [None, None, 300.0, 600.0]
    assert run.status == "ok" and run.wall_time_s == pytest.approx(4.0)


def test_summary_zero_is_no_result_never_zero() -> None:
    res = _parse(["DLL 2021-02-18 06:21:29.862595 - () train_throughput : 0"])
    run = res.runs[0]
    assert (run.status, run.images_per_sec, run.images_per_sec_mean) == ("no_result", None, None)


def test_summary_prefers_train_total_over_val_and_compute() -> None:
    res = _parse(
        [
            _meta("val.total_ips", unit="img/s"),
            _meta("train.compute_ips", unit="img/s"),
            _meta("train.total_ips", unit="img/s"),
            _rec("1.0", [], {"val.total_ips": 900.0, "train.compute_ips": 800.0, "train.total_ips": 700.0}),
        ]
    )
    assert res.runs[0].images_per_sec == 700.0
    assert res.runs[0].details["throughput_metric"] == "train.total_ips"


def test_token_rates_are_never_images() -> None:
    res = _parse([_meta("throughput", unit="tokens/s", type="THROUGHPUT"), _rec("1.0", [], {"throughput": 5.0})])
    run = res.runs[0]
    assert run.images_per_sec is None and (run.throughput, run.throughput_unit) == (5.0, "tokens/sec")


def test_wrapped_parameter_line_is_glued_back() -> None:
    res = _parse(
        [
            "DLL 2020-06-20 01:15:38.036441 - PARAMETER arch : resnet50  batch_size : 2",
            "56  precision : fp16  use_xla : Fals",
            "e  gpu_id : 0",
            "Model HParams:",
            "Num GPUs 4",
            "DLL 2020-06-20 01:15:40.036441 - () train_throughput : 10.5",
        ]
    )
    run = res.runs[0]
    assert (run.model, run.batch_size_per_device, run.precision) == ("resnet50", 256, "fp16")
    assert (run.num_gpus, run.global_batch_size, run.images_per_sec) == (4, 1024, 10.5)
    assert run.tags["use_xla"] == "False" and run.wall_time_s == pytest.approx(2.0)
    assert res.problems == []


def test_error_after_summary_keeps_ok_and_bad_json_is_a_problem() -> None:
    res = _parse(
        [
            _rec("1.0", "PARAMETER", {"batch_size": 8, "fp16": True}),
            'DLLL {"timestamp": "2.0", "type": "LOG", "step": [0, 1], "data": {',
            _rec("3.0", [], {"train.total_ips": 42.0}),
            "RuntimeError: error in a shutdown hook",
        ]
    )
    run = res.runs[0]
    assert (run.status, run.images_per_sec, run.precision) == ("ok", 42.0, "fp16")
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 2)]


def test_out_of_memory_without_summary_is_oom() -> None:
    res = _parse([_rec("1.0", [0, 1], {"total_ips": 5.0}), "RuntimeError: CUDA out of memory. Tried to allocate"])
    run = res.runs[0]
    assert (run.status, run.images_per_sec, run.last_line) == ("oom", None, 2)


# --- corpus (values read with grep/awk, see fixtures/README.md) ---------------------------------------


def _corpus(corpus: Path, name: str) -> ParseResult:
    parsed = parse_bytes((corpus / "dllogger" / name).read_bytes(), source=name)
    assert parsed.format == "dllogger"
    assert not [p for p in parsed.result.problems if p.kind == "bad_line"]
    return parsed.result


def test_corpus_rigl_pytorch_json(corpus: Path) -> None:
    res = _corpus(corpus, "nv-rigl-imagenet-resnet50-raport.json")
    (run,) = res.runs
    assert (run.status, run.mode, run.model, run.precision) == ("ok", "train", "resnet50", "amp")
    assert (run.batch_size_per_device, run.num_gpus, run.global_batch_size) == (128, 8, 1024)
    assert run.images_per_sec == pytest.approx(7766.128202053745)  # final [] train.total_ips
    assert run.images_per_sec_mean == pytest.approx(7765.515462, rel=1e-8)  # 2,999 [e, i] values after the first
    assert run.wall_time_s == pytest.approx(43180.762365, rel=1e-9)
    assert run.started_at == pytest.approx(1609395313.095243)
    assert len(res.steps) == 3250  # 3,000 [e, i] rows + 250 [e] epoch rows (two records each, merged)


def test_corpus_pkb_stdout_wrapped_parameters(corpus: Path) -> None:
    res = _corpus(corpus, "pkb-horovod-dle-tf-resnet50-stdout.txt")
    (run,) = res.runs
    assert (run.status, run.mode, run.model, run.precision, run.data) == ("ok", "train", "resnet50", "fp16", "real")
    assert (run.batch_size_per_device, run.num_gpus, run.global_batch_size) == (256, 8, 2048)
    assert run.warmup_steps == 50 and run.tags["data_format"] == "NCHW"  # both after a wrap point
    assert run.images_per_sec == pytest.approx(6638.003508038038)  # "() train_throughput"
    assert run.images_per_sec_mean == pytest.approx(6640.879113, rel=1e-8)  # 720 total_ips after (0, 50)
    assert run.wall_time_s == pytest.approx(438.322042, rel=1e-9) and run.started_at is None
    assert len(res.steps) == 721 and res.steps.rows()[0]["step"] == 50


def test_corpus_fastpitch_inference(corpus: Path) -> None:
    res = _corpus(corpus, "fastpitch-inference-nvlog.json")
    (run,) = res.runs
    assert (run.status, run.mode, run.model, run.precision) == ("ok", "inference", "FastPitch_PyT", "fp32")
    assert run.batch_size_per_device == 1 and run.images_per_sec is None
    assert run.details["avg:latency"] == "0.07084401270618573"
    assert run.wall_time_s == pytest.approx(12.32306, rel=1e-9)
    assert len(res.steps) == 84  # one row per utterance (84 generator_frames_per_sec records)


def test_corpus_nvidia_example_stdout_toy_values(corpus: Path) -> None:
    res = _corpus(corpus, "nvidia-dllogger-example-stdout.txt")
    (run,) = res.runs
    assert (run.status, run.mode, run.images_per_sec) == ("ok", "train", None)
    assert run.wall_time_s == pytest.approx(0.001486)
    rows = res.steps.rows()
    assert len(rows) == 46  # 49 lines, 3 PARAMETER
    assert rows[1]["loss"] == 130.0 and (rows[1]["epoch"], rows[1]["step"]) == (0, 0)


def test_bert_sequences_per_second_summary_is_the_throughput_in_sequences() -> None:
    """DeepLearningExamples BERT (PyTorch) ends with a summary record holding
    training_sequences_per_second and no images rate: that is the run's throughput, in sequences/sec."""
    res = _parse([
        _rec("1.0", "PARAMETER", {"train_batch_size": 64}),
        _rec("2.0", [0, 10], {"average_loss": 7.5, "step_loss": 7.4}),
        _rec("9.0", [], {"e2e_train_time": 7.0, "training_sequences_per_second": 812.5, "final_loss": 7.1}),
    ])
    run = res.runs[0]
    assert (run.status, run.throughput, run.throughput_unit, run.images_per_sec) == ("ok", 812.5, "sequences/sec", None)
    assert run.details["throughput_metric"] == "training_sequences_per_second"


def test_throughput_train_in_the_unit_its_metadata_gives() -> None:
    """DLE TensorFlow's end-of-training throughput_train: images/sec unless its METADATA says otherwise
    (BERT: sequences/s), and then never images_per_sec."""
    seq = _parse([_meta("throughput_train", unit="sequences/s", type="THROUGHPUT"),
                  _rec("1.0", [], {"throughput_train": 1234.5})]).runs[0]
    assert (seq.throughput, seq.throughput_unit, seq.images_per_sec) == (1234.5, "sequences/sec", None)
    img = _parse([_rec("1.0", [], {"throughput_train": 987.0})]).runs[0]  # no metadata: the name says a rate
    assert (img.throughput, img.throughput_unit, img.images_per_sec) == (987.0, "images/sec", 987.0)
