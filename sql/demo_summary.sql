-- One row per (format, framework, model, num_gpus): how many runs the store holds, how many ended ok,
-- and the median / min / max of their images_per_sec (ok runs only; failed runs are counted, never zeros).
-- Grain: format x framework x model x num_gpus. Reads the view `runs`. No parameters.
WITH ok_runs AS (
    SELECT * FROM runs WHERE status = 'ok'
),
counts AS (
    SELECT format, framework, model, num_gpus,
           count(*) AS n_runs,
           count(*) FILTER (WHERE status = 'ok') AS n_ok
    FROM runs
    GROUP BY ALL
),
rates AS (
    SELECT format, framework, model, num_gpus,
           median(images_per_sec) AS median_images_per_sec,
           min(images_per_sec) AS min_images_per_sec,
           max(images_per_sec) AS max_images_per_sec
    FROM ok_runs
    GROUP BY ALL
)
SELECT c.format, c.framework, c.model, c.num_gpus, c.n_runs, c.n_ok,
       r.median_images_per_sec, r.min_images_per_sec, r.max_images_per_sec
FROM counts c
LEFT JOIN rates r
  ON  c.format IS NOT DISTINCT FROM r.format
  AND c.framework IS NOT DISTINCT FROM r.framework
  AND c.model IS NOT DISTINCT FROM r.model
  AND c.num_gpus IS NOT DISTINCT FROM r.num_gpus
ORDER BY c.format, c.framework, c.model, c.num_gpus
