"""Render query results as a table, CSV or JSON (one array of row objects)."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal


def _plain(v: object) -> object:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def to_json(cols: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return json.dumps([{c: _plain(v) for c, v in zip(cols, r, strict=True)} for r in rows], indent=2)


def to_csv(cols: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if v is None else json.dumps(_plain(v)) if isinstance(v, dict | list) else v for v in r])
    return buf.getvalue()


def print_table(cols: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Data is text: every cell, header and title goes in as rich Text, and the console parses neither
    # markup ("[/0]", "[exp]") nor emoji codes (":x:") nor highlights numbers.
    t = Table(title=Text(title) if title is not None else None)
    wide = None if sys.stdout.isatty() else 160  # piped or captured: don't squeeze into 80 columns
    for c in cols:
        t.add_column(Text(str(c)))
    for r in rows:
        t.add_row(*(Text("NULL" if v is None else f"{v:.2f}" if isinstance(v, float) else str(_plain(v))) for v in r))
    Console(width=wide, markup=False, emoji=False, highlight=False).print(t)
