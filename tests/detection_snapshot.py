"""The format detection gives every fixture and corpus log (``python -m``-runnable: it prints the snapshot
that ``ingest/test_detection.py`` compares with ``detected_formats.json``). Archives are summarised per format,
with a SHA-256 over their members' ``name<TAB>format`` lines, so that any member's change shows."""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench.ingest import parse, registry

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "logs"
CORPUS = ROOT.parent / "shared" / "corpus"


def detected(data: bytes, source: str) -> str | None:
    head = data[: registry.HEAD_CHARS].decode("utf-8", errors="replace")
    module = parse.detect(head, source=source, forced=None, problems=[], whole=data)
    return None if module is None else module.NAME


def _archive(path: Path) -> dict[str, Any]:
    lines, counts = [], Counter()
    with tarfile.open(path, mode="r|*") as tar:
        for member in tar:
            f = tar.extractfile(member) if member.isfile() else None
            if f is None:
                continue
            fmt = detected(f.read(), member.name)
            counts[str(fmt)] += 1
            lines.append(f"{member.name}\t{fmt}")
    return {"formats": dict(sorted(counts.items())), "sha256": hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()}


def snapshot(corpus: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.suffix not in (".md", ".py") and not path.name.endswith(".expected.json"):
            out[f"fixtures/{path.relative_to(FIXTURES)}"] = detected(path.read_bytes(), str(path))
    for path in sorted(CORPUS.rglob("*")) if corpus else []:
        if not path.is_file() or path.suffix == ".md":
            continue
        key = f"corpus/{path.relative_to(CORPUS)}"
        out[key] = _archive(path) if path.name.endswith((".tar.gz", ".tgz", ".tar")) else detected(path.read_bytes(), str(path))
    return out


if __name__ == "__main__":
    json.dump(snapshot(), sys.stdout, indent=1, sort_keys=True)
    print()
