"""MLPerf Training v0.5 to v0.7 as their submitters really wrote them (layouts seen in mlcommons'
training_results_v0.5, _v0.6 and _v0.7, where MLCommons' summarizer cannot read them): text logs whose last
line is no event, ``:::MLL`` payloads in Python-literal or bare-word form, MiniGo's post-hoc evaluation,
v0.5's ``"success": "true"`` and its results tree, v0.7 stamps in seconds and result files without a
benchmark folder, and the older or misspelt system descriptions. Every input is hand-written here in those
layouts, with made-up values; the expected values are read off it."""

from __future__ import annotations

import json

import pytest

from bench.ingest import patterns
from bench.ingest.formats import mlperf
from bench.ingest.formats.mlperf_events import loose_json
from bench.ingest.parse import parse_bytes

TEXT_LOG = """\
MLPerf: resnet [06/13/19 00:30:56], run_start
MLPerf: resnet [06/13/19 00:30:57], preproc_num_train_examples: 1281167
MLPerf: resnet [06/13/19 00:31:00], run_start
MLPerf: resnet [06/13/19 00:31:00], train_epoch:0
MLPerf: resnet [06/13/19 00:32:19], eval_accuracy: {"value": 14.48800%, "epoch": 3}
MLPerf: resnet [06/13/19 00:55:21], eval_accuracy: {"value": 75.98000%, "epoch": 79}
MLPerf: resnet [06/13/19 00:55:21], run_stop
MLPerf: resnet [06/13/19 00:55:21], run_final
MLPerf: resnet [06/13/19 00:55:21], Total runtime: 24.409763 minutes
"""


def test_text_log_is_detected_though_its_last_line_is_no_event() -> None:
    parsed = parse_bytes(TEXT_LOG.encode(), source="Alibaba/results/sinian/resnet/result_1.txt")
    assert parsed.format == "mlperf"
    (run,) = parsed.result.runs
    # ranks print run_start seconds apart with other events between: the clock starts at the first, as the
    # log's own "Total runtime: 24.409763 minutes" (1464.6 s) does: 00:30:56 -> 00:55:21 = 24 min 25 s
    assert (run.status, run.time_to_train_s, run.started_at) == ("ok", 1465.0, None)  # a zone-less clock
    steps = parsed.result.steps.columns()
    evals = [(int(e), m["eval_accuracy"]) for e, m in zip(steps["epoch"], steps["metrics"], strict=True) if m]
    assert evals == [(3, 0.14488), (79, 0.7598)]  # percentages as fractions, with their epochs


def test_run_starts_printed_by_each_rank_start_the_clock_at_the_first() -> None:
    """Four ranks print run_start, one after the other (00:30:56 to 00:30:59), with nothing between them: one
    start, whose clock is the first (with other events between them too: above)."""
    ranks = "".join(f"MLPerf: resnet [06/13/19 00:30:5{6 + r}], run_start\n" for r in range(4))
    log = ranks + TEXT_LOG.split("\n", 3)[3]  # TEXT_LOG from its train_epoch line: no second run_start
    (run,) = parse_bytes(log.encode(), source="result_0.txt").result.runs
    assert (run.status, run.time_to_train_s) == ("ok", 1465.0)  # 00:30:56 -> 00:55:21 = 24 min 25 s
    prefixed = [f'[1,{r}]<stdout>::::MLLOG {{"key": "run_start", "value": null, "time_ms": {1000 + 500 * r}, "metadata": {{}}}}'
                for r in range(2)]
    stop = ':::MLLOG {"key": "run_stop", "value": null, "time_ms": 61000, "metadata": {"status": "success"}}'
    (run,) = mlperf.parse_lines([*prefixed, stop], source="test").runs
    assert run.time_to_train_s == 60.0  # from rank 0's 1000 ms, not rank 1's 1500


