-- One row per configuration and scale point (num_gpus, num_nodes): weak scaling, the per-device batch
-- fixed (a configuration of the view `configs`, keyed by config_id, includes batch_size_per_device).
-- Baseline: the smallest num_gpus (> 0) of the configuration that has a mean of ok runs; between rows at
-- that GPU count on different node counts, the fewest nodes (NULL num_nodes, a log that does not say,
-- first). So a configuration measured only from 2 GPUs up, or whose 1-GPU runs all failed, is scaled
-- from its smallest measured count.
-- speedup = images_per_sec / baseline_images_per_sec; efficiency = speedup / (num_gpus / baseline_gpus);
-- superlinear = efficiency > 1. Never clamped. NULL (never 0) where the row has no ok mean or no GPU count
-- (num_gpus NULL or 0, as for a CPU run).
-- Columns: every column of `configs`, then baseline_gpus, baseline_images_per_sec, speedup, efficiency,
-- superlinear. Reads the view `configs`. No parameters.
WITH points AS MATERIALIZED (  -- read `configs` once: it is used twice below
    SELECT * FROM configs
),
baselines AS (
    SELECT DISTINCT ON (config_id)
           config_id, num_gpus AS baseline_gpus, images_per_sec AS baseline_images_per_sec
    FROM points
    WHERE images_per_sec IS NOT NULL AND num_gpus > 0
    ORDER BY config_id, num_gpus, num_nodes NULLS FIRST
),
scaled AS (
    SELECT c.*, b.baseline_gpus, b.baseline_images_per_sec,
           CASE WHEN c.num_gpus > 0 THEN c.images_per_sec / b.baseline_images_per_sec END AS speedup
    FROM points c
    LEFT JOIN baselines b ON c.config_id = b.config_id
)
SELECT *,
       speedup / (num_gpus::DOUBLE / baseline_gpus) AS efficiency,
       speedup / (num_gpus::DOUBLE / baseline_gpus) > 1 AS superlinear
FROM scaled
ORDER BY config_id, num_gpus, num_nodes
