"""MLPerf compliance lines of every era, one line at a time -> an :class:`Event` (log-formats.md §10).

- v0.5 ``:::MLPv0.5.0 <model> <unix s> (<file>:<line>) <key>[: <json>]``; a ``0000000000`` stamp is
  a placeholder (no time).
- v0.6 ``:::MLL <unix s> <key>: {"value": ..., "metadata": {...}}``; ``0.0`` stamps mean no time.
- v0.6, one submitter's own text: ``MLPerf: resnet [06/13/19 00:30:56], run_start`` (see ``TEXT``).
- v0.7+ ``:::MLLOG {"namespace", "time_ms", ["event_type",] "key", "value", "metadata"}`` (``time_s``, in
  seconds, in Alibaba's v0.7 logs).

``bench.ingest.formats.mlperf`` folds the events into runs.
"""

from __future__ import annotations

import ast
import calendar
import datetime
import json
import re
from dataclasses import dataclass
from typing import Any

SNIFF = re.compile(r":::(?:MLLOG \{|MLL \d|MLPv\d)")
#: One v0.6 submitter's own lines: ``MLPerf: resnet [06/13/19 00:30:56], run_start`` (a local clock with no
#: zone, whole seconds), a value after ``, `` or ``: `` that need not be JSON (``75.98000%``).
TEXT = re.compile(r"MLPerf: (\w+) \[(\d\d)/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)\],? (\w+)(?:[,:] *(.*?))?\s*$",
                  re.MULTILINE)  # one line, or any line of a head (a log's last line need not be one of these)
_V05 = re.compile(r":::MLPv(\S+) (\S+) +(\S+) \(([^)]*)\) (\w+)\s*(?::\s*(.*?))?\s*$")
_MLL = re.compile(r":::MLL (\S+) (\w+): (.*)$")


@dataclass(slots=True)
class Event:
    key: str
    value: Any
    ms: float | None  # unix milliseconds (exact for durations), None for placeholder stamps
    meta: dict[str, Any]


def _millis(raw: Any, per_unit: float) -> float | None:
    """A stamp (seconds: per_unit 1000, ms: 1) -> unix ms, keeping the digits a float of seconds loses."""
    if isinstance(raw, str):
        whole, _, frac = raw.strip().partition(".")
        if not whole.isdigit() or (frac and not frac.isdigit()):
            return None
        t = int(whole) * per_unit + (float("0." + frac) * per_unit if frac else 0.0)
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        t = raw * per_unit
    else:
        return None
    return t if t > 0 else None


def _meta(d: dict[str, Any]) -> dict[str, Any]:
    meta = d.get("metadata")
    return meta if isinstance(meta, dict) else {}


#: ``json.loads`` without its wrappers: (object, end) of the JSON text starting at an index.
_JSON_AT = json.JSONDecoder().raw_decode


def read_event(text: str) -> Event | None:
    """One compliance line (already cut at ``:::ML`` and right-stripped) -> event; None if it cannot be read."""
    if text.startswith(":::MLLOG "):
        try:  # what json.loads(text[9:]) reads, without copying the line (nothing follows: it is stripped)
            d, end = _JSON_AT(text, 9) if text.startswith("{", 9) else (json.loads(text[9:]), len(text))
        except ValueError:
            return None
        if end != len(text) or not isinstance(d, dict) or not isinstance(d.get("key"), str):
            return None
        raw = d.get("time_ms")
        ms = raw if (type(raw) is int or type(raw) is float) and raw > 0 else _millis(raw, 1)
        if raw is None and "time_s" in d:  # Alibaba's v0.7 logs stamp in seconds
            ms = _millis(d["time_s"], 1000)
        return Event(d["key"], d.get("value"), ms, _meta(d))
    if text.startswith(":::MLL "):
        m = _MLL.match(text)
        if not m:
            return None
        try:
            d = json.loads(m.group(3))
        except ValueError:
            d = loose_json(m.group(3))
        if not isinstance(d, dict):
            return None
        return Event(m.group(2), d.get("value"), _millis(m.group(1), 1000), _meta(d))
    m = _V05.match(text)
    if not m:
        return None
    raw = m.group(6)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        value = raw
    info: dict[str, Any] = {"model": m.group(2), "version": m.group(1)}
    if isinstance(value, dict) and "value" in value and "epoch" in value:  # eval_accuracy
        info["epoch_num"], value = value["epoch"], value["value"]
    return Event(m.group(5), value, _millis(m.group(3), 1000), info)


