"""No label is cut at a figure's edge (issue 42: the leaderboard's x label ended "(geometric mean, 9")."""

from __future__ import annotations

import re

from matplotlib.backends.backend_agg import FigureCanvasAgg

from bench.analytics.report.findings import leaderboard_plot
from bench.analytics.report.model import svg_bytes

LONG = "images/s relative to GeForce RTX 2080 Super with Max-Q Design (geometric mean, 95% CI) and more words after it"


def test_a_long_label_widens_its_figure_instead_of_being_cut() -> None:
    fig = leaderboard_plot(["GeForce RTX 2080 Super with Max-Q Design", "Vega 20"], [0.5, 0.6], [0.1, 0.1], [0.1, 0.1], "x")
    fig.axes[0].set_xlabel(LONG)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches: what was drawn, the label included
    width = fig.get_size_inches()[0]
    assert drawn.x1 - width > 1.0  # at the figure's own size, the label runs an inch past its right edge
    svg = svg_bytes(fig).decode()
    saved = float(re.search(r'<svg[^>]*width="([0-9.]+)pt"', svg).group(1)) / 72  # type: ignore[union-attr]
    assert saved >= drawn.width and saved > width  # the saved page holds all of it
    assert LONG in svg  # the whole label, as text
