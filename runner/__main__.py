"""``python -m bench.runner`` is the ``bench`` command."""

from bench.runner.cli import main

main()
