-- One row per strong-scaling configuration and scale point (num_gpus, num_nodes): the global batch
-- (global_batch_size = batch_size_per_device × num_gpus) is fixed, so the per-device batch shrinks as GPUs
-- are added. A strong-scaling configuration is every factor of `configs` except batch_size_per_device,
-- plus global_batch_size; strong_config_id is the md5 of their JSON object (config_id, kept, still names
-- the per-device-batch configuration of the row).
-- Baseline: the smallest num_gpus (> 0) of the strong configuration that has a mean of ok runs (fewest
-- nodes first, NULL num_nodes first). A row whose global batch is unknown (batch_size_per_device or
-- num_gpus NULL) has no strong-scaling partner: its baseline and ratios are NULL.
-- speedup = images_per_sec / baseline_images_per_sec; efficiency = speedup / (num_gpus / baseline_gpus);
-- superlinear = efficiency > 1. Never clamped; NULL (never 0) where the row has no ok mean.
-- Columns: every column of `configs`, global_batch_size, strong_config_id, baseline_gpus,
-- baseline_images_per_sec, speedup, efficiency, superlinear. Reads the view `configs`. No parameters.
WITH points AS MATERIALIZED (  -- computed once: used twice below
    SELECT *,
           batch_size_per_device * num_gpus AS global_batch_size,
           md5(to_json(struct_pack(
               framework := framework, framework_version := framework_version, model := model,
               dataset := dataset, data := data, mode := mode, precision := precision,
               data_format := data_format, variable_update := variable_update, all_reduce := all_reduce,
               gpu_model := gpu_model, config_tags := config_tags,
               global_batch_size := batch_size_per_device * num_gpus
           ))) AS strong_config_id
    FROM configs
),
baselines AS (
    SELECT DISTINCT ON (strong_config_id)
           strong_config_id, num_gpus AS baseline_gpus, images_per_sec AS baseline_images_per_sec
    FROM points
    WHERE images_per_sec IS NOT NULL AND num_gpus > 0 AND global_batch_size IS NOT NULL
    ORDER BY strong_config_id, num_gpus, num_nodes NULLS FIRST
),
scaled AS (
    SELECT p.*, b.baseline_gpus, b.baseline_images_per_sec,
           CASE WHEN p.num_gpus > 0 THEN p.images_per_sec / b.baseline_images_per_sec END AS speedup
    FROM points p
    LEFT JOIN baselines b ON p.strong_config_id = b.strong_config_id AND p.global_batch_size IS NOT NULL
)
SELECT *,
       speedup / (num_gpus::DOUBLE / baseline_gpus) AS efficiency,
       speedup / (num_gpus::DOUBLE / baseline_gpus) > 1 AS superlinear
FROM scaled
ORDER BY strong_config_id, num_gpus, num_nodes
