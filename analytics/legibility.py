"""Whether a matplotlib figure can be read: its texts measured against each other, the figure's edge and
the data they sit on, as the renderer lays them out.

:func:`problems` names what a reader would trip over: two tick labels of one axis that overlap, a text
(other than a tick label) that reaches past the figure's edge, a legend wider than its figure, a note inside the axes drawn over
data points, and a label shortened in the middle (an ellipsis inside it). :func:`settle` fixes the tick
labels before a figure is saved (it turns crowded x labels, then makes them smaller), and the report
tests call :func:`problems` on every figure of the Lambda, MLPerf, sweep and fleet reports."""

from __future__ import annotations

import re
from typing import Any

#: Overlap below this many pixels (at the figure's dpi) is a touch of the glyphs' padding, not a collision.
SLACK_PX = 1.0
_MID_CUT = re.compile(r"\S(?:\.\.\.|…)\S")


def _renderer(fig: Any) -> Any:
    if fig.canvas is None or not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # lays out the figure (constrained layout included) as saving it would
    return fig.canvas.get_renderer()


def _shown(t: Any) -> bool:
    return bool(t.get_visible() and t.get_text().strip())


def _overlap(a: Any, b: Any) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK_PX) and (min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK_PX)


def _tick_labels(axis: Any) -> list[Any]:
    return [t for t in axis.get_ticklabels() if _shown(t)]


def _crowded(labels: list[Any], renderer: Any) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if _overlap(ba, bb)]


def problems(fig: Any) -> list[str]:
    """What in ``fig`` a reader cannot read, one line each; [] for a legible figure."""
    renderer = _renderer(fig)
    width = fig.bbox.width
    found = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            found += [f"{name} tick labels overlap: {a!r} and {b!r}" for a, b in _crowded(_tick_labels(axis), renderer)]
        legend = ax.get_legend()
        wide = legend.get_window_extent(renderer).width if legend is not None and legend.get_visible() else 0.0
        if wide > width + SLACK_PX:
            found.append(f"a legend {wide:.0f} px wide in a figure of {width:.0f}")
        notes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if _shown(t)]
        found += [f"the notes {a!r} and {b!r} overlap" for i, (a, ba) in enumerate(notes) for b, bb in notes[i + 1:]
                  if _overlap(ba, bb)]
        points = _data_points(ax)
        for t in ax.texts:
            if _shown(t) and points is not None:
                box = t.get_window_extent(renderer)
                inside = ((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                          & (points[:, 1] < box.y1))
                if inside.any():
                    found.append(f"the note {t.get_text()!r} covers {int(inside.sum())} data points")
    from matplotlib.text import Text

    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels()}
    for t in fig.findobj(Text):
        if not _shown(t):
            continue
        box = t.get_window_extent(renderer)
        # a tick label at the axis' end may overhang the edge by half its width: the saved figure's tight box
        # takes it in; a title or note past the edge is a layout that does not fit
        if id(t) not in ticks and (box.x0 < -SLACK_PX or box.x1 > width + SLACK_PX):
            found.append(f"{t.get_text()!r} reaches past the figure's edge")
        if _MID_CUT.search(t.get_text()):
            found.append(f"{t.get_text()!r} is cut in the middle")
    return found


def _data_points(ax: Any) -> Any:
    """The axes' line vertices and scatter offsets in display pixels (an N x 2 array), None without any."""
    import numpy as np

    parts = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        if line.get_visible() and (line.get_marker() not in (None, "None", "", " ") or len(xy) > 1):
            parts.append(line.get_transform().transform(xy))
    for col in ax.collections:
        offsets = np.asarray(col.get_offsets(), dtype=float)
        if col.get_visible() and offsets.size:
            parts.append(col.get_offset_transform().transform(offsets))
    if not parts:
        return None
    pts = np.concatenate(parts)
    return pts[np.isfinite(pts).all(axis=1)]


def settle(fig: Any) -> None:
    """Crowded tick labels made readable before the figure is saved: x labels that overlap are turned
    (45 degrees, then upright), then drawn smaller (down to 5 pt); y labels that overlap get smaller. Notes
    placed at an offset in points (names of points) that overlap an earlier one move up until they do not.
    A figure whose ticks are all placed by matplotlib's locators (spaced to fit) and that has no notes is
    left as it is, unmeasured: a layout pass is a third of a small figure's drawing time."""
    from matplotlib.ticker import FixedLocator

    named = any(isinstance(axis.get_major_locator(), FixedLocator) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis))
    if not named and not any(ax.texts for ax in fig.axes):
        return
    renderer = _renderer(fig)
    for ax in fig.axes:
        placed: list[Any] = []
        for t in (t for t in ax.texts if _shown(t)):
            offset = t.xyann if getattr(t, "anncoords", None) == "offset points" else None
            for _ in range(40):
                box = t.get_window_extent(renderer)
                if offset is None or not any(_overlap(box, b) for b in placed):
                    break
                offset = (offset[0], offset[1] + box.height * 72 / fig.dpi + 1)
                t.xyann = offset
            placed.append(t.get_window_extent(renderer))
        labels = _tick_labels(ax.xaxis)
        for rotation in (45, 90):
            if not _crowded(labels, renderer):
                break
            for t in labels:
                t.set_rotation(rotation)
                t.set_horizontalalignment("right" if rotation == 45 else "center")
                t.set_rotation_mode("anchor" if rotation == 45 else "default")
            renderer = _renderer(fig)
        for axis in (ax.xaxis, ax.yaxis):
            labels = _tick_labels(axis)
            while labels and _crowded(labels, renderer) and labels[0].get_fontsize() > 5:
                for t in labels:
                    t.set_fontsize(t.get_fontsize() - 1)
                renderer = _renderer(fig)
