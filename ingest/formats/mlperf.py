"""MLPerf training result logs (log-formats.md §10).

Every generation of the compliance log (``bench.ingest.formats.mlperf_events`` reads one line: v0.5
``:::MLPv0.5.0``, v0.6 ``:::MLL`` and one submitter's ``MLPerf: resnet [06/13/19 00:30:56], run_start``
text, v0.7+ ``:::MLLOG``), each found behind any prefix (Slurm ``" 0: "``, mpirun ``[1,0]<stdout>:``,
asctime), which is stripped: everything before the ``:::ML`` token is ignored, as the checker does
(``MLL:mlp_parser/ruleset_510.py:L63-L69``). ``run_stop`` status success is ``ok`` (so is v0.5's
``"success": true``, or ``"true"`` as a string); any other (aborted, failure, v0.5's ``success: false``) is
``failed`` with the run_stop event, in the log's own words, as ``status_detail``. The text lines' clock has
no zone: their runs keep durations but no absolute times.

Framework lines mixed in are read too: MXNet Speedometer (via ``bench.ingest.formats.mxnet``),
PyTorch GNMT ``TRAIN [e][i/n] ... Tok/s`` and ``Performance: ... Tok/s`` (tokens, never images).

Run grain: one run per ``run_start`` (a second ``run_start`` after a ``run_stop`` opens run 1, which
inherits the configuration keys read so far). Units: ``time_to_train_s`` and ``wall_time_s`` are
``run_stop − run_start`` in seconds from the first ``run_start`` of the run: every rank prints one, and a
v0.6 log's ranks print theirs seconds apart with other events between (00:30:56 to 00:31:00; its own
``Total runtime: 24.409763 minutes`` is timed from the first). v0.6 MiniGo evaluates its models after training: its ``eval_result`` event's ``timestamp`` is
the training time of the first model that beat the target (``Model ... beat target after <s>s``), and that
is its time to train (detail ``time_to_train_source``), its run ok even where no ``run_stop`` was logged.
Throughput (samples/s), by priority:
``tracked_stats`` ``value.throughput``; the ``'training_sequences_per_second': X`` NVIDIA's BERT prints
in its final summary dict (as printed); MXNet Speedometer intervals; epoch (else block) intervals
× samples per epoch (``train_samples`` / ``num_train_examples`` / ``preproc_num_train_examples``).
In every case the first (start-up) interval is dropped when there are two or more; a run that is not
``ok`` (aborted, crashed, truncated) keeps its step rows but gets None, never 0, as throughput;
the rate = total samples / total time of the rest, its mean (``images_per_sec_mean``, for images) the
arithmetic mean of their per-interval rates. Steps: one row per epoch/block stop, eval, ``tracked_stats``,
Speedometer line and GNMT ``TRAIN`` line.

``throughput`` holds that rate in the benchmark's unit (``_IMAGE_BENCHMARKS`` images/sec, BERT
sequences/sec, GPT-3 tokens/sec (its "epochs" are tokens), others samples/sec; GNMT the mean of its printed
per-epoch ``Training: X Tok/s``, in tokens/sec); ``images_per_sec`` repeats it only for images. ``throughput_derived`` is True for the epoch and
block rates (samples per epoch x epochs / time: no rate was printed).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from bench.ingest.formats import mxnet
from bench.ingest.formats.mlperf_events import SNIFF, TEXT, Event, log_format, read_event, read_text_event
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, split_rank

NAME = "mlperf"
DESCRIPTION = ("MLPerf training logs: :::MLLOG JSON, :::MLL and 'MLPerf: <bench> [date]' (v0.6) and :::MLPv0.5.0 "
               "compliance lines")

_NODE = re.compile(r"\bNode\[(\d+)\]")
_GNMT_TRAIN = re.compile(
    r"TRAIN \[(\d+)\]\[(\d+)/\d+\]\s+Time ([\d.e+-]+) \([\d.e+-]+\).*?"
    r"Tok/s ([\d.]+) \(([\d.]+)\)(?:\s+Loss/tok ([\d.e+-]+))?"
)
_GNMT_PERF = re.compile(r"Performance: Epoch: (\d+)\s+Training: ([\d.]+) Tok/s")
#: NVIDIA's BERT prints its own summary last: ``{'e2e_time': ..., 'training_sequences_per_second': X, ...}``
_FINAL_RATE = re.compile(r"'training_sequences_per_second': (\d+(?:\.\d+)?)[,}]")
_ERROR = re.compile(r"(?:[\w.]+\.)?\w*(?:Error|Exception)(?::|$)")
_LEADING_INT = re.compile(r"\s*(-?\d+)")
#: MLPerf BERT redefines "epoch" (Google v0.7 logs steps in first_epoch_num, NVIDIA logs samples), and
#: Stable Diffusion's blocks count steps (v3.1: Habana logs ``epoch_count`` 1 per 100 steps with
#: ``train_samples`` 1): epoch_count × train_samples is not a sample count there, and no rate is derived.
_EPOCH_NOT_A_PASS = frozenset({"bert", "stable_diffusion"})
#: MLPerf GPT-3 counts its "epochs" in tokens: every v3.1 submitter's block ``epoch_count`` is global batch x
#: 2,048 tokens x steps (50,331,648 = 2,048 x 2,048 x 12), so a block's rate is epoch_count / time, in tokens.
_TOKEN_EPOCHS = frozenset({"gpt3"})
_SAMPLES_KEYS = ("train_samples", "num_train_examples", "preproc_num_train_examples")
_TAG_KEYS = ("submission_org", "submission_platform", "submission_division", "opt_name")
_DETAIL_KEYS = ("submission_status",)  # availability category of the submission, not a setting
_FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "jax", "paddlepaddle", "mindspore", "caffe")
#: What one MLPerf sample is, by benchmark: the unit of the run's ``throughput``. Image benchmarks count
#: images; BERT counts sequences; every other benchmark counts samples in its own sense (DLRM click
#: records, RNN-T utterances, UNet3D volumes, ...), the word MLPerf's own loggers use.
_IMAGE_BENCHMARKS = frozenset({"resnet", "ssd", "maskrcnn", "retinanet", "image_classification",
                               "object_detection", "single_stage_detector", "mask_rcnn"})
_SAMPLE_UNITS = {"bert": "sequences/sec", "gpt3": "tokens/sec"}  # GPT-3's tracked_stats: global batch x 2,048 / step time
#: Throughput sources that are printed rates; the others (epochs, blocks) are samples per epoch x
#: epochs / time, computed here: ``throughput_derived``.
_PRINTED_SOURCES = frozenset({"tracked_stats", "final_summary", "speedometer", "gnmt_performance"})
#: Metadata that says where a line was logged, not what happened.
_NOT_SAID = frozenset({"file", "lineno", "model", "version", "local_clock"})

#: Every substring a line needs for ``parse_lines`` to do anything with it: a compliance line (``:::ML``),
#: the v0.6 text lines, and the framework lines ``_on_other`` reads (Speedometer, GNMT ``Tok/s``, errors,
#: out of memory). A line with none of them, like an empty line, is skipped: the registry's C scan gives
#: such lines as "" (``registry.marked_lines``), so only the ~1 line in 5 of a real log that matters is
#: read in Python. Keep this in step with ``_on_other`` (tests/ingest/test_mlperf_markers.py).
MARKERS = (b":::ML", b"MLPerf: ", b"Speed", b"Tok/s", b"training_sequences_per_second", b"Traceback (most recent call last)",
           b"Error", b"Exception", b"out of memory", b"ResourceExhausted", b"OutOfMemory")


def sniff(head: str) -> bool:
    """True when the head holds an MLPerf compliance line of any generation (or the v0.6 text lines)."""
    if contains(head, "MLPerf: ") and TEXT.search(head) is not None:
        return True
    return contains(head, ":::ML") and SNIFF.search(head) is not None


@dataclass
class _State:
    """Everything one run accumulates while the lines stream by."""

    config: dict[str, Any] = field(default_factory=dict)  # key -> value of config keys
    tags: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    first_line: int | None = None
    last_line: int | None = None
    run_start: float | None = None  # unix ms
    run_stop: float | None = None
    stop_status: str | None = None
    open_epochs: dict[Any, float] = field(default_factory=dict)
    open_blocks: dict[Any, tuple[float, Any]] = field(default_factory=dict)
    epochs: list[float] = field(default_factory=list)  # durations (s)
    blocks: list[tuple[float, Any]] = field(default_factory=list)  # (duration s, epoch_count)
    tracked: list[tuple[float, float | None]] = field(default_factory=list)  # (rate, seconds since previous)
    last_tracked_ms: float | None = None
    speedo: dict[tuple[int, int], tuple[float, dict[int | None, float]]] = field(default_factory=dict)
    # ^ (epoch, end batch) -> (batches in the interval, {node: speed}); one speed per node and interval
    nodes: set[int] = field(default_factory=set)
    tokens: bool = False
    target_s: float | None = None  # MiniGo v0.6: eval_result's timestamp, when a model first beat the target
    unreadable: int = 0  # MLLOG lines that cannot be read (the summarizer's checker then drops the run)
    epoch_tokens_per_sec: list[float] = field(default_factory=list)  # GNMT "Performance: ... Training: X Tok/s"
    final_rate: float | None = None  # BERT's printed summary 'training_sequences_per_second'
    error: str | None = None
    error_line: int = 0
    oom: bool = False
    local_clock: bool = False  # stamps of a clock with no zone: durations only
    stop_words: str | None = None  # the run_stop event as the log wrote it (value and metadata)


def _int(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        m = _LEADING_INT.match(v)  # v0.5 "61, but this epoch only has ..."
        return int(m.group(1)) if m else None
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _on_event(ev: Event, st: _State, res: ParseResult, run_index: int, line_no: int, rank: int | None) -> None:
    """Fold one event into the run state; interval ends and evaluations become step rows."""
    key, ms, meta = ev.key, ev.ms, ev.meta
    ts = ms / 1000 if ms is not None and not meta.get("local_clock") else None  # no zone: no absolute time
    if key == "run_start":
        st.run_start = ms if st.run_start is None else st.run_start  # each rank's copy: the first counts
    elif key == "run_stop":
        v05 = ev.value.get("success") if isinstance(ev.value, dict) else None  # v0.5: {"success": bool}
        status = meta.get("status", "success" if v05 in (True, None) or str(v05).lower() == "true" else "failure")
        st.run_stop, st.stop_status = ms, str(status).lower()
        said = {k: v for k, v in meta.items() if k not in _NOT_SAID}
        said = ({"value": ev.value} if ev.value is not None else {}) | said
        st.stop_words = "run_stop" + (" " + json.dumps(said, default=str)[:300] if said else "")
    elif key == "epoch_start" and ms is not None:
        st.open_epochs[meta.get("epoch_num")] = ms
    elif key == "epoch_stop":
        start = st.open_epochs.pop(meta.get("epoch_num"), None)
        if start is not None and ms is not None and ms > start:
            dur = (ms - start) / 1000
            st.epochs.append(dur)
            per_epoch = _per_epoch_samples(st)
            res.steps.add(run_index, None, rank=rank, epoch=_int(meta.get("epoch_num")), timestamp=ts,
                          interval_images_per_sec=per_epoch / dur if per_epoch else None,
                          line_no=line_no, metrics={"epoch_time_s": dur})
    elif key == "block_start" and ms is not None:
        st.open_blocks[meta.get("first_epoch_num")] = (ms, meta.get("epoch_count"))
    elif key == "block_stop":
        opened = st.open_blocks.pop(meta.get("first_epoch_num"), None)
        if opened is not None and ms is not None and ms > opened[0]:
            dur, count = (ms - opened[0]) / 1000, _num(opened[1])
            st.blocks.append((dur, count))
            per_epoch = _per_epoch_samples(st)
            rate = per_epoch * count / dur if per_epoch and count else None
            metrics = {"block_time_s": dur} | ({"epoch_count": count} if count is not None else {})
            res.steps.add(run_index, None, rank=rank, epoch=_int(meta.get("first_epoch_num")), timestamp=ts,
                          interval_images_per_sec=rate, line_no=line_no, metrics=metrics)
    elif key in ("eval_accuracy", "eval_result") and _num(ev.value) is not None:
        res.steps.add(run_index, None, rank=rank, epoch=_int(meta.get("epoch_num")), timestamp=ts,
                      line_no=line_no, metrics={key: float(ev.value)})
    elif key == "eval_result" and _num(meta.get("timestamp")) is not None and _num(ev.value) is None:
        st.target_s = st.target_s if st.target_s is not None else float(meta["timestamp"])
    elif key == "train_epoch":  # v0.5 epoch marker
        res.steps.add(run_index, None, rank=rank, epoch=_int(ev.value), timestamp=ts, line_no=line_no)
    elif key == "tracked_stats" and isinstance(ev.value, dict):
        _on_tracked(ev, st, res, run_index, line_no, rank)
    elif ev.value is not None and not isinstance(ev.value, (dict, list)):
        st.config[key] = ev.value


def _on_tracked(ev: Event, st: _State, res: ParseResult, run_index: int, line_no: int, rank: int | None) -> None:
    """``tracked_stats``: the program's own throughput for the interval since the previous one."""
    rate = _num(ev.value.get("throughput"))
    if rate is not None and rate > 0:
        last = st.last_tracked_ms
        st.tracked.append((rate, (ev.ms - last) / 1000 if ev.ms and last and ev.ms > last else None))
        st.last_tracked_ms = ev.ms
    other = {k: float(v) for k, v in ev.value.items() if k != "throughput" and _num(v) is not None}
    res.steps.add(run_index, _int(ev.meta.get("step")), rank=rank, epoch=_int(ev.meta.get("epoch_num")),
                  images_per_sec=rate, interval_images_per_sec=rate, timestamp=ev.ms / 1000 if ev.ms else None, line_no=line_no,
                  metrics=other or None)


