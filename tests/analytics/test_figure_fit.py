"""No label is cut at a figure's edge (as the leaderboard's x label once ended "(geometric mean, 9")."""

from __future__ import annotations

import re

from matplotlib.backends.backend_agg import FigureCanvasAgg

from bench.analytics.plots import new_figure
from bench.analytics.report.model import svg_bytes

LONG = "images/s relative to GeForce RTX 2080 Super with Max-Q Design (geometric mean, 95% CI) and more words after it"


def test_a_text_past_the_edge_widens_the_saved_figure_instead_of_being_cut() -> None:
    fig = new_figure(7.0, 2.0)
    fig.add_subplot().plot([0, 1], [0, 1])
    fig.text(0.8, 0.5, LONG)  # starts at 80% of the width: runs inches past the right edge, whatever the layout
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches: what was drawn, the text included
    width = fig.get_size_inches()[0]
    assert drawn.x1 - width > 1.0
    svg = svg_bytes(fig).decode()
    saved = float(re.search(r'<svg[^>]*width="([0-9.]+)pt"', svg).group(1)) / 72  # type: ignore[union-attr]
    assert saved >= drawn.width > width  # the saved page holds all of it
    assert LONG in svg  # the whole text, as text
