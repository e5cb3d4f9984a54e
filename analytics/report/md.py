"""``bench report`` writers for the folder: report.md (figures linked as figures/<slug>.svg) and the
files beside it (figures/*.svg, tables/*.csv with the numbers unformatted, NULL as an empty field).
Text from the store is data, never markup: in report.md its control characters are escaped
(bench.analytics.render.shown), and so are ``<`` and ``&`` (Markdown passes HTML through to the page: they
are backslash-escaped) and, in table cells, ``|`` and newlines; the CSVs escape control characters too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.analytics.render import shown
from bench.analytics.report.model import Figure, Report, Table

if TYPE_CHECKING:
    from pathlib import Path


def write_assets(report: Report, out: Path) -> None:
    """figures/<slug>.svg and tables/<slug>.csv of every section (a slug seen twice gets a -2 suffix)."""
    (out / "figures").mkdir(exist_ok=True)
    (out / "tables").mkdir(exist_ok=True)
    for sec in report.sections:
        for fig in sec.figures:
            (out / "figures" / f"{fig.slug}.svg").write_bytes(fig.svg)
        for t in sec.tables:
            frame = t.frame.rename(columns=lambda c: shown(str(c)))
            for c in [c for c in frame.columns if frame[c].dtype.kind not in "biufcmM"]:  # object or pandas 3's str
                frame[c] = frame[c].map(lambda v: shown(v) if isinstance(v, str) else v)
            frame.to_csv(out / "tables" / f"{t.slug}.csv", index=False)


def unique_slugs(report: Report) -> None:
    """Make every table and figure slug unique within the report (files and anchors share them)."""
    seen: dict[str, int] = {}
    for sec in report.sections:
        items: list[Table | Figure] = [*sec.tables, *sec.figures]
        for item in items:
            n = seen.get(item.slug, 0) + 1
            seen[item.slug] = n
            if n > 1:
                item.slug = f"{item.slug}-{n}"


def _md(text: str) -> str:
    """Text as Markdown shows it: ``<`` and ``&`` backslash-escaped (never a tag or an entity, and still
    readable as plain text), backslashes too, and control characters as ``shown`` writes them."""
    return shown(text.replace("\\", "\\\\").replace("<", "\\<").replace("&", "\\&"))


def _cell(text: str) -> str:
    return _md(text).replace("|", "\\|").replace("\n", " ")


def md_table(t: Table) -> list[str]:
    """The table in GitHub Markdown: formatted numbers, "—" for no value, notes below."""
    cols = list(t.frame.columns)
    lines = [f"**{_cell(t.title)}** (`tables/{t.slug}.csv`)", "",
             "| " + " | ".join(_cell(str(c)) for c in cols) + " |",
             "|" + "|".join("---:" if t.frame[c].dtype.kind in "fiu" else "---" for c in cols) + "|"]
    for texts in t.texts():
        lines.append("| " + " | ".join(_cell(text) for text in texts) + " |")
    if not len(t.frame):
        lines.append("| " + " | ".join("—" for _ in cols) + " |")
    lines += [""] + [f"_{_cell(n)}_" for n in t.notes] + ([""] if t.notes else [])
    return lines


def render_md(report: Report) -> str:
    """report.md: title, the selection, then each section's paragraphs, tables and figures."""
    unique_slugs(report)
    lines = [f"# {_md(report.title)}", "", f"Selection: {_md(report.selection)}", ""]
    for sec in report.sections:
        if sec.detail:
            continue
        lines += ["#" * sec.level + " " + _md(sec.title), ""]
        lines += [f"{i}. {_md(text)} ([table](#{link}))" for i, (text, link) in enumerate(sec.findings, 1)]
        lines += [""] if sec.findings else []
        for p in sec.paragraphs:
            lines += [_md(p), ""]
        for t in sec.tables:
            lines += md_table(t)
        for f in sec.figures:
            lines += [f"![{_cell(f.caption)}](figures/{f.slug}.svg)", ""]
    return "\n".join(lines) + "\n"
