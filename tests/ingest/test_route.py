"""One route for every file: a held file and a streamed one pass through the same stages, in the same
order, each stage once (ingest/README.md, "The route of one file"); only where the stages run differs."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from logtools import tf_cnn_log

from bench.ingest import read as read_stage
from bench.ingest import registry
from bench.ingest.pipeline import ingest

#: (module file, function) -> the stage it is the entry of
STAGES = {
    ("read.py", "read_held"): "read", ("read.py", "__init__"): "read",
    ("parse.py", "detect"): "detect",
    ("parse.py", "run_parser"): "parse",
    ("rows.py", "file_rows"): "rows",
    ("parts.py", "finish"): "write",
    ("pipeline.py", "_record"): "record",
}


def _route(log: Path, store: Path) -> list[str]:
    """The stages entered while ``log`` is ingested, in order (threads included)."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            stage = STAGES.get((Path(frame.f_code.co_filename).name, frame.f_code.co_name))
            if stage is not None and "/ingest/" in frame.f_code.co_filename:
                entered.append(stage)

    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        summary = ingest([str(log)], store, workers=0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert summary.runs_added == 1 and summary.steps_added == 300  # hand count: 300 steps, display_every=1
    return entered


def test_a_held_and_a_streamed_file_take_the_same_stages_once_each(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "output.log"
    log.write_text(tf_cnn_log(300, display_every=1, seed=4))
    held = _route(log, tmp_path / "held")
    monkeypatch.setattr(read_stage, "BIG_FILE", 1000)  # now it is streamed, in 4 KiB chunks
    monkeypatch.setattr(read_stage, "CHUNK", 4096)
    monkeypatch.setattr(registry, "HEAD_CHARS", 4096)
    streamed = _route(log, tmp_path / "streamed")
    assert held == streamed == ["read", "detect", "parse", "rows", "write", "record"]