#: What some v0.6 loggers wrote where JSON has something else: a Python repr's 'single-quoted' string, a
#: bare word (an unquoted key or value: ``{value: true, metadata: {file: manual}}``), True, False, None.
_LOOSE = re.compile(r"""("(?:[^"\\]|\\.)*")|('(?:[^'\\]|\\.)*')|(?<![\w.+-])([A-Za-z_][\w.\-/]*)""")
_WORDS = {"true": "true", "false": "false", "null": "null", "True": "true", "False": "false", "None": "null",
          "NaN": "NaN", "Infinity": "Infinity"}


def loose_json(text: str) -> Any:
    """``text`` read as JSON once the spellings of ``_LOOSE`` are made JSON (the ``:::MLL`` lines of Intel's
    v0.6 MiniGo logs: ``{"value": 8192, "metadata": {'lineno': 233, 'file': 'train.py'}}``); None when it
    still does not read."""

    def as_json(m: re.Match[str]) -> str:
        double, single, word = m.groups()
        if double is not None:
            return double
        if single is not None:
            return json.dumps(ast.literal_eval(single))
        return _WORDS.get(word) or json.dumps(word)

    try:
        return json.loads(_LOOSE.sub(as_json, text))
    except (ValueError, SyntaxError):
        return None


_PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?)%")


def _text_value(raw: str | None) -> Any:
    """A value of a ``MLPerf:`` text line: JSON where it is, a percentage as a fraction (also inside an
    object: ``{"value": 75.98000%, "epoch": 79}``), else the text."""
    if not raw:
        return None
    if raw.endswith("%"):
        try:
            return float(raw[:-1]) / 100
        except ValueError:
            return raw
    try:
        return json.loads(raw)
    except ValueError:
        pass
    try:
        return json.loads(_PERCENT.sub(lambda p: repr(float(p[1]) / 100), raw)) if "%" in raw else raw
    except ValueError:
        return raw


def read_text_event(m: re.Match[str]) -> Event:
    """A ``MLPerf: <bench> [MM/DD/YY HH:MM:SS], <key>[, value]`` line. Its clock has no zone: the stamp is
    read as if UTC, right for durations; the run's absolute times are not stored (``local_clock``)."""
    month, day, year, hh, mm, ss = (int(g) for g in m.group(2, 3, 4, 5, 6, 7))
    try:
        ms: float | None = calendar.timegm((2000 + year, month, day, hh, mm, ss)) * 1000.0
        datetime.date(2000 + year, month, day)  # a month 17 is no date: no time
    except ValueError:
        ms = None
    value = _text_value(m.group(9))
    meta: dict[str, Any] = {"model": m.group(1), "local_clock": True}
    if isinstance(value, dict) and "value" in value and "epoch" in value:  # eval_accuracy, as v0.5 wrote it
        meta["epoch_num"], value = value["epoch"], value["value"]
    if m.group(8) == "run_stop" and isinstance(value, str):
        meta["status"] = value
    return Event(m.group(8), value, ms, meta)


def log_format(text: str) -> str:
    if text.startswith("MLPerf: "):
        return "MLPerf text"
    if text.startswith(":::MLLOG"):
        return "MLLOG"
    return "MLL" if text.startswith(":::MLL ") else "MLPv0.5"
