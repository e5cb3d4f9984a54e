-- One row per (device, precision): the device's peak dense throughput in that precision, in TFLOP/s, as its
-- maker's data sheet states it, and the document. Dense means without 2:4 structured sparsity: where a sheet
-- gives only the sparse figure (marked with an asterisk on NVIDIA's sheets), it is halved here. These are the
-- denominators of MFU (the view `utilisation`); a device or precision not listed has no MFU, never a guess.
-- `pattern` is a case-insensitive regular expression on the runs' device_model (as logs and nvidia-smi name
-- devices: 'NVIDIA H100 80GB HBM3' is the SXM part, 'NVIDIA H100 PCIe' the PCIe one); `priority` orders the
-- patterns a name could match (the lower wins: 'H100 PCIe' before 'H100').
-- Not listed: Gaudi 2 (no data sheet figure found that this project could check), fp32 (a run logged as fp32
-- may run its matrix products on TF32 tensor cores or not; the log does not say which, so no peak applies).
-- Grain: device x precision. No parameters.
SELECT * FROM (VALUES
    ('H100 PCIe', 'h100.*pcie',                    1, 'fp8',  1513.0, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H100 PCIe', 'h100.*pcie',                    1, 'bf16',  756.0, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H100 PCIe', 'h100.*pcie',                    1, 'fp16',  756.0, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H100 SXM',  'h100',                          2, 'fp8',  1979.0, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H100 SXM',  'h100',                          2, 'bf16',  989.5, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H100 SXM',  'h100',                          2, 'fp16',  989.5, 'NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)'),
    ('H200',      'h200',                          1, 'fp8',  1979.0, 'NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)'),
    ('H200',      'h200',                          1, 'bf16',  989.5, 'NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)'),
    ('H200',      'h200',                          1, 'fp16',  989.5, 'NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)'),
    ('B200',      'b200',                          1, 'fp8',  4500.0, 'NVIDIA HGX B200 datasheet, per GPU (nvidia.com/en-us/data-center/hgx)'),
    ('B200',      'b200',                          1, 'bf16', 2250.0, 'NVIDIA HGX B200 datasheet, per GPU (nvidia.com/en-us/data-center/hgx)'),
    ('B200',      'b200',                          1, 'fp16', 2250.0, 'NVIDIA HGX B200 datasheet, per GPU (nvidia.com/en-us/data-center/hgx)'),
    ('A100 PCIe', 'a100.*pcie',                    1, 'bf16',  312.0, 'NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)'),
    ('A100 PCIe', 'a100.*pcie',                    1, 'fp16',  312.0, 'NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)'),
    ('A100 SXM',  'a100',                          2, 'bf16',  312.0, 'NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)'),
    ('A100 SXM',  'a100',                          2, 'fp16',  312.0, 'NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)'),
    ('L40S',      'l40s',                          1, 'fp8',   733.0, 'NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s)'),
    ('L40S',      'l40s',                          1, 'bf16',  362.05, 'NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s)'),
    ('L40S',      'l40s',                          1, 'fp16',  362.05, 'NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s)'),
    ('L4',        '\bl4\b',                        1, 'fp8',   242.5, 'NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4)'),
    ('L4',        '\bl4\b',                        1, 'bf16',  121.0, 'NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4)'),
    ('L4',        '\bl4\b',                        1, 'fp16',  121.0, 'NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4)'),
    ('V100 PCIe', 'v100.*pcie',                    1, 'fp16',  112.0, 'NVIDIA Tesla V100 datasheet (nvidia.com/en-us/data-center/v100)'),
    ('V100 SXM2', 'v100',                          2, 'fp16',  125.0, 'NVIDIA Tesla V100 datasheet (nvidia.com/en-us/data-center/v100)'),
    ('MI250X',    'mi250x',                        1, 'bf16',  383.0, 'AMD Instinct MI250X data sheet (amd.com/en/products/accelerators/instinct/mi200/mi250x.html)'),
    ('MI250X',    'mi250x',                        1, 'fp16',  383.0, 'AMD Instinct MI250X data sheet (amd.com/en/products/accelerators/instinct/mi200/mi250x.html)'),
    ('MI300X',    'mi300x',                        1, 'fp8',  2614.9, 'AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)'),
    ('MI300X',    'mi300x',                        1, 'bf16', 1307.4, 'AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)'),
    ('MI300X',    'mi300x',                        1, 'fp16', 1307.4, 'AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)'),
    ('Gaudi 3',   'gaudi.?3|hl-325',               1, 'fp8',  1835.0, 'Intel Gaudi 3 AI Accelerator white paper (intel.com/content/www/us/en/content-details/817486)'),
    ('Gaudi 3',   'gaudi.?3|hl-325',               1, 'bf16', 1835.0, 'Intel Gaudi 3 AI Accelerator white paper (intel.com/content/www/us/en/content-details/817486)'),
    ('TPU v4',    'tpu.?v4',                       1, 'bf16',  275.0, 'Google Cloud TPU v4 documentation (cloud.google.com/tpu/docs/v4)'),
    ('TPU v5e',   'tpu.?v5.?(e|lite)',             1, 'bf16',  197.0, 'Google Cloud TPU v5e documentation (cloud.google.com/tpu/docs/v5e)'),
    ('TPU v5p',   'tpu.?v5.?p',                    1, 'bf16',  459.0, 'Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p)')
) AS t(device, pattern, priority, precision, peak_tflops, source)
