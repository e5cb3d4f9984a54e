"""The store: the one package that owns what bench keeps on disk, and the SQL over it.

``bench.ingest`` writes through it and ``bench.analytics`` reads through it; it imports neither. It holds the
tables' schemas and schema version (``schema``; the per-sample tables' columns in ``columns``, which a parser
imports without pyarrow), the layout, lock and commit protocol (``store``), the Delta
tables and the ``commits`` table (``delta``), which files a reader may use and their checksums (``health``),
OPTIMIZE and VACUUM (``compact``), a store on object storage written by many hosts (``remote``, reached
through ``objstore``), the conversion of an old store (``migrate``), atomic writes (``atomic``),
stored names (``names``), the ``telemetry_links`` table (``links``), and the read connection (``read``) with
its views (``views``: each ``*.sql`` here is a view of the same name). ``errors`` holds ``BenchError``, which
every package raises for what the user must fix: it sits here, at the bottom that every package already
imports, and the command layer (bench.runner.cli) turns it into one line and an exit code.
"""
