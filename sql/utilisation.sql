-- One row per ok run that states its device's throughput in FLOP/s (details['tflops_per_device']: Megatron's
-- "throughput per GPU (TFLOP/s/GPU)" and "TFLOPs", torchtitan's and MaxText's tflops, DeepSpeed's profiler):
-- its model FLOPs utilisation against the device's peak in the run's precision (the view `device_peaks`).
-- mfu = tflops_per_device / peak_tflops, a fraction. The FLOP count is the trainer's own: Megatron and
-- torchtitan count a dense transformer's 6 x parameters per token plus attention's 12 x layers x hidden x
-- sequence (Megatron also the logits), so the MFU of a sparse (MoE) model counts its active parameters only.
-- Where no peak applies (a device or precision `device_peaks` does not list, a run that does not say its
-- device or precision) peak_tflops and mfu are NULL and `why` says which; the trainer's own MFU, where it
-- printed one against a peak it chose, is trainer_mfu (details['mfu_pct'] / 100).
-- Grain: run. Reads the views `runs` and `device_peaks`. No parameters.
WITH stated AS (
    SELECT run_id, device_model, precision, throughput, throughput_unit, num_devices,
           TRY_CAST(details['tflops_per_device'] AS DOUBLE) AS tflops_per_device,
           TRY_CAST(details['mfu_pct'] AS DOUBLE) / 100 AS trainer_mfu,
           CASE WHEN precision IN ('fp16', 'amp') THEN 'fp16' ELSE precision END AS peak_precision
    FROM runs
    WHERE status = 'ok' AND TRY_CAST(details['tflops_per_device'] AS DOUBLE) > 0
),
matched AS (
    SELECT s.run_id, arg_min(p.device, p.priority) AS peak_device
    FROM stated s JOIN (SELECT DISTINCT device, pattern, priority FROM device_peaks) p
      ON s.device_model IS NOT NULL AND regexp_matches(lower(s.device_model), p.pattern)
    GROUP BY s.run_id
)
SELECT s.run_id, s.device_model, m.peak_device, s.precision, s.throughput, s.throughput_unit, s.num_devices,
       s.tflops_per_device, p.peak_tflops, s.tflops_per_device / p.peak_tflops AS mfu, s.trainer_mfu,
       p.source AS peak_source,
       CASE WHEN s.device_model IS NULL THEN 'the run does not say its device'
            WHEN m.peak_device IS NULL THEN 'no peak listed for this device'
            WHEN s.precision IS NULL THEN 'the run does not say its precision'
            WHEN p.peak_tflops IS NULL THEN 'no peak listed for this device in ' || s.precision END AS why
FROM stated s
LEFT JOIN matched m USING (run_id)
LEFT JOIN device_peaks p ON p.device = m.peak_device AND p.precision = s.peak_precision
ORDER BY s.run_id