def _per_epoch_samples(st: _State) -> float | None:
    benchmark = str(st.config.get("submission_benchmark", st.tags.get("benchmark", ""))).lower()
    if benchmark in _EPOCH_NOT_A_PASS:
        return None
    if benchmark in _TOKEN_EPOCHS:
        return 1.0  # an "epoch" is one token
    for k in _SAMPLES_KEYS:
        v = _num(st.config.get(k))
        if v:
            return v
    return None


def _summarize(
    intervals: Sequence[tuple[float, float | None]], drop_first: bool = True
) -> tuple[float | None, float | None]:
    """(rate, weight s) per interval -> (total samples / total time, mean rate), start-up dropped."""
    if not intervals:
        return None, None
    used = intervals[1:] if drop_first and len(intervals) > 1 else intervals
    mean = sum(r for r, _ in used) / len(used)
    timed = [(r, w) for r, w in used if w]
    if len(timed) < len(used):  # an interval of unknown length: no total, the mean stands in
        return mean, mean
    return sum(r * w for r, w in timed) / sum(w for _, w in timed), mean


def _throughput(st: _State) -> tuple[float | None, float | None, str | None]:
    """(images_per_sec, images_per_sec_mean, source) by the priority in the module docstring."""
    if st.tracked:
        return (*_summarize(st.tracked), "tracked_stats")
    if st.final_rate is not None:
        return st.final_rate, None, "final_summary"
    if st.speedo:
        firsts: dict[int, int] = {}
        for epoch, end in st.speedo:
            firsts[epoch] = min(end, firsts.get(epoch, end))
        summed = [(e, end, n, sum(by_node.values())) for (e, end), (n, by_node) in sorted(st.speedo.items())]
        rows = [(s, n / s) for e, end, n, s in summed if end != firsts[e] and s > 0]
        return (*_summarize(rows, drop_first=False), "speedometer") if rows else (None, None, None)
    per_epoch = _per_epoch_samples(st)
    if per_epoch and st.epochs:
        return (*_summarize([(per_epoch / d, d) for d in st.epochs]), "epochs")
    if per_epoch and st.blocks:
        rows = [(per_epoch * c / d, d) for d, c in st.blocks if c]
        return (*_summarize(rows), "blocks") if rows else (None, None, None)
    return None, None, None


