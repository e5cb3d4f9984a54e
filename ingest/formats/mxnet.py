"""MXNet training logs: Speedometer intervals, fit.py / GluonCV headers, epoch-end lines (log-formats.md §5).

Read behind any prefix (``INFO:root:``, ``<asctime> Node[k]``, ``Node[0] 06:49:12 INFO:root:``,
``[2020-06-22 19:16:26]``, ``Rank[k]``, MPI/Slurm tags), tab- or space-separated:
``Epoch[e] Batch [n]\tSpeed: s samples/sec\tTrain-m=v`` (<= 0.9: one line per metric, same Speed: one
interval), ``Batch [n]`` + all metrics (0.10-1.3, GluonCV), ``Batch [n0-n1]`` (>= 1.4; ``[0-n]`` with
auto_reset=False: cumulative metrics, per-interval Speed), ``Iter[e] Batch [n]``, fit.py ``--test-io``
``Batch [n]`` (no epoch); ``Epoch[e] Train-m=v`` / ``Time cost=t`` / ``Validation-m=v``; GluonCV
``[Epoch e] training: m=v``, ``speed: X samples/sec\ttime cost: T``, ``validation: m=v m=v``; fit.py
``Namespace(batch_size=B, gpus='0,1', kv_store=..)`` (B per worker), GluonCV ``Namespace(batch_size=B,
num_gpus=N)`` (B per device), ``Start training with [gpu(0), ...]``. A Namespace/Start line that the same
rank already printed, or a Speedometer whose epoch or batch goes back, starts a new run.

Steps: one row per interval per rank (``step`` = end batch, ``images_per_sec`` = ``interval_images_per_sec``
= Speed: that worker's samples/sec; accuracy / top_k_accuracy_5 / cross-entropy also fill top1/top5/loss),
and one row per epoch end per rank with ``step`` and rates NULL and ``metrics`` = ``Train-*``,
``Validation-*`` (GluonCV names get these prefixes), ``time_cost_s``, GluonCV ``samples_per_sec``.
Interleaved ranks' rows may come out of line order (see ``line_no``).

Run: ``images_per_sec`` = Σ over ranks of images/time over the intervals, the first report of each epoch
(start-up) excluded: f batches (from the batch numbers) at Speed s are f·B images in f·B/s seconds, so B
cancels. ``images_per_sec_mean`` = Σ over ranks of the mean of those Speeds. With no such interval: the
GluonCV epoch speeds weighted by time cost. ``wall_time_s`` = Σ ``Time cost`` (the largest rank's sum).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.formats.mxnet_run import NAME as NAME  # the registry reads NAME here
from bench.ingest.formats.mxnet_run import RankState, RunState, build_run
from bench.ingest.records import ParseResult
from bench.ingest.text import contains, split_rank, utc_seconds

DESCRIPTION = "MXNet Speedometer / fit.py / GluonCV logs: samples/sec per interval, Time cost per epoch"

_SPEEDO = re.compile(
    r"(?:\b(?:Epoch|Iter)\[(\d+)\]\s*)?Batch\s*\[(\d+)(?:-(\d+))?\]\s+Speed:\s*(\S+)\s+samples/sec(.*)"
)
_EPOCH_END = re.compile(r"\bEpoch\[(\d+)\]\s*(?:(Train|Validation)-([^=]+)=(\S+)|Time cost=(\S+))\s*$")
_GLUON = re.compile(r"\[Epoch (\d+)\] (?:(training|validation): (.*)|speed: (\S+) samples/sec\s+time cost: (\S+))")
_NAMESPACE = re.compile(r"\bNamespace\((.*)\)\s*$")
_NS_KEYS = ("batch_size", "gpus", "num_gpus", "kv_store", "network", "model", "dtype", "num_epochs",
            "benchmark", "optimizer", "amp", "data_type", "dataset")
_NS_ITEM = re.compile(r"(?:^|, )(" + "|".join(_NS_KEYS) + r")=('[^']*'|\"[^\"]*\"|[^,]*)")
_START = re.compile(r"\bStart training with \[(.*)\]")
_RANK = re.compile(r"\b(?:Node|Rank)\[(\d+)\]")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d+))?")
_ERRORISH = re.compile(
    r"Error|Exception|Traceback|Interrupt|terminate called|Segmentation fault|Aborted \(core|out of memory"
)
_EXC = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)(?::.*)?$")
_FATAL = ("terminate called after throwing", "Segmentation fault", "Aborted (core dumped)")
_MLPERF = (":::MLLOG", ":::MLL ", ":::MLPv0.5.0")
_SNIFF = re.compile(
    r"(?:Epoch|Iter)\[\d+\]\s*Batch\s*\[\d+(?:-\d+)?\]\s+Speed:\s*\S+\s+samples/sec"
    r"|\[Epoch \d+\] speed: \S+ samples/sec|Namespace\(.*\bkv_store=|Start training with \[(?:gpu|cpu)\("
)
_SNIFF_LITERALS = ("samples/sec", "kv_store=", "Start training with [")
_COLUMNS = {"accuracy": "top1_accuracy", "acc": "top1_accuracy", "top_k_accuracy_5": "top5_accuracy",
            "cross-entropy": "loss", "ce": "loss", "loss": "loss"}

#: epoch (None: --test-io), batch start, batch end, Speed, metrics, match position, all items numeric
Speedo = tuple[int | None, int | None, int, float, dict[str, float], int, bool]


def sniff(head: str) -> bool:
    """A Speedometer line, a GluonCV epoch summary, an MXNet Namespace or ``Start training with [gpu(``;
    never a file with MLPerf markers (the mlperf module owns those, Speedometer lines and all)."""
    if any(contains(head, m) for m in _MLPERF):
        return False
    # Every alternative of _SNIFF contains one of these; testing them first spares the regex on other files.
    return any(contains(head, m) for m in _SNIFF_LITERALS) and _SNIFF.search(head) is not None


def _pairs(text: str) -> tuple[dict[str, float], bool]:
    """``name=value`` items split on tabs (on spaces if there is no tab) -> (the numeric ones, whether
    every item was one)."""
    out: dict[str, float] = {}
    clean = True
    for item in text.split("\t") if "\t" in text else text.split():
        name, eq, value = item.strip().rpartition("=")
        if not item.strip():
            continue
        try:
            if not (eq and name.strip()):
                raise ValueError(item)
            out[name.strip()] = float(value)
        except ValueError:
            clean = False
    return out, clean


def _speedometer(line: str) -> Speedo | None:
    """Like :func:`speedometer`, with epoch None for ``--test-io`` lines, plus where the match starts and
    whether every ``name=value`` item was numeric (the others are left out)."""
    if "samples/sec" not in line:
        return None
    m = _SPEEDO.search(line)
    if m is None:
        return None
    epoch, first, second, speed, rest = m.groups()
    try:
        value = float(speed)
    except ValueError:
        return None
    metrics, clean = _pairs(rest)
    start, end = (int(first), int(second)) if second is not None else (None, int(first))
    return (None if epoch is None else int(epoch)), start, end, value, metrics, m.start(), clean


def speedometer(line: str) -> tuple[int, int | None, int, float, dict[str, float]] | None:
    """Read one MXNet Speedometer line, behind any prefix; None if the line is not one.

    Returns ``(epoch, batch_start, batch_end, samples_per_sec, metrics)``: ``batch_start`` is None for the
    ``Batch [n]`` forms and ``n0`` for ``Batch [n0-n1]`` (0 with auto_reset=False); ``samples_per_sec`` is
    the Speed as printed (one worker's rate over the interval; may be ``inf``); ``metrics`` maps each
    ``name=value`` as printed (``Train-accuracy``, ``accuracy``, ``lr``...) to a float, empty for
    ``Iter[e]`` lines. Stable API: the mlperf parser imports it for Speedometer lines in result files.
    """
    got = _speedometer(line)
    if got is None or got[0] is None:
        return None
    return got[0], got[1], got[2], got[3], got[4]


def _where(prefix: str, line: str) -> tuple[int | None, float | None]:
    """(rank, unix seconds) from the text before a match: ``Node[k]``/``Rank[k]`` or an MPI/Slurm tag;
    an asctime or ``[YYYY-mm-dd HH:MM:SS]`` stamp (local time read as UTC)."""
    m = _RANK.search(prefix)
    rank = int(m.group(1)) if m is not None else split_rank(line)[0]
    s = _STAMP.search(prefix) if prefix else None
    if s is None:
        return rank, None
    y, mo, d, hh, mi, ss, frac = s.groups()
    secs = utc_seconds(y, mo, d, hh, mi, ss)
    return rank, None if secs is None else secs + (float("0." + frac) if frac else 0.0)


def _columns(row: dict[str, Any], metrics: dict[str, float]) -> None:
    """Copy well-known metric names (with or without ``Train-``) into their step columns."""
    for name, value in metrics.items():
        col = _COLUMNS.get(name.removeprefix("Train-"))
        if col is not None:
            row[col] = value


class _Parser(LineFormat[RunState]):
    """One :class:`RunState` open at a time, finished when the next starts."""

    def new_run(self, no: int) -> RunState:
        return RunState(self.index, no, no)

    def open(self, no: int) -> RunState:
        if self.run is not None:
            self.run.last_line = no - 1  # the line that starts the next run is not this one's
        return super().open(no)

    def emit(self, run: RunState) -> None:
        for st in run.ranks.values():
            self.flush(run, st)
        self.result.runs.append(build_run(run, self.followed))

    def flush(self, run: RunState, st: RankState, which: tuple[str, ...] = ("pending", "epoch_row")) -> None:
        for key in which:
            row = getattr(st, key)
            if row is not None:
                self.result.steps.add(run.index, **row)
                setattr(st, key, None)

    def bad(self, message: str, line_no: int, line: str) -> None:
        self.result.problem("bad_line", message, line_no, line)

    def read(self, raw: Line) -> bool:
        line_no, line = raw.no, raw.raw
        if self.run is not None:
            self.run.last_line = line_no
        if "samples/sec" in line and self.speed_line(line_no, line):
            return True
        if "Epoch" in line and self.epoch_line(line_no, line):
            return True
        if ("Namespace(" in line or "Start training with" in line) and self.header_line(line_no, line):
            return True
        if _ERRORISH.search(line):
            self.error_line(line_no, line)
        return True

    def speed_line(self, line_no: int, line: str) -> bool:
        got = _speedometer(line)
        if got is None:
            m = _GLUON.search(line)
            if m is not None and m.group(4) is not None:
                return self.epoch_speed(line_no, line, m)
            if "Speed" in line or "speed:" in line:
                self.bad("Speedometer-like line that cannot be read", line_no, line)
                return True
            return False
        if not got[6]:
            self.bad("Speedometer item(s) that are not name=number: Speed and other items kept", line_no, line)
        rank, ts = _where(line[: got[5]], line)
        run = self.current(line_no)
        last = run.ranks[rank].last if rank in run.ranks else None
        if got[0] is not None and last is not None and last[0] is not None:
            if got[0] < last[0] or (got[0] == last[0] and got[2] < last[1]):
                run = self.open(line_no)  # epoch or batch went back: a restart without a header
        self.interval(run, rank, got, line_no, ts)
        return True

    def interval(self, run: RunState, rank: int | None, got: Speedo, line_no: int, ts: float | None) -> None:
        """Count one Speedometer interval, or merge a <= 0.9 per-metric line into the last one."""
        epoch, start, end, speed, metrics = got[:5]
        st = run.rank(rank)
        p = st.pending
        if p is not None and (p["epoch"], p["step"], p["images_per_sec"]) == (epoch, end, speed):
            p["metrics"].update(metrics)
            _columns(p, metrics)
            run.era = "per_metric"
            return
        self.flush(run, st)
        first = st.last is None or st.last[0] != epoch or st.last[1] >= end
        if start is not None and (start > 0 or first):
            frames = end - start
        else:  # "[n]" forms and auto_reset=False "[0-n]": batches since the last report
            frames = end if st.last is None or first else end - st.last[1]
        st.last = (epoch, end)
        if not first and frames > 0 and 0 < speed < math.inf:
            st.batches += frames
            st.time_units += frames / speed
            st.speed_sum += speed
            st.n += 1
        if run.era is None:
            run.era = ("test_io" if epoch is None else "iter" if not metrics
                       else "single" if start is None else "range")
        row = {"step": end, "rank": rank, "epoch": epoch, "images_per_sec": speed,
               "interval_images_per_sec": speed, "timestamp": ts, "line_no": line_no, "metrics": dict(metrics)}
        _columns(row, metrics)
        st.pending = row
        run.intervals += 1
        run.rated += 0 < speed < math.inf
        run.last_event = "interval"
        run.seen(ts, epoch)

    def epoch_line(self, line_no: int, line: str) -> bool:
        m = _EPOCH_END.search(line)
        if m is not None:
            _, kind, name, value, cost = m.groups()
            try:
                values = {"time_cost_s" if cost else f"{kind}-{name}": float(cost or value)}
            except ValueError:
                self.bad("epoch-end value is not a number", line_no, line)
                return True
            self.epoch_value(line_no, line, m, values)
            return True
        m = _GLUON.search(line)
        if m is None or m.group(2) is None:
            return False
        pairs, clean = _pairs(m.group(3))
        if not clean:
            self.bad("GluonCV epoch item(s) that are not name=number: others kept", line_no, line)
        prefix = "Train-" if m.group(2) == "training" else "Validation-"
        self.epoch_value(line_no, line, m, {prefix + k: v for k, v in pairs.items()})
        return True

    def epoch_speed(self, line_no: int, line: str, m: re.Match[str]) -> bool:
        try:
            speed, cost = float(m.group(4)), float(m.group(5))
        except ValueError:
            self.bad("GluonCV epoch speed line cannot be read", line_no, line)
            return True
        run = self.epoch_value(line_no, line, m, {"samples_per_sec": speed, "time_cost_s": cost})
        if 0 < speed < math.inf and cost > 0:
            run.gluon = [run.gluon[0] + speed * cost, run.gluon[1] + cost]
        return True

    def epoch_value(self, line_no: int, line: str, m: re.Match[str], values: dict[str, float]) -> RunState:
        """Add epoch-end values to the rank's epoch row (a new row when the epoch changes)."""
        rank, ts = _where(line[: m.start()], line)
        epoch = int(m.group(1))
        run = self.current(line_no)
        st = run.rank(rank)
        self.flush(run, st, ("pending",))
        if st.epoch_row is not None and st.epoch_row["epoch"] != epoch:
            self.flush(run, st, ("epoch_row",))
        if st.epoch_row is None:
            st.epoch_row = {"step": None, "rank": rank, "epoch": epoch, "timestamp": ts, "line_no": line_no,
                            "metrics": {}}
        st.epoch_row["metrics"].update(values)
        if "time_cost_s" in values:
            st.time_cost = (st.time_cost or 0.0) + values["time_cost_s"]
        run.epoch_ends += 1
        run.last_event = "epoch_end"
        run.seen(ts, epoch)
        return run

    def header_line(self, line_no: int, line: str) -> bool:
        """``Namespace(...)`` (with a batch_size) or ``Start training with [...]``."""
        m = _NAMESPACE.search(line) or _START.search(line)
        if m is None or (m.re is _NAMESPACE and "batch_size=" not in m.group(1)):
            return False  # some other program's argparse dump
        rank, ts = _where(line[: m.start()], line)
        is_ns, run = m.re is _NAMESPACE, self.run
        if run is None or rank in run.ranks or rank in run.started or (is_ns and rank in run.ns_ranks):
            run = self.open(line_no)  # this rank already started the current run: a new one
        if is_ns:
            run.ns_ranks.add(rank)
            for k, v in _NS_ITEM.findall(m.group(1)):
                run.ns.setdefault(k, v.strip().strip("'\""))
        else:
            run.started.add(rank)
            run.start_gpus = m.group(1).count("gpu(")
        run.seen(ts)
        return True

    def error_line(self, line_no: int, line: str) -> None:
        text = split_rank(line)[1].rstrip()
        if "out of memory" in text and self.run is not None:
            self.run.oom = True  # e.g. the "what():  ... cudaMalloc failed: out of memory" line
        if text.startswith("Traceback (most recent call last)"):
            run = self.current(line_no)
            run.error = run.error or text
        elif _EXC.match(text) or text.startswith(_FATAL):
            run = self.current(line_no)
            run.error = text[:500]  # the last exception line is the one that ended the program
            run.oom = run.oom or "out of memory" in text

    def finish(self) -> None:
        if not self.result.runs:  # never dropped: a run row that says nothing usable was found
            self.result.problem("missing_field", "no MXNet Speedometer, epoch or Namespace line found")
            self.emit(self.new_run(1))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse an MXNet log (see the module docstring). Pure, one pass; unreadable lines become problems."""
    return drive(_Parser, lines, result)
