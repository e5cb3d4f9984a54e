"""bench.ingest: raw benchmark logs -> typed records -> a versioned Parquet store."""