def _on_other(line: str, st: _State, res: ParseResult, run_index: int, line_no: int) -> bool:
    """Framework lines inside an MLPerf log. Returns True when the line was used."""
    rank, body = split_rank(line)
    if "Speed" in body and "samples/sec" in body:
        return _on_speedometer(line, st, res, run_index, line_no)
    if "Tok/s" in body:
        m = _GNMT_TRAIN.search(body)
        if m:
            st.tokens = True
            time_s, rate, mean, loss = (res.number(m.group(k), name, line_no)  # a field that will not convert: NULL
                                        for k, name in ((3, "Time"), (4, "Tok/s"), (5, "Tok/s mean"), (6, "Loss/tok")))
            metrics = {k: v for k, v in (("tokens_per_sec", rate), ("tokens_per_sec_avg", mean)) if v is not None}
            res.steps.add(run_index, int(m.group(2)), rank=rank, epoch=int(m.group(1)), loss=loss, line_no=line_no,
                          step_time_ms=None if time_s is None else time_s * 1000, metrics=metrics or None)
            return True
        m = _GNMT_PERF.search(body)
        if m:
            st.tokens = True
            st.epoch_tokens_per_sec.append(float(m.group(2)))
            res.steps.add(run_index, None, rank=rank, epoch=int(m.group(1)), line_no=line_no,
                          metrics={"train_tokens_per_sec": float(m.group(2))})
            return True
        return False
    if "training_sequences_per_second" in body:
        m = _FINAL_RATE.search(body)
        if m:
            st.final_rate = float(m.group(1))
            return True
    if "Traceback (most recent call last)" in body:
        st.error, st.error_line = st.error or "Traceback", line_no
    elif ("Error" in body or "Exception" in body) and _ERROR.match(body.strip()):
        st.error, st.error_line = body.strip(), line_no
    if "out of memory" in body or "ResourceExhausted" in body or "OutOfMemory" in body:
        st.oom, st.error, st.error_line = True, body.strip(), line_no
    return False


