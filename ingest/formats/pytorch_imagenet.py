"""PyTorch's ImageNet example (pytorch/examples ``imagenet/main.py``) and torchvision's classification references:
one run per training, one step row per printed batch.

Lines read, tab- or space-separated, behind any prefix:

- the example's ProgressMeter, in its eras: ``Epoch: [0][ 10/5005]\\tTime 0.512 ( 0.602)\\tData 0.001 (
  0.100)\\tLoss 6.9 (6.9)\\tPrec@1 0.0 (0.1)\\tPrec@5 0.3 (0.4)`` (2017-2018: ``Prec@k``, no padding) and
  today's ``Epoch: [0][   11/5005]   Time  0.227 ( 0.597)   ...   Acc@1   0.00 (  0.25)   Acc@5 ...``; its
  ``Test: [ 1/25]`` lines and `` * Acc@1 69.104 Acc@5 89.088`` (the validation accuracy, in details);
  ``=> creating model 'resnet18'`` / ``=> creating model: resnet18`` / ``Creating model resnet50``;
- torchvision's MetricLogger: ``Epoch: [0]  [ 10/334]  eta: 0:06:47  lr: 0.128  img/s: 5625.49  loss: 7.29
  (7.25)  acc1: 0.0 (0.13)  acc5: ...  time: 1.2591  data: 0.0019``, and its ``Epoch: [0] Total time:``.

How the numbers are defined:

- The ProgressMeter prints the batch time of the printed batch and, in brackets, the mean since the epoch
  began; it never prints the batch size. The run's rate is therefore in ``steps/sec``: printed batches over
  the sum of their times, leaving out each epoch's first printed batch (its data loader and cuDNN warm-up:
  4.75 s against 0.2-0.6 s in a real run). The printed batches are every ``--print-freq``-th, a sample of the
  epoch. With the batch size from elsewhere (a path pattern, run.json), images/s is batch x ranks x steps/s.
- torchvision's ``img/s`` is one rank's: its batch over that iteration's time. The run's rate is the
  harmonic mean of the printed ``img/s``, each epoch's batch 0 left out (images over time), times the number
  of ranks where the log says it (``| distributed init (rank 3)`` lines, ``world_size``), else per device
  (``images/sec/device``). Where the log prints a per-epoch ``Epoch: [0] Avg img/s: 5060.2`` (DeepSpark's
  reference scripts), those summaries are used instead: their harmonic mean over the epochs.
- Several ranks print the same batch (multiprocessing-distributed): a batch is read once, the first time.
- A traceback (an NCCL error under torchelastic) followed by more batches is a restart: counted in details
  (``restarts``); only an error after the last batch ends the run ``failed`` (``oom`` for out of memory).
"""

from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.column_buffers import MAX_INT, MapBlock
from bench.ingest.formats.line_scan import FastRows, Program, Rows
from bench.ingest.formats.lines import Line, drive, error_status, program_error
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import WORLD_SIZE, contains, strip_ansi

NAME = "pytorch_imagenet"
DESCRIPTION = "PyTorch ImageNet example (Epoch: [0][ 10/5005] Time ...) and torchvision references (img/s)"

_METER = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/(\d+)\]\s+Time\s+(\S+)\s+\(\s*(\S+)\)\s+Data\s+(\S+)\s+\(\s*\S+\)"
                    r"\s+Loss\s+(\S+)\s+\(\s*\S+\)\s+(?:Acc|Prec)@1\s+(\S+)\s+\(\s*\S+\)\s+(?:Acc|Prec)@5\s+(\S+)")
_LOGGER = re.compile(r"Epoch: \[(\d+)\]\s+\[\s*(\d+)/(\d+)\]\s+eta: \S+\s+(.*)")
_PAIR = re.compile(r"([\w/]+): (\S+)")
_ACCURACY = re.compile(r"^\s*\* Acc@1 (\S+) Acc@5 (\S+)")
_MODEL = re.compile(r"(?:=> creating model:? '?|Creating model )([\w.-]+)")
_EPOCH_AVG = re.compile(r"Epoch: \[\d+\] Avg img/s: (\S+)")
_RANK_INIT = re.compile(r"\| distributed init \(rank (\d+)\)")