MLL_LOG = """\
:::MLL 1000.5 submission_benchmark: {"value": "minigo", "metadata": {"lineno": 0, "file": "manual"}}
:::MLL 1000.75 cache_clear: {value: true, metadata: {lineno: 0, file: manual}}
:::MLL 1001.0 run_start: {"value": null, "metadata": {'lineno': 615, 'file': 'ml_perf/ref.py'}}
:::MLL 1001.25 global_batch_size: {"value": 8192, "metadata": {'lineno': 233, 'file': 'train.py'}}
:::MLL 10[2019-06-18 10:02:47] iteration time 0: 56.971 seconds
:::MLL 1400.0 eval_accuracy: {"value": 0.51, "metadata": {'epoch_num': 14, 'lineno': 60}}
:::MLL 1400.5 eval_result: {"value": null, "metadata": {'lineno': 52, 'iteration': 14, 'timestamp': 300.25}}
:::MLL 1401.0 run_stop: {"value": null, "metadata": {'lineno': 53, 'status': 'success'}}
"""


def test_mll_payloads_in_python_literal_or_bare_word_form_are_read() -> None:
    assert loose_json("{value: true, metadata: {lineno: 0, file: manual}}") == {
        "value": True, "metadata": {"lineno": 0, "file": "manual"}}
    assert loose_json("""{'a': None, 'b': 'it\\'s', "c": 1e-05, 'd': [True, -Infinity]}""") == {
        "a": None, "b": "it's", "c": 1e-05, "d": [True, float("-inf")]}
    assert loose_json("{not: json at all") is None
    res = mlperf.parse_lines(MLL_LOG.splitlines(), source="test")
    (run,) = res.runs
    assert (run.status, run.global_batch_size, run.tags["benchmark"]) == ("ok", 8192, "minigo")
    assert run.wall_time_s == 400.0  # run_start 1001.0 -> run_stop 1401.0, read from the Python-literal lines
    # the cut, interleaved line is still unreadable, and the only problem; an :::MLL line, which no checker
    # of the summarizer reads: the run is not marked for it (an MLLOG line would be: v4.1's Lambda sets)
    assert [(p.kind, p.line_no) for p in res.problems] == [("bad_line", 5)]
    assert "unreadable_compliance_lines" not in run.details
    mllog = [":::MLLOG " + '{"key": "run_start", "value": null, "time_ms": 1000, "metadata": {}}',
             ':::MLLOG {"key": "opt_name", "value": "adamw"Acmeorkspace/x.py", "lineno": 257}}',
             ":::MLLOG " + '{"key": "run_stop", "value": null, "time_ms": 61000, "metadata": {"status": "success"}}']
    (run,) = mlperf.parse_lines(mllog, source="test").runs
    assert (run.status, run.time_to_train_s, run.details["unreadable_compliance_lines"]) == ("ok", 60.0, "1")


def test_minigo_v06_time_to_train_is_its_eval_result_timestamp() -> None:
    """MiniGo v0.6 evaluates its models after training: run_stop comes after that, and the time to train
    is the training time of the first model that beat the target (eval_result's timestamp)."""
    (run,) = mlperf.parse_lines(MLL_LOG.splitlines(), source="test").runs
    assert (run.time_to_train_s, run.details["time_to_train_source"]) == (300.25, "eval_result timestamp")
    no_stop = [line for line in MLL_LOG.splitlines() if "run_stop" not in line]  # as NVIDIA's v0.6 logs end
    (run,) = mlperf.parse_lines(no_stop, source="test").runs
    assert (run.status, run.time_to_train_s, run.wall_time_s) == ("ok", 300.25, None)


def _system(text: str) -> tuple[object, list[tuple[str, str]]]:
    parsed = parse_bytes(text.encode(), source="training_results_v0.6/Acme/systems/box.json")
    (system,) = parsed.result.systems
    return system, [(p.kind, p.message) for p in parsed.result.problems]