def _on_speedometer(line: str, st: _State, res: ParseResult, run_index: int, line_no: int) -> bool:
    """MXNet Speedometer line; per-node speeds of one (epoch, batch) interval are summed (§5)."""

    got = mxnet.speedometer(line)
    if got is None:
        return False
    epoch, start, end, speed, metrics = got
    m = _NODE.search(line)
    node = int(m.group(1)) if m else None
    if node is not None:
        st.nodes.add(node)
    n_batches = float(end - start) if start is not None and end > start else 1.0
    if math.isfinite(speed):  # <= 0.9 repeats a line per metric: one speed per node and interval
        st.speedo.setdefault((epoch, end), (n_batches, {}))[1].setdefault(node, speed)
    res.steps.add(run_index, end, rank=node, epoch=epoch, images_per_sec=speed, interval_images_per_sec=speed,
                  line_no=line_no, metrics=dict(metrics) or None)
    return True


def _status(st: _State) -> tuple[str, str | None]:
    """ok for a run_stop with status success; failed (oom when the log ran out of memory) for any other
    status (aborted, failure, v0.5's success false), with the run_stop event in the log's own words."""
    if st.stop_status is None and st.target_s is None:
        if st.error:
            return ("oom" if st.oom else "failed"), st.error
        return "truncated", "no run_stop: the log ends mid-run"
    if st.stop_status in ("success", None):  # None: a MiniGo v0.6 log, whose eval_result says it reached the target
        return "ok", None
    detail = (st.stop_words or f"run_stop status {st.stop_status}") + (f"; {st.error}" if st.error else "")
    return ("oom" if st.oom else "failed"), detail


