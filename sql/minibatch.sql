-- One row per minibatch curve point: a configuration (sql/run_configs.sql) without its batch size (every
-- factor except batch_size_per_device, tags, and the scale point num_devices, num_nodes; curve_id =
-- md5 of their JSON object) at one batch_size_per_device.
-- ms_per_image: time per image of one training (or inference) step, mean over the ok runs of
--   forward_backward_ms / batch_size_per_device where the log times the step (caffe time), else
--   1000 / images_per_sec (for several devices, the system's time per image). A mean of per-run times (so from
--   throughputs, 1000 / ms_per_image is their harmonic mean, while images_per_sec below is their mean).
-- forward_ms_per_image: mean over the ok runs of forward_ms / batch_size_per_device, where logged.
-- images_per_sec: mean over the ok runs. n_runs counts every run, n_ok the ok ones, n_oom the runs that
--   ran out of memory; oom = n_oom > 0. An OOM batch size stays as a row (its means NULL when no run was ok).
-- curvature_sign of ms_per_image at this batch size between its measured neighbours (the next smaller and
--   larger batch sizes with an ms_per_image; OOM-only points are skipped): the sign of the change of slope,
--   (y2 - y1)/(x2 - x1) - (y1 - y0)/(x1 - x0), which for equally spaced batch sizes is the sign of the
--   second difference y2 - 2·y1 + y0. +1 convex (diminishing returns), -1 concave, 0 straight (within
--   1e-9 relative). NULL at the ends of the curve and where ms_per_image is NULL.
-- Reads the view `run_configs`. No parameters.
WITH keyed AS (
    SELECT c.framework, c.framework_version, c.model, c.dataset, c.data, c.mode, c.precision, c.data_format,
           c.variable_update, c.all_reduce, c.device_type, c.device_model,
           map_entries(c.tags) AS tags,  -- grouped as a list of entries: cheaper than a MAP
           c.num_devices, c.num_nodes, c.batch_size_per_device, c.status, c.images_per_sec,
           c.forward_ms / c.batch_size_per_device AS forward_ms_per_image,
           coalesce(c.forward_backward_ms / c.batch_size_per_device, 1000.0 / c.images_per_sec) AS ms_per_image
    FROM run_configs c
),
points AS (
    SELECT framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, device_type, device_model, tags, num_devices, num_nodes, batch_size_per_device,
           count(*) AS n_runs,
           count(*) FILTER (WHERE status = 'ok') AS n_ok,
           count(*) FILTER (WHERE status = 'oom') AS n_oom,
           avg(ms_per_image) FILTER (WHERE status = 'ok') AS ms_per_image,
           avg(forward_ms_per_image) FILTER (WHERE status = 'ok') AS forward_ms_per_image,
           avg(images_per_sec) FILTER (WHERE status = 'ok') AS images_per_sec
    FROM keyed
    GROUP BY ALL
),
curves AS MATERIALIZED (  -- computed once: used twice below
    SELECT md5(to_json(struct_pack(
               framework := framework, framework_version := framework_version, model := model,
               dataset := dataset, data := data, mode := mode, precision := precision,
               data_format := data_format, variable_update := variable_update, all_reduce := all_reduce,
               device_type := device_type, device_model := device_model, config_tags := tags,
               num_devices := num_devices, num_nodes := num_nodes
           ))) AS curve_id, * REPLACE (map_from_entries(tags) AS tags)
    FROM points
),
neighbours AS (
    SELECT curve_id, batch_size_per_device AS x1, ms_per_image AS y1,
           lag(batch_size_per_device) OVER w AS x0, lag(ms_per_image) OVER w AS y0,
           lead(batch_size_per_device) OVER w AS x2, lead(ms_per_image) OVER w AS y2
    FROM curves
    WHERE ms_per_image IS NOT NULL AND batch_size_per_device IS NOT NULL
    WINDOW w AS (PARTITION BY curve_id ORDER BY batch_size_per_device)
),
slopes AS (
    SELECT curve_id, x1, (y1 - y0) / (x1 - x0) AS s01, (y2 - y1) / (x2 - x1) AS s12
    FROM neighbours
)
SELECT c.*, c.n_oom > 0 AS oom,
       CASE WHEN c.device_type = 'gpu' THEN c.device_model END AS gpu_model,
       CASE WHEN c.device_type = 'gpu' THEN c.num_devices END AS num_gpus,
       CASE WHEN abs(s.s12 - s.s01) <= 1e-9 * (abs(s.s01) + abs(s.s12)) THEN 0
            ELSE sign(s.s12 - s.s01)::INTEGER
       END AS curvature_sign
FROM curves c
LEFT JOIN slopes s ON s.curve_id = c.curve_id AND s.x1 = c.batch_size_per_device
ORDER BY model, framework, device_model, curve_id, batch_size_per_device
