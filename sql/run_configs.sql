-- One row per run: the configuration it belongs to (config_id and its factors) and its scale point.
-- A configuration is every factor of a run except its repetition: framework, framework_version, model,
-- dataset, data, mode, precision, data_format, variable_update, all_reduce, batch_size_per_device,
-- throughput_unit (what the run's rate counts: images/sec, tokens/sec, busbw GB/s, ...; runs counting different
-- things are never one configuration, so no mean, speedup or ratio mixes them), device_type (gpu, tpu, ipu,
-- hpu, npu, cpu), device_model, and the tags as `tags` (a MAP with its
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
-- such as `system`, and `xla` = on for a step compiled with XLA: bench run --xla); bench compare pairs on the
-- workload (bench.analytics.compare), and --ignore takes a factor or tag out for one question
-- (bench.analytics.selection: --ignore system gives a system whose name says XLA the tag xla = on).
-- num_devices and num_nodes are not factors but the scale point: 8 devices on 1 node and 8 on 2 nodes are
-- two rows of one configuration. So CPU, TPU and IPU runs scale like GPU runs.
-- gpu_model and num_gpus repeat device_model and num_devices where device_type is 'gpu' (NULL otherwise),
-- for queries written against the GPU-only columns.
-- config_id: md5 of the JSON object of the factors and tags (a NULL factor is JSON null, never ''),
-- the same at every scale point of a configuration; scaling, strong_scaling and compare join on it.
-- Columns: run_id, config_id, the factors above, tags (MAP: the configuration's, as above), num_devices, num_nodes, and the run's
-- status, status_detail, images_per_sec, wall_time_s, throughput, time_to_train_s, forward_ms,
-- forward_backward_ms, source, source_sha256; then series_id, series_system, series_tags (MAP), host and
-- started_at. Every view that keys runs by configuration reads this one: configs (grouped
-- by config_id and scale point), report_runs (one row per run), minibatch (its curves drop the batch size).
-- A series (series_id, `bench changes` and `bench check`) is one workload on one system, followed through
-- time: every factor above except framework_version (system facts such as the framework's version, the
-- driver or CUDA may move along a series: finding which one moved is the point), plus the scale point and
-- series_system, the run's `system` tag or else its host. Its tags are those tags less the sequence tags:
-- a tag (other than `system` / `host`) that, among runs equal in every other factor, host and system, takes
-- at least 3 values on groups of 3 or more runs and a distinct value on at least half of them (a commit, a
-- date, a build number) says when a run was made, not what ran. config_id keeps such tags as they are.
-- Reads the view `runs`. No parameters.
WITH r AS MATERIALIZED (  -- the runs, read once (the view runs is costly: each mention would read it again)
    SELECT run_id, tags, format, framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, batch_size_per_device, throughput_unit, device_type, device_model,
           num_devices, num_nodes, status, images_per_sec, wall_time_s, status_detail, throughput, time_to_train_s,
           forward_ms, forward_backward_ms, source, source_sha256, host, started_at
    FROM runs
),
tag_rows AS (
    SELECT unnest(map_entries(tags)) AS e, model, dataset, data, mode, precision, data_format, variable_update,
           all_reduce, batch_size_per_device::VARCHAR AS batch_size_per_device, num_devices::VARCHAR AS num_devices,
           num_nodes::VARCHAR AS num_nodes
    FROM r WHERE tags IS NOT NULL
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
format_units AS (  -- the unit of each format whose ok runs all count in one
    SELECT format, any_value(coalesce(throughput_unit, CASE WHEN images_per_sec IS NOT NULL THEN 'images/sec' END))
               AS unit
    FROM r WHERE status = 'ok'
    GROUP BY format
    HAVING count(DISTINCT coalesce(throughput_unit, CASE WHEN images_per_sec IS NOT NULL THEN 'images/sec' END)) = 1
),
own AS (
    SELECT row_number() OVER () AS _row, run_id, framework, framework_version, model, dataset, data, mode, precision,
           data_format, variable_update, all_reduce, batch_size_per_device,
           -- a rate in images repeats in throughput (bench.ingest.units); a table written without it still counts;
           -- a run without a result counts in the one unit its format's runs count in, where they count in one
           coalesce(throughput_unit, CASE WHEN images_per_sec IS NOT NULL THEN 'images/sec' END, fu.unit)
               AS throughput_unit,
           device_type, device_model,
           -- a sorted list of entries while runs are matched (list_has_all), a MAP at the end
           list_sort([e FOR e IN map_entries(coalesce(tags, MAP {}::MAP(VARCHAR, VARCHAR)))
                      IF e.key NOT IN ('repeat', 'device', 'sweep', 'cell', 'run', 'run_id')
                         AND NOT list_contains(restating.keys, e.key)])
               AS config_tags,
           num_devices, num_nodes, status, images_per_sec, wall_time_s, status_detail,
           coalesce(throughput, images_per_sec) AS throughput,
           time_to_train_s, forward_ms, forward_backward_ms, source, source_sha256, host, started_at
    FROM r LEFT JOIN format_units fu ON fu.format IS NOT DISTINCT FROM r.format, restating
),
tag_values AS (  -- one row per (run, tag), with the run's group of equal factors, host and system
    SELECT e.key AS key, e.value AS value,
           md5(to_json(struct_pack(framework := framework, model := model, dataset := dataset, data := data,
               mode := mode, precision := precision, data_format := data_format, variable_update := variable_update,
               all_reduce := all_reduce, b := batch_size_per_device, u := throughput_unit, device_type := device_type,
               device_model := device_model, n := num_devices, nodes := num_nodes, host := host,
               system := [t.value FOR t IN config_tags IF t.key = 'system']))) AS grp
    FROM (SELECT *, unnest(config_tags) AS e FROM own)
    WHERE e.key NOT IN ('system', 'host')
),
sequence AS (  -- the sequence tags (see the header), as one list
    SELECT coalesce(list(key), []) AS keys FROM (
        SELECT key FROM (SELECT key, grp, count(*) AS n, count(DISTINCT value) AS d FROM tag_values
                         GROUP BY key, grp HAVING count(*) >= 3)
        GROUP BY key HAVING sum(d) >= 0.5 * sum(n) AND max(d) >= 3)
),
complete AS (
    SELECT DISTINCT framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, batch_size_per_device, throughput_unit, device_type, device_model, config_tags
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
     AND (o.throughput_unit IS NULL OR o.throughput_unit = c.throughput_unit)
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
           coalesce(a.c.throughput_unit, o.throughput_unit) AS throughput_unit,
           coalesce(a.c.device_type, o.device_type) AS device_type,
           coalesce(a.c.device_model, o.device_model) AS device_model,
           CASE WHEN a._row IS NULL THEN o.config_tags ELSE a.c.config_tags END AS config_tags,
           o.run_id, o.num_devices, o.num_nodes, o.status, o.images_per_sec, o.wall_time_s, o.status_detail,
           o.throughput, o.time_to_train_s, o.forward_ms, o.forward_backward_ms, o.source, o.source_sha256,
           o.host, o.started_at
    FROM own o LEFT JOIN adopted a ON a._row = o._row
),
serial AS (
    SELECT keyed.*, coalesce([t.value FOR t IN config_tags IF t.key = 'system'][1], host) AS series_system,
           [t FOR t IN config_tags IF NOT list_contains(sequence.keys, t.key)] AS series_tags
    FROM keyed, sequence
)
SELECT run_id,
       md5(to_json(struct_pack(
           framework := framework, framework_version := framework_version, model := model,
           dataset := dataset, data := data, mode := mode, precision := precision, data_format := data_format,
           variable_update := variable_update, all_reduce := all_reduce,
           batch_size_per_device := batch_size_per_device, throughput_unit := throughput_unit,
           device_type := device_type, device_model := device_model,
           config_tags := map_from_entries(config_tags)  -- the key ids were made with
       ))) AS config_id,
       framework, framework_version, model, dataset, data, mode, precision, data_format, variable_update,
       all_reduce, batch_size_per_device, throughput_unit, device_type, device_model,
       map_from_entries(config_tags) AS tags,
       num_devices, num_nodes, status, images_per_sec, wall_time_s, status_detail, throughput, time_to_train_s,
       forward_ms, forward_backward_ms, source, source_sha256,
       md5(to_json(struct_pack(
           framework := framework, model := model, dataset := dataset, data := data, mode := mode,
           precision := precision, data_format := data_format, variable_update := variable_update,
           all_reduce := all_reduce, batch_size_per_device := batch_size_per_device,
           throughput_unit := throughput_unit, device_type := device_type,
           device_model := device_model, num_devices := num_devices, num_nodes := num_nodes,
           system := series_system, tags := map_from_entries(series_tags)
       ))) AS series_id,
       series_system, map_from_entries(series_tags) AS series_tags, host, started_at
FROM serial
