"""A PyTorch training benchmark whose log bench reads: DLLogger JSON lines (``DLLL {...}``) on stdout.

Run it under bench: ``bench run --tag framework=pytorch -- python runner/examples/torch_train.py --steps 300``

It trains a ResNet (defined here, so that only ``torch`` is needed) on synthetic ImageNet-shaped data and
prints, as NVIDIA's DeepLearningExamples do:
- one PARAMETER record: arch, batch_size (per device), precision, world_size (GPU runs), mode, data_backend;
- one METADATA record saying ``train.total_ips`` is a throughput in img/s;
- one LOG record per ``--log-every`` steps: the interval's images/s and the loss;
- one summary record (step ``[]``): images/s over the timed steps (after ``--warmup`` steps).

To make your own script readable by bench, print the same four kinds of line (or tf_cnn_benchmarks'
``total images/sec: N``), and pass what the log does not say with ``bench run --tag key=value``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

import torch
from torch import nn

#: blocks per stage of the bottleneck ResNets (He et al. 2016, table 1)
DEPTHS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet26": (2, 2, 2, 2)}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if stride == 1 and cin == cout else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


def resnet(depths: tuple[int, ...], classes: int = 1000) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                               nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, blocks in enumerate(depths):
        width = 64 * 2 ** stage
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if b == 0 and stage > 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def dllog(kind: str, step: object = None, **fields: object) -> None:
    now = time.time()
    record: dict[str, object] = {"timestamp": f"{now:.6f}", "datetime": datetime.fromtimestamp(now, UTC).isoformat(),
                                 "type": kind}
    if step is not None:
        record["step"] = step
    record.update(fields)
    print("DLLL " + json.dumps(record), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(DEPTHS), default="resnet50")
    ap.add_argument("--batch-size", type=int, default=64, help="per device")
    ap.add_argument("--steps", type=int, default=100, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10, help="steps before the timing starts")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--precision", choices=sorted(DTYPES), default="fp32", help="autocast dtype (fp32: none)")
    ap.add_argument("--device", default="auto", help="auto (cuda when there is one), cuda, cpu")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    args = ap.parse_args(argv)
    if min(args.batch_size, args.steps, args.image_size, args.log_every) < 1 or args.warmup < 0:
        ap.error("--batch-size, --steps, --image-size and --log-every must be positive, --warmup not negative")

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    model = resnet(DEPTHS[args.model]).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    autocast = torch.autocast(device.type, dtype=DTYPES[args.precision], enabled=args.precision != "fp32")

    params = {"arch": args.model, "batch_size": args.batch_size, "precision": args.precision,
              "mode": "training_benchmark", "data_backend": "synthetic", "image_size": args.image_size,
              "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__}
    if cuda:
        params["world_size"] = 1
    dllog("LOG", "PARAMETER", data=params)
    dllog("METADATA", metric="train.total_ips", metadata={"unit": "img/s", "format": ":.1f", "type": "THROUGHPUT"})

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    start = last = time.perf_counter()
    for i in range(1, args.steps + 1):
        loss = step()
        if i % args.log_every == 0 or i == args.steps:
            value = float(loss.detach())  # waits for the device
            now = time.perf_counter()
            done = args.log_every if i % args.log_every == 0 else i % args.log_every
            dllog("LOG", [0, i], data={"train.loss": round(value, 4),
                                       "train.total_ips": round(done * args.batch_size / (now - last), 2)})
            last = now
    total = args.steps * args.batch_size / (last - start)
    dllog("LOG", [], data={"train.total_ips": round(total, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
