"""MLPerf system descriptions: the JSON file ``<submitter>/systems/<system>.json`` of a results repository.

One ``System`` per file (its path gives the submitter folder and the system, which its results join on;
see ``bench.ingest.patterns.SYSTEMS_TREE``). Counts are often strings (``"number_of_nodes": "8"``): a
string of digits is read as the count; anything else that is not a whole number from 1 (0 for
``accelerators_per_node``: a CPU-only system) to 2^53 is a ``bad_line`` problem and NULL. A description without ``system_name``, ``number_of_nodes``,
``accelerators_per_node`` or ``accelerator_model_name`` gets a ``missing_field`` problem per missing key.
A file that is not a JSON object is one ``bad_line`` problem and no system.

Older rounds wrote other layouts, read into the same fields (``_current_keys``): keys with spaces
(``"number of nodes"``, Intel v0.6) or misspelt (``_MISSPELT``); v0.5/v0.6's ``nodes`` list of
``{"num_nodes", "accelerator", "num_accelerators", "cpu": "2x <model>"}`` (Fujitsu, Intel v0.6); and NVIDIA
v0.6's lines of ``<key>: {"value": ..., "metadata": ...}``, whose ``entry`` value is a Python repr holding
``nodes`` as another repr, and whose ``org`` and ``platform`` name the submitter and the system.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from typing import Any

from bench.ingest.devices import accelerator_name
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
    text = "\n".join(lines)
    doc = _key_lines(text)
    if doc is None:
        doc = json_object([text], result)
    if doc is None:
        return result
    doc = _current_keys(doc, result)
    for key in _REQUIRED:
        if _text(doc.get(key)) is None:
            result.problem("missing_field", f"the system description has no {key}")
    values: dict[str, Any] = {field: _text(doc.get(key)) for key, field in _TEXTS.items()}
    for key, field in _COUNTS.items():
        values[field] = _count(doc.get(key), least=0 if key == "accelerators_per_node" else 1)
        if values[field] is None and _text(doc.get(key)) is not None:
            result.problem("bad_line", f"{key} {doc[key]!r} is not a count; stored as NULL")
    if values["device_model"] is not None:  # one name per device; the submitted one is kept in details
        submitted = values["device_model"]
        values["device_model"], power = accelerator_name(submitted)
        values["details"] = {"accelerator_model_name": submitted,
                             **({"accelerator_power_w": str(power)} if power is not None else {})}
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


_KEY_LINE = re.compile(r"(\w+): (\{.*\})")


def _key_lines(text: str) -> dict[str, Any] | None:
    """NVIDIA v0.6's layout, every line ``<key>: {"value": ...}``, as {key: value}; None for any other text."""
    doc: dict[str, Any] = {}
    for line in filter(None, (ln.strip() for ln in text.splitlines())):
        m = _KEY_LINE.fullmatch(line)
        if m is None or line.startswith("{"):
            return None
        try:
            value = json.loads(m[2])
        except ValueError:
            return None
        doc[m[1]] = value.get("value") if isinstance(value, dict) else None
    return doc or None


def _literal(value: object) -> object:
    """A Python repr (of a dict, say) read as the value it shows; anything else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return value


_NOT_A_MODEL = {"", "na", "n/a", "none", "-"}
#: Keys misspelt in MLCommons' repositories (Intel v0.6, SIAT v0.7), read under their right names.
_MISSPELT = {"sumitter": "submitter", "divison": "division"}
_HOST_COUNT = re.compile(r"(\d+)\s*x\s+(.+)")


def _current_keys(doc: dict[str, Any], result: ParseResult) -> dict[str, Any]:
    """The description under today's keys (the module docstring lists the older layouts). Keys it already
    has are kept as they are. A count that cannot be one per node is left out, with a problem saying why."""
    out = {str(k).strip().replace(" ", "_"): v for k, v in doc.items()}
    for wrong, right in _MISSPELT.items():
        if wrong in out:
            out.setdefault(right, out[wrong])
    entry = _literal(out.get("entry"))
    if isinstance(entry, dict):  # NVIDIA v0.6
        for k, v in entry.items():
            out.setdefault(str(k), v)
        out.setdefault("submitter", out.get("org"))
        out.setdefault("system_name", out.get("platform"))
    nodes = _literal(out.get("nodes"))
    nodes = [nodes] if isinstance(nodes, dict) else nodes
    if not (isinstance(nodes, list) and nodes and all(isinstance(n, dict) for n in nodes)):
        return out
    first = nodes[0]
    kinds = {(str(n.get("num_accelerators")), str(n.get("accelerator")), str(n.get("cpu"))) for n in nodes}
    counts = [_count(n.get("num_nodes")) for n in nodes]
    if len(kinds) > 1:  # nodes of different kinds: no one count per node says what the system has
        return out
    if all(counts):
        out.setdefault("number_of_nodes", sum(c for c in counts if c))
    model = _text(first.get("accelerator"))
    size = re.search(r"-(\d+)$", model or "")
    if size and str(first.get("num_accelerators")) == size[1] and (out.get("number_of_nodes") or 0) != 1:
        result.problem("bad_line", f"num_accelerators {first.get('num_accelerators')} is the size of the slice "
                       f"its accelerator's name gives ({model}), not a count per node of its "
                       f"{out.get('number_of_nodes')} nodes; stored as NULL")  # Google v0.5: tpuv2-512 on 64 hosts
    else:
        out.setdefault("accelerators_per_node", first.get("num_accelerators"))
    if model is not None and model.lower() not in _NOT_A_MODEL:
        out.setdefault("accelerator_model_name", model)
    cpu = _text(first.get("cpu"))
    if cpu is not None:
        m = _HOST_COUNT.fullmatch(cpu)  # "2x Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
        out.setdefault("host_processors_per_node", m[1] if m else None)
        out.setdefault("host_processor_model_name", m[2] if m else cpu)
    return out


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
