"""MLPerf system descriptions: the JSON file ``<submitter>/systems/<system>.json`` of a results repository.

One ``System`` per file (its path gives the submitter folder and the system, which its results join on;
see ``bench.ingest.patterns.SYSTEMS_TREE``). Counts are often strings (``"number_of_nodes": "8"``): a
string of digits is read as the count; anything else that is not a whole number from 1 (0 for
``accelerators_per_node``: a CPU-only system) to 2^53 is a ``bad_line`` problem and NULL. A description without ``system_name``, ``number_of_nodes``,
``accelerators_per_node`` or ``accelerator_model_name`` gets a ``missing_field`` problem per missing key.
A file that is not a JSON object is one ``bad_line`` problem and no system.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from bench.ingest.records import ParseResult, System

NAME = "mlperf_system"
LINE_ORIENTED = False  # a JSON document: no final newline is not a cut line
DESCRIPTION = "MLPerf system description JSON (<submitter>/systems/<system>.json of a results repository)"

_REQUIRED = ("system_name", "number_of_nodes", "accelerators_per_node", "accelerator_model_name")
_COUNTS = {"number_of_nodes": "num_nodes", "accelerators_per_node": "accelerators_per_node",
           "host_processors_per_node": "host_processors_per_node"}
_TEXTS = {"submitter": "submitter_name", "division": "division", "status": "availability",
          "system_name": "system_name", "accelerator_model_name": "device_model",
          "host_processor_model_name": "host_processor_model", "framework": "framework"}


def sniff(head: str) -> bool:
    """A JSON object naming a system and its accelerators per node."""
    return head.lstrip()[:1] == "{" and '"accelerators_per_node"' in head and '"system_name"' in head


def parse_lines(lines: Iterable[str], *, source: str, result: ParseResult | None = None) -> ParseResult:
    """Parse one system description (see the module docstring)."""
    result = result if result is not None else ParseResult()
    doc = json_object(lines, result)
    if doc is None:
        return result
    for key in _REQUIRED:
        if _text(doc.get(key)) is None:
            result.problem("missing_field", f"the system description has no {key}")
    values: dict[str, Any] = {field: _text(doc.get(key)) for key, field in _TEXTS.items()}
    for key, field in _COUNTS.items():
        values[field] = _count(doc.get(key), least=0 if key == "accelerators_per_node" else 1)
        if values[field] is None and _text(doc.get(key)) is not None:
            result.problem("bad_line", f"{key} {doc[key]!r} is not a count; stored as NULL")
    result.systems.append(System(**values))
    return result


def json_object(lines: Iterable[str], result: ParseResult) -> dict[str, Any] | None:
    """The file's lines as one JSON object; None, with a ``bad_line`` problem, when they are not one."""
    try:
        doc = json.loads("\n".join(lines))
    except json.JSONDecodeError as e:
        result.problem("bad_line", f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})", e.lineno)
        return None
    if not isinstance(doc, dict):
        result.problem("bad_line", f"top level is a JSON {type(doc).__name__}, not an object")
        return None
    return doc


def _text(value: object) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _count(value: object, least: int = 1) -> int | None:
    """A whole number from ``least`` to 2^53, given as a number or a string of digits; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and least <= value <= 2**53 else None