def test_system_with_a_nodes_list_and_keys_with_spaces() -> None:
    doc = {"division": "open", "hardware": "Acme rack", "framework": "MXNet 1.3.1",
           "nodes": [{"num_nodes": 64, "cpu": "2x Acme Xeon 6148", "accelerator": "Tesla V100-SXM2-16GB",
                      "num_accelerators": 4}]}
    s, problems = _system(json.dumps(doc, indent=2))
    assert (s.num_nodes, s.accelerators_per_node, s.device_model) == (64, 4, "Tesla V100-SXM2-16GB")
    assert (s.host_processors_per_node, s.host_processor_model, s.framework) == (2, "Acme Xeon 6148", "MXNet 1.3.1")
    assert problems == [("missing_field", "the system description has no system_name")]  # v0.6 had none
    cpu = {"system_name": "CLX-2S", "number of nodes": "32", "host_processors_per_node": "2",
           "host_processor_model_name": "Acme Xeon 8260L",
           "nodes": [{"num_nodes": 32, "cpu": "Acme Xeon 8260L", "accelerator": "NA", "num_accelerators": 0}]}
    s, _ = _system(json.dumps(cpu))
    assert (s.num_nodes, s.accelerators_per_node, s.device_model, s.host_processors_per_node) == (32, 0, None, 2)
    mixed = doc | {"nodes": [*doc["nodes"], {"num_nodes": 2, "accelerator": "none", "num_accelerators": 0}]}
    s, _ = _system(json.dumps(mixed))  # nodes of two kinds: no count per node describes the system
    assert (s.num_nodes, s.accelerators_per_node, s.device_model) == (None, None, None)


def test_system_as_lines_of_key_and_json_with_a_python_repr_entry() -> None:
    nodes = repr({"num_nodes": "130", "num_accelerators": "8", "accelerator": "Tesla V100-SXM2-16GB",
                  "cpu": "2x Acme E5-2698 v4"})
    entry = repr({"hardware": "DGX-1", "framework": "MXNet Release 19.05", "nodes": nodes})
    lines = [f"{key}: {json.dumps({'value': value, 'metadata': {'file': 'log_utils.py', 'lineno': 1}})}"
             for key, value in (("org", "Acme"), ("division", "closed"), ("platform", "130xDGX-1"),
                                ("entry", entry))]
    s, problems = _system("\n".join(lines) + "\n")
    assert problems == []
    assert (s.submitter_name, s.system_name, s.division, s.framework) == ("Acme", "130xDGX-1", "closed",
                                                                         "MXNet Release 19.05")
    assert (s.num_nodes, s.accelerators_per_node, s.device_model, s.host_processors_per_node) == (
        130, 8, "Tesla V100-SXM2-16GB", 2)


@pytest.mark.parametrize(("success", "status"), [("true", "ok"), ('"true"', "ok"), ('"True"', "ok"),
                                                 ("false", "failed"), ('"false"', "failed")])
def test_v05_run_stop_success_may_be_a_string(success: str, status: str) -> None:
    lines = [":::MLPv0.5.0 ncf 1541000000.0 (ncf.py:1) run_start",
             f':::MLPv0.5.0 ncf 1541000060.0 (ncf.py:2) run_stop: {{"success": {success}}}']
    (run,) = mlperf.parse_lines(lines, source="test").runs
    assert (run.status, run.time_to_train_s) == (status, 60.0 if status == "ok" else None)


def test_v05_tree_names_a_result_set_by_its_entry_folders_and_system() -> None:
    tpu = "training_results_v0.5/v0.5.0/acme/cloud_v2.8/resnet-v2-8/results/tpu"
    assert patterns.match_first(list(patterns.RESULTS_TREE), f"{tpu}/resnet/result_3.txt") == {
        "submitter": "acme", "system": "cloud_v2.8/resnet-v2-8/tpu", "benchmark": "resnet", "repeat": "3",
        "round": "0.5"}
    # the entry.json beside the results describes that result set's system, under the same name
    assert patterns.match_first(list(patterns.SYSTEMS_TREE), f"{tpu}/entry.json") == {
        "submitter": "acme", "system": "cloud_v2.8/resnet-v2-8/tpu", "round": "0.5"}
    assert patterns.match_first(list(patterns.RESULTS_TREE), "v0.5.0/acme/sub/results/box/ssd/result_0.txt")[
        "system"] == "sub/box"


