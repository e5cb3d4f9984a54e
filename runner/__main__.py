"""``python -m bench.runner`` is the ``bench`` command."""

from bench.runner.console import main

main()
