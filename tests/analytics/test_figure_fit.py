"""No label is cut at a figure's edge (issue 42: the leaderboard's x label ended "(geometric mean, 9")."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg

from bench.analytics.report.findings import leaderboard_plot
from bench.analytics.report.model import svg_bytes

LONG = "images/s relative to GeForce RTX 2080 Super with Max-Q Design (geometric mean, 95% CI) and more words after it"


def _overflow(fig) -> float:  # type: ignore[no-untyped-def]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())
    w, h = fig.get_size_inches()
    return max(-drawn.x0, drawn.x1 - w, -drawn.y0, drawn.y1 - h)


def test_a_long_label_widens_its_figure_instead_of_being_cut() -> None:
    fig = leaderboard_plot(["GeForce RTX 2080 Super with Max-Q Design", "Vega 20"], [0.5, 0.6], [0.1, 0.1], [0.1, 0.1], "x")
    fig.axes[0].set_xlabel(LONG)
    assert _overflow(fig) > 1.0  # as drawn at its own size, the label runs an inch past the edge
    svg = svg_bytes(fig)
    assert _overflow(fig) <= 0.02 and fig.get_size_inches()[0] > 7.0
    assert LONG.encode() in svg  # the whole label, as text
