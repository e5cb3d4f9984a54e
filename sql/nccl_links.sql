-- One row per ok nccl-tests run (throughput_unit 'busbw GB/s'): its bus bandwidth at the largest message size
-- beside the nominal rate of the link that bounds it, where the run's facts name that link (bench run's run.json:
-- `nvidia-smi topo -m`, the GPUs' PCIe link, ibstat; bench.ingest.run_dirs.link_facts). Across nodes the
-- bound is the network port (nic_rate_gbps); within a node, NVLink where the GPUs are joined by it (NVLinks x the
-- per-link rate of the GPU's generation), else the GPU's PCIe link (lanes x the per-lane rate). `of_nominal` is
-- busbw / nominal; `why` says what is missing where no nominal rate applies (a log ingested without its run.json
-- names no link). Grain: run. Reads the views `runs` and `link_rates`. No parameters.
WITH nccl AS (
    SELECT run_id, host, device_model, num_devices, num_nodes, throughput AS busbw_gb_s,
           TRY_CAST(tags['message_bytes'] AS BIGINT) AS message_bytes,
           TRY_CAST(details['nvlinks'] AS INTEGER) AS nvlinks,
           TRY_CAST(details['pcie_gen'] AS INTEGER) AS pcie_gen, TRY_CAST(details['pcie_width'] AS INTEGER) AS pcie_width,
           TRY_CAST(details['nic_rate_gbps'] AS DOUBLE) AS nic_rate_gbps, details['nic_link_layer'] AS nic_link_layer
    FROM runs
    WHERE status = 'ok' AND throughput_unit = 'busbw GB/s'
),
bound AS (
    SELECT n.*,
           CASE WHEN coalesce(n.num_nodes, 1) > 1 THEN
                     CASE WHEN n.nic_rate_gbps IS NOT NULL
                          THEN (CASE WHEN n.nic_link_layer = 'Ethernet' THEN 'RoCE ' ELSE 'InfiniBand ' END)
                               || CAST(n.nic_rate_gbps AS BIGINT) || ' Gb/s port' END
                WHEN n.nvlinks IS NOT NULL THEN
                     (SELECT l.link FROM link_rates l WHERE l.kind = 'nvlink' AND n.device_model IS NOT NULL
                        AND regexp_matches(lower(n.device_model), l.pattern) LIMIT 1) || ' x ' || n.nvlinks
                WHEN n.pcie_gen IS NOT NULL THEN 'PCIe ' || n.pcie_gen || '.0 x' || n.pcie_width END AS link,
           CASE WHEN coalesce(n.num_nodes, 1) > 1 THEN n.nic_rate_gbps / 8
                WHEN n.nvlinks IS NOT NULL THEN
                     n.nvlinks * (SELECT l.gb_per_s FROM link_rates l WHERE l.kind = 'nvlink' AND n.device_model IS NOT NULL
                                    AND regexp_matches(lower(n.device_model), l.pattern) LIMIT 1)
                WHEN n.pcie_gen IS NOT NULL THEN
                     n.pcie_width * (SELECT l.gb_per_s FROM link_rates l WHERE l.kind = 'pcie' AND l.pattern = CAST(n.pcie_gen AS VARCHAR))
           END AS nominal_gb_s
    FROM nccl n
)
SELECT run_id, host, device_model, num_devices, num_nodes, message_bytes, busbw_gb_s, link, nominal_gb_s,
       busbw_gb_s / nominal_gb_s AS of_nominal,
       CASE WHEN nominal_gb_s IS NOT NULL THEN NULL
            WHEN coalesce(num_nodes, 1) > 1 THEN 'the run''s facts name no network port (ibstat in its run.json)'
            WHEN nvlinks IS NOT NULL THEN 'no NVLink generation listed for this device'
            ELSE 'the run''s facts name no link (nvidia-smi topo -m and the PCIe link in its run.json)' END AS why
FROM bound
ORDER BY run_id
