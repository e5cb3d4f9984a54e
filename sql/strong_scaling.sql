-- One row per strong-scaling configuration and scale point (num_devices, num_nodes): the global batch
-- (global_batch_size = batch_size_per_device × num_devices) is fixed, so the per-device batch shrinks as devices
-- are added. A strong-scaling configuration is every factor of `configs` except batch_size_per_device,
-- plus global_batch_size; strong_config_id is the md5 of their JSON object (config_id, kept, still names
-- the per-device-batch configuration of the row).
-- Baseline: the smallest num_devices (> 0) of the strong configuration that has a mean of ok runs (fewest
-- nodes first, NULL num_nodes first). A row whose global batch is unknown (batch_size_per_device or
-- num_devices NULL) has no strong-scaling partner: its baseline and ratios are NULL.
-- speedup = throughput / baseline_throughput (in the configuration's one throughput_unit; for images/sec the same
-- as images_per_sec / baseline_images_per_sec); efficiency = speedup / (num_devices / baseline_devices);
-- superlinear = efficiency > 1. Never clamped; NULL (never 0) where the row has no ok mean.
-- Columns: every column of `configs`, global_batch_size, strong_config_id, baseline_devices,
-- baseline_images_per_sec, baseline_throughput, speedup, efficiency, superlinear. Reads the view `configs`.
-- No parameters.
WITH points AS MATERIALIZED (  -- computed once: used twice below
    SELECT *,
           batch_size_per_device * num_devices AS global_batch_size,
           md5(to_json(struct_pack(
               framework := framework, framework_version := framework_version, model := model,
               dataset := dataset, data := data, mode := mode, precision := precision,
               data_format := data_format, variable_update := variable_update, all_reduce := all_reduce,
               throughput_unit := throughput_unit,
               device_type := device_type, device_model := device_model, config_tags := tags,
               global_batch_size := batch_size_per_device * num_devices
           ))) AS strong_config_id
    FROM configs
),
baselines AS (
    SELECT DISTINCT ON (strong_config_id)
           strong_config_id, num_devices AS baseline_devices, images_per_sec AS baseline_images_per_sec,
           throughput AS baseline_throughput
    FROM points
    WHERE throughput IS NOT NULL AND num_devices > 0 AND global_batch_size IS NOT NULL
    ORDER BY strong_config_id, num_devices, num_nodes NULLS FIRST
),
scaled AS (
    SELECT p.*, b.baseline_devices, b.baseline_images_per_sec, b.baseline_throughput,
           CASE WHEN p.num_devices > 0 THEN p.throughput / b.baseline_throughput END AS speedup
    FROM points p
    LEFT JOIN baselines b ON p.strong_config_id = b.strong_config_id AND p.global_batch_size IS NOT NULL
)
SELECT *,
       speedup / (num_devices::DOUBLE / baseline_devices) AS efficiency,
       speedup / (num_devices::DOUBLE / baseline_devices) > 1 AS superlinear
FROM scaled
ORDER BY strong_config_id, num_devices, num_nodes
