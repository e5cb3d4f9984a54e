"""NVIDIA DLLogger output (log-formats.md §11), both backends; one run per file.

- JSON stream: ``DLLL {"timestamp": "<unix s>", "datetime", ["elapsedtime",] "type": "LOG"|"METADATA",
  "step": "PARAMETER" | int | [epoch, iter, ...] | [] | "<label>", "data" | "metric" + "metadata"}``.
- StdOut backend (``DLL:dllogger/logger.py`` ``StdOutBackend``): ``DLL <datetime> - <str(step)> <k> : <v>
  <unit> ...``; the older example prints ``DLLL <datetime> - Epoch: 0 Iteration: 3  loss : 1 nat``. A
  PARAMETER line hard-wrapped by whatever captured it is glued back from the next lines holding `` : ``.

Step rows: consecutive LOG records with the same step and disjoint names are one row (DeepLearning-
Examples logs a step in two records). ``[e, i]`` -> epoch e, step i; ``[e]`` -> epoch summary (step
None); an int -> step. ``[]``/``()`` and string steps (``avg``, ``90%``) are run summaries, not rows.

Throughput: a metric whose METADATA ``type`` is THROUGHPUT or unit img/s, or (stdout, no metadata) named
``*ips``/``*throughput*``; train before val, ``total`` before ``compute``. Without one, a summary rate whose
unit is known (``training_sequences_per_second``, a METADATA unit such as tokens/s). ``throughput`` is in
that metric's unit (``bench.ingest.units``: its METADATA unit, else its name, else images/sec);
``images_per_sec`` repeats it only when the unit is images. ``images_per_sec`` = the final summary value, else the
time-weighted rate of the step values; ``images_per_sec_mean`` = mean of the step values at the finest
step depth without the first logged interval (warm-up) and the 0s logged before warm-up ended (a 0 is
not a measurement: None, never 0). Both are None unless the status is ok. Parameters read: batch
``batch_size``/``train_batch_size`` (per GPU); GPUs ``world_size``/``num_gpus``/``gpus``/``n_gpus``/
``ngpus`` or DLE TensorFlow's printed ``Num GPUs N``; precision ``precision``, else ``amp``/``amp_run``/
``use_amp``/``use_tf_amp`` -> amp, ``fp16``/``use_fp16`` -> fp16, present but false -> fp32; model
``arch``/``model_name``/``model``; ``mode``; ``warmup_steps`` (DLE: steps left out of the throughput).
``wall_time_s`` = last − first LOG timestamp (stdout: local wall clock, exact as a duration).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.dllogger_state import Series, State
from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, split_rank, utc_seconds
from bench.ingest.units import IMAGES, unit_of

NAME = "dllogger"
DESCRIPTION = "NVIDIA DLLogger: JSON stream 'DLLL {json}' and StdOut backend 'DLL <datetime> - <step> k : v'"

_SNIFF = re.compile(r"(?m)^.{0,40}?DLLL? (?:\{\"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
_STDOUT = re.compile(r"DLLL? (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d(?:\.\d+)?)(?:[+-]\d\d:?\d\d)? - ?(.*)$")
_NAMED_STEP = re.compile(r"((?:[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)*: -?\d+ ?)+)")
_NAMED_PART = re.compile(r"([A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)*): (-?\d+)")
_IMAGE_NAME = re.compile(r"(?:^|[._])\w*ips$|throughput", re.I)
_RATE_NAME = re.compile(r"/s$|per_?sec|ips$|throughput", re.I)
_IMAGE_UNITS = frozenset({"img/s", "images/s", "imgs/s", "img/sec", "images/sec", "samples/s", "sequences/s"})
_ERROR = re.compile(r"(?:[\w.]+\.)?\w*(?:Error|Exception)(?::|$)")
_NUM_GPUS = re.compile(r"Num GPUs (\d+)\s*$")
_AMP_KEYS, _FP16_KEYS = ("amp", "amp_run", "use_amp", "use_tf_amp"), ("fp16", "use_fp16")
_TAG_KEYS = ("mode", "optimizer", "optimizer_batch_size", "data_backend", "iter_unit", "num_iter", "epochs",
             "data_format", "memory_format", "use_xla", "use_dali", "model_config")
_Step = tuple[Any, ...]  # ("P",) params, ("S",) summary, ("L", label), ("I", e, i...), ("I0", n), ("N", (name, n)...)


def sniff(head: str) -> bool:
    """True when a line starts (behind a short prefix) with a DLLogger record of either backend."""
    return contains(head, "DLL") and _SNIFF.search(head) is not None


def _micros(stamp: Any) -> int | None:
    """``"1609395313.095243"`` -> integer microseconds (exact, unlike a float of ~1.6e9 s)."""
    text = stamp if isinstance(stamp, str) else (repr(float(stamp)) if isinstance(stamp, (int, float)) else "")
    whole, _, frac = text.strip().partition(".")
    if not whole.isdigit() or (frac and not frac.isdigit()):
        return None
    return int(whole) * 1_000_000 + int((frac + "000000")[:6])


def _convert(raw: str) -> Any:
    """A stdout value as printed -> int | float | bool | None | str."""
    if raw in ("True", "False", "None"):
        return None if raw == "None" else raw == "True"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _items(text: str) -> dict[str, tuple[Any, str | None]] | None:
    """``k : v unit k2 : v2  k3 : v3`` (items ``"{k} : {v} {unit}"`` joined by a space) -> {k: (v, unit)}."""
    parts = text.split(" : ")
    if len(parts) < 2:
        return {} if not text.strip() else None
    out: dict[str, tuple[Any, str | None]] = {}
    key = parts[0].strip()
    for i, chunk in enumerate(parts[1:], 1):
        nxt = ""
        if i < len(parts) - 1:
            if "  " in chunk:  # empty unit: "v " + " " + next key
                chunk, nxt = chunk.rsplit("  ", 1)
            else:  # "v unit next key"
                toks = chunk.split(" ")
                if len(toks) < 2:
                    return None
                cut = 2 if len(toks) > 2 else 1
                chunk, nxt = " ".join(toks[:cut]), " ".join(toks[cut:])
        if not key:
            return None
        head, _, unit = chunk.strip().partition(" ")
        value = _convert(head)
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        out[key] = (value, unit.strip()) if unit and numeric else (_convert(chunk.strip()), None)
        key = nxt.strip()
    return out


def _stdout_step(rest: str) -> tuple[_Step, str] | None:
    """Split ``<str(step)> <items>`` into a step key and the items text."""
    if rest.startswith("PARAMETER"):
        return ("P",), rest[9:]
    if rest[:1] in "([":
        close = rest.find(")" if rest[0] == "(" else "]")
        if close < 0:
            return None
        inner = [p.strip() for p in rest[1:close].split(",") if p.strip()]
        try:
            return (("I", *(int(p) for p in inner)) if inner else ("S",)), rest[close + 1 :]
        except ValueError:
            return ("L", rest[: close + 1]), rest[close + 1 :]
    m = _NAMED_STEP.match(rest)
    if m:
        return ("N", *((n, int(v)) for n, v in _NAMED_PART.findall(m.group(1)))), rest[m.end() :]
    head, _, tail = rest.partition(" ")
    if tail.startswith(": ") or not head:
        return ("S",), rest  # no step printed
    try:
        return ("I0", int(head)), tail
    except ValueError:
        return ("L", head), tail


def _json_step(step: Any) -> _Step:
    if step == "PARAMETER":
        return ("P",)
    if isinstance(step, list):
        if all(isinstance(s, int) and not isinstance(s, bool) for s in step):
            return ("I", *step) if step else ("S",)
        return ("L", json.dumps(step))
    if isinstance(step, int) and not isinstance(step, bool):
        return ("I0", step)  # a bare int is a step number, not an epoch
    return ("L", str(step)) if step is not None else ("S",)


def _place(step: _Step) -> tuple[int | None, int | None, dict[str, float]]:
    """Step key -> (epoch, step, other step components as metrics)."""
    kind, parts = step[0], step[1:]
    if kind == "I0":
        return None, parts[0], {}
    if kind == "I":
        return parts[0], parts[1] if len(parts) > 1 else None, {f"step_{i}": float(v) for i, v in enumerate(parts[2:], 2)}
    epoch = it = None
    extra = {}
    for name, v in parts:
        low = name.lower()
        if low == "epoch":
            epoch = v
        elif low in ("iteration", "step", "iter") and it is None:
            it = v
        else:
            extra[low.replace(" ", "_")] = float(v)
    return epoch, it, extra


def _rank(name: str) -> tuple[bool, bool, bool, str]:
    """Preference among throughput metrics: train before val, total before compute."""
    low = name.lower()
    return low.startswith(("val", "eval", "test")) or ".val" in low, "total" not in low, "train" not in low, low


def _rate_kind(name: str, meta: dict[str, Any]) -> str | None:
    """"image" for a samples/s throughput, "other" for any other rate (tokens, frames...), else None."""
    unit = str(meta.get("unit", "")).strip().lower()
    typed = str(meta.get("type", "")).upper() == "THROUGHPUT"
    if "tok" not in unit and (typed or unit in _IMAGE_UNITS or (not unit and _IMAGE_NAME.search(name))):
        return "image"
    return "other" if typed or unit.endswith("/s") or _RATE_NAME.search(name) else None


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _on_record(st: State, res: ParseResult, step: _Step, data: dict[str, Any],
               us: int | None, line_no: int, rank: int | None) -> None:
    """One LOG record (either backend): parameters, a run summary, or (part of) a step row."""
    ts = us / 1e6 if us is not None else None
    if us is not None:
        st.span_us[:] = [st.span_us[0] if st.span_us else us, us]
    st.first_line = st.first_line or line_no
    st.last_line = line_no
    if step[0] == "P":
        st.params.update(data)
        return
    st.names.update(data)
    if step[0] in ("S", "L"):
        _flush(st, res)
        st.ended = True
        for name, v in data.items():
            if _finite(v) is not None and step[0] == "S":
                st.summary[name] = float(v)
            elif _finite(v) is not None:
                st.details[f"{step[1]}:{name}"] = repr(float(v))
        return
    if st.row is not None and (st.row["step"] != step or st.row["data"].keys() & data.keys()):
        _flush(st, res)
    if st.row is None:
        st.row = {"step": step, "data": dict(data), "ts": ts, "line_no": line_no, "rank": rank}
    else:
        st.row["data"].update(data)


def _flush(st: State, res: ParseResult) -> None:
    """Write the merged step row; remember its throughput for the run summary."""
    row, st.row = st.row, None
    if row is None:
        return
    epoch, step, metrics = _place(row["step"])
    data = row["data"]
    rates = sorted((n for n in data if _rate_kind(n, st.meta.get(n, {})) == "image"), key=_rank)
    ips = loss = None
    if rates and _finite(data[rates[0]]) is not None:
        value = float(data[rates[0]])
        series = st.series.setdefault((rates[0], len(row["step"]) - 1), Series())
        series.add(row["ts"], value)
        if series.warming:
            metrics[rates[0]] = value  # a 0 before warm-up ended is not a measurement: kept as printed only
        else:
            ips = value
    for name, v in data.items():
        num = _finite(v)
        if num is None or (rates and name == rates[0]):
            continue
        low = name.lower()
        if loss is None and (low == "loss" or low.endswith((".loss", "_loss"))) and not _rank(name)[0]:
            loss = num
        else:
            metrics[name] = num
    res.steps.add(0, step, rank=row["rank"], epoch=epoch, images_per_sec=ips, interval_images_per_sec=ips,
                  loss=loss, timestamp=row["ts"], line_no=row["line_no"], metrics=metrics or None)


def _json_line(st: State, res: ParseResult, text: str, line_no: int, rank: int | None) -> bool:
    """``DLLL {json}``; False when the record cannot be read."""
    try:
        rec = json.loads(text[5:])
    except ValueError:
        return False
    if not isinstance(rec, dict):
        return False
    if rec.get("type") == "METADATA":
        ok = isinstance(rec.get("metric"), str) and isinstance(rec.get("metadata"), dict)
        if ok:
            st.meta.setdefault(rec["metric"], {}).update(rec["metadata"])
        return ok
    if not isinstance(rec.get("data"), dict):
        return False
    us = _micros(rec.get("timestamp"))
    st.unix = st.unix or us is not None
    _on_record(st, res, _json_step(rec.get("step")), rec["data"], us, line_no, rank)
    return True


def _stdout_line(st: State, res: ParseResult, text: str, line_no: int, rank: int | None) -> bool:
    """``DLL(L) <datetime> - <step> k : v ...``; False when the line cannot be read."""
    m = _STDOUT.match(text)
    split = _stdout_step(m.group(7)) if m else None
    if m is None or split is None:
        return False
    y, mo, d, hh, mi, ss = m.groups()[:6]
    whole, _, frac = ss.partition(".")
    day = utc_seconds(y, mo, d, hh, mi, 0)
    if day is None:
        return False  # a damaged stamp: not a DLLogger stdout line
    ts = (int(day) + int(whole)) * 1_000_000 + int((frac + "000000")[:6])  # µs; local wall clock read as UTC
    step, items_text = split
    if step == ("P",):  # may be hard-wrapped: read it once the continuation lines are in
        st.wrap = ([items_text], line_no, ts)
        return True
    items = _items(items_text)
    if items is None:
        return False
    for k, (_, unit) in items.items():
        if unit:
            st.meta.setdefault(k, {}).setdefault("unit", unit)
    _on_record(st, res, step, {k: v for k, (v, _) in items.items()}, ts, line_no, rank)
    return True


def _finish_wrap(st: State, res: ParseResult) -> None:
    """Read a (re-joined) stdout PARAMETER line."""
    if st.wrap is None:
        return
    (pieces, line_no, ts), st.wrap = st.wrap, None
    items = _items("".join(pieces))
    if items is None:
        res.problem("bad_line", "DLLogger PARAMETER line that cannot be read", line_no, "".join(pieces))
    else:
        _on_record(st, res, ("P",), {k: v for k, (v, _) in items.items()}, ts, line_no, None)


def _on_other(st: State, res: ParseResult, line: str, line_no: int) -> None:
    """Non-DLLogger lines: hard-wrap continuations, DLE's ``Num GPUs N``, errors."""
    if st.wrap is not None:
        if " : " in line:
            st.wrap[0].append(line)
            return
        _finish_wrap(st, res)
    m = _NUM_GPUS.search(line) if "Num GPUs" in line else None
    if m:
        st.printed_gpus = int(m.group(1))
    body = split_rank(line)[1].strip()
    oom = "out of memory" in body or "ResourceExhausted" in body or "OutOfMemory" in body
    if oom or (("Error" in body or "Exception" in body) and _ERROR.match(body)):
        st.error = (body, line_no, oom or bool(st.error and st.error[2]))
    elif "Traceback (most recent call last)" in body and st.error is None:
        st.error = ("Traceback", line_no, False)


