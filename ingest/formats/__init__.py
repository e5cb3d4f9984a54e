"""One module per log format. Each module defines:

- ``NAME: str`` (the ``--format`` value) and ``DESCRIPTION: str`` (one line for ``--list-formats``);
- ``sniff(head: str) -> bool``: cheap content check on the first ``HEAD_CHARS`` characters of a file;
- ``parse_lines(lines, *, source, result=None) -> ParseResult``: pure, lines in (already without
  their line ending), records and problems out. When ``result`` is given the parser fills it (the
  ingest passes one whose step buffer spills to disk); otherwise it makes its own.

The order of ``bench.ingest.registry.FORMAT_MODULES`` is the detection order.
"""
