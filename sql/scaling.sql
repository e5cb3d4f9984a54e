-- One row per configuration and scale point (num_devices, num_nodes): weak scaling, the per-device batch
-- fixed (a configuration of the view `configs`, keyed by config_id, includes batch_size_per_device).
-- Baseline: the smallest num_devices (> 0) of the configuration that has a mean of ok runs; between rows at
-- that device count on different node counts, the fewest nodes (NULL num_nodes, a log that does not say,
-- first). So a configuration measured only from 2 devices up, or whose 1-device runs all failed, is scaled
-- from its smallest measured count.
-- speedup = throughput / baseline_throughput, in the configuration's one throughput_unit (images/sec: the same
-- as images_per_sec / baseline_images_per_sec; tokens/sec, samples/sec, busbw GB/s alike: a configuration never
-- mixes units); efficiency = speedup / (num_devices / baseline_devices);
-- superlinear = efficiency > 1. Never clamped. NULL (never 0) where the row has no ok mean or no device count
-- (num_devices NULL or 0: a log that says nothing of its devices), and for a configuration with a mean at one
-- device count only (a system measured only at 8 GPUs): nothing was scaled, and an efficiency of 1.00 there
-- would rank as perfect scaling. An efficiency is relative to baseline_devices ("efficiency vs 8 devices"
-- where that is 8), which a ranking must say.
-- Columns: every column of `configs`, then baseline_devices, baseline_images_per_sec, baseline_throughput,
-- speedup, efficiency,
-- superlinear. Reads the view `configs`. No parameters.
WITH points AS MATERIALIZED (  -- read `configs` once: it is used twice below
    SELECT * FROM configs
),
baselines AS (
    SELECT DISTINCT ON (config_id)
           config_id, num_devices AS baseline_devices, images_per_sec AS baseline_images_per_sec,
           throughput AS baseline_throughput
    FROM points
    WHERE throughput IS NOT NULL AND num_devices > 0
    ORDER BY config_id, num_devices, num_nodes NULLS FIRST
),
reach AS (  -- configurations with means at two device counts or more: the ones that scaled
    SELECT config_id FROM points WHERE throughput IS NOT NULL AND num_devices > 0
    GROUP BY config_id HAVING count(DISTINCT num_devices) >= 2
),
scaled AS (
    SELECT c.*, b.baseline_devices, b.baseline_images_per_sec, b.baseline_throughput,
           CASE WHEN c.num_devices > 0 AND c.config_id IN (SELECT config_id FROM reach)
                THEN c.throughput / b.baseline_throughput END AS speedup
    FROM points c
    LEFT JOIN baselines b ON c.config_id = b.config_id
)
SELECT *,
       speedup / (num_devices::DOUBLE / baseline_devices) AS efficiency,
       speedup / (num_devices::DOUBLE / baseline_devices) > 1 AS superlinear
FROM scaled
ORDER BY config_id, num_devices, num_nodes