def _throughput(st: State) -> tuple[float | None, float | None, str | None]:
    """(images_per_sec, images_per_sec_mean, metric name); the summary value wins when it is > 0."""
    summary = sorted((n for n in st.summary if _rate_kind(n, st.meta.get(n, {})) == "image"), key=_rank)
    names = sorted({n for n, _ in st.series}, key=_rank)
    rate = mean = None
    if names:
        rate, mean = st.series[(names[0], max(d for n, d in st.series if n == names[0]))].rates()
    if summary and st.summary[summary[0]] > 0:
        return st.summary[summary[0]], mean, summary[0]
    return rate, mean, summary[0] if summary else (names[0] if names else None)


def _run_facts(st: State) -> dict[str, Any]:
    """Run fields read from the PARAMETER records (keys listed in the module docstring)."""
    p = st.params
    ints = {k: v for k, v in p.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    batch = next((ints[k] for k in ("batch_size", "train_batch_size") if k in ints), None)
    gpus = next((ints[k] if k in ints else len(p[k]) for k in ("world_size", "num_gpus", "gpus", "n_gpus", "ngpus")
                 if k in ints or isinstance(p.get(k), list)), st.printed_gpus)
    if isinstance(p.get("precision"), str):
        precision: str | None = p["precision"].lower()
    elif any(p.get(k) is True for k in _AMP_KEYS) or any(p.get(k) is True for k in _FP16_KEYS):
        precision = "amp" if any(p.get(k) is True for k in _AMP_KEYS) else "fp16"
    else:
        precision = "fp32" if any(k in p for k in (*_AMP_KEYS, *_FP16_KEYS)) else None
    where = p.get("data_dir", p.get("data"))
    data = "synthetic" if "synt" in str(p.get("data_backend", "")).lower() else (  # DLE spells "syntetic"
        "real" if isinstance(where, str) and where not in ("", "None") else None)
    return {"model": next((str(p[k]) for k in ("arch", "model_name", "model") if isinstance(p.get(k), str)), None),
            "data": data, "precision": precision, "batch_size_per_device": batch, "num_gpus": gpus,
            "global_batch_size": batch * gpus if batch and gpus else None, "num_ranks": ints.get("world_size"),
            "warmup_steps": ints.get("warmup_steps")}


def _mode(st: State) -> str | None:
    """Declared ``mode``, else train when a training loss is logged, inference for latencies."""
    declared = str(st.params.get("mode", "")).lower()
    for word, mode in (("train", "train"), ("infer", "inference"), ("predict", "inference"), ("eval", "eval")):
        if word in declared:
            return mode
    losses = [n for n in st.names if "loss" in n.lower()]
    if any(not _rank(n)[0] for n in losses):
        return "train"
    return "inference" if any("latency" in n.lower() for n in st.names) else ("eval" if losses else None)


def _unit(st: State, name: str) -> str | None:
    """The unit of metric ``name``: its METADATA unit, else what its name says (``*_sequences_per_second``)."""
    return unit_of(str(st.meta.get(name, {}).get("unit", ""))) or unit_of(name)


def _build_run(st: State) -> Run:
    ips, mean, metric = _throughput(st)
    unit = (_unit(st, metric) if metric else None) or IMAGES
    tags = {k: str(st.params[k]) for k in _TAG_KEYS if st.params.get(k) is not None}
    details = dict(st.details)
    others = sorted(n for n in st.names if _rate_kind(n, st.meta.get(n, {})) == "other")
    if ips is None and others:  # a summary rate in another unit: BERT's training_sequences_per_second
        named = [n for n in sorted(others, key=lambda n: ("train" not in n.lower(), n))
                 if st.summary.get(n, 0) > 0 and _unit(st, n)]
        if named:
            metric, ips, unit = named[0], st.summary[named[0]], _unit(st, named[0]) or IMAGES
        else:
            details["rate_metrics"] = ",".join(others)  # rates in no unit we know (frames, speeds...)
            units = sorted({str(st.meta[n]["unit"]) for n in others if st.meta.get(n, {}).get("unit")})
            details.update({"throughput_unit": ",".join(units)} if units else {})
    if metric:
        details["throughput_metric"] = metric
    status, detail, last = "ok", None, st.last_line
    if st.error and not st.ended:
        status, detail, last = ("oom" if st.error[2] else "failed"), st.error[0], max(last or 0, st.error[1])
    elif metric and ips is None:
        status, detail = "no_result", "throughput logged only as 0 (fewer iterations than warm-up steps?)"
    elif metric is None and not others:
        status, detail = "no_result", "no throughput metric logged"
    if status != "ok":
        ips = mean = None  # not a measurement: None, never 0; the step rows keep what was printed
    start, end = (st.span_us[0] / 1e6, st.span_us[1] / 1e6) if st.span_us and st.unix else (None, None)
    wall = (st.span_us[1] - st.span_us[0]) / 1e6 if st.span_us else None
    images = unit == IMAGES
    return Run(run_index=0, format=NAME, mode=_mode(st), started_at=start, ended_at=end,
               wall_time_s=wall, images_per_sec=ips if images else None,
               images_per_sec_mean=mean if images else None, throughput=ips,
               throughput_unit=unit if ips is not None else None, status=status, status_detail=detail, first_line=st.first_line,
               last_line=last, tags=tags, details=details, **_run_facts(st))


class _Parser(LineFormat[State]):
    """One run per file: the state opens at the first line."""

    RANKS = True  # DLLogger's own lines never start with a rank prefix; a launcher's tag is taken off

    def new_run(self, no: int) -> State:
        return State()

    def read(self, line: Line) -> bool:
        st, res, text = self.current(line.no), self.result, line.msg
        if not text.startswith("DLL"):
            _on_other(st, res, line.raw, line.no)
            return True
        _finish_wrap(st, res)
        if text.startswith("DLLL {"):
            ok = _json_line(st, res, text, line.no, line.rank)
        elif _STDOUT.match(text):
            ok = _stdout_line(st, res, text, line.no, line.rank)
        else:
            return True  # "DLL..." that is not a record
        if not ok:
            res.problem("bad_line", "DLLogger record that cannot be read", line.no, line.raw)
        return True

    def emit(self, st: State) -> None:
        _finish_wrap(st, self.result)
        _flush(st, self.result)
        if st.first_line is not None:
            self.result.runs.append(_build_run(st))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one DLLogger file (either backend) into one run and its step rows."""
    return drive(_Parser, lines, result)