def _framework(st: _State) -> tuple[str | None, str | None]:
    entry = str(st.config.get("submission_entry", ""))
    m = re.search(r"'framework': '([^']*)'", entry)
    if m:
        first, _, rest = m.group(1).partition(" ")
        if first.lower() in _FRAMEWORKS:
            return first.lower(), rest or None
    return ("mxnet", None) if st.speedo else (None, None)


def _build_run(st: _State, run_index: int) -> Run:
    """Turn the finished state into the run record (status, topology, throughput, tags, details)."""
    c = st.config
    status, detail = _status(st)
    tags, details = dict(st.tags), dict(st.details)
    tags.update({k: str(c[k]) for k in _TAG_KEYS if k in c})
    details.update({k: str(c[k]) for k in _DETAIL_KEYS if k in c})
    model = c.get("submission_benchmark") or tags.get("benchmark")
    if model:
        tags["benchmark"] = str(model)
    # v0.5's input_batch_size is the batch of the process that logged it (tf_cnn_benchmarks: per-device
    # batch x the process's GPUs; Caffe: one solver's), not the global batch: a detail, never global.
    global_batch = _int(c.get("global_batch_size"))
    if "input_batch_size" in c:
        details["input_batch_size"] = str(c["input_batch_size"])
    nodes = _int(c.get("number_of_nodes"))
    platform = re.match(r"(\d+)x", str(c.get("submission_platform", "")))
    if nodes is None and platform:
        nodes = int(platform.group(1))  # NVIDIA-style "<nodes>x<system>" platform names
    per_node = _int(c.get("accelerators_per_node"))
    gpus = nodes * per_node if nodes and per_node else None
    ips, ips_mean, source = _throughput(st) if status == "ok" else (None, None, None)  # failed: None, never 0
    if source:
        details["throughput_source"] = source
    bench_name = str(model or "").lower()
    unit = "images/sec" if bench_name in _IMAGE_BENCHMARKS else _SAMPLE_UNITS.get(bench_name, "samples/sec")
    if st.tokens:  # GNMT: its printed per-epoch Tok/s, never samples per epoch: tokens are not sentences
        unit, rates = "tokens/sec", st.epoch_tokens_per_sec
        ips = sum(rates) / len(rates) if rates and status == "ok" else None
        ips_mean, source = ips, "gnmt_performance" if ips is not None else None
        if source:
            details["throughput_source"] = source
    wall = (st.run_stop - st.run_start) / 1000 if st.run_stop and st.run_start else None
    if st.target_s is not None:
        details["time_to_train_source"] = "eval_result timestamp"
    if st.unreadable:
        details["unreadable_compliance_lines"] = str(st.unreadable)
    framework, version = _framework(st)
    return Run(
        run_index=run_index, format=NAME, framework=framework, framework_version=version,
        model=str(model) if model else None, mode="train", global_batch_size=global_batch,
        batch_size_per_device=global_batch // gpus if global_batch and gpus and global_batch % gpus == 0 else None,
        num_gpus=gpus, num_nodes=nodes, num_ranks=len(st.nodes) if len(st.nodes) > 1 else None,
        started_at=st.run_start / 1000 if st.run_start and not st.local_clock else None,
        ended_at=st.run_stop / 1000 if st.run_stop and not st.local_clock else None, wall_time_s=wall,
        time_to_train_s=(wall if st.target_s is None else st.target_s) if status == "ok" else None,
        images_per_sec=ips if unit == "images/sec" else None,
        images_per_sec_mean=ips_mean if unit == "images/sec" else None,
        throughput=ips, throughput_unit=unit if ips is not None else None,
        throughput_derived=None if ips is None else source not in _PRINTED_SOURCES,
        status=status, status_detail=detail, first_line=st.first_line,
        last_line=max(st.last_line or 0, st.error_line if status in ("failed", "oom") else 0) or None, tags=tags,
        details=details,
    )


