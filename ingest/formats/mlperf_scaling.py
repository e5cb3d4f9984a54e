"""MLPerf score factors: ``<submitter>/results/<system>/<benchmark>/scaling.json`` of a results repository.

``{"scaling_factor": 1.0044}``: the factor by which MLCommons' result summarizer multiplies that result
set's score (the review committee's reference-convergence normalisation; mlperf-logging's RCP checker also
writes these files). One ``ScoreScale`` per file; its place in the tree (``patterns.SCALING_TREE``) names the
set. A factor that is not a finite number > 0, or a file that is not such an object, is a ``bad_line``
problem and no factor: the score then stays unscaled, never scaled by a number that lies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bench.ingest.formats.mlperf_system import json_object
from bench.ingest.records import ParseResult, ScoreScale

NAME = "mlperf_scaling"
LINE_ORIENTED = False  # a JSON document: no final newline is not a cut line
DESCRIPTION = "MLPerf score factor JSON (<submitter>/results/<system>/<benchmark>/scaling.json)"


def sniff(head: str) -> bool:
    """A small JSON object holding ``scaling_factor`` (and no system description)."""
    return head.lstrip()[:1] == "{" and '"scaling_factor"' in head and len(head) < 4096


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one scaling.json (see the module docstring)."""
    result = result if result is not None else ParseResult()
    doc = json_object(lines, result)
    if doc is None:
        return result
    factor = doc.get("scaling_factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not (math.isfinite(factor) and factor > 0):
        result.problem("bad_line", f"scaling_factor {factor!r} is not a number > 0; the score stays unscaled")
        return result
    result.score_scales.append(ScoreScale(float(factor)))
    return result