def test_a_pod_slice_named_for_its_size_is_no_count_per_node() -> None:
    doc = {"division": "closed", "nodes": [{"num_nodes": 64, "cpu": "Acme Skylake", "accelerator": "tpuv2-512",
                                            "num_accelerators": 512}]}
    s, problems = _system(json.dumps(doc))
    assert (s.num_nodes, s.accelerators_per_node, s.device_model) == (64, None, "tpuv2-512")  # not 32,768
    assert ("bad_line", "num_accelerators 512 is the size of the slice its accelerator's name gives (tpuv2-512), "
            "not a count per node of its 64 nodes; stored as NULL") in problems
    one_host = doc | {"nodes": [{"num_nodes": 1, "accelerator": "tpuv2-8", "num_accelerators": 8}]}
    s, _ = _system(json.dumps(one_host))
    assert (s.num_nodes, s.accelerators_per_node) == (1, 8)


def test_v07_stamps_in_seconds_and_result_files_without_a_benchmark_folder() -> None:
    lines = [':::MLLOG {"key": "submission_benchmark", "value": "resnet", "time_s": 1593354400.5, "metadata": {}}',
             ':::MLLOG {"key": "run_start", "value": null, "time_s": 1593354424.831, "metadata": {}}',
             ':::MLLOG {"key": "run_stop", "value": null, "time_s": 1593354661.616, "metadata": {"status": "success"}}']
    (run,) = mlperf.parse_lines(lines, source="test").runs
    assert run.status == "ok" and run.time_to_train_s == pytest.approx(236.785)  # 661.616 - 424.831
    assert run.started_at == pytest.approx(1593354424.831)
    place = patterns.match_first(list(patterns.RESULTS_TREE), "training_results_v0.7/Acme/results/v100-256/result_2.txt")
    assert place == {"round": "0.7", "submitter": "Acme", "system": "v100-256", "repeat": "2"}  # the log names the benchmark


def test_misspelt_keys_of_system_descriptions_are_read() -> None:
    doc = {"sumitter": "Acme", "divison": "open", "system_name": "box", "number_of_nodes": "2",
           "accelerators_per_node": "4", "accelerator_model_name": "Acme NPU"}
    s, problems = _system(json.dumps(doc))
    assert (s.submitter_name, s.division, s.num_nodes, s.accelerators_per_node) == ("Acme", "open", 2, 4)
    assert problems == []


POWER_LOG = """\
:::MLLOG {"namespace":"","time_ms":1715294004458,"event_type":"INTERVAL_START","key":"power_measurement_start","value":"null","metadata":""}
:::MLLOG {"namespace": "", "time_ms": 1715294008500, "event_type": "POINT_IN_TIME", "key": "power_reading", "value": 2246, "metadata": ""}
:::MLLOG {"namespace": "", "time_ms": 1715294010500, "event_type": "POINT_IN_TIME", "key": "power_reading", "value": -43, "metadata": ""}
:::MLLOG {"namespace": "", "time_ms": 1715294012500, "event_type": "POINT_IN_TIME", "key": "power_reading", "value": 2245.5, "metadata": ""}
"""


def test_a_power_log_is_telemetry_not_a_run() -> None:
    """v4.0's power/result_*/node_<n>.txt: MLLOG lines of power readings, which were read as one truncated
    training run each; they are power samples, a negative one NULL with a problem."""
    parsed = parse_bytes(POWER_LOG.encode(), source="Acme/results/box/ssd/power/result_1_2/node_0.txt")
    assert (parsed.format, parsed.result.runs) == ("mlperf_power", [])
    t = parsed.result.telemetry.columns()
    watts = [None if w != w else w for w in t["power_w"]]  # NULL is a NaN sentinel in the buffer
    assert watts == [2246.0, None, 2245.5]
    assert list(t["elapsed_s"]) == [0.0, 2.0, 4.0]
    assert [(p.kind, p.line_no) for p in parsed.result.problems] == [("invalid_value", 3)]
    result_log = POWER_LOG.replace("power_measurement_start", "run_start")  # a training run's log stays one
    assert parse_bytes(result_log.encode(), source="x.txt").format == "mlperf"
