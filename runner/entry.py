"""The ``bench`` console entry point (and ``python -m bench.runner``).

It does one thing before the command's modules load: a ``bench ingest`` process starts hashing the large
files named on its command line (``bench.ingest.prehash``), so that the hash, which a large file's rows
cannot be committed without, runs while Typer, numpy, pyarrow and the parsers are imported (measured on
the 1 GB benchmark log: 0.05 s off the ingest, median of 8). Then ``bench.runner.cli.main`` runs it.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["ingest"]:
        from bench.ingest import prehash

        prehash.start(prehash.command_paths(sys.argv[2:]))
    from bench.runner.cli import main as run

    run()
