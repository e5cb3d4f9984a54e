-- One row per run: its configuration (config_id, from `run_configs`, so exactly the id `configs` has),
-- its scale point (num_devices, num_nodes) and where it came from (source, source_sha256), with status and
-- status_detail. `bench report` uses it to link every number (a configuration at a scale point) back to its
-- runs, and as the closing provenance table. Failed runs are rows like any other (images_per_sec NULL).
-- Grain: run. Reads the view `run_configs`. No parameters.
SELECT config_id, num_devices, num_nodes, run_id, status, status_detail, images_per_sec, throughput,
       time_to_train_s, source, source_sha256
FROM run_configs
ORDER BY config_id, num_devices NULLS FIRST, num_nodes NULLS FIRST, run_id
