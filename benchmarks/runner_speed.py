"""``make bench``: the trainer's speed and the runner's overhead, each next to its baseline in the same run.

On CPU, resnet20 (cifar10 shapes), batch 32, 10 warm-up then 50 timed steps, each way in a process of its own:

1. ``bench run`` (the runner launching our trainer), images/sec read from its ``total images/sec`` line;
2. a plain Keras ``model.fit`` on the same model and synthetic data, a callback timing the 50 batches
   after the 10 warm-up ones (this module run with ``--keras-fit``, which prints the same two lines);
3. tf_cnn_benchmarks itself, when ``BENCH_TF_CNN_DIR`` names a checkout of its ``tf_cnn_benchmarks``
   folder (skipped with a note otherwise).

Prints images/sec for each (the best and the median of the rounds, which run in an order rotated each
round), the ratios of the bests ours/other and the verdict (goal: ours >= 0.98 x the fastest other); then the runner's overhead, the wall time of ``bench run`` minus the trainer's timed window
(goal: <= 5 s + TensorFlow's import time, measured here as ``python -c "import tensorflow"``).
Every number is measured in this run; nothing is hard-coded. TensorFlow is imported only in the
``--keras-fit`` child.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.runner.train.models import SPECS, build_model, input_shape

MODEL, BATCH, STEPS, WARMUP = "resnet20", 32, 50, 10
VARIABLE_UPDATE = "replicated"  # one device: MirroredStrategy over /cpu:0 (parameter_server also runs)
SPEED_GOAL = 0.98  # ours / fastest other
OVERHEAD_BUDGET_S = 5.0  # plus TensorFlow's import time

_TOTAL = re.compile(r"total images/sec:\s*([0-9.]+)")
_WINDOW = re.compile(r"Timed window:\s*([0-9.]+) s for (\d+) images")


@dataclass(frozen=True, slots=True)
class TrainerOutput:
    """What a trainer's text says: ``images_per_sec`` of its (last) total line and its timed window;
    None when the line is absent."""

    images_per_sec: float | None
    timed_window_s: float | None
    timed_images: int | None


@dataclass(frozen=True, slots=True)
class Measurement:
    """One way's result: images/sec (None when it did not run), wall time of its process, and a note
    (why it was skipped or failed)."""

    name: str
    images_per_sec: float | None
    wall_s: float | None = None
    timed_window_s: float | None = None
    note: str = ""


def parse_trainer_output(text: str) -> TrainerOutput:
    """The last ``total images/sec: X`` and ``Timed window: S s for N images`` in ``text`` (tf_cnn's
    total line may carry a rank or Horovod tag before it)."""
    totals = _TOTAL.findall(text)
    windows = _WINDOW.findall(text)
    window = windows[-1] if windows else None
    return TrainerOutput(
        images_per_sec=float(totals[-1]) if totals else None,
        timed_window_s=float(window[0]) if window else None,
        timed_images=int(window[1]) if window else None,
    )


def speed_verdict(ours: float | None, others: dict[str, float | None]) -> tuple[dict[str, float], str]:
    """Ratios ours/other for every other that ran, and a one-line verdict against
    ``ours >= SPEED_GOAL x the fastest other``."""
    ran = {name: ips for name, ips in others.items() if ips}
    if not ours:
        return {}, "NOT met: bench run gave no images/sec"
    ratios = {name: ours / ips for name, ips in ran.items()}
    if not ran:
        return ratios, "undecided: no other way ran"
    fastest = max(ran, key=lambda n: ran[n])
    ratio = ratios[fastest]
    met = ratio >= SPEED_GOAL
    return ratios, (f"{'met' if met else 'NOT met'}: ours/{fastest} (the fastest other) = {ratio:.3f} "
                    f"(goal >= {SPEED_GOAL})")


def overhead_verdict(wall_s: float, window_s: float, import_s: float) -> tuple[float, str]:
    """The runner's overhead ``wall_s - window_s`` and its verdict against
    ``OVERHEAD_BUDGET_S + import_s``."""
    overhead = wall_s - window_s
    budget = OVERHEAD_BUDGET_S + import_s
    met = overhead <= budget
    return overhead, (f"{'met' if met else 'NOT met'}: {overhead:.2f} s "
                      f"(goal <= {OVERHEAD_BUDGET_S:g} s + import {import_s:.2f} s = {budget:.2f} s)")


def machine_line() -> str:
    """Host, logical and physical cores, CPU model, Python (from /proc/cpuinfo when present)."""
    model = platform.processor() or platform.machine()
    cores: set[tuple[str | None, str | None]] = set()
    try:
        block: dict[str, str] = {}
        for line in [*Path("/proc/cpuinfo").read_text().splitlines(), ""]:
            if not line.strip():
                cores.add((block.get("physical id"), block.get("core id", block.get("processor"))))
                model = block.get("model name", model)
                block = {}
            elif ":" in line:
                key, _, value = line.partition(":")
                block[key.strip()] = value.strip()
    except OSError:
        pass
    cores.discard((None, None))
    return (f"machine: {platform.node()}  {os.cpu_count()} logical cores, {len(cores) or '?'} physical  "
            f"CPU {model}  Python {platform.python_version()}")


def _run(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, int, str]:
    """(wall seconds, exit code, stdout+stderr) of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                          env=env, cwd=cwd)
    return time.perf_counter() - t0, proc.returncode, proc.stdout


