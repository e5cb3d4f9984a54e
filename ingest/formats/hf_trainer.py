"""Hugging Face ``transformers`` Trainer logs: one run per ``trainer.train()``, one step row per logged loss.

Lines read, behind the explicit format's ``[INFO|trainer.py:1618] 2026-11-27 08:28:42,477 >> `` prefix or
none: the ``***** Running training *****`` block (``Num examples``, ``Num Epochs``, ``Instantaneous batch
size per device``, ``Total train batch size (...)``, ``Gradient Accumulation steps``, ``Total optimization
steps``, ``Num update steps per epoch``, ``Number of trainable parameters``), the dicts the Trainer prints
(``{'loss': 0.69, 'learning_rate': 4e-05, 'epoch': 0.25}``; transformers 5 quotes the values), the closing
``{'train_runtime': ..., 'train_samples_per_second': ...}`` and a Python traceback.

- ``throughput`` is the Trainer's ``train_samples_per_second`` in samples/sec, as printed: samples of all
  epochs over ``train_runtime``, evaluation included. ``wall_time_s`` is ``train_runtime``.
- A loss dict is a step row: ``step`` = epoch x update steps per epoch (rounded), the epoch fraction,
  learning rate and grad norm go to ``metrics``. Evaluation dicts go to the run's details (the last wins).
- A new ``Running training`` block starts the next run; so does a metrics dict after a run's summary.
- A run's lines are the Trainer's own (``trainer.py``) and unprefixed ones (metrics, tracebacks); other
  modules log while the next process sets up. Stamps are the logger's local time, read as UTC.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.ingest.formats.lines import Line, LineFormat, drive
from bench.ingest.records import ParseResult, Run
from bench.ingest.text import contains, utc_seconds

NAME = "hf_trainer"
DESCRIPTION = "Hugging Face transformers Trainer logs (train_samples_per_second, loss per logging step)"

_PREFIX = re.compile(r"\[[A-Z]+\|([^\]:]*)[^\]]*\] (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),\d+ >> ?")
_HEADER = re.compile(r" *(Num examples|Num Epochs|Instantaneous batch size per device|Total train batch size"
                     r"|Gradient Accumulation steps|Total optimization steps|Num update steps per epoch"
                     r"|Number of trainable parameters)[^=]* = ([\d,]+)$")
_PAIR = re.compile(r"'(\w+)': '?([^',}]*)'?")
_EXCEPTION = re.compile(r"(?:\w+\.)*\w*(?:Error|Exception|Interrupt)\b.*")
_HEADER_FIELDS = {"Num examples": "examples", "Num Epochs": "epochs", "Gradient Accumulation steps": "grad_accum",
                  "Total optimization steps": "steps", "Num update steps per epoch": "steps_per_epoch",
                  "Number of trainable parameters": "parameters",
                  "Instantaneous batch size per device": "batch", "Total train batch size": "global_batch"}


def sniff(head: str) -> bool:
    """The Trainer's header block with a field only the Trainer prints (Google's BERT ``run_squad.py`` prints
    the same ``***** Running training *****`` banner, then its own fields), or its metrics dicts (logging
    below INFO prints only those)."""
    if contains(head, "***** Running training *****") and (
            contains(head, "Instantaneous batch size per device") or contains(head, "Total optimization steps")):
        return True
    if contains(head, "'train_samples_per_second': "):
        return True
    return contains(head, "{'loss': ") and contains(head, "'learning_rate': ")


@dataclass
class _State:
    first_line: int
    last_line: int = 0
    facts: dict[str, int] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    in_eval: bool = False
    completed: bool = False  # "Training completed": the loop ended, whatever its summary says
    summary: dict[str, float] | None = None
    error: str | None = None
    stamps: list[float] = field(default_factory=list)


class _Parser(LineFormat[_State]):
    MUST_READ, STATE = ("{'",), _State
    BAD_LINE = "a Trainer metrics line that is cut short or whose values are not numbers"

    def read(self, line: Line) -> bool:
        msg, m = line.msg, _PREFIX.match(line.msg)
        if m is not None:
            msg = msg[m.end():]
        dict_line = msg.startswith("{'")
        # a run opens at its header block, or (logging below INFO prints no header) at its first metrics
        if msg.endswith("***** Running training *****") or (dict_line and (self.run is None or self.run.summary)):
            self.open(line.no)
        st = self.run
        if st is None or (m is not None and m.group(1) != "trainer.py"):
            return True  # other modules log while a process sets up: that is before its run
        st.last_line = line.no
        if m is not None and (stamp := utc_seconds(*m.groups()[1:])) is not None:
            st.stamps[1:] = [stamp]
        if dict_line:
            return self._metrics(st, line, msg)
        if msg.endswith("***** Running Evaluation *****"):
            st.in_eval = True
        elif not st.in_eval and (h := _HEADER.match(msg)) is not None:
            st.facts[_HEADER_FIELDS[h.group(1)]] = int(h.group(2).replace(",", ""))
        elif msg.startswith("Training completed"):
            st.completed = True
        elif msg.startswith("Traceback (most recent call last)"):
            st.error = st.error or msg
        elif st.error is not None and _EXCEPTION.fullmatch(msg):
            st.error = msg  # the last exception line is the one that ended the program
        return True

    def _metrics(self, st: _State, line: Line, msg: str) -> bool:
        try:
            values = {k: float(v) for k, v in _PAIR.findall(msg)}
        except ValueError:
            return False
        if not msg.rstrip().endswith("}") or not values:
            return False
        if "train_runtime" in values:
            st.summary = values
        elif "eval_loss" in values:
            st.details.update({k: f"{v:g}" for k, v in values.items() if k != "epoch"})
        elif "loss" in values:
            epoch, per_epoch = values.get("epoch"), st.facts.get("steps_per_epoch")
            step = round(epoch * per_epoch) if epoch is not None and per_epoch else None
            metrics = {k: v for k, v in values.items() if k != "loss"}
            self.step(step, loss=values["loss"], line_no=line.no, metrics=metrics)
        st.in_eval = False
        return True

    def emit(self, st: _State) -> None:
        f, s = st.facts, st.summary or {}
        rate = s.get("train_samples_per_second")
        ended = st.summary is not None or st.completed
        status = "ok" if rate is not None and rate > 0 else "no_result" if ended else "truncated"
        if st.error is not None:
            status = "oom" if "out of memory" in st.error.lower() else "failed"
        details = dict(st.details)
        for key, name in (("grad_accum", "gradient_accumulation_steps"), ("parameters", "trainable_parameters"),
                          ("examples", "num_examples"), ("epochs", "num_epochs")):
            if key in f:
                details[name] = str(f[key])
        for key in ("train_steps_per_second", "train_loss"):
            if key in s:
                details[key] = f"{s[key]:g}"
        kw: dict[str, Any] = {}
        if status == "ok":
            kw = {"throughput": rate, "throughput_unit": "samples/sec", "throughput_derived": False,
                  "wall_time_s": s.get("train_runtime")}
        self.result.runs.append(Run(
            run_index=self.index, format=NAME, framework="transformers", mode="train",
            batch_size_per_device=f.get("batch"), global_batch_size=f.get("global_batch"), num_steps=f.get("steps"),
            started_at=st.stamps[0] if st.stamps else None, ended_at=st.stamps[-1] if st.stamps else None,
            status=status, status_detail=st.error, first_line=st.first_line, last_line=st.last_line,
            details=details, **kw))


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse a Trainer log (see the module docstring); unreadable metrics lines become problem rows."""
    return drive(_Parser, lines, result)
