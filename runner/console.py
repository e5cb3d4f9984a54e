"""The ``bench`` console script and ``python -m bench.runner``: a Ctrl-C while bench is still starting (its
modules being imported, before any command runs) is one line and exit 130, as it is once a command runs,
never a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from bench.runner.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted: bench stopped while starting; nothing was done.\n")
        raise SystemExit(130) from None
    run()