def _measure(name: str, cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> Measurement:
    wall, code, text = _run(cmd, env, cwd)
    out = parse_trainer_output(text)
    if code != 0 or out.images_per_sec is None:
        tail = " | ".join(text.strip().splitlines()[-3:])
        return Measurement(name, None, wall, note=f"failed (exit {code}): {tail}")
    return Measurement(name, out.images_per_sec, wall, out.timed_window_s)


def bench_run_cmd(out: Path, store: Path) -> list[str]:
    """The ``bench run`` command line of way (1)."""
    return [sys.executable, "-m", "bench.runner", "run", "--model", MODEL, "--device", "cpu", "--num-gpus", "1",
            "--batch-size", str(BATCH), "--num-batches", str(STEPS), "--num-warmup-batches", str(WARMUP),
            "--variable-update", VARIABLE_UPDATE, "--data-format", "NHWC",
            "--out", str(out), "--store", str(store), "--no-ingest"]


def tf_cnn_cmd() -> list[str]:
    """tf_cnn_benchmarks' command line of way (3), to run in its folder."""
    return [sys.executable, "tf_cnn_benchmarks.py", f"--model={MODEL}", "--data_name=cifar10",
            f"--batch_size={BATCH}", f"--num_batches={STEPS}", f"--num_warmup_batches={WARMUP}",
            "--device=cpu", "--data_format=NHWC"]


def measure_tf_cnn() -> Measurement:
    """Way (3), or a skipped Measurement with the reason."""
    folder = os.environ.get("BENCH_TF_CNN_DIR")
    if not folder:
        return Measurement("tf_cnn_benchmarks", None, note="skipped: set BENCH_TF_CNN_DIR to a tf_cnn_benchmarks checkout")
    if not (Path(folder) / "tf_cnn_benchmarks.py").is_file():
        return Measurement("tf_cnn_benchmarks", None, note=f"skipped: no tf_cnn_benchmarks.py in {folder}")
    env = dict(os.environ)
    if importlib.util.find_spec("tf_keras") is not None:
        env["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2 under TF >= 2.16; TF <= 2.15's tf.keras is Keras 2 already
    return _measure("tf_cnn_benchmarks", tf_cnn_cmd(), env=env, cwd=folder)


def keras_fit_main() -> None:
    """The ``--keras-fit`` child: ``model.fit`` over WARMUP + STEPS batches of synthetic data; prints
    ``Timed window`` and ``total images/sec`` for the STEPS batches after the warm-up."""
    import tensorflow as tf

    spec = SPECS[MODEL]
    model = build_model(MODEL, "NHWC")
    model.compile(optimizer=tf.keras.optimizers.SGD(0.005),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images = tf.random.uniform((BATCH, *input_shape(spec, "NHWC")))
    labels = tf.random.uniform((BATCH,), maxval=spec.num_classes, dtype=tf.int32)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    marks: dict[int, float] = {}

    class Timer(tf.keras.callbacks.Callback):
        # Batch hooks make Keras turn the logs to numbers, which waits for the step to finish.
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            marks[batch] = time.perf_counter()

    model.fit(data, steps_per_epoch=WARMUP + STEPS, epochs=1, verbose=0, callbacks=[Timer()])
    elapsed = marks[WARMUP + STEPS - 1] - marks[WARMUP - 1]
    print(f"Timed window: {elapsed:.9f} s for {STEPS * BATCH} images")
    print(f"total images/sec: {STEPS * BATCH / elapsed:.2f}", flush=True)


def best_of(rounds: list[Measurement]) -> Measurement:
    """The round with the highest images/sec (the one least disturbed by other load on the machine);
    the first round when none ran, so its note explains why."""
    ran = [m for m in rounds if m.images_per_sec is not None]
    return max(ran, key=lambda m: m.images_per_sec or 0.0) if ran else rounds[0]


def measure_ours() -> Measurement:
    with tempfile.TemporaryDirectory() as tmp:
        return _measure("bench run", bench_run_cmd(Path(tmp) / "out", Path(tmp) / "store"))


def measure_keras() -> Measurement:
    return _measure("keras model.fit", [sys.executable, __file__, "--keras-fit"])


def round_order(rotation: int, ways: int = 3) -> list[int]:
    """The order the ways run in round ``rotation``: rotated each round, so that no way always runs
    first (after the machine was idle) or right after the same other one."""
    k = rotation % ways
    return [*range(k, ways), *range(k)]


def measure_round(rotation: int = 0) -> list[Measurement]:
    """One round: bench run, keras model.fit, tf_cnn_benchmarks, each in a process of its own, started in
    ``round_order(rotation)``; returned in that fixed order."""
    ways = (measure_ours, measure_keras, measure_tf_cnn)
    done = {k: ways[k]() for k in round_order(rotation, len(ways))}
    return [done[k] for k in range(len(ways))]


def _print_ways(rounds: list[list[Measurement]]) -> list[Measurement]:
    """Print each way's rounds and best; return the best of each way."""
    bests = []
    for way in zip(*rounds, strict=True):
        best = best_of(list(way))
        bests.append(best)
        if best.images_per_sec is None:
            print(f"  {best.name:<18} --  {best.note}")
            continue
        each = ", ".join("--" if m.images_per_sec is None else f"{m.images_per_sec:.1f}" for m in way)
        median = statistics.median(m.images_per_sec for m in way if m.images_per_sec is not None)
        print(f"  {best.name:<18} best {best.images_per_sec:8.2f} images/sec  median {median:.2f}  (rounds: {each})")
    return bests


def _print_overhead(ours: list[Measurement], import_s: float) -> None:
    timed = [(m.wall_s, m.timed_window_s) for m in ours if m.wall_s is not None and m.timed_window_s is not None]
    if not timed:
        print("  NOT measured: bench run printed no timed window")
        return
    for wall, window in timed:
        print(f"  wall {wall:.2f} s - timed window {window:.2f} s = {wall - window:.2f} s")
    wall, window = min(timed, key=lambda t: t[0] - t[1])
    print(f"  overhead goal (least of the rounds): {overhead_verdict(wall, window, import_s)[1]}")


def main(rounds: int = 3) -> None:
    """Measure the three ways ``rounds`` times, interleaved, and the overhead; print them with their verdicts."""
    print(machine_line(), flush=True)
    print("load average (1, 5, 15 min) before the runs: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"workload: {MODEL} batch {BATCH}, {WARMUP} warm-up + {STEPS} timed steps, CPU, NHWC, synthetic data, "
          f"variable_update {VARIABLE_UPDATE}; {rounds} interleaved rounds (order rotated each round), "
          "best of each way kept")
    import_s, code, _ = _run([sys.executable, "-c", "import tensorflow"])
    print(f"`python -c \"import tensorflow\"`: {import_s:.2f} s" + ("" if code == 0 else f" (exit {code})"), flush=True)
    results = []
    for i in range(rounds):
        results.append(measure_round(i))
        print(f"round {i + 1}/{rounds}: " + ", ".join(
            f"{m.name} {'--' if m.images_per_sec is None else f'{m.images_per_sec:.1f}'}" for m in results[-1]),
            flush=True)
    print("\n== images/sec")
    bests = _print_ways(results)
    ratios, verdict = speed_verdict(bests[0].images_per_sec, {m.name: m.images_per_sec for m in bests[1:]})
    for name, ratio in ratios.items():
        print(f"  ratio bench/{name}: {ratio:.3f}")
    print(f"  speed goal: {verdict}")
    print("\n== runner overhead (wall time of `bench run` minus the trainer's timed window)")
    _print_overhead([r[0] for r in results], import_s)


if __name__ == "__main__":
    if sys.argv[1:] == ["--keras-fit"]:
        keras_fit_main()
    else:
        main(int(os.environ.get("BENCH_ROUNDS", "3")))
