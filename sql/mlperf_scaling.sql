-- MLPerf scaling over time to train: one row per result set of `mlperf_scores` with a score, within a
-- scaling configuration = (round, division, submitter, benchmark, framework family, device_type,
-- device_model): the same submitter's result sets of one benchmark on one kind of device at different
-- device counts (num_devices, num_nodes). config_id is the md5 of that configuration's JSON object.
-- framework family: the first word of the framework, lower case ("PyTorch NVIDIA Release 21.05" and
-- "pytorch" are both pytorch).
-- T = score_min, the official score in minutes. Baseline: the smallest num_devices (> 0) of the
-- configuration with a score; between sets at that count, the fewest nodes, then the lowest score.
-- speedup = T(baseline) / T(N) (lower time is faster); efficiency = speedup / (num_devices /
-- baseline_devices); superlinear = efficiency > 1. Never clamped. Sets without a score or a device count
-- (no system description ingested) are not rows: they have no time or no scale.
-- Columns: config_id, round, division, submitter, benchmark, framework, device_type, device_model, system,
-- num_devices, num_nodes, score_min, baseline_devices, baseline_score_min, speedup, efficiency, superlinear.
-- `bench fit --view mlperf_scaling` fits Amdahl and USL to it. Reads the view `mlperf_scores`.
WITH points AS MATERIALIZED (
    SELECT md5(to_json(struct_pack(
               round := round, division := division, submitter := submitter, benchmark := benchmark,
               framework := lower(split_part(framework, ' ', 1)), device_type := device_type,
               device_model := device_model
           ))) AS config_id,
           round, division, submitter, benchmark, lower(split_part(framework, ' ', 1)) AS framework,
           device_type, device_model, system, num_devices, num_nodes, score_min
    FROM mlperf_scores
    WHERE score_min > 0 AND num_devices > 0
),
baselines AS (
    SELECT DISTINCT ON (config_id)
           config_id, num_devices AS baseline_devices, score_min AS baseline_score_min
    FROM points
    ORDER BY config_id, num_devices, num_nodes NULLS FIRST, score_min
)
SELECT p.*, b.baseline_devices, b.baseline_score_min,
       b.baseline_score_min / p.score_min AS speedup,
       b.baseline_score_min / p.score_min / (p.num_devices::DOUBLE / b.baseline_devices) AS efficiency,
       b.baseline_score_min / p.score_min / (p.num_devices::DOUBLE / b.baseline_devices) > 1 AS superlinear
FROM points p
JOIN baselines b USING (config_id)
ORDER BY p.config_id, p.num_devices, p.num_nodes