_SNIFF = re.compile(r"Epoch: \[\d+\](?:\[\s*\d+/\d+\]\s+Time |\s+\[\s*\d+/\d+\]\s+eta: .*img/s: )")


def sniff(head: str) -> bool:
    """A ProgressMeter line (``Epoch: [0][ 10/5005]``, then ``Time``) or a MetricLogger one with ``img/s``."""
    return contains(head, "Epoch: [") and _SNIFF.search(head) is not None


class _Batches:
    """The batches of a run read so far, by key (``_batch``): those read one at a time in a set, those read a
    stretch at a time (``fast_rows``: each above every key before it) appended to a sorted array, which costs
    less than hashing them by the hundred thousand."""

    def __init__(self) -> None:
        self.keys: set[int | tuple[int, int]] = set()
        self.ordered = array("q")
        self.high = -1  # the largest int key read

    def __contains__(self, key: int | tuple[int, int]) -> bool:
        if key in self.keys:
            return True
        if not isinstance(key, int) or not self.ordered or key > self.ordered[-1]:
            return False
        at = bisect_left(self.ordered, key)
        return self.ordered[at] == key

    def add(self, key: int | tuple[int, int]) -> None:
        self.keys.add(key)
        if isinstance(key, int):
            self.high = max(self.high, key)

    def extend_above(self, keys: Any) -> None:
        """Keys (an int64 array) rising, the first above ``high``."""
        self.ordered.frombytes(keys.tobytes())
        self.high = int(keys[-1])


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    kind: str = "imagenet"
    seen: _Batches = field(default_factory=lambda: _Batches())
    times_s: list[float] = field(default_factory=list)  # batch times, each epoch's first batch left out
    rates: list[float] = field(default_factory=list)  # torchvision img/s, each epoch's first batch left out
    epoch_rates: list[float] = field(default_factory=list)  # a per-epoch "Avg img/s" summary, where printed
    accuracy: tuple[str, str] | None = None
    error: str | None = None
    restarts: int = 0
    avg_batch_s: float | None = None


