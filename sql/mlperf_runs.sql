-- One row per run of an MLPerf Training results tree, with the result set it belongs to: (round, division,
-- submitter, system, benchmark), as a results repository lays them out (<submitter>/results/<system>/
-- <benchmark>/result_<n>.txt; bench.ingest.patterns.RESULTS_TREE gives the tags round, submitter, system,
-- benchmark). What mlperf_scores scores and bench report links each score to.
-- round: the tree's (training_results_v<round>), else the log's own version (v0.5's :::MLPv0.5.0, v0.6's
-- :::MLL: 0.5, 0.6); v0.7+ logs name no version. division: the system description's, as the summarizer
-- reports it (a result set's logs may disagree: one of SIAT's v0.7 sets logs 'open' once and 'closed' four
-- times), else the logs' submission_division. minutes: the time to train of a run that ended ok, else NULL;
-- NULL too for a run whose log holds an MLLOG line (v0.7+) that cannot be read (detail
-- unreadable_compliance_lines), which the summarizer's checker drops as non-converged.
-- Reads the views `runs` and `systems`. No parameters.
WITH logged AS (
    SELECT run_id, coalesce(tags['round'], nullif(regexp_extract(tags['mlperf_version'], '^(\d+\.\d+)', 1), '')) AS round,
           tags['submission_division'] AS logged_division, tags['submitter'] AS submitter,
           tags['system'] AS system, lower(tags['benchmark']) AS benchmark, framework,
           CASE WHEN status = 'ok' AND time_to_train_s > 0 AND details['unreadable_compliance_lines'] IS NULL
                THEN time_to_train_s / 60.0 END AS minutes
    FROM runs
    WHERE format = 'mlperf' AND tags['submitter'] IS NOT NULL AND tags['system'] IS NOT NULL
),
divisions AS (
    SELECT round, submitter, system, any_value(division) AS division
    FROM systems
    GROUP BY ALL
)
SELECT l.run_id, l.round, coalesce(v.division, l.logged_division) AS division, l.submitter, l.system, l.benchmark,
       l.framework, l.minutes
FROM logged l
LEFT JOIN divisions v
       ON v.submitter = l.submitter AND v.system = l.system AND v.round IS NOT DISTINCT FROM l.round