def _new_state(prev: _State | None) -> _State:
    """A fresh run; a follow-on run keeps the configuration, tags and details read before it."""
    st = _State()
    if prev is not None:
        st.config, st.tags, st.details = dict(prev.config), dict(prev.tags), dict(prev.details)
    return st


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse an MLPerf log (any generation) into runs and step rows; see the module docstring."""
    res = result if result is not None else ParseResult()
    st = _new_state(None)
    run_index = 0
    for line_no, line in filter(itemgetter(1), enumerate(lines, 1)):  # "" does nothing (see MARKERS): skipped in C
        i = line.find(":::ML")
        m = TEXT.search(line) if i < 0 and "MLPerf: " in line else None
        if i < 0 and m is None:
            if _on_other(line, st, res, run_index, line_no) and st.first_line is not None:
                st.last_line = line_no
            continue
        text = line[i:].rstrip() if m is None else "MLPerf: "
        if m is None and not (text.startswith(":::MLLOG {") or SNIFF.match(text)):
            continue
        ev = read_event(text) if m is None else read_text_event(m)
        if ev is None:
            res.problem("bad_line", "MLPerf compliance line that cannot be read", line_no, line)
            st.unreadable += text.startswith(":::MLLOG")  # the summarizer's checker reads MLLOG logs (v0.7+)
            continue
        if ev.key == "run_start" and st.run_stop is not None:
            res.runs.append(_build_run(st, run_index))
            st, run_index = _new_state(st), run_index + 1
        if "log_format" not in st.details:
            st.details["log_format"] = log_format(text)
        if "version" in ev.meta:
            st.tags.setdefault("mlperf_version", str(ev.meta["version"]))
            st.tags.setdefault("benchmark", str(ev.meta["model"]))
        elif "mlperf_version" not in st.tags and text.startswith((":::MLL ", "MLPerf: ")):
            st.tags.setdefault("mlperf_version", "0.6")  # the :::MLL and text forms existed only in v0.6
        if ev.meta.get("local_clock"):
            st.tags.setdefault("benchmark", str(ev.meta["model"]))
            st.local_clock = True
        st.first_line, st.last_line = st.first_line or line_no, line_no
        rank = split_rank(line)[0] if i > 0 else None
        _on_event(ev, st, res, run_index, line_no, rank)
    if st.first_line is not None:
        res.runs.append(_build_run(st, run_index))
        if res.runs[-1].status == "truncated":
            res.problem("truncated", "no run_stop event: the log ends mid-run", st.last_line)
    return res
