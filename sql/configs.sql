-- One row per configuration and scale point (num_devices, num_nodes), across repetitions.
-- A configuration is every factor of a run except its repetition: framework, framework_version, model,
-- dataset, data, mode, precision, data_format, variable_update, all_reduce, batch_size_per_device,
-- device_type (gpu, tpu, ipu, hpu, npu, cpu), device_model, and the tags as `config_tags` (a MAP with its
-- entries sorted by key; {} when a run has no other tags, so NULL tags and {} group together), less the
-- bookkeeping tags, which never split a configuration: `repeat`, `sweep` and `cell` (bench sweep's: a
-- sweep's cells at 1 and 2 devices are one configuration's scaling curve), `run` / `run_id`, and `device`
-- (which device_type states). A tag that restates a workload column (model ... batch_size_per_device,
-- num_devices, num_nodes) is bookkeeping too: across the selected runs its values map one to one onto the
-- column's, each the column's value or, for text, its abbreviation (a prefix, case aside). A path
-- pattern's `{data_mode}` (syn, real) beside the `data` column (synthetic, real) restates it: kept, it would
-- split every synthetic-against-real pair. Such a tag never merges configurations the column keeps apart;
-- a tag with one value restates nothing. A run without a result (failed, interrupted, ...) whose log
-- ended before it said everything belongs to the configuration it was meant to be: where exactly one
-- configuration of ok runs agrees with every factor it has (a NULL one is unknown) and holds every tag it
-- has, the run is counted there (n_runs), not as an all-NULL configuration of its own; where none or
-- several agree, it keeps its own. NULL factors group together (GROUP BY).
-- This is the one place that says what a configuration is. The factors split into the workload (model,
-- dataset, data, mode, precision, data_format, variable_update, all_reduce, batch_size_per_device and the
-- scale point below) and the system (framework, framework_version, device_type, device_model, and tags
-- such as `system`); bench compare pairs on the workload (bench.analytics.compare), and --ignore takes a
-- factor or tag out for one question (bench.analytics.selection).
-- num_devices and num_nodes are not factors but the scale point: 8 devices on 1 node and 8 on 2 nodes are
-- two rows of one configuration. So CPU, TPU and IPU runs scale like GPU runs.
-- gpu_model and num_gpus repeat device_model and num_devices where device_type is 'gpu' (NULL otherwise),
-- for queries written against the GPU-only columns.
-- config_id: md5 of the JSON object of the factors and config_tags (a NULL factor is JSON null, never ''),
-- the same at every scale point of a configuration; scaling, strong_scaling and compare join on it.
-- n_runs counts every run, n_ok those with status 'ok'. images_per_sec (mean), median, min, max, stddev
-- (sample) and wall_time_s (mean) are over the ok runs only: a failed run is never a zero.
-- ci95_low/ci95_high: t-interval mean ± t(0.975, n-1) · stddev / sqrt(n), n = ok runs with a value; NULL
-- when n < 2. t comes from the table `t975` (df 1..30, scipy.stats.t.ppf to 6 decimals, agreeing with
-- printed t tables to their 3 decimals) and beyond df 30 from the Cornish-Fisher expansion in 1/df (error
-- below 2e-6 at df 31, shrinking after), not 1.96, which would make a 31-run interval 4% too narrow.
-- Reads the view `runs`. No parameters.
WITH t975(df, t) AS (
    VALUES (1, 12.706205), (2, 4.302653), (3, 3.182446), (4, 2.776445), (5, 2.570582),
           (6, 2.446912), (7, 2.364624), (8, 2.306004), (9, 2.262157), (10, 2.228139),
           (11, 2.200985), (12, 2.178813), (13, 2.160369), (14, 2.144787), (15, 2.131450),
           (16, 2.119905), (17, 2.109816), (18, 2.100922), (19, 2.093024), (20, 2.085963),
           (21, 2.079614), (22, 2.073873), (23, 2.068658), (24, 2.063899), (25, 2.059539),
           (26, 2.055529), (27, 2.051831), (28, 2.048407), (29, 2.045230), (30, 2.042272)
),
tag_rows AS (
    SELECT unnest(map_entries(tags)) AS e, model, dataset, data, mode, precision, data_format, variable_update,
           all_reduce, batch_size_per_device::VARCHAR AS batch_size_per_device, num_devices::VARCHAR AS num_devices,
           num_nodes::VARCHAR AS num_nodes
    FROM runs WHERE tags IS NOT NULL
),
tag_pairs AS (
    UNPIVOT tag_rows ON model, dataset, data, mode, precision, data_format, variable_update, all_reduce,
                        batch_size_per_device, num_devices, num_nodes INTO NAME col VALUE val
),
restating AS (  -- the tag keys that restate a workload column (see the header), as one list
    SELECT coalesce(list(DISTINCT key), []) AS keys FROM (
        SELECT e.key AS key FROM tag_pairs GROUP BY e.key, col
        HAVING count(DISTINCT e.value) >= 2 AND count(DISTINCT e.value) = count(DISTINCT val)
           AND count(DISTINCT (e.value, val)) = count(DISTINCT e.value)
           AND bool_and(lower(val) = lower(e.value)
                        OR (NOT regexp_full_match(e.value, '[0-9.]+') AND starts_with(lower(val), lower(e.value)))))
),
own AS (
    SELECT row_number() OVER () AS _row, framework, framework_version, model, dataset, data, mode, precision,
           data_format, variable_update, all_reduce, batch_size_per_device, device_type, device_model,
           -- grouped as a sorted list of entries and made a MAP once per group: cheaper than per run
           list_sort([e FOR e IN map_entries(coalesce(tags, MAP {}::MAP(VARCHAR, VARCHAR)))
                      IF e.key NOT IN ('repeat', 'device', 'sweep', 'cell', 'run', 'run_id')
                         AND NOT list_contains(restating.keys, e.key)])
               AS config_tags,
           num_devices, num_nodes, status, images_per_sec, wall_time_s
    FROM runs, restating
),
complete AS (
    SELECT DISTINCT framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, batch_size_per_device, device_type, device_model, config_tags
    FROM own WHERE status = 'ok'
),
adopted AS (  -- a run without a result, in the one configuration of ok runs it agrees with (see the header)
    SELECT o._row, any_value(c) AS c
    FROM own o JOIN complete c
      ON (o.framework IS NULL OR o.framework = c.framework)
     AND (o.framework_version IS NULL OR o.framework_version = c.framework_version)
     AND (o.model IS NULL OR o.model = c.model) AND (o.dataset IS NULL OR o.dataset = c.dataset)
     AND (o.data IS NULL OR o.data = c.data) AND (o.mode IS NULL OR o.mode = c.mode)
     AND (o.precision IS NULL OR o.precision = c.precision)
     AND (o.data_format IS NULL OR o.data_format = c.data_format)
     AND (o.variable_update IS NULL OR o.variable_update = c.variable_update)
     AND (o.all_reduce IS NULL OR o.all_reduce = c.all_reduce)
     AND (o.batch_size_per_device IS NULL OR o.batch_size_per_device = c.batch_size_per_device)
     AND (o.device_type IS NULL OR o.device_type = c.device_type)
     AND (o.device_model IS NULL OR o.device_model = c.device_model)
     AND list_has_all(c.config_tags, o.config_tags)
    WHERE o.status IS DISTINCT FROM 'ok'
    GROUP BY o._row HAVING count(*) = 1
),
keyed AS (
    SELECT coalesce(a.c.framework, o.framework) AS framework,
           coalesce(a.c.framework_version, o.framework_version) AS framework_version,
           coalesce(a.c.model, o.model) AS model, coalesce(a.c.dataset, o.dataset) AS dataset,
           coalesce(a.c.data, o.data) AS data, coalesce(a.c.mode, o.mode) AS mode,
           coalesce(a.c.precision, o.precision) AS precision, coalesce(a.c.data_format, o.data_format) AS data_format,
           coalesce(a.c.variable_update, o.variable_update) AS variable_update,
           coalesce(a.c.all_reduce, o.all_reduce) AS all_reduce,
           coalesce(a.c.batch_size_per_device, o.batch_size_per_device) AS batch_size_per_device,
           coalesce(a.c.device_type, o.device_type) AS device_type,
           coalesce(a.c.device_model, o.device_model) AS device_model,
           CASE WHEN a._row IS NULL THEN o.config_tags ELSE a.c.config_tags END AS config_tags,
           o.num_devices, o.num_nodes, o.status, o.images_per_sec, o.wall_time_s
    FROM own o LEFT JOIN adopted a ON a._row = o._row
),
grouped AS (
    SELECT framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, batch_size_per_device, device_type, device_model, config_tags,
           num_devices, num_nodes,
           count(*) AS n_runs,
           count(*) FILTER (WHERE status = 'ok') AS n_ok,
           count(images_per_sec) FILTER (WHERE status = 'ok') AS n_values,
           avg(images_per_sec) FILTER (WHERE status = 'ok') AS images_per_sec,
           median(images_per_sec) FILTER (WHERE status = 'ok') AS median,
           min(images_per_sec) FILTER (WHERE status = 'ok') AS min,
           max(images_per_sec) FILTER (WHERE status = 'ok') AS max,
           stddev_samp(images_per_sec) FILTER (WHERE status = 'ok') AS stddev,
           avg(wall_time_s) FILTER (WHERE status = 'ok') AS wall_time_s
    FROM keyed
    GROUP BY ALL
),
with_t AS (
    SELECT g.* REPLACE (map_from_entries(g.config_tags) AS config_tags),
           CASE WHEN g.n_values >= 2
                THEN coalesce(t.t, 1.959964 + 2.372271 / (g.n_values - 1) + 2.822499 / (g.n_values - 1) ^ 2
                                   + 2.555850 / (g.n_values - 1) ^ 3)
           END AS t_quantile
    FROM grouped g
    LEFT JOIN t975 t ON t.df = g.n_values - 1
)
SELECT md5(to_json(struct_pack(
           framework := framework, framework_version := framework_version, model := model,
           dataset := dataset, data := data, mode := mode, precision := precision, data_format := data_format,
           variable_update := variable_update, all_reduce := all_reduce,
           batch_size_per_device := batch_size_per_device, device_type := device_type,
           device_model := device_model, config_tags := config_tags
       ))) AS config_id,
       framework, framework_version, model, dataset, data, mode, precision, data_format, variable_update,
       all_reduce, batch_size_per_device, device_type, device_model, config_tags, num_devices, num_nodes,
       CASE WHEN device_type = 'gpu' THEN device_model END AS gpu_model,
       CASE WHEN device_type = 'gpu' THEN num_devices END AS num_gpus,
       n_runs, n_ok, images_per_sec, median, min, max, stddev,
       images_per_sec - t_quantile * stddev / sqrt(n_values) AS ci95_low,
       images_per_sec + t_quantile * stddev / sqrt(n_values) AS ci95_high,
       wall_time_s
FROM with_t
ORDER BY model, framework, device_model, data, batch_size_per_device, config_id, num_devices, num_nodes
