"""Progress of a running sweep: one line per finished run (``bench.runner.sweep.result_line``), or a rich
progress bar on a terminal with those lines above it, and an ETA from the runs finished so far."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def eta_s(durations: Sequence[float], remaining: int) -> float | None:
    """Seconds left: mean duration of the runs finished so far x runs remaining; None before the first."""
    return sum(durations) / len(durations) * remaining if durations else None


def format_eta(seconds: float | None) -> str:
    """``h:mm:ss`` (rounded up), ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = math.ceil(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class PlainReporter:
    """One line per finished run (for logs and pipes): ``[i/n] <cell> r<k>: <status> ... ETA h:mm:ss``."""

    def __init__(self, write: Callable[[str], None]):
        self.write, self.total = write, 0

    def start(self, total: int) -> None:
        self.total = total
        self.write(f"sweep: {total} run(s) to launch")

    def advance(self, line: str, done: int, eta: float | None) -> None:
        self.write(f"[{done}/{self.total}] {line}; ETA {format_eta(eta)}")

    def stop(self) -> None:
        return None


class RichReporter(PlainReporter):
    """A rich.progress bar on a terminal (stderr), with a line per finished run printed above it."""

    def start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total
        self._progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True))
        self._task = self._progress.add_task("sweep", total=total, eta="?")
        self._progress.start()

    def advance(self, line: str, done: int, eta: float | None) -> None:
        self._progress.console.print(line, markup=False, highlight=False)
        self._progress.update(self._task, completed=done, eta=format_eta(eta))

    def stop(self) -> None:
        self._progress.stop()
