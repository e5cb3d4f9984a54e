"""What a reader must know of the store before it reads a byte of it, without importing pyarrow (a tenth
of a second of every ``bench sql``): the schema version and the tables' names, in their order. Their Arrow
schemas are bench.sql.schema's, keyed by these names."""

SCHEMA_VERSION = 6  # 2: MANIFEST.json per batch, status "invalid", problem kinds invalid_value and store_error;
#                     3: runs.num_devices/device_type/device_model, throughput/_unit/_derived, tables systems
#                        and score_scales; 4: sources.content_sha256 and supersedes; 5: systems.details;
#                     6: Delta Lake tables and their commits table (bench.sql.store), not batch folders
TABLE_NAMES = ("runs", "steps", "telemetry", "problems", "sources", "systems", "score_scales", "telemetry_links")
