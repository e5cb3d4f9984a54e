"""``bench report`` writer: report.html, one self-contained file (CSS inline, figures as inline SVG whose
text is text a reader can select and search, no script, no network access). All text from the store (labels, sources, status details, tags) is
escaped with ``html.escape``. A number with runs behind it links to ``#run-<first run_id>`` in the
provenance table (the runs of one configuration point are adjacent there) and lists every run_id in its
``title``; provenance rows carry ``id="run-<run_id>"``."""

from __future__ import annotations

import html
import re

from bench.analytics.render import shown
from bench.analytics.report.model import Figure, Report, Section, Table, slugify

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1.5em 2em; color: #1d1d1f; }
h1 { font-size: 1.7em; margin-bottom: .2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { margin-top: 1.6em; } .sel { color: #555; }
.tbl { overflow-x: auto; margin: .6em 0 1.2em; }
table { border-collapse: collapse; font-size: 12.5px; }
.cap { font-weight: 600; margin: .3em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; vertical-align: top; }
th { background: #f3f4f6; position: sticky; top: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.t { max-width: 38em; overflow-wrap: break-word; }
tr:nth-child(even) td { background: #fafafa; }
tr:target td { background: #fff3b0; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
.note { color: #555; font-style: italic; margin: .2em 0; }
.figs { display: flex; flex-wrap: wrap; gap: 12px; } .figs figure { flex: 1 1 560px; max-width: 100%; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 12px; }
nav ul { columns: 2; font-size: 13px; }
details > summary { cursor: pointer; } details.sec > summary h2 { display: inline; border: none; }
details.tbl > summary { font-weight: 600; padding: .3em 0; }
@media print {
  @page { size: A4 landscape; margin: 1cm; }
  body { max-width: none; padding: 0; font-size: 12px; }
  .tbl { overflow: visible; }
  table { width: 100%; font-size: 10px; }
  th, td { padding: 2px 4px; }
  th { position: static; overflow-wrap: break-word; }
  td.t { max-width: none; overflow-wrap: anywhere; }
  thead { display: table-header-group; }
  tr, figure, li { break-inside: avoid; }
  figure svg, figure img { max-height: 17cm; max-width: 100%; width: auto; }
  details::details-content { content-visibility: visible; display: block; }
  .screen { display: none; }
}
@media screen { .paper { display: none; } }
"""


def _e(text: object) -> str:
    """Text from the store as HTML shows it: HTML and control characters escaped."""
    return html.escape(shown(str(text)), quote=True)


def _anchor(run_id: str) -> str:
    return "run-" + run_id


def html_table(t: Table, anchors: set[str] | None = None) -> str:
    """One table: numbers right-aligned in their column's format, "—" for no value, each number with runs
    linked to the first of them (title: all run_ids) when that run's provenance row is on the page
    (``anchors``; None: always); provenance rows get their run anchor."""
    cols = list(t.frame.columns)
    numeric = {c for c in cols if t.frame[c].dtype.kind in "fiu"}
    rows = []
    run_ids = t.frame["run_id"].tolist() if t.slug == "provenance" else None
    for i, texts in enumerate(t.texts()):
        cells = []
        for c, cell in zip(cols, texts, strict=True):
            text, ids = _e(cell), t.cell_runs.get((i, c), ())
            if ids and (anchors is None or ids[0] in anchors):
                text = f'<a href="#{_e(_anchor(ids[0]))}" title="runs: {_e(" ".join(ids[:50]))}">{text}</a>'
            cells.append(f'<td class="{"n" if c in numeric else "t"}">{text}</td>')
        rid = f' id="{_e(_anchor(str(run_ids[i])))}"' if run_ids is not None else ""
        rows.append(f"<tr{rid}>{''.join(cells)}</tr>")
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in t.notes)
    body = f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    paper = _on_paper(t)
    if paper:  # the screen's table, and what a printed page shows instead
        body = f'<table class="screen">{body}{paper}{notes}'
    else:
        body = f"<table>{body}{notes}"
    if t.folded:  # its caption, one click from its rows
        return (f'<details class="tbl" id="{_e(t.slug)}"><summary>{_e(t.title)} ({len(rows)} rows)</summary>'
                f"{body}</details>")
    return f'<div class="tbl" id="{_e(t.slug)}"><p class="cap">{_e(t.title)}</p>{body}</div>'


#: A table wider than this many columns, with long headers, prints turned: one row per column.
PRINT_COLUMNS = 9


def _on_paper(t: Table) -> str:
    """What a printed page shows in place of the table, "" for the table itself: a lookup table's file; a
    table too wide for a page (many columns with long names, as a family's series) turned, so that each of
    its columns is a row whose name wraps at the page's left, when the turned table is narrow enough."""
    if t.reference:
        return (f'<p class="paper note">{len(t.frame)} rows, not printed: tables/{_e(t.slug)}.csv beside this '
                "page, and this page on a screen, hold them.</p>")
    cols = [str(c) for c in t.frame.columns]
    if len(cols) <= PRINT_COLUMNS or len(t.frame) + 1 > PRINT_COLUMNS or max(map(len, cols)) <= 24:
        return ""
    texts = t.texts()
    head = "".join(f"<th>{_e(c)}</th>" for c in (cols[0], *(r[0] for r in texts)))
    rows = "".join(f'<tr><td class="t">{_e(c)}</td>' + "".join(f'<td class="n">{_e(r[j])}</td>' for r in texts)
                   + "</tr>" for j, c in enumerate(cols) if j)
    return f'<table class="paper"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'



def html_figure(f: Figure, inline: bool = True) -> str:
    """A figure as inline SVG (its text stays text), with its caption (and the runs it draws, as a title);
    or, past the page's budget, a link to its file beside the page (figures/<slug>.svg), which print draws."""
    if not inline:  # printed all the same: the file beside the page, drawn on paper only
        return (f'<figure id="{_e(f.slug)}"><a class="screen" href="figures/{_e(f.slug)}.svg">{_e(f.caption)}</a>'
                f'<img class="paper" src="figures/{_e(f.slug)}.svg" alt="{_e(f.caption)}">'
                '<figcaption class="screen">(a figure file beside this page)</figcaption>'
                f'<figcaption class="paper">{_e(f.caption)}</figcaption></figure>')
    runs = f' title="runs: {_e(" ".join(f.run_ids))}"' if f.run_ids and len(f.run_ids) <= 200 else ""
    return (f'<figure id="{_e(f.slug)}"{runs}>{inline_svg(f.svg, f.caption)}'
            f"<figcaption>{_e(f.caption)}</figcaption></figure>")


_PROLOG = re.compile(rb"\A\s*(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?")


def inline_svg(svg: bytes, label: str) -> str:
    """matplotlib's SVG file as an element of the page: without its XML prolog and DOCTYPE, labelled for
    screen readers."""
    body = _PROLOG.sub(b"", svg, count=1).decode("utf-8")
    return body.replace("<svg ", f'<svg role="img" aria-label="{_e(label)}" ', 1)


#: Bytes of SVG inlined into report.html, in page order; later figures are linked files (the page stays small).
INLINE_BUDGET = 500_000


def _section_heading(sec: Section) -> str:
    return f'<h{sec.level} id="{_e(_sec_id(sec))}">{_e(sec.title)}</h{sec.level}>'


def _section(sec: Section, budget: list[int], anchors: set[str], heading: bool = True) -> str:
    parts = [_section_heading(sec)] if heading else []
    if sec.findings:
        parts.append('<ol class="findings">' + "".join(f'<li>{_e(text)} <a href="#{_e(link)}">(table)</a></li>'
                                                        for text, link in sec.findings) + "</ol>")
    parts += [f"<p>{_e(p)}</p>" for p in sec.paragraphs]
    parts += [html_table(t, anchors) for t in sec.tables]
    if sec.figures:  # side by side where the page is wide enough: a family's three figures in one row
        shown = []
        for f in sec.figures:
            budget[0] -= len(f.svg)
            shown.append(html_figure(f, inline=budget[0] >= 0))
        parts.append('<div class="figs">' + "".join(shown) + "</div>")
    return "\n".join(parts)


def _sec_id(sec: Section) -> str:

    return "sec-" + slugify(sec.title)


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8), with a table of contents of the level-2 sections."""
    toc = "".join(f'<li><a href="#{_e(_sec_id(s))}">{_e(s.title)}</a></li>' for s in report.sections
                  if s.level == 2 and not s.detail)
    anchors = {str(r) for s in report.sections if not s.detail for t in s.tables if t.slug == "provenance"
               for r in t.frame["run_id"]}
    budget = [INLINE_BUDGET]
    parts, open_fold = [], False
    for s in (s for s in report.sections if not s.detail):
        if s.level == 2 and open_fold:
            parts.append("</details>")
            open_fold = False
        if s.folded and s.level == 2:  # this section and its level-3 ones, one click away
            parts.append(f'<details class="sec"><summary>{_section_heading(s)}</summary>')
            parts.append(_section(s, budget, anchors, heading=False))
            open_fold = True
        else:
            parts.append(_section(s, budget, anchors))
    body = "\n".join([*parts, *(["</details>"] if open_fold else [])])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(report.title)}</title><style>{CSS}</style></head><body>"
            f'<h1>{_e(report.title)}</h1><p class="sel">Selection: {_e(report.selection)}</p>'
            f"<nav><ul>{toc}</ul></nav>\n{body}\n</body></html>\n")
