"""Ctrl-C handling shared by the commands: one context manager that sets a SIGINT handler for a block."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Handler = Callable[[int, Any], Any] | int | signal.Handlers | None


@contextmanager
def sigint_handler(handler: Handler) -> Iterator[None]:
    """SIGINT goes to ``handler`` (a function, ``signal.SIG_IGN`` or ``signal.default_int_handler``) inside the
    block and to the previous handler after it. Only the main thread may set handlers: elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
