"""Render query results as a table, CSV or JSON (one array of row objects).

Data is text, never commands: a stored string's control characters (ESC, BEL, CR, ...: a log line can hold
``\x1b[2J`` or an OSC 52 clipboard write) reach no terminal and no page raw. Tables and CSV show them
escaped (``shown``), JSON escapes them itself, and report.md also escapes HTML (bench.analytics.report.md).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

#: C0 controls but tab and newline, DEL and the C1 controls (0x9b is a one-byte CSI on some terminals).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with every control character but tab and newline escaped as ``\\xNN`` (``\\x1b[2J``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def shown_figure(fig: Any) -> None:
    """Every text of a matplotlib figure made already (titles, labels, legends, ticks set as labels) with
    ``shown``'s escapes, before it is saved (an SVG's XML cannot even hold ESC)."""
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        text = t.get_text()
        if isinstance(text, str) and _CONTROL.search(text):
            t.set_text(shown(text))


#: savefig's arguments that keep every label whole: the saved canvas grows (or shrinks) to what was drawn,
#: so a long axis label or device name is never cut at the border ("(geometric mean, 9"), at the cost of
#: one layout pass without rendering, not a second draw.
WHOLE: dict[str, Any] = {"bbox_inches": "tight", "pad_inches": 0.05}


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
    w.writerow([shown(str(c)) for c in cols])
    for r in rows:
        w.writerow(["" if v is None else json.dumps(_plain(v)) if isinstance(v, dict | list)
                    else shown(v) if isinstance(v, str) else v for v in r])
    return buf.getvalue()


def print_table(cols: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Data is text: every cell, header and title goes in as rich Text, and the console parses neither
    # markup ("[/0]", "[exp]") nor emoji codes (":x:") nor highlights numbers.
    t = Table(title=Text(shown(title)) if title is not None else None)
    wide = None if sys.stdout.isatty() else 160  # piped or captured: don't squeeze into 80 columns
    for c in cols:
        t.add_column(Text(shown(str(c))))
    for r in rows:
        t.add_row(*(Text("NULL" if v is None else f"{v:.2f}" if isinstance(v, float) else shown(str(_plain(v))))
                    for v in r))
    Console(width=wide, markup=False, emoji=False, highlight=False).print(t)
