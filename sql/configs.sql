-- One row per configuration and scale point (num_devices, num_nodes), across repetitions. What a
-- configuration is (its factors, the bookkeeping tags that never split one, the runs without a result that
-- join one) is said once, in sql/run_configs.sql; config_id comes from there.
-- num_devices and num_nodes are not factors but the scale point: 8 devices on 1 node and 8 on 2 nodes are
-- two rows of one configuration. So CPU, TPU and IPU runs scale like GPU runs.
-- gpu_model and num_gpus repeat device_model and num_devices where device_type is 'gpu' (NULL otherwise),
-- for queries written against the GPU-only columns.
-- n_runs counts every run, n_ok those with status 'ok'. images_per_sec (mean), median, min, max, stddev
-- (sample), throughput (mean, in throughput_unit: the same as images_per_sec where that is images/sec) and
-- wall_time_s (mean) are over the ok runs only: a failed run is never a zero.
-- ci95_low/ci95_high: t-interval mean ± t(0.975, n-1) · stddev / sqrt(n), n = ok runs with a value; NULL
-- when n < 2. t comes from the table `t975` (df 1..30, scipy.stats.t.ppf to 6 decimals, agreeing with
-- printed t tables to their 3 decimals) and beyond df 30 from the Cornish-Fisher expansion in 1/df (error
-- below 2e-6 at df 31, shrinking after), not 1.96, which would make a 31-run interval 4% too narrow.
-- Reads the view `run_configs`. No parameters.
WITH t975(df, t) AS (
    VALUES (1, 12.706205), (2, 4.302653), (3, 3.182446), (4, 2.776445), (5, 2.570582),
           (6, 2.446912), (7, 2.364624), (8, 2.306004), (9, 2.262157), (10, 2.228139),
           (11, 2.200985), (12, 2.178813), (13, 2.160369), (14, 2.144787), (15, 2.131450),
           (16, 2.119905), (17, 2.109816), (18, 2.100922), (19, 2.093024), (20, 2.085963),
           (21, 2.079614), (22, 2.073873), (23, 2.068658), (24, 2.063899), (25, 2.059539),
           (26, 2.055529), (27, 2.051831), (28, 2.048407), (29, 2.045230), (30, 2.042272)
),
grouped AS (
    SELECT config_id, any_value(framework) AS framework, any_value(framework_version) AS framework_version,
           any_value(model) AS model, any_value(dataset) AS dataset, any_value(data) AS data,
           any_value(mode) AS mode, any_value(precision) AS precision, any_value(data_format) AS data_format,
           any_value(variable_update) AS variable_update, any_value(all_reduce) AS all_reduce,
           any_value(batch_size_per_device) AS batch_size_per_device, any_value(throughput_unit) AS throughput_unit,
           any_value(device_type) AS device_type,
           any_value(device_model) AS device_model, any_value(tags) AS tags,
           num_devices, num_nodes,
           count(*) AS n_runs,
           count(*) FILTER (WHERE status = 'ok') AS n_ok,
           count(images_per_sec) FILTER (WHERE status = 'ok') AS n_values,
           avg(images_per_sec) FILTER (WHERE status = 'ok') AS images_per_sec,
           median(images_per_sec) FILTER (WHERE status = 'ok') AS median,
           min(images_per_sec) FILTER (WHERE status = 'ok') AS min,
           max(images_per_sec) FILTER (WHERE status = 'ok') AS max,
           stddev_samp(images_per_sec) FILTER (WHERE status = 'ok') AS stddev,
           avg(throughput) FILTER (WHERE status = 'ok') AS throughput,
           avg(wall_time_s) FILTER (WHERE status = 'ok') AS wall_time_s
    FROM run_configs
    GROUP BY config_id, num_devices, num_nodes
),
with_t AS (
    SELECT g.*,
           CASE WHEN g.n_values >= 2
                THEN coalesce(t.t, 1.959964 + 2.372271 / (g.n_values - 1) + 2.822499 / (g.n_values - 1) ^ 2
                                   + 2.555850 / (g.n_values - 1) ^ 3)
           END AS t_quantile
    FROM grouped g
    LEFT JOIN t975 t ON t.df = g.n_values - 1
)
SELECT config_id,
       framework, framework_version, model, dataset, data, mode, precision, data_format, variable_update,
       all_reduce, batch_size_per_device, throughput_unit, device_type, device_model, tags, num_devices, num_nodes,
       CASE WHEN device_type = 'gpu' THEN device_model END AS gpu_model,
       CASE WHEN device_type = 'gpu' THEN num_devices END AS num_gpus,
       n_runs, n_ok, images_per_sec, median, min, max, stddev,
       images_per_sec - t_quantile * stddev / sqrt(n_values) AS ci95_low,
       images_per_sec + t_quantile * stddev / sqrt(n_values) AS ci95_high,
       throughput, wall_time_s
FROM with_t
ORDER BY model, framework, device_model, data, batch_size_per_device, config_id, num_devices, num_nodes