class _Parser(FastRows):
    #: ``_METER`` in its ``Acc@`` spelling (the one the example prints today), for the C path (line_scan)
    PROGRAM = (Program().find("Epoch: [").digits("epoch").lit("][").ws().digits("batch").lit("/").digits("batches")
               .lit("]").ws(least=1).lit("Time").ws(least=1).token("took").ws(least=1).lit("(").ws()
               .token("mean", ends=")").ws(least=1).lit("Data").ws(least=1).token("data").ws(least=1).lit("(").ws()
               .token(None, ends=")").ws(least=1).lit("Loss").ws(least=1).token("loss").ws(least=1).lit("(").ws()
               .token(None, ends=")").ws(least=1).lit("Acc@1").ws(least=1).token("top1").ws(least=1).lit("(").ws()
               .token(None, ends=")").ws(least=1).lit("Acc@5").ws(least=1).token("top5"))
    MUST_READ = ("img/s: ",)
    BAD_LINE = "a training line whose step or time cannot be read"
    STATE = _State

    def __init__(self, result: ParseResult):
        super().__init__(result)
        self.model: str | None = None
        self.ranks: set[int] = set()
        self.world: int | None = None

    def read(self, line: Line) -> bool:
        msg = strip_ansi(line.msg)
        if (m := _METER.search(msg)) is not None:
            return self._meter(line, m)
        if (m := _LOGGER.search(msg)) is not None:
            return self._logger(line, m)
        if (m := _EPOCH_AVG.search(msg)) is not None and self.run is not None:
            rate = self.result.number(m.group(1), "Avg img/s", line.no)
            if rate is not None and math.isfinite(rate) and rate > 0:
                self.run.epoch_rates.append(rate)
            return rate is not None
        if "Epoch: [" in msg and "Time " in msg and "Test:" not in msg:
            return False  # a ProgressMeter line this module cannot read: a bad_line
        st = self.run
        if (m := _MODEL.search(msg)) is not None:
            self.model = self.model or m.group(1)
        elif (m := _RANK_INIT.search(msg)) is not None:
            self.ranks.add(int(m.group(1)))
        elif (m := WORLD_SIZE.search(msg)) is not None:
            self.world = self.world or int(m.group(1))
        elif st is None:
            return True
        elif (m := _ACCURACY.match(msg)) is not None:
            st.accuracy = (m.group(1), m.group(2))
        else:
            st.error = program_error(st.error, msg)
        return True

    def fast_rows(self, rows: Rows, lo: int, hi: int) -> int:
        """``fast_line`` over rows lo.. of the open run, for as long as each is a new batch after no error."""
        import numpy as np

        st = self.run
        assert st is not None  # (line_scan calls it for an open run only)
        if st.error is not None:
            return 0
        epoch, i, per_epoch = (rows.col[k][lo:hi] for k in ("epoch", "batch", "batches"))
        small = (epoch < 1 << 31) & (i < 1 << 31) & (per_epoch < 1 << 31)  # so that the step fits an int64
        good = small & (np.where(small, epoch * per_epoch + i, 0) <= MAX_INT)
        keys = np.where(small, epoch * (1 << 32) + i, 0)  # _batch's keys
        good[1:] &= keys[1:] > keys[:-1]  # rising from above every batch before: new, none another rank's copy
        good[0] &= int(keys[0]) > st.seen.high
        k = hi - lo if good.all() else int(np.argmin(good))
        if k == 0:
            return 0
        epoch, i, per_epoch = epoch[:k], i[:k], per_epoch[:k]
        took, mean, data = (rows.col[c][lo:lo + k] for c in ("took", "mean", "data"))
        st.seen.extend_above(keys[:k])
        st.last_line = int(rows.no[lo + k - 1])
        with np.errstate(invalid="ignore"):
            timed = (i > 1) & np.isfinite(took) & (took > 0)
        st.times_s.extend(took[timed].tolist())
        st.avg_batch_s = float(mean[-1])
        self.result.steps.add_block(len(self.result.runs), k, {
            "step": epoch * per_epoch + i, "epoch": epoch, "step_time_ms": took * 1e3,
            "loss": rows.col["loss"][lo:lo + k], "top1_accuracy": rows.col["top1"][lo:lo + k],
            "top5_accuracy": rows.col["top5"][lo:lo + k], "line_no": rows.no[lo:lo + k],
            "metrics": MapBlock(k, {"data_time_ms": data * 1e3})})
        return k

    def _new_batch(self, no: int, epoch: int, i: int) -> _State | None:
        """The open run (opened at line ``no`` if none is) when batch ``i`` of ``epoch`` is new, else None
        (another rank's copy)."""
        st = self.current(no)
        if (key := _batch(epoch, i)) in st.seen:
            return None
        if st.error is not None:  # training went on after an error: the job restarted
            st.restarts, st.error = st.restarts + 1, None
        st.seen.add(key)
        st.last_line = no
        return st

    def fast_line(self, no: int, raw: str) -> bool:
        """A ProgressMeter line of the open run whose figures all read (``_meter`` on the general path)."""
        st = self.run
        if st is None or "\x1b" in raw or (m := _METER.search(raw)) is None:
            return False
        try:
            took, mean, data, loss, top1, top5 = map(float, m.group(4, 5, 6, 7, 8, 9))
        except ValueError:
            return False  # the general path names the field
        epoch, i, per_epoch = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if self._new_batch(no, epoch, i) is None:
            return True  # another rank's copy
        if i > 1 and math.isfinite(took) and took > 0:
            st.times_s.append(took)
        st.avg_batch_s = mean
        self.result.steps.add(len(self.result.runs), epoch * per_epoch + i, epoch=epoch, step_time_ms=took * 1e3,
                              loss=loss, top1_accuracy=top1, top5_accuracy=top5, line_no=no,
                              metrics={"data_time_ms": data * 1e3})
        return True

    def _meter(self, line: Line, m: re.Match[str]) -> bool:
        epoch, i, per_epoch = int(m.group(1)), int(m.group(2)), int(m.group(3))
        number = self.result.number
        took = number(m.group(4), "Time", line.no)
        if took is None:
            return True
        st = self._new_batch(line.no, epoch, i)
        if st is None:
            return True
        if i > 1 and math.isfinite(took) and took > 0:
            st.times_s.append(took)
        st.avg_batch_s = number(m.group(5), "Time (mean)", line.no)
        self.step(epoch * per_epoch + i, epoch=epoch, step_time_ms=took * 1e3, loss=number(m.group(7), "Loss", line.no),
                  top1_accuracy=number(m.group(8), "Acc@1", line.no), top5_accuracy=number(m.group(9), "Acc@5", line.no),
                  line_no=line.no, rank=line.rank, metrics={"data_time_ms": d * 1e3}
                  if (d := number(m.group(6), "Data", line.no)) is not None else None)
        return True

    def _logger(self, line: Line, m: re.Match[str]) -> bool:
        epoch, i, per_epoch = int(m.group(1)), int(m.group(2)), int(m.group(3))
        pairs = dict(_PAIR.findall(m.group(4)))
        rate = self.result.number(pairs.get("img/s"), "img/s", line.no)
        if rate is None:
            return False
        st = self._new_batch(line.no, epoch, i)
        if st is None:
            return True
        st.kind = "torchvision"
        if i > 0 and math.isfinite(rate) and rate > 0:
            st.rates.append(rate)
        number = self.result.number
        took = number(pairs.get("time"), "time", line.no)
        self.step(epoch * per_epoch + i, epoch=epoch, images_per_sec=rate, line_no=line.no, rank=line.rank,
                  loss=number(pairs.get("loss"), "loss", line.no),
                  top1_accuracy=number(pairs.get("acc1"), "acc1", line.no),
                  top5_accuracy=number(pairs.get("acc5"), "acc5", line.no),
                  step_time_ms=None if took is None else took * 1e3)
        return True

    def emit(self, st: _State) -> None:
        world = self.world or (len(self.ranks) if self.ranks else None)
        details: dict[str, str] = {}
        if st.accuracy is not None:
            details["val_top1"], details["val_top5"] = st.accuracy
        if st.restarts:
            details["restarts"] = str(st.restarts)
        kw: dict[str, Any] = {}
        if st.kind == "torchvision" and (st.rates or st.epoch_rates):
            rates = st.epoch_rates or st.rates
            mean = len(rates) / sum(1 / r for r in rates)
            if st.epoch_rates:
                details["throughput_source"] = "the per-epoch 'Avg img/s' summaries (harmonic mean over epochs)"
            kw = {"throughput": mean * world, "throughput_unit": "images/sec", "images_per_sec": mean * world} \
                if world else {"throughput": mean, "throughput_unit": "images/sec/device"}
        elif st.times_s:
            kw = {"throughput": len(st.times_s) / sum(st.times_s), "throughput_unit": "steps/sec"}
            details["throughput_note"] = "the log prints no batch size: images/s is batch x ranks x steps/sec"
        if st.avg_batch_s is not None:
            details["last_mean_batch_time_s"] = f"{st.avg_batch_s:g}"
        status = "ok" if kw else "no_result"
        if st.error is not None:
            status = error_status(st.error)
        if status == "ok":
            kw["throughput_derived"] = True
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="pytorch" if st.kind == "imagenet" else "torchvision",
            model=self.model, mode="train", num_devices=world, num_ranks=world,
            status=status, status_detail=st.error, first_line=st.first_line,
            last_line=st.last_line, details=details, **kw))


#: Read through the line program in C when it is built (registry.LINE_SCANNED).
C_PATH = _Parser


def _batch(epoch: int, i: int) -> int | tuple[int, int]:
    """A key for batch ``i`` of ``epoch``: an int where ``i`` fits in 32 bits (cheaper to hold and compare by the
    hundred thousand), else the pair; two batches have the same key only if they are the same batch."""
    return epoch * (1 << 32) + i if 0 <= i < 1 << 32 else (epoch, i)


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse an ImageNet-example or torchvision-references log (see the module docstring)."""
    return drive(_Parser, lines, result)
