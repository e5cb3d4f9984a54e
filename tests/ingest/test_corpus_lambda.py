"""Every tf_cnn ``throughput/1`` log in the Lambda corpus tarball, streamed (never extracted to disk).

Expected values come from the log itself and from its directory name, read with simple regexes that
are independent of the parser:
- ``total images/sec: X`` (the harness leaves the total line unstamped) -> images_per_sec;
- the ``Ngpus`` and ``<model>-<batch>`` directory names -> num_gpus and batch_size_per_device;
- ``Batch size:  G global`` + ``B per device`` header lines -> G/B = num_gpus;
- lines ``<step>\\timages/sec:`` -> the number of step rows.
Directory layout: ``<machine>.logs/<syn|real>-<variable_update>-<fp16|fp32>-<N>gpus[-...]/<model>-<B>/throughput/1``
(corpus README / PROVENANCE). The 19 logs without a total were read by hand (see ``_NO_TOTAL``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from logtools import lambda_members

from bench.ingest.parse import parse_bytes

_DIR = re.compile(r"/(syn|real)-(replicated|parameter_server)-(fp16|fp32)-(\d+)gpus[^/]*/([\w.]+)-(\d+)/throughput/1$")
_TOTAL = re.compile(rb"^total images/sec: ([\d.]+)$", re.M)
_STEP = re.compile(rb"^\d+\timages/sec: ", re.M)
_BATCH = re.compile(rb"^Batch size: +(\d+) global\n(\d+) per device$", re.M)

# Logs without a total, read by hand: (path suffix, status). i7 TF1.15: ResourceExhaustedError raised
# through the coordinator; 7502 4-GPU: "InternalError: ... unhandled system error" (NCCL) tracebacks;
# Processor ps inception3: an import-time NotFoundError traceback before any header; Processor ps
# resnet152 and the Radeon inception3 log end after the header ("Running warm up") with no error.
_NO_TOTAL = {
    "3970X-Radeon-VII-Pro-PCIEGen4-10bit.logs/syn-replicated-fp32-1gpus/inception3-96": "no_result",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp16-4gpus/alexnet-768": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp16-4gpus/inception3-24": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp16-4gpus/vgg16-48": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp32-4gpus/alexnet-384": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp32-4gpus/inception4-8": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp32-4gpus/resnet152-16": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp32-4gpus/resnet50-40": "failed",
    "7502-GeForce_RTX_3070.logs/syn-replicated-fp32-4gpus/vgg16-40": "failed",
    "Processor-LambdaCloud_4xQuadro_RTX_6000.logs/syn-parameter_server-fp16-4gpus/inception3-256": "failed",
    "Processor-LambdaCloud_4xQuadro_RTX_6000.logs/syn-parameter_server-fp16-4gpus/resnet152-128": "no_result",
}
# Headers that contradict themselves: "Batch size: 512*N global" over N devices but "256 per device"
# (the 1-GPU log of the same machine prints 512/512; throughput scales as 512 per GPU). The parser keeps
# G and the device list, so B = G/N = 512 (the directory's batch), and reports a conflict problem.
_BATCH_CONFLICT = {f"7502-RTX_A6000_XLA_TF1_15.logs/syn-replicated-fp16-{n}gpus/inception3-512" for n in (2, 4, 8)}
for _m in ("TF1_15", "XLA_TF1_15"):
    for _d in ("syn-replicated-fp32-1gpus", "syn-replicated-fp32-1gpus-inference"):
        for _b in ("inception4-12", "vgg16-48"):
            _NO_TOTAL[f"i7-9750H-GeForce_RTX_2080_with_Max-Q_Design_{_m}.logs/{_d}/{_b}"] = "oom"


def _check(name: str, data: bytes) -> list[str]:
    """Mismatches between the parse of one member and what its text and path say."""
    parsed = parse_bytes(data, source=name)
    errs = []
    if parsed.format != "tf_cnn" or len(parsed.result.runs) != 1:
        return [f"{name}: format {parsed.format}, {len(parsed.result.runs)} runs"]
    run = parsed.result.runs[0]
    d = _DIR.search(name)
    assert d is not None, name
    totals = _TOTAL.findall(data)
    key = name.rsplit("/throughput/", 1)[0]
    if totals:
        if run.status != "ok" or run.images_per_sec != float(totals[-1]):
            errs.append(f"{name}: {run.status} {run.images_per_sec} != {totals[-1]!r}")
    elif run.status != _NO_TOTAL.get(key) or run.images_per_sec is not None:
        errs.append(f"{name}: no total but {run.status} {run.images_per_sec}")
    batch = _BATCH.search(data)
    if batch is not None:
        g, b = int(batch[1]), int(batch[2])
        if key in _BATCH_CONFLICT:
            conflicts = [p for p in parsed.result.problems if p.kind == "conflict"]
            b = g // int(d[4]) if len(conflicts) == 1 and b == 256 else -1
        if not (run.num_gpus == int(d[4]) == g // b and run.batch_size_per_device == int(d[6]) == b):
            errs.append(f"{name}: gpus {run.num_gpus} batch {run.batch_size_per_device} vs {g}/{b}")
    elif totals:
        errs.append(f"{name}: ok run without a header")
    if len(parsed.result.steps) != len(_STEP.findall(data)):
        errs.append(f"{name}: {len(parsed.result.steps)} step rows != {len(_STEP.findall(data))}")
    return errs


def test_every_lambda_throughput_log(corpus: Path) -> None:
    t0 = time.perf_counter()
    errors: list[str] = []
    members = no_total = 0
    for name, data in lambda_members(corpus, "/throughput/1"):
        members += 1
        no_total += _TOTAL.search(data) is None
        errors.extend(_check(name, data))
    assert errors == []
    # 3,949 throughput logs (corpus PROVENANCE.md); 19 of them have no total (grep -L).
    assert (members, no_total) == (3949, len(_NO_TOTAL)) == (3949, 19)
    assert time.perf_counter() - t0 < 60
