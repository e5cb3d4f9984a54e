-- One row per kind of link a collective crosses: its nominal data rate per direction, in GB/s (10^9 bytes), and
-- the document. nccl-tests' bus bandwidth is comparable to it (its busbw is defined so that it is bounded by
-- the slowest link's rate whatever the number of ranks: NCCL's doc/PERFORMANCE.md).
-- NVLink: per link and direction (a GPU's rate is that times its links: `nvidia-smi topo -m` says NV18 on an
-- HGX H100, NV12 on an HGX A100); its generation is the GPU's (`pattern` on device_model, as device_peaks).
-- PCIe: per lane and direction after 128b/130b encoding (gen 3: 8 GT/s, gen 4: 16, gen 5: 32, gen 6: 64
-- with FLIT mode, counted here at its raw 64 GT/s / 8); a link's rate is that times its width.
-- InfiniBand / RoCE: a port's signalling rate in Gb/s as ibstat prints it, / 8.
-- Grain: link kind. No parameters.
SELECT * FROM (VALUES
    ('NVLink 2', 'nvlink', 'v100',             25.0, 'NVIDIA Tesla V100 datasheet: NVLink 300 GB/s over 6 links, both directions (nvidia.com/en-us/data-center/v100)'),
    ('NVLink 3', 'nvlink', 'a100',             25.0, 'NVIDIA A100 datasheet: NVLink 600 GB/s over 12 links, both directions (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)'),
    ('NVLink 4', 'nvlink', 'h100|h200|gh200',  25.0, 'NVIDIA H100 datasheet: NVLink 900 GB/s over 18 links, both directions (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('NVLink 5', 'nvlink', 'b200|gb200|b300', 50.0, 'NVIDIA HGX B200 datasheet: NVLink 1.8 TB/s over 18 links, both directions (nvidia.com/en-us/data-center/hgx)'),
    ('PCIe 3.0', 'pcie',   '3',   0.985, 'PCI Express Base Specification 3.0: 8 GT/s per lane, 128b/130b'),
    ('PCIe 4.0', 'pcie',   '4',   1.969, 'PCI Express Base Specification 4.0: 16 GT/s per lane, 128b/130b'),
    ('PCIe 5.0', 'pcie',   '5',   3.938, 'PCI Express Base Specification 5.0: 32 GT/s per lane, 128b/130b'),
    ('PCIe 6.0', 'pcie',   '6',   8.0,   'PCI Express Base Specification 6.0: 64 GT/s per lane (PAM4, FLIT)'),
    ('InfiniBand / RoCE port', 'nic', '', 0.125, 'a port''s rate in Gb/s as ibstat prints it (EDR 100, HDR 200, NDR 400, XDR 800), / 8 bits')
) AS t(link, kind, pattern, gb_per_s, source)
