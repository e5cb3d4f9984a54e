"""``python -m bench.runner`` is the ``bench`` command."""

from bench.runner.entry import main

main()
