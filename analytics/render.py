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
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from bench.sql.names import CONTROL as _CONTROL
from bench.sql.names import shown


class _Shown(io.TextIOBase):
    """A text stream that writes to ``stream`` with ``shown``'s escapes: what a command prints from stored
    names (a host, a model, a tag) reaches the terminal as text."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(shown(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return bool(self.stream.isatty())

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "encoding", None)


@contextmanager
def plain_output() -> Iterator[None]:
    """stdout and stderr with every control character escaped while the block prints (``bench check``,
    ``fleet``, ``effects``: lines built from stored names)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Shown(out), _Shown(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def shown_xml(xml: bytes) -> bytes:
    """A serialised XML document with its control characters escaped as ``\\xNN`` text: XML 1.0 cannot hold
    them at all, even as character references, so a JUnit file of a hostile name stays well-formed."""
    return shown(xml.decode("utf-8")).encode("utf-8")


def shown_figure(fig: Any) -> None:
    """Every text of a matplotlib figure made already (titles, labels, legends, ticks set as labels) with
    ``shown``'s escapes, before it is saved (an SVG's XML cannot even hold ESC)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for t in fig.findobj(Text):
        text = t.get_text()
        if isinstance(text, str) and _CONTROL.search(text):
            t.set_text(shown(text))
    for ax in fig.axes:  # tick labels given as a list (set_ticks(..., labels)) are made at each draw
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, FixedFormatter):
                formatter.seq = [shown(s) if isinstance(s, str) else s for s in formatter.seq]
            elif isinstance(formatter, FuncFormatter) and not getattr(formatter.func, "shown", False):
                def label(x: Any, pos: Any, func: Any = formatter.func) -> str:
                    return shown(str(func(x, pos)))
                label.shown = True  # type: ignore[attr-defined]
                formatter.func = label


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
