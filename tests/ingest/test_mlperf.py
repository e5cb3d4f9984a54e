"""MLPerf compliance logs: tricky lines, and every corpus file of the format.

Corpus values were read from the logs with grep/awk (see fixtures/README.md, mlperf section for the
commands), not copied from the parser's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ingest.formats import mlperf
from bench.ingest.parse import parse_bytes
from bench.ingest.records import ParseResult


def _parse(text: str) -> ParseResult:
    return mlperf.parse_lines(text.splitlines(), source="test")


def _mllog(ms: int, key: str, value: str = "null", meta: str = "{}") -> str:
    return f':::MLLOG {{"namespace": "", "time_ms": {ms}, "key": "{key}", "value": {value}, "metadata": {meta}}}'


def test_sniff_accepts_each_generation_and_rejects_lookalikes() -> None:
    assert mlperf.sniff(' 0: :::MLLOG {"namespace": ""}')
    assert mlperf.sniff(":::MLL 1558420845.819 run_start: {}")
    assert mlperf.sniff(":::MLPv0.5.0 resnet 1543785258.9 (x.py:1) run_start")
    assert not mlperf.sniff(":::DLBS_LOG something")
    assert not mlperf.sniff("echo ':::MLLOG' is the token")  # no JSON object behind it
    assert not mlperf.sniff("Epoch[0] Batch [0-20]\tSpeed: 100.0 samples/sec")


def test_prefixes_are_stripped_and_ranks_kept() -> None:
    res = _parse(
        "\n".join(
            [
                " 3: " + _mllog(1000, "run_start"),
                "[1,2]<stdout>:" + _mllog(2000, "eval_accuracy", "0.5", '{"epoch_num": 1}'),
                "2023-01-01 00:00:03,000 INFO " + _mllog(3000, "run_stop", meta='{"status": "success"}'),
            ]
        )
    )
    (run,) = res.runs
    assert run.time_to_train_s == pytest.approx(2.0)
    assert run.status == "ok"
    (row,) = res.steps.rows()
    assert (row["rank"], row["epoch"], row["metrics"]) == (2, 1, {"eval_accuracy": 0.5})


def test_v05_space_before_colon_placeholder_stamp_and_string_epoch() -> None:
    res = _parse(
        "\n".join(
            [
                ":::MLPv0.5.0 resnet 0000000000 (empty:0) run_set_random_seed: 0",
                ":::MLPv0.5.0 resnet 100.5 (a.py:1) run_start",
                ':::MLPv0.5.0 resnet 101 (a.py:2) opt_learning_rate : { "deferred": true, "value": 0.1 }',
                ':::MLPv0.5.0 resnet 102 (a.py:3) train_epoch: "7, but this epoch only has 3% of the examples"',
                ':::MLPv0.5.0 resnet 110 (a.py:4) run_stop: {"success": false}',
            ]
        )
    )
    (run,) = res.runs
    assert run.started_at == 100.5  # the 0000000000 placeholder is not a time
    assert run.status == "failed" and run.status_detail == 'run_stop {"value": {"success": false}}'  # its words
    assert run.wall_time_s == pytest.approx(9.5) and run.time_to_train_s is None
    assert res.steps.rows()[0]["epoch"] == 7
    assert res.problems == []


def test_mll_zero_stamp_is_no_time_and_bad_json_is_a_problem() -> None:
    res = _parse(
        "\n".join(
            [
                ':::MLL 0.0 submission_org: {"value": "x", "metadata": {}}',
                ':::MLL 10.0 run_start: {"value": null, "metadata": {}}',
                ":::MLL 11.0 global_batch_size: {not json",
            ]
        )
    )
    (run,) = res.runs
    assert run.started_at == 10.0 and run.tags["submission_org"] == "x"
    assert run.status == "truncated" and run.global_batch_size is None
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 3), ("truncated", 2)]


def test_second_run_start_after_run_stop_opens_a_new_run_with_the_config() -> None:
    lines = [
        _mllog(0, "global_batch_size", "256"),
        _mllog(1000, "run_start"),
        _mllog(5000, "run_stop", meta='{"status": "success"}'),
        _mllog(6000, "run_start"),
        _mllog(9000, "run_stop", meta='{"status": "aborted"}'),
    ]
    runs = _parse("\n".join(lines)).runs
    assert [(r.run_index, r.status, r.global_batch_size) for r in runs] == [(0, "ok", 256), (1, "failed", 256)]
    assert [r.time_to_train_s for r in runs] == [pytest.approx(4.0), None]
    assert [(r.first_line, r.last_line) for r in runs] == [(1, 3), (4, 5)]


def test_bert_blocks_are_not_epochs_of_train_samples() -> None:
    # MLPerf BERT counts "epochs" in steps or samples: epoch_count x train_samples is no sample count
    lines = [
        _mllog(0, "submission_benchmark", '"bert"'),
        _mllog(1, "train_samples", "3507200"),
        _mllog(1000, "run_start"),
        _mllog(1000, "block_start", meta='{"first_epoch_num": 1953, "epoch_count": 1953}'),
        _mllog(2000, "block_stop", meta='{"first_epoch_num": 1953}'),
        _mllog(2000, "block_start", meta='{"first_epoch_num": 3906, "epoch_count": 1953}'),
        _mllog(3000, "block_stop", meta='{"first_epoch_num": 3906}'),
        _mllog(3000, "run_stop", meta='{"status": "success"}'),
    ]
    res = _parse("\n".join(lines))
    assert res.runs[0].images_per_sec is None
    assert [r["interval_images_per_sec"] for r in res.steps.rows()] == [None, None]


def test_gpt3_epochs_are_tokens_and_stable_diffusion_blocks_are_steps() -> None:
    # MLPerf Training v3.1: Google's TPU v5e GPT-3 logs blocks of 50,331,648 tokens (2,048 sequences of
    # 2,048 tokens x 12 steps) and train_samples 1,207,959,552; Habana's Stable Diffusion logs epoch_count 1
    # per block of 100 steps and train_samples 1. Neither is epochs x train_samples.
    def blocks(benchmark: str, count: int, train_samples: int) -> ParseResult:
        return _parse("\n".join([
            _mllog(0, "submission_benchmark", f'"{benchmark}"'),
            _mllog(1, "train_samples", str(train_samples)),
            _mllog(1000, "run_start"),
            _mllog(1000, "block_start", meta=f'{{"first_epoch_num": 0, "epoch_count": {count}}}'),
            _mllog(61000, "block_stop", meta='{"first_epoch_num": 0}'),
            _mllog(61000, "block_start", meta=f'{{"first_epoch_num": {count}, "epoch_count": {count}}}'),
            _mllog(181000, "block_stop", meta=f'{{"first_epoch_num": {count}}}'),
            _mllog(181000, "run_stop", meta='{"status": "success"}'),
        ]))

    (gpt3,) = blocks("gpt3", 50331648, 1207959552).runs
    assert (gpt3.throughput, gpt3.throughput_unit, gpt3.throughput_derived) == (50331648 / 120, "tokens/sec", True)
    assert gpt3.images_per_sec is None
    sd = blocks("stable_diffusion", 1, 1)
    assert (sd.runs[0].throughput, sd.runs[0].status) == (None, "ok")
    assert [r["interval_images_per_sec"] for r in sd.steps.rows()] == [None, None]


def test_single_epoch_interval_is_used_and_zero_samples_never_divide() -> None:
    lines = [
        _mllog(0, "train_samples", "1000"),
        _mllog(1000, "run_start"),
        _mllog(1000, "epoch_start", meta='{"epoch_num": 1}'),
        _mllog(3000, "epoch_stop", meta='{"epoch_num": 1}'),
        _mllog(3000, "run_stop", meta='{"status": "success"}'),
    ]
    run = _parse("\n".join(lines)).runs[0]
    # 1000 samples in 2 s: 500 samples/s, computed from an epoch (no rate printed): derived
    assert (run.throughput, run.throughput_unit, run.throughput_derived) == (pytest.approx(500.0), "samples/sec", True)
    assert run.images_per_sec is None and run.details["throughput_source"] == "epochs"  # no benchmark: not images
    run = _parse("\n".join([_mllog(0, "submission_benchmark", '"resnet"'), *lines])).runs[0]
    assert (run.images_per_sec, run.throughput, run.throughput_unit) == (pytest.approx(500.0), pytest.approx(500.0),
                                                                         "images/sec")


def test_gnmt_tok_s_is_never_images() -> None:
    lines = [
        ':::MLL 1.0 run_start: {"value": null, "metadata": {}}',
        "0: TRAIN [2][40/1938]\tTime 0.118 (0.148)\tData 2.17e-04 (8.73e-03)\tTok/s 88584 (89645)\t"
        "Loss/tok 8.5587 (9.3642)\tLR 6.325e-05",
        ':::MLL 9.0 run_stop: {"value": null, "metadata": {"status": "success"}}',
    ]
    res = _parse("\n".join(lines))
    run = res.runs[0]
    assert (run.images_per_sec, run.throughput) == (None, None)  # no per-epoch Performance line: no throughput
    # with two epochs' printed summaries, the throughput is their mean in tokens/sec: (88000 + 90000) / 2
    perf = ["0: Performance: Epoch: 0\tTraining: 88000 Tok/s\tValidation: 1 Tok/s",
            "0: Performance: Epoch: 1\tTraining: 90000 Tok/s\tValidation: 1 Tok/s"]
    two = _parse("\n".join([*lines[:2], *perf, lines[2]])).runs[0]
    assert (two.images_per_sec, two.throughput, two.throughput_unit, two.throughput_derived) == (
        None, 89000.0, "tokens/sec", False)
    (row,) = res.steps.rows()
    assert (row["epoch"], row["step"], row["rank"], row["images_per_sec"]) == (2, 40, 0, None)
    assert row["metrics"] == {"tokens_per_sec": 88584.0, "tokens_per_sec_avg": 89645.0}
    assert row["loss"] == pytest.approx(8.5587) and row["step_time_ms"] == pytest.approx(118.0)


def test_traceback_without_run_stop_is_failed_with_the_error_line() -> None:
    lines = [_mllog(1000, "run_start"), "Traceback (most recent call last):", "ValueError: bad shape"]
    res = _parse("\n".join(lines))
    run = res.runs[0]
    assert (run.status, run.status_detail, run.last_line) == ("failed", "ValueError: bad shape", 3)
    assert res.problems == []  # a crash, not a cut file


# --- corpus: every MLPerf result file (values read with grep, see fixtures/README.md) -----------------

CORPUS_RUNS = {
    # file: (model, global batch, time to train s, images/s, images/s mean)
    # v0.5: input_batch_size is the logging process's batch (tf_cnn: 8 GPUs x 256; Caffe: one solver's
    # 32), a detail, never the global batch
    "mlperf/v0.5-google-8xv100-resnet-result_0.txt": ("resnet", None, 8279.087045193, None, None),
    "mlperf/v0.5-intel-skx8180-caffe-resnet-result_0.txt": ("resnet", None, 628081.0, None, None),
    "mlperf/v0.6-google-tpuv3-32-resnet-result_0.txt": ("resnet", 4096, 2533.457, 31226.0113, 31226.0118),
    "mlperf/v0.6-nvidia-dgx1-pytorch-gnmt-result_0.txt": ("gnmt", 2048, 1225.22, None, None),
    "mlperf/v0.7-google-tpuv3-8192-jax-resnet-result_0.txt": ("resnet", 65536, 28.702, 4507364.0107, 4507484.2760),
    "mlperf/v0.7-google-tpuv4-16-tf-bert-result_0.txt": ("bert", 256, 2733.886, None, None),
    "mlperf/v0.7-nvidia-dgx1-tf-minigo-result_0.txt": ("minigo", None, 40308.198, None, None),
    "mxnet/mlperf-v0.7-dellemc-2xc4140-mxnet-resnet-result_0.txt": ("resnet", 1664, 4594.791, 11240.8292, 11240.8881),
    "mxnet/mlperf-v0.7-intel-cpx-mxnet-resnet-result_0.txt": ("resnet", 4096, 65402.792489746, 787.4847, 787.4954),
}


@pytest.mark.parametrize("name", sorted(CORPUS_RUNS))
def test_corpus_file(corpus: Path, name: str) -> None:
    parsed = parse_bytes((corpus / name).read_bytes(), source=name)
    assert parsed.format == "mlperf"
    model, batch, ttt, ips, ips_mean = CORPUS_RUNS[name]
    (run,) = parsed.result.runs
    assert (run.status, run.model, run.global_batch_size, run.mode) == ("ok", model, batch, "train")
    assert run.time_to_train_s == pytest.approx(ttt, rel=1e-9)
    assert run.wall_time_s == pytest.approx(ttt, rel=1e-9)
    for got, want in ((run.images_per_sec, ips), (run.images_per_sec_mean, ips_mean)):
        assert got is None if want is None else got == pytest.approx(want, rel=1e-6)
    assert not [p for p in parsed.result.problems if p.kind == "bad_line"]
    if "v0.5" in name:
        assert run.details["input_batch_size"] == {"google": "2048", "intel": "32"}[name.split("-")[1]]


def test_corpus_details(corpus: Path) -> None:
    """Facts read with grep: eval rows, tags, GNMT Tok/s rows, Speedometer framework, node count."""
    def parse(name: str) -> ParseResult:
        return parse_bytes((corpus / name).read_bytes(), source=name).result

    google = parse("mlperf/v0.5-google-8xv100-resnet-result_0.txt")
    evals = [r for r in google.steps.rows() if r["metrics"] and "eval_accuracy" in r["metrics"]]
    assert len(evals) == 16 and evals[-1]["epoch"] == 61
    assert evals[-1]["metrics"]["eval_accuracy"] == pytest.approx(0.74994140625)
    assert google.runs[0].tags["mlperf_version"] == "0.5.0"
    gnmt = parse("mlperf/v0.6-nvidia-dgx1-pytorch-gnmt-result_0.txt")
    run = gnmt.runs[0]
    assert (run.framework, run.num_nodes, run.throughput_unit) == ("pytorch", 1, "tokens/sec")
    assert sum(1 for r in gnmt.steps.rows() if r["metrics"] and "tokens_per_sec" in r["metrics"]) == 776
    dell = parse("mxnet/mlperf-v0.7-dellemc-2xc4140-mxnet-resnet-result_0.txt").runs[0]
    assert (dell.framework, dell.num_nodes, dell.tags["submission_org"]) == ("mxnet", 2, "NVIDIA")
    tpu = parse("mlperf/v0.6-google-tpuv3-32-resnet-result_0.txt")
    assert tpu.runs[0].tags["submission_platform"] == "tpu-v3-32" and tpu.runs[0].num_nodes is None
    assert [p.kind for p in tpu.problems] == ["truncated"]  # no final newline in that file


def test_bert_final_summary_rate_is_its_throughput(tmp_path: Path) -> None:
    """NVIDIA's v1.0 BERT ends with ``0: {'e2e_time': ..., 'training_sequences_per_second': X, ...}``: that
    printed rate is the run's throughput (it was dropped, so throughput was NULL). Hand value: the line."""
    import tarfile

    from conftest import CORPUS

    tarball = CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz"
    if not tarball.is_file():
        pytest.skip(f"MLPerf v1.0 results not present at {tarball} (read from ../shared)")
    member = "training_results_v1.0/NVIDIA/results/dgxa100_ngc21.05_pytorch/bert/result_0.txt"
    with tarfile.open(tarball) as tar:
        data = tar.extractfile(member).read()  # type: ignore[union-attr]
    line = next(ln for ln in data.decode().splitlines() if "training_sequences_per_second" in ln)
    expected = float(line.split("'training_sequences_per_second': ")[1].split(",")[0])
    assert expected == pytest.approx(2193.410654407418)
    (run,) = mlperf.parse_lines(data.decode().splitlines(), source=member).runs
    assert (run.status, run.throughput, run.throughput_unit) == ("ok", pytest.approx(expected), "sequences/sec")
    assert run.images_per_sec is None and run.throughput_derived is False
    assert run.details["throughput_source"] == "final_summary"
