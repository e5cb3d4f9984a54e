"""``bench sweep``'s own record, ``<out>/sweep-<plan>-<UTC stamp>.json``: the plan's name and one entry per
cell (its status and run folder). It holds no run of its own: each cell's run is read from its run folder
(output.log and run.json) beside it. The record is recognized, so that ingesting a sweep's folder does not
report bench's own file as a log of an unknown format; it adds a sources row and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.ingest.records import ParseResult

NAME = "bench_sweep"
LINE_ORIENTED = False  # a JSON document: no final newline is not a cut line
DESCRIPTION = "bench sweep's record of its cells (sweep-<plan>-<stamp>.json): its runs are in their run folders"


def sniff(head: str) -> bool:
    """A JSON object whose cells name their run folders, as runner.sweep.write_record writes it."""
    return (head.lstrip()[:1] == "{" and '"cells": [' in head and '"sweep": ' in head and '"run_dir": ' in head
            and '"skip_reason": ' in head)


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Nothing to read: the record's runs are read from their run folders (see the module docstring)."""
    return result if result is not None else ParseResult()
