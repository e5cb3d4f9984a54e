-- One row per run: its configuration (config_id, computed exactly as in `configs`: the md5 of the JSON
-- object of the factors and the tags except `repeat` and `device`), its scale point (num_devices, num_nodes) and where it
-- came from (source, source_sha256), with status and status_detail. `bench report` uses it to link every
-- number (a configuration at a scale point) back to its runs, and as the closing provenance table.
-- Failed runs are rows like any other (images_per_sec NULL). Grain: run. Reads the view `runs`.
-- No parameters.
WITH keyed AS (
    SELECT run_id, source, source_sha256, status, status_detail, num_devices, num_nodes, images_per_sec,
           throughput, time_to_train_s,
           framework, framework_version, model, dataset, data, mode, precision, data_format,
           variable_update, all_reduce, batch_size_per_device, device_type, device_model,
           map_from_entries(list_sort(
               [e FOR e IN map_entries(coalesce(tags, MAP {}::MAP(VARCHAR, VARCHAR))) IF e.key NOT IN ('repeat', 'device')]
           )) AS config_tags
    FROM runs
)
SELECT md5(to_json(struct_pack(
           framework := framework, framework_version := framework_version, model := model,
           dataset := dataset, data := data, mode := mode, precision := precision, data_format := data_format,
           variable_update := variable_update, all_reduce := all_reduce,
           batch_size_per_device := batch_size_per_device, device_type := device_type,
           device_model := device_model, config_tags := config_tags
       ))) AS config_id,
       num_devices, num_nodes, run_id, status, status_detail, images_per_sec, throughput, time_to_train_s,
       source, source_sha256
FROM keyed
ORDER BY config_id, num_devices NULLS FIRST, num_nodes NULLS FIRST, run_id
