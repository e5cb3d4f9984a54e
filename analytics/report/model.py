"""The content of ``bench report`` as plain data: tables, figures and sections, built by
bench.analytics.report and written by report.html / report.md (no formatting logic here beyond the
number format of a column).

A :class:`Table` holds its numbers unformatted (NaN / None = no value, shown as "—", never 0); its
``cell_runs`` name the runs behind each number so a writer can link the number to them.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

NULL_TEXT = "—"


@dataclass
class Table:
    """One table. ``slug``: file name (tables/<slug>.csv) and anchor; ``formats``: column -> format spec
    for numbers (e.g. ".1f"; default ".4g"); ``cell_runs``: (row position, column) -> run_ids."""

    slug: str
    title: str
    frame: pd.DataFrame
    formats: dict[str, str] = field(default_factory=dict)
    cell_runs: dict[tuple[int, str], tuple[str, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Folded: report.html shows its caption, one click from its rows (a closed <details>, opened in print).
    folded: bool = False
    #: A lookup table (provenance): printed as its caption and where its rows are, not row by row.
    reference: bool = False

    def texts(self) -> list[tuple[str, ...]]:
        """Every cell as text, row by row: the number in its column's format, "—" for no value. A column is
        read once, not a cell at a time through pandas indexing (which made table writing a third of
        ``bench report`` on 10,000 runs)."""
        columns = [[format_value(v, self.formats.get(c)) for v in self.frame.iloc[:, j].tolist()]
                   for j, c in enumerate(self.frame.columns)]
        return list(zip(*columns, strict=True)) if columns else [() for _ in range(len(self.frame))]


class Drawing(Protocol):
    """A figure being drawn elsewhere (report.render.Pending): its SVG bytes once done."""

    def result(self) -> bytes: ...


@dataclass
class Figure:
    """One figure as SVG bytes. ``slug``: file name (figures/<slug>.svg) and anchor; ``image``: the bytes, or
    a :class:`Drawing` of them (report.render's workers), read through :attr:`svg`."""

    slug: str
    caption: str
    image: bytes | Drawing
    run_ids: tuple[str, ...] = ()

    @property
    def svg(self) -> bytes:
        """The figure's SVG bytes (waits for a worker still drawing it)."""
        if not isinstance(self.image, bytes):
            self.image = self.image.result()
        return self.image


@dataclass
class Section:
    """A heading with paragraphs, tables and figures, in that order; ``level`` 2 or 3."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    level: int = 2
    #: Numbered sentences, each with the slug of the table or figure behind it (the Findings).
    findings: list[tuple[str, str]] = field(default_factory=list)
    #: Detail: its tables go to tables/*.csv only, not into report.html or report.md (which say so).
    detail: bool = False
    #: Folded: report.html shows its heading, one click from the rest (a closed <details> around it and its
    #: level-3 sections; not printed): what the first pages leave for whoever asks.
    folded: bool = False


@dataclass
class Report:
    """Everything ``bench report`` writes: a title, a one-line description of the selection, sections."""

    title: str
    selection: str
    sections: list[Section]
    findings: list[Any] = field(default_factory=list)  # bench.analytics.findings.Finding, for the terminal and --json


def format_value(v: Any, spec: str | None = None) -> str:
    """A number in ``spec`` (default: an integer as is, else 4 significant digits); "—" for None / NaN
    (no value is never written as 0); a bool as yes / no; anything else as str."""
    if v is None:
        return NULL_TEXT
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "yes" if v else "no"
    if isinstance(v, numbers.Real):
        x = float(v)
        if math.isnan(x):
            return NULL_TEXT
        if spec is None and abs(x) < 1e15 and x == int(x):  # (an infinity is not < 1e15: no int() of it)
            return str(int(x))
        return format(x, spec or ".4g")
    text = str(v)
    return NULL_TEXT if text in ("", "nan", "None", "NaT", "<NA>") else text


def slugify(text: str, limit: int = 120) -> str:
    """A file-name and anchor-safe slug: lower case letters, digits and '-', at most ``limit`` characters,
    cut between words ("mode-train", never "mode-tr")."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) > limit:
        slug = slug[: limit + 1].rsplit("-", 1)[0] if "-" in slug[: limit + 1] else slug[:limit]
    return slug or "x"


def svg_bytes(fig: Any) -> bytes:
    """A matplotlib Figure as SVG bytes (written once; the HTML inlines them, the Markdown links a file).

    SVG, not PNG: its text stays text (``svg.fonttype`` none: the viewer's sans-serif draws it), so a figure
    is smaller than a 100-dpi PNG, sharp at any zoom, and written without rasterising its glyphs. No date
    and a fixed id salt: the same store gives the same bytes."""
    import io

    import matplotlib

    from bench.analytics.render import WHOLE, shown_figure, shown_xml

    shown_figure(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "bench-report"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, **WHOLE)
    return shown_xml(buf.getvalue())  # tick labels are made while drawing, after shown_figure
