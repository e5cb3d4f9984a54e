"""The damage table (run by `make bench`): what each kind of damage to a store reads as, what `--check` says,
and what `--rebuild` restores with the original logs and without them.

A store of 12 ingests (11 generated tf_cnn_benchmarks logs, one per ingest, past the tables' first Delta
checkpoint; then the run directories of fixtures/runs: runs, steps, telemetry, problems) is copied once per
case and damaged; for each case the table gives the rows a query reads (runs, steps, telemetry) and whether
it warned, `--check`'s exit code, then `--rebuild`'s exit code and the rows read after it, with the logs in
place and with them moved away. Printed as Markdown, with the machine.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from logtools import tf_cnn_log  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from bench.ingest.pipeline import ingest  # noqa: E402
from bench.runner.cli import app  # noqa: E402

RUNNER = CliRunner()


def _cli(*args: str) -> tuple[int, str, str]:
    r = RUNNER.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _reading(st: Path) -> str:
    code, out, err = _cli("sql", "SELECT (SELECT count(*) FROM runs) AS r, (SELECT count(*) FROM steps) AS s, "
                                 "(SELECT count(*) FROM telemetry) AS t", "--store", str(st), "--format", "json")
    if code:
        return f"exit {code}: {err.strip().splitlines()[-1][:60] if err.strip() else ''}"
    (row,) = json.loads(out)
    return f"{row['r']}/{row['s']}/{row['t']}{' (warned)' if 'warning' in err else ''}"


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _newest(folder: Path, pattern: str) -> Path:
    return sorted(folder.glob(pattern))[-1]


def cases() -> dict[str, Callable[[Path], None]]:
    t = lambda st, name: st / "tables" / name  # noqa: E731
    return {
        "runs file flipped": lambda st: _flip(_newest(t(st, "runs"), "*.parquet")),
        "steps file flipped": lambda st: _flip(_newest(t(st, "steps"), "*.parquet")),
        "telemetry file flipped": lambda st: _flip(_newest(t(st, "telemetry"), "*.parquet")),
        "sources file flipped": lambda st: _flip(_newest(t(st, "sources"), "*.parquet")),
        "runs file deleted": lambda st: _newest(t(st, "runs"), "*.parquet").unlink(),
        "runs log newest cut": lambda st: os.truncate(_newest(t(st, "runs") / "_delta_log", "*.json"), 100),
        "runs log newest deleted": lambda st: _newest(t(st, "runs") / "_delta_log", "*.json").unlink(),
        "telemetry log newest cut": lambda st: os.truncate(_newest(t(st, "telemetry") / "_delta_log", "*.json"), 100),
        "runs checkpoint deleted": lambda st: _newest(t(st, "runs") / "_delta_log", "*.checkpoint.parquet").unlink(),
        "commits log newest cut": lambda st: os.truncate(_newest(t(st, "commits") / "_delta_log", "*.json"), 100),
        "commits log newest flipped": lambda st: _flip(_newest(t(st, "commits") / "_delta_log", "*.json")),
        "commits log newest deleted": lambda st: _newest(t(st, "commits") / "_delta_log", "*.json").unlink(),
        "commits checkpoint deleted": lambda st: _newest(t(st, "commits") / "_delta_log", "*.checkpoint.parquet").unlink(),
        "commits row file flipped": lambda st: _flip(_newest(t(st, "commits"), "*.parquet")),
        "commits table deleted": lambda st: shutil.rmtree(t(st, "commits")),
        "STORE.json flipped": lambda st: _flip(st / "STORE.json"),
    }


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-damage-"))
    try:
        logs = work / "logs"
        for k in range(11):
            (logs / f"tf{k}").mkdir(parents=True)
            (logs / f"tf{k}" / "0.log").write_text(tf_cnn_log(10, seed=k))
            ingest([str(logs / f"tf{k}")], work / "orig", workers=0)
        shutil.copytree(REPO / "fixtures" / "runs", logs / "runs")
        ingest([str(logs / "runs")], work / "orig", workers=0)
        print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
        print(f"store: 12 ingests; a sound read (runs/steps/telemetry): {_reading(work / 'orig')}\n")
        print("| damage | read (runs/steps/telemetry) | --check | --rebuild with logs: exit, read | "
              "--rebuild without logs: exit, read |")
        print("|---|---|---|---|---|")
        for name, damage in cases().items():
            cells = [name]
            for n, logs_there in enumerate((True, False)):
                st = work / f"{name.replace(' ', '-')}-{n}"
                shutil.copytree(work / "orig", st)
                damage(st)
                if n == 0:
                    cells += [_reading(st), str(_cli("ingest", "--check", "--store", str(st))[0])]
                if not logs_there:
                    os.rename(logs, work / "away")
                try:
                    code, _, err = _cli("ingest", "--rebuild", "--store", str(st))
                finally:
                    if not logs_there:
                        os.rename(work / "away", logs)
                said = "" if code == 0 else f" ({err.strip().splitlines()[-1][:70]}...)"
                check = _cli("ingest", "--check", "--store", str(st))[0]
                cells.append(f"{code}, {_reading(st)}, --check {check}{said}")
            print("| " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
