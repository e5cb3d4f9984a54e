"""A simulated fleet: seeded `bench run` directories (output.log, run.json, telemetry.csv) for H hosts x G
GPUs x R runs of one training, with faults injected into some hosts, for `bench fleet` to find.

    python benchmarks/fleet_sim.py OUT [--hosts 64] [--gpus 8] [--runs 3] [--noise 0.01] [--fault-size 0.10]
                                       [--faults 8] [--seed 1]

Healthy hosts differ from each other by --noise (the SD of a host's log throughput; 1% by default) and a
host's runs by a third of that. Each faulty host gets one fault, the kinds in turn (``FAULTS``), and is
--fault-size slower (its runs' throughput divided by 1 + size):

- ``app_clocks``: every GPU's application clock set low (run.json ``gpus[i].applications_clock_sm_mhz``),
  their SM clock under load with it;
- ``power_cap``: every GPU's enforced power limit lowered; they draw it, and clock lower;
- ``hot_gpu``: one GPU throttles at 92 °C with a low SM clock while its neighbours wait for it;
- ``old_driver``: the node left on an older driver; its telemetry looks healthy;

and, with ``health`` (``--health``: run.json and telemetry.csv carry what bench.runner.gpu_health records), two
kinds more that ``--kinds`` can name (``HEALTH_FAULTS``):

- ``pcie_link``: one GPU's PCIe link trained down to Gen3 x16 (its peers run Gen5 x16 under load), and the GPU
  busy 85% of the time under load (it waits on its link);
- ``row_remaps``: one GPU with 2 uncorrectable row remaps pending a reset.

``start=K`` (``--start K``) makes each fault begin at run K (a late fault: the runs before are healthy, facts
and telemetry included), and ``ramp`` (``--ramp``) makes it grow run by run from K to the last run, where it is
--fault-size (a degrading host). ``rack=N`` (``--rack N``) tags each run ``rack=rNN``, N hosts to a rack.

``group=N`` (``--group N``) also rolls a new driver (``NEW_DRIVER``) out to the last N healthy hosts, which makes
them ``group_size`` slower (a bad rollout: one finding for bench fleet, not N); the truth names them.

OUT.truth.json (beside OUT) says which host got which fault (and which GPU): tests and `make bench` score bench fleet's
answers against it. The logs are in the tf_cnn_benchmarks format of `bench run`'s bundled trainer; nothing in
them is measured.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

FAULTS = ("app_clocks", "power_cap", "hot_gpu", "old_driver")
HEALTH_FAULTS = ("pcie_link", "row_remaps")
_ONE_GPU = ("hot_gpu", *HEALTH_FAULTS)  # the kinds that are one GPU's
GPU = "NVIDIA H100 80GB HBM3"
DRIVER, OLD_DRIVER, NEW_DRIVER = "550.90.07", "535.104.05", "575.51.03"
CLOCK, LOW_CLOCK = 1980.0, 1410.0
LIMIT, LOW_LIMIT = 700.0, 500.0
BASE_RATE = 2950.0  # images/sec of a healthy host (8 GPUs, ResNet-50, fp16)
SAMPLES = 24  # telemetry samples per GPU per run (0.5 s apart)


def plan(hosts: int, faults: int, seed: int, kinds: tuple[str, ...] = FAULTS) -> dict[str, dict[str, object]]:
    """host name -> its fault (kind, gpu) for ``faults`` hosts drawn by ``seed``, the ``kinds`` in turn."""
    rng = random.Random(seed)
    names = [f"node{i:03d}" for i in range(1, hosts + 1)]
    chosen = rng.sample(names, min(faults, hosts))
    return {h: {"kind": kinds[i % len(kinds)], "gpu": rng.randrange(8) if kinds[i % len(kinds)] in _ONE_GPU else None}
            for i, h in enumerate(chosen)}


def truth_path(out: Path) -> Path:
    """Where the truth of the fleet in ``out`` is written: beside it, so that ingesting ``out`` reads run folders only."""
    return out.parent / f"{out.name}.truth.json"


def generate(out: Path, *, hosts: int = 64, gpus: int = 8, runs: int = 3, noise: float = 0.01,
             fault_size: float = 0.10, faults: int = 8, seed: int = 1, group: int = 0,
             group_size: float = 0.06, kinds: tuple[str, ...] = FAULTS, health: bool = False, start: int = 0,
             ramp: bool = False, rack: int = 0) -> dict[str, dict[str, object]]:
    """Write the fleet's run directories under ``out`` and its truth beside it (``truth_path``); returns the truth
    of the faulty hosts (the group's hosts are in the truth file's ``group``)."""
    rng = random.Random(seed * 7919 + 17)
    if not health and set(kinds) & set(HEALTH_FAULTS):
        raise ValueError(f"fault kinds {HEALTH_FAULTS} need health=True")
    truth = plan(hosts, faults, seed, kinds)
    healthy = [f"node{h:03d}" for h in range(1, hosts + 1) if f"node{h:03d}" not in truth]
    rollout = set(healthy[len(healthy) - group:]) if group else set()
    for gpu_fault in truth.values():
        if gpu_fault["gpu"] is not None:
            gpu_fault["gpu"] = int(gpu_fault["gpu"]) % gpus  # type: ignore[call-overload]
    first = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    out.mkdir(parents=True, exist_ok=True)
    for h in range(1, hosts + 1):
        host = f"node{h:03d}"
        fault = truth.get(host) or ({"kind": "new_driver", "gpu": None} if host in rollout else None)
        base = BASE_RATE * math.exp(rng.gauss(0, noise))
        tags = {"rack": f"r{(h - 1) // rack:02d}"} if rack else {}
        for r in range(runs):
            now = fault if host not in truth or r >= start else None
            size = fault_size * (r - start + 1) / (runs - start) if ramp and host in truth else fault_size
            level = base / (1 + size if now is not None and host in truth else 1)
            level /= 1 + group_size if host in rollout else 1
            rate = level * math.exp(rng.gauss(0, noise / 3))
            at = first + timedelta(days=r, minutes=h)
            write_run(out / f"{host}-r{r}", host, rate, now, gpus, at, rng, health, tags)
    truth_path(out).write_text(json.dumps({"hosts": hosts, "gpus": gpus, "runs": runs, "noise": noise,
                                                "fault_size": fault_size, "seed": seed, "faults": truth,
                                                "group": sorted(rollout), "group_size": group_size, "start": start,
                                                "ramp": ramp, "rack": rack}, indent=1))
    return truth


def write_run(d: Path, host: str, rate: float, fault: dict[str, object] | None, gpus: int, at: datetime,
             rng: random.Random, health: bool = False, tags: dict[str, str] | None = None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    kind = fault["kind"] if fault else None
    settings = []
    for i in range(gpus):
        driver = {"old_driver": OLD_DRIVER, "new_driver": NEW_DRIVER}.get(str(kind), DRIVER)
        s = {"name": GPU, "driver_version": driver, "memory_total_mib": 81559.0,
             "sm_clock_max_mhz": CLOCK, "power_limit_w": LIMIT, "enforced_power_limit_w": LIMIT,
             "applications_clock_sm_mhz": CLOCK, "applications_clock_memory_mhz": 2619.0, "memory_clock_max_mhz": 2619.0,
             "persistence_mode": "Enabled", "ecc_mode": "Enabled", "vbios_version": "96.00.99.00.01"}
        if kind == "app_clocks":
            s["applications_clock_sm_mhz"] = LOW_CLOCK
        if kind == "power_cap":
            s["enforced_power_limit_w"] = s["power_limit_w"] = LOW_LIMIT
        if health:  # at the start of the run: an idle GPU's link at Gen1; H100s report no retired pages
            s.update({"pcie.link.gen.current": 1, "pcie.link.gen.max": 5, "pcie.link.width.current": 16,
                      "pcie.link.width.max": 16, "ecc.errors.corrected.volatile.total": 0,
                      "ecc.errors.uncorrected.volatile.total": 0, "ecc.errors.corrected.aggregate.total": 0,
                      "ecc.errors.uncorrected.aggregate.total": 0, "retired_pages.single_bit_ecc.count": None,
                      "retired_pages.double_bit.count": None, "retired_pages.pending": None,
                      "remapped_rows.correctable": 0, "remapped_rows.uncorrectable": 0, "remapped_rows.pending": "No",
                      "remapped_rows.failure": "No", "nvlink.links_active": 18, "nvlink.links_inactive": 0})
            if kind == "row_remaps" and i == fault["gpu"]:  # type: ignore[index]
                s.update({"remapped_rows.uncorrectable": 2, "remapped_rows.pending": "Yes",
                          "ecc.errors.uncorrected.volatile.total": 2, "ecc.errors.uncorrected.aggregate.total": 2})
        settings.append(s)
    batches, warmup, per_gpu = 100, 10, 256
    seconds = batches * per_gpu * gpus / rate
    end = at + timedelta(seconds=seconds + 20)
    run_id = f"{at:%Y%m%dT%H%M%SZ}-resnet50-{host[-3:]}"
    doc = {
        "schema_version": 2, "run_id": run_id, "argv": ["bench", "run", "--model", "resnet50", "--num-gpus", str(gpus)],
        "spec": {"model": "resnet50", "batch_size": per_gpu, "num_gpus": gpus, "variable_update": "replicated",
                 "all_reduce": "nccl", "data_format": "NCHW", "precision": "fp16", "launcher": "local",
                 "num_batches": batches, "num_warmup_batches": warmup, "device": "gpu", "tags": {}},
        "tags": dict(tags or {}), "repeat": None, "env": {"CUDA_VERSION": "12.4.1"},
        "host": {"hostname": host, "cpu_model": "AMD EPYC 9654 96-Core Processor", "kernel": "6.8.0-45-generic",
                 "os": "Ubuntu 22.04.4 LTS", "physical_cores": 192, "logical_cpus": 384, "memory_total_mib": 2063731,
                 "python": "3.11.9"},
        "versions": {"tensorflow": "2.15.1", "cuda": "12.4", "cudnn": "8.9.7", "nccl": "2.21.5", "horovod": None},
        "gpus": settings, "gpu_topology": None, "started_at": at.isoformat(), "ended_at": end.isoformat(),
        "wall_time_s": (end - at).total_seconds(), "exit_code": 0, "status": "ok",
    }
    (d / "run.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    (d / "output.log").write_text(_log(rate, gpus, per_gpu, batches, rng))
    (d / "telemetry.csv").write_text(_telemetry(fault, gpus, at, rng, health))


def _log(rate: float, gpus: int, per_gpu: int, batches: int, rng: random.Random) -> str:
    devices = ", ".join(f"'/gpu:{i}'" for i in range(gpus))
    lines = ["TensorFlow:  2.15", "Model:       resnet50", "Dataset:     imagenet (synthetic)", "Mode:        training",
             "SingleSess:  False", f"Batch size:  {per_gpu * gpus} global", f"             {per_gpu} per device",
             f"Num batches: {batches}", "Num epochs:  0.00", f"Devices:     [{devices}]", "NUMA bind:   False",
             "Data format: NCHW", "Optimizer:   sgd", "Variables:   replicated", "AllReduce:   nccl", "==========",
             "Generating training model", "Initializing graph", "Running warm up", "Done warm up",
             "Step\tImg/sec\ttotal_loss"]
    for step in range(10, batches + 1, 10):
        lines.append(f"{step}\timages/sec: {rate * (1 + rng.gauss(0, 0.001)):.1f} +/- {rate * 0.002:.1f} "
                     f"(jitter = {rate * 0.004:.1f})\t{7.9 - step * 0.001:.3f}")
    lines += ["-" * 64, f"total images/sec: {rate:.2f}", "-" * 64]
    return "\n".join(lines) + "\n"


def _telemetry(fault: dict[str, object] | None, gpus: int, at: datetime, rng: random.Random, health: bool = False) -> str:
    kind = fault["kind"] if fault else None
    rows = ["timestamp, index, utilization.gpu [%], memory.used [MiB], temperature.gpu, power.draw [W], clocks.sm [MHz]"
            + (", pcie.link.gen.current, pcie.link.width.current, clocks_event_reasons.active" if health else "")]
    base_temp = [rng.gauss(64, 3) for _ in range(gpus)]
    for k in range(SAMPLES):
        t = at + timedelta(seconds=0.5 * k)
        for i in range(gpus):
            util = 0 if k < 2 else 98  # the first second is start-up
            if kind == "pcie_link" and i == fault["gpu"] and util:  # type: ignore[index]
                util = 85  # it waits on its link
            clock, temp, power = CLOCK - abs(rng.gauss(0, 8)), base_temp[i] + rng.gauss(0, 1), rng.gauss(610, 15)
            if kind == "app_clocks":
                clock, power = LOW_CLOCK - abs(rng.gauss(0, 5)), rng.gauss(470, 12)
            elif kind == "power_cap":
                clock, power = rng.gauss(1640, 25), LOW_LIMIT - abs(rng.gauss(0, 3))
            elif kind == "hot_gpu" and i == fault["gpu"]:  # type: ignore[index]
                clock, temp, power = rng.gauss(1500, 30), 92 + rng.gauss(0, 0.7), rng.gauss(540, 15)
            if util == 0:
                clock, power = 345.0, 75.0
            row = (f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {i}, {util} %, "
                   f"{0 if util == 0 else 61234} MiB, {temp:.0f}, {power:.2f} W, {clock:.0f} MHz")
            if health:
                gen = 1 if util == 0 else 3 if kind == "pcie_link" and i == fault["gpu"] else 5  # type: ignore[index]
                mask = 0x1 if util == 0 else {"app_clocks": 0x2, "power_cap": 0x4}.get(str(kind), 0)
                if kind == "hot_gpu" and i == fault["gpu"] and util:  # type: ignore[index]
                    mask |= 0x20
                if rng.random() < 0.05 and util:  # now and then a healthy GPU touches its power limit
                    mask |= 0x4
                row += f", {gen}, 16, 0x{mask:016x}"
            rows.append(row)
    return "\n".join(rows) + "\n"


#: the words of ``bench fleet``'s differing facts that name each fault (a hot GPU is named by its index)
FAULT_FACTS = {"app_clocks": "applications", "power_cap": "power_limit", "old_driver": "driver", "row_remaps": "remapped_rows"}


def score(outliers: list[dict[str, object]], truth: dict[str, dict[str, object]]) -> dict[str, object]:
    """bench fleet's ``--json`` outliers against the truth: faulty hosts flagged (``found``), those flagged with
    the right fact or GPU (``explained``), and healthy hosts flagged (``false``), each a sorted list of hosts."""
    flagged = {str(o["host"]): o for o in outliers}
    explained = []
    for host, fault in truth.items():
        o = flagged.get(host)
        if o is None:
            continue
        if fault["kind"] in ("hot_gpu", "pcie_link"):
            right = o.get("gpu") == fault["gpu"]
        elif fault["kind"] == "row_remaps":
            right = o.get("gpu") == fault["gpu"] and any("remapped_rows" in key for key in o.get("differs") or {})  # type: ignore[attr-defined]
        else:
            right = any(FAULT_FACTS[str(fault["kind"])] in key for key in o.get("differs") or {})  # type: ignore[attr-defined]
        if right:
            explained.append(host)
    return {"found": sorted(h for h in truth if h in flagged), "explained": sorted(explained),
            "false": sorted(h for h in flagged if h not in truth)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--noise", type=float, default=0.01)
    p.add_argument("--fault-size", type=float, default=0.10)
    p.add_argument("--faults", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--group", type=int, default=0, help="roll NEW_DRIVER out to this many healthy hosts")
    p.add_argument("--group-size", type=float, default=0.06)
    p.add_argument("--health", action="store_true", help="record the PCIe link, ECC, row remaps and throttle reasons")
    p.add_argument("--kinds", default=",".join(FAULTS), help=f"fault kinds in turn, of {FAULTS + HEALTH_FAULTS}")
    p.add_argument("--start", type=int, default=0, help="the run each fault begins at")
    p.add_argument("--ramp", action="store_true", help="each fault grows run by run from --start (degrading)")
    p.add_argument("--rack", type=int, default=0, help="tag runs rack=rNN, this many hosts to a rack")
    a = p.parse_args()
    truth = generate(a.out, hosts=a.hosts, gpus=a.gpus, runs=a.runs, noise=a.noise, fault_size=a.fault_size,
                     faults=a.faults, seed=a.seed, group=a.group, group_size=a.group_size,
                     kinds=tuple(a.kinds.split(",")), health=a.health, start=a.start, ramp=a.ramp, rack=a.rack)
    print(f"{a.hosts} hosts x {a.gpus} GPUs x {a.runs} runs in {a.out}; faults: "
          + ", ".join(f"{h} {f['kind']}" + (f" (GPU {f['gpu']})" if f["gpu"] is not None else "")
                      for h, f in sorted(truth.items())))


if __name__ == "__main__":
    main()
