"""The store: the one package that owns what bench keeps on disk, and the SQL over it.

``bench.ingest`` writes through it and ``bench.analytics`` reads through it. It holds the
tables' schemas and schema version (``schema``; the per-sample tables' columns in ``columns``, which a parser
imports without pyarrow), the layout, lock and commit protocol (``store``), the Delta
tables and the ``commits`` table (``delta``), which files a reader may use and their checksums (``health``),
OPTIMIZE and VACUUM (``compact``), a store on object storage written by many hosts (``remote``, reached
through ``objstore``), the conversion of an old store (``migrate``), atomic writes (``atomic``),
stored names (``names``), the ``telemetry_links`` table (``links``), and the read connection (``read``) with
its views (``views``: each ``*.sql`` here is a view of the same name).

It also holds the contracts every package shares, because it is the bottom layer all of them import and
only the command layer may cross between the others: ``errors`` (``BenchError``, which every package raises
for what the user must fix; the command layer, bench.runner.cli, turns it into one line and an exit code),
``runjson`` (the run directory ``bench run`` writes and the ingest reads) and ``columns``'s whole-number
columns. It imports nothing else of bench.
"""
