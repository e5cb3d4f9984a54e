-- One row per (format, model, device_type, num_devices): how many runs the store holds, how many ended ok, and the
-- median images_per_sec of the ok runs (failed runs are counted, never averaged in as zeros).
-- Grain: format x model x device_type x num_devices. Reads the view `runs`. No parameters.
WITH counts AS (
    SELECT format, model, device_type, num_devices,
           count(*) AS n_runs,
           count(*) FILTER (WHERE status = 'ok') AS n_ok,
           string_agg(DISTINCT status, ',' ORDER BY status) FILTER (WHERE status <> 'ok') AS other_statuses
    FROM runs
    GROUP BY ALL
),
rates AS (
    SELECT format, model, device_type, num_devices, median(images_per_sec) AS median_images_per_sec
    FROM runs
    WHERE status = 'ok'
    GROUP BY ALL
)
SELECT c.format, c.model, c.device_type, c.num_devices, c.n_runs, c.n_ok, c.other_statuses, r.median_images_per_sec
FROM counts c
LEFT JOIN rates r
  ON  c.format IS NOT DISTINCT FROM r.format
  AND c.model IS NOT DISTINCT FROM r.model
  AND c.device_type IS NOT DISTINCT FROM r.device_type
  AND c.num_devices IS NOT DISTINCT FROM r.num_devices
ORDER BY c.format, c.model NULLS LAST, c.device_type NULLS LAST, c.num_devices NULLS LAST
