-- One row per MLPerf Training result set: (round, division, submitter, system, benchmark), the runs of one
-- benchmark on one system as a results repository lays them out (<submitter>/results/<system>/<benchmark>/
-- result_<n>.txt; bench.ingest.patterns.RESULTS_TREE gives the tags round, submitter, system, benchmark).
-- Its runs, round and division are those of the view `mlperf_runs`; framework the runs' framework (one
-- value, else the first).
-- score_min: MLCommons' result summarizer's score (mlperf-logging 4.1, _compute_strong_score_standalone),
-- rule "olympic": each run's time to train in minutes (run_stop - run_start); a run that did not end ok is
-- dropped and counts as the slowest; of the ok runs sorted, the fastest max_dropped and the slowest
-- (max_dropped - dropped) are left out and the rest averaged, max_dropped = 4 for unet3d, else 1. No score
-- when more runs were dropped than max_dropped (verdict 'too many failed runs') or none is left ('too few
-- runs'). The same rule for every round (v0.5 to today: drop the fastest and the slowest run). Where the
-- result set's folder holds a scaling.json (the view `score_scales`: the review committee's reference-
-- convergence normalisation, which the summarizer multiplies in), score_min is the olympic mean times its
-- scaling_factor and score_rule says 'olympic x scaling.json'; else scaling_factor is NULL and the rule
-- 'olympic'. Of the summarizer's compliance checks, which drop a run for reasons besides its status, one
-- is applied (in mlperf_runs: an MLLOG line that cannot be read), the others not (v5.0: an initialization
-- over 30 minutes). n_runs counts every run, n_ok those mlperf_runs gives a time to train.
-- time_to_train_min: the plain mean of the ok runs' times to train (minutes), a score or not: what
-- `bench compare --metric time_to_train` compares (a set with too few runs for a score still has one).
-- What the runs ran on comes from the system description of the same (round, submitter, system) in the
-- view `systems` (any of them when a repository holds copies; NULL when none was ingested, whenever it
-- is ingested): num_nodes, num_devices (nodes x accelerators per node), device_type, device_model,
-- host_processor_model, availability; framework is the logs' (one word: mxnet, pytorch, ...), else the
-- description's (often a list of container releases).
-- Reads the views `mlperf_runs`, `systems` and `score_scales`. No parameters.
WITH ranked AS (
    SELECT *,
           count(*) OVER (PARTITION BY round, division, submitter, system, benchmark) AS n_runs,
           count(minutes) OVER (PARTITION BY round, division, submitter, system, benchmark) AS n_ok,
           row_number() OVER (PARTITION BY round, division, submitter, system, benchmark
                              ORDER BY minutes ASC NULLS LAST) AS fastest,
           CASE WHEN benchmark = 'unet3d' THEN 4 ELSE 1 END AS max_dropped
    FROM mlperf_runs
),
scored AS (
    SELECT round, division, submitter, system, benchmark,
           min(framework) AS framework,
           any_value(n_runs) AS n_runs, any_value(n_ok) AS n_ok, any_value(max_dropped) AS max_dropped,
           avg(minutes) AS time_to_train_min,
           avg(minutes) FILTER (WHERE minutes IS NOT NULL AND fastest > max_dropped
                                AND fastest <= n_ok - (max_dropped - (n_runs - n_ok))) AS olympic
    FROM ranked
    GROUP BY ALL
),
scales AS (
    SELECT round, submitter, system, lower(benchmark) AS benchmark, any_value(scaling_factor) AS scaling_factor
    FROM score_scales
    GROUP BY ALL
),
described AS (
    SELECT round, submitter, system, any_value(num_nodes) AS num_nodes, any_value(num_devices) AS num_devices,
           any_value(device_type) AS device_type, any_value(device_model) AS device_model,
           any_value(host_processor_model) AS host_processor_model, any_value(availability) AS availability,
           any_value(framework) AS framework
    FROM systems
    GROUP BY ALL
)
SELECT s.round, s.division, s.submitter, s.system, s.benchmark,
       coalesce(s.framework, d.framework) AS framework,
       CASE WHEN s.n_runs - s.n_ok <= s.max_dropped THEN s.olympic * coalesce(f.scaling_factor, 1.0) END AS score_min,
       s.time_to_train_min, s.n_runs, s.n_ok,
       CASE WHEN s.n_runs - s.n_ok > s.max_dropped THEN 'too many failed runs'
            WHEN s.olympic IS NULL THEN 'too few runs'
            ELSE 'scored' END AS verdict,
       CASE WHEN f.scaling_factor IS NULL THEN 'olympic' ELSE 'olympic x scaling.json' END AS score_rule,
       f.scaling_factor,
       d.num_nodes, d.num_devices, d.device_type, d.device_model, d.host_processor_model, d.availability
FROM scored s
LEFT JOIN scales f
       ON f.submitter = s.submitter AND f.system = s.system AND f.benchmark = s.benchmark
      AND f.round IS NOT DISTINCT FROM s.round
LEFT JOIN described d
       ON d.submitter = s.submitter AND d.system = s.system AND d.round IS NOT DISTINCT FROM s.round
ORDER BY s.round, s.division, s.submitter, s.system, s.benchmark
