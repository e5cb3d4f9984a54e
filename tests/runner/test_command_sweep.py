"""``bench sweep`` with a ``[command]`` template: argv expanded over the matrix, the factors as the runs'
columns, resume, and the plan errors a user makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.analytics.query import run_sql
from bench.runner import sweep
from bench.sql.errors import BenchError

REPO = Path(__file__).resolve().parents[2]
# prints a DLLogger summary of 100 x its first argument images/s, and its arguments
PROGRAM = ("import json, sys, time\n"
           "print('args', sys.argv[1:], flush=True)\n"
           "rate = 100.0 * int(sys.argv[1])\n"
           "for rec in ({'type': 'METADATA', 'metric': 'ips', 'metadata': {'unit': 'img/s', 'type': 'THROUGHPUT'}},\n"
           "            {'type': 'LOG', 'step': [0, 1], 'data': {'ips': rate}},\n"
           "            {'type': 'LOG', 'step': [], 'data': {'ips': rate}}):\n"
           "    print('DLLL ' + json.dumps({'timestamp': str(time.time()), **rec}), flush=True)\n")


def plan_text(tmp_path: Path, extra: str = "") -> str:
    (tmp_path / "prog.py").write_text(PROGRAM)  # braces in a template are fields: the program is a file
    argv = json.dumps([sys.executable, str(tmp_path / "prog.py"), "{batch_size}", "--lr", "{lr}", "--gbs", "{global_batch}"])
    return f"""name = "cmd"
repetitions = 2
[matrix]
batch_size = [8, 16]
lr = ["0.1"]
[command]
argv = {argv}
tags = {{ framework = "pytorch", device = "cpu" }}
{extra}"""


def load(tmp_path: Path, text: str) -> sweep.Plan:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return sweep.load_plan(path)


def test_argv_is_expanded_per_cell_and_factors_become_tags(tmp_path: Path) -> None:
    cells = sweep.expand(load(tmp_path, plan_text(tmp_path)))
    assert [(c.batch_size, c.repeat) for c in cells] == [(8, 1), (8, 2), (16, 1), (16, 2)]
    spec = cells[2].spec
    assert spec is not None and spec.command == (sys.executable, str(tmp_path / "prog.py"), "16", "--lr", "0.1", "--gbs", "16")
    tags = dict(spec.tags)
    assert tags["batch_size_per_device"] == "16" and tags["lr"] == "0.1" and tags["framework"] == "pytorch"
    assert tags["sweep"] == "cmd" and tags["cell"] == "batch_size=16,lr=0.1,num_batches=None"


def test_strong_scaling_and_a_launcher_divide_the_batch_over_the_devices(tmp_path: Path) -> None:
    text = """name = "s"
scaling = "strong"
[matrix]
batch_size = [256]
num_gpus = [4]
nodes = [2]
[launcher]
launcher = "mpirun"
hosts = ["n1", "n2"]
[command]
argv = ["python", "train.py", "--bs", "{batch_size}", "--global", "{global_batch}", "--n", "{devices}"]
"""
    (cell,) = sweep.expand(load(tmp_path, text))
    assert cell.spec is not None
    assert cell.spec.command == ("python", "train.py", "--bs", "32", "--global", "256", "--n", "8")
    assert (cell.spec.np, cell.spec.hosts) == (8, "n1:4,n2:4")
    assert dict(cell.spec.tags)["num_gpus"] == "8" and dict(cell.spec.tags)["num_nodes"] == "2"


@pytest.mark.parametrize(("extra", "matrix", "message"), [
    ("", 'batch_size = [8]\n[command]\nargv = ["python", "t.py", "{bs}"]', "{bs} in '{bs}' is not a matrix key"),
    ("", 'batch_size = [8]\n[command]\nargv = ["python", "{"]', "write {{ for a brace"),
    ("", 'batch_size = [8]\n[command]\nargv = []', "command.argv must be a non-empty list"),
    ("", 'batch_size = [8]\n[command]\nargv = ["python"]\nshel = true', "unknown plan key command.shel"),
    ("", 'batch_size = [8]\n[command]\nargv = ["python", "{num_batches}"]', "{num_batches}"),
    ('[trainer]\ndevice = "cpu"\n', 'batch_size = [8]\n[command]\nargv = ["python"]', "command and trainer conflict"),
    ("", 'bs = [8]', "unknown plan key matrix.bs"),  # without a command, the trainer's keys only
])
def test_plan_errors_name_the_key(tmp_path: Path, extra: str, matrix: str, message: str) -> None:
    with pytest.raises(BenchError) as e:
        load(tmp_path, f'name = "x"\n{extra}[matrix]\n{matrix}\n')
    assert message in str(e.value)


def test_a_command_sweep_runs_ingests_and_resumes(tmp_path: Path) -> None:
    plan, out, store = tmp_path / "plan.toml", tmp_path / "logs", tmp_path / "store"
    plan.write_text(plan_text(tmp_path, "[launcher]\ntelemetry_interval_s = 0\n"))

    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bench.runner", "sweep", str(plan), "--out", str(out),
                               "--store", str(store), *args], capture_output=True, text=True, timeout=300, check=False)

    res = bench()
    assert res.returncode == 0, res.stderr
    _, rows = run_sql(store, "SELECT batch_size_per_device, framework, device_type, tags['lr'], images_per_sec, status "
                                "FROM runs ORDER BY 1")
    assert rows == [(8, "pytorch", "cpu", "0.1", 800.0, "ok")] * 2 + [(16, "pytorch", "cpu", "0.1", 1600.0, "ok")] * 2
    firsts = sorted(p.read_text().splitlines()[0] for p in out.glob("*/output.log"))
    assert firsts == ["args ['16', '--lr', '0.1', '--gbs', '16']"] * 2 + ["args ['8', '--lr', '0.1', '--gbs', '8']"] * 2
    res = bench("--resume", "--dry-run")
    assert "--resume: 4 of 4 cells already have an ok run in the store" in res.stdout
    assert "sweep cmd: 0 cells" in res.stdout
    res = bench("--resume")
    assert res.returncode == 0 and res.stdout.count(": resumed") == 4


def test_the_bundled_command_plan_expands_to_the_pytorch_example() -> None:
    plan = sweep.load_plan(REPO / "fixtures" / "plans" / "cpu-command.toml")
    cells = sweep.expand(plan)
    assert [(c.batch_size, c.repeat) for c in cells] == [(2, 1), (2, 2), (4, 1), (4, 2)]
    assert cells[0].spec is not None and cells[0].spec.command[:6] == (
        "python", "runner/examples/torch_train.py", "--model", "resnet26", "--batch-size", "2")
