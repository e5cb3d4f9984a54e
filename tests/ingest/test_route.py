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

import bench.ingest
from bench.ingest import read_stage, registry
from bench.ingest.pipeline import ingest

#: (module file, function) -> the stage it is the entry of
STAGES = {
    ("read_stage.py", "read_held"): "read", ("read_stage.py", "__init__"): "read",
    ("parse.py", "detect"): "detect",
    ("parse.py", "run_parser"): "parse",
    ("rows.py", "file_rows"): "rows",
    ("parts.py", "finish"): "write",
    ("pipeline.py", "_record"): "record",
}


#: The folder holding bench's packages (ingest/, sql/, ...): the repository, in an editable install.
ROOT = Path(bench.ingest.__file__).resolve().parent.parent


def _module(code: Any) -> str | None:
    """``ingest/read_stage.py`` for a function of bench's own packages, else None."""
    path = Path(code.co_filename)
    if not path.is_relative_to(ROOT) or path.relative_to(ROOT).parts[0] not in ("ingest", "sql", "runner", "analytics"):
        return None
    return path.relative_to(ROOT).as_posix()


def _route(log: Path, store: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """The stages entered while ``log`` is ingested, in order (threads included), and every call from
    one of bench's modules into another (caller, callee)."""
    entered: list[str] = []
    edges: set[tuple[str, str]] = set()
    modules: dict[Any, str | None] = {}

    def module(code: Any) -> str | None:
        if code not in modules:
            modules[code] = _module(code)
        return modules[code]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (callee := module(frame.f_code)) is None:
            return
        stage = STAGES.get((Path(frame.f_code.co_filename).name, frame.f_code.co_name))
        if stage is not None and callee.startswith("ingest/"):
            entered.append(stage)
        caller = frame.f_back
        while caller is not None and module(caller.f_code) is None:
            caller = caller.f_back
        edges.add((module(caller.f_code) if caller is not None else "", callee))

    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        summary = ingest([str(log)], store, workers=0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert summary.runs_added == 1 and summary.steps_added == 300  # hand count: 300 steps, display_every=1
    return entered, {(a, b) for a, b in edges if a != b}


def test_a_held_and_a_streamed_file_take_the_same_stages_once_each(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages, in order, once each; and the calls between modules differ only where the work runs: a
    held file's chunk goes through the stages from the pool, a streamed file from the ingest loop, with
    its own reading (the chunks, the hash thread) and its part writer's threads."""
    log = tmp_path / "output.log"
    log.write_text(tf_cnn_log(300, display_every=1, seed=4))
    ingest([str(log)], tmp_path / "warm", workers=0)  # every module imported: imports are not the route
    held, held_calls = _route(log, tmp_path / "held")
    monkeypatch.setattr(read_stage, "BIG_FILE", 1000)  # now it is streamed, in 4 KiB chunks
    monkeypatch.setattr(read_stage, "CHUNK", 4096)
    monkeypatch.setattr(registry, "HEAD_CHARS", 4096)
    streamed, streamed_calls = _route(log, tmp_path / "streamed")
    assert held == streamed == ["read", "detect", "parse", "rows", "write", "record"]
    assert held_calls - streamed_calls == {("ingest/pool.py", "ingest/stages.py"), ("ingest/pool.py", "ingest/parts.py")}
    where = {"ingest/read_stage.py", "ingest/parts.py", "ingest/stages.py", "ingest/parse.py"}
    assert all(where.intersection(edge) for edge in streamed_calls - held_calls), streamed_calls - held_calls
    assert {a for a, b in held_calls | streamed_calls if b == "ingest/pipeline.py"} == {""}  # the loop is entered once
