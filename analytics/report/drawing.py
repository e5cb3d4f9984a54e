"""``bench report``'s figures, drawn while the report computes its tables.

A figure is a *drawing*: a module-level function of plain data (DataFrames, lists, text) that returns a
matplotlib Figure, and its arguments. :meth:`Renderer.svg` gives the drawing's SVG bytes
(report.model.svg_bytes), either drawn at once in this process (``workers=0``, the plain path) or in
worker processes while the report goes on computing tables (the fast path; the same function on the same
data, so the same bytes, which a test checks). A report's figures draw as fast as its tables compute:
with workers, the slower of the two decides how long ``bench report`` takes, not their sum.

Workers are spawned, not forked: the report process holds DuckDB's threads, and a forked child of a
threaded process may deadlock. They start when the renderer opens, so their imports overlap the report's
first queries. A drawing's own error is raised where the report reads the figure; workers that could
not start at all leave the drawing to this process. Workers ignore Ctrl-C: the report process stops.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from bench.analytics.report.model import svg_bytes

#: The default number of drawing processes: one per core beyond the report's own, at least one.
DEFAULT_WORKERS = max(1, (os.cpu_count() or 1) - 1)


def draw_svg(draw: Callable[..., Any], args: tuple[Any, ...], title: str | None = None) -> bytes:
    """``draw(*args)`` as SVG bytes, with ``title`` as the figure's title (wrapped) when given."""
    from bench.analytics.legibility import settle
    from bench.analytics.plots import wrap

    fig = draw(*args)
    if title:
        fig.suptitle(wrap(title, 90), fontsize=9)
    try:
        settle(fig)  # crowded tick labels turned or made smaller
        return svg_bytes(fig)
    finally:
        fig.clear()  # free the artists now: figures here are not pyplot-managed


class Renderer:
    """Draws figures here (``workers=0``) or in ``workers`` spawned processes; a context manager that
    waits for and stops its workers on exit."""

    def __init__(self, workers: int = 0):
        self._pool = None
        if workers > 0:
            import multiprocessing

            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_ignore_ctrl_c)
            with _ctrl_c_ignored():  # a worker started now ignores it from its first instruction
                self._pool.submit(_warm)  # start a worker and its imports now, not at the first figure

    def svg(self, draw: Callable[..., Any], *args: Any, title: str | None = None) -> bytes | Pending:
        """The SVG bytes of ``draw(*args)``: bytes, or a :class:`Pending` drawing in a worker."""
        if self._pool is not None:
            try:
                return Pending(self._pool.submit(draw_svg, draw, args, title), draw, args, title)
            except BrokenProcessPool:  # the workers could not start (below): draw here from now on
                self._pool = None
        return draw_svg(draw, args, title)

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class Pending:
    """A figure a worker is drawing. :meth:`result` waits for its bytes; when the pool broke (a worker
    could not start: spawning re-imports the main module, which a program read from stdin does not have),
    it draws the figure here instead."""

    def __init__(self, future: Future[bytes], draw: Callable[..., Any], args: tuple[Any, ...], title: str | None):
        self._future, self._drawing = future, (draw, args, title)

    def result(self) -> bytes:
        try:
            return self._future.result()
        except BrokenProcessPool:
            return draw_svg(*self._drawing)


@contextmanager
def _ctrl_c_ignored() -> Iterator[None]:
    """SIGINT held (blocked in this thread) while workers are spawned: a child inherits the mask through
    fork and exec, so Ctrl-C cannot reach it before its initializer ignores it (``_ignore_ctrl_c``), and it
    neither dies with a traceback nor leaves the pool broken. A Ctrl-C meant for ``bench report`` itself is
    delivered when the mask is lifted, or at once to another of its threads: never lost, as it was when the
    signal was ignored here for the spawn's few milliseconds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _ignore_ctrl_c() -> None:
    """A worker's initializer: Ctrl-C is ignored from here on, and a Ctrl-C held since its spawn is dropped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _warm() -> None:
    import matplotlib.figure  # noqa: F401  (the worker's first figure need not wait for matplotlib)
