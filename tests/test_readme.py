"""Every command example of README.md, run as a user would, in README order, in one workspace.

A command whose comment says ``needs ...`` (GPUs, a dataset) is not run here: ``bench run`` and ``bench
sweep`` ones are run with ``--dry-run`` (their options and plan are checked), and the test checks that the
README marks them. ``make demo`` and ``make test`` are the journey tests' and CI's. The names the README
uses stand for files made in the workspace (``WORKSPACE`` below): ``logs/`` is fixtures/logs, ``run.log``
and ``more.log`` are fixture logs, ``nights/`` the run folders of ``tests/nightly.py``, ``fleet/`` those of ``benchmarks/fleet_sim.py``, ``train.py`` a script that prints DLLogger lines, the two tarballs are
../shared/corpus's (their commands skip when it is absent), and ``/tmp/`` is the workspace's own folder.
Commands that train with the bundled trainer skip where TensorFlow is not installed. Every run command must
exit 0 (``--strict`` on logs with problems: 1, as documented).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
TARBALLS = {"lambda-logs.tar.gz": CORPUS / "tf_cnn_benchmarks" / "lambda-logs.tar.gz",
            "training_results_v1.0.tar.gz": CORPUS / "mlperf_results" / "training_results_v1.0.tar.gz"}
#: The stores the tarballs' commands make and read.
TARBALL_STORES = {"lambda": "lambda-logs.tar.gz", "mlperf": "training_results_v1.0.tar.gz"}
TRAIN_PY = """\
import json, sys, time
def log(step, **data):
    print("DLLL " + json.dumps({"timestamp": f"{time.time():.6f}", "type": "LOG", "step": step, "data": data}))
log("PARAMETER", arch="resnet50", batch_size=64, precision="fp32", data_backend="synthetic")
print("Warning: a line the pipe may filter")
for i in range(1, 4):
    log([0, i], **{"train.loss": 7.0 - i, "train.total_ips": 100.0 + i})
log([], **{"train.total_ips": 101.5})
"""


def readme_commands() -> list[tuple[str, list[str]]]:
    """Each command of README.md's sh blocks, continuation lines and multi-line quotes joined, with its
    comment, and the output the README quotes for it: the comment-only lines after it written as output
    (``# 4 series ...``, ``#   FLAGGED ...``: one space after ``#``, or an output line's own indent), not the
    prose ones (``#  one curve from four systems``: two spaces)."""
    text = (REPO / "README.md").read_text()
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        pending, first = "", len(out)
        for line in block.splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                if len(out) > first and re.match(r"\s*# (?! \S)", line):
                    out[-1][1].append(line.lstrip()[2:])
                continue
            pending = f"{pending}\n{line}" if pending else line
            if pending.rstrip().endswith("\\"):
                pending = pending.rstrip()[:-1]
                continue
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # an open quote: the command goes on on the next line
                continue
            out.append((pending, []))
            pending = ""
    return out


QUOTED = readme_commands()
COMMANDS = [c for c, _ in QUOTED]
ENV: dict[str, str] = {}  # what the README's `export` lines set, for the commands after them
UNMADE: set[str] = set()  # stores that only commands skipped here would have made


def _argv(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def _comment(command: str) -> str:
    """The command's trailing comment: from the first # outside quotes that begins a word."""
    quote = None
    for i, ch in enumerate(command):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            return command[i:]
    return ""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("readme")
    for name in ("fixtures", "sql", "runner"):
        (ws / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "fixtures" / "logs", ws / "logs")  # a copy: `bench run` writes its run folders into logs/
    tf_log = REPO / "fixtures" / "runs" / "hand-ok-2gpu" / "output.log"
    shutil.copy(tf_log, ws / "run.log")
    shutil.copy(REPO / "fixtures" / "runs" / "hand-timeout-truncated" / "output.log", ws / "more.log")
    with zipfile.ZipFile(ws / "big.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big/run.log", tf_log.read_text())
    (ws / "train.py").write_text(TRAIN_PY)
    for name, path in TARBALLS.items():
        if path.is_file():
            (ws / name).symlink_to(path)
    (ws / "tmp").mkdir()
    sys.path.insert(0, str(REPO / "tests"))
    import nightly  # the README's `python tests/nightly.py nights`

    nightly.write_nights(ws / "nights")
    spec = importlib.util.spec_from_file_location("fleet_sim", REPO / "benchmarks" / "fleet_sim.py")
    assert spec is not None and spec.loader is not None
    fleet_sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fleet_sim)
    fleet_sim.generate(ws / "fleet")  # the README's `python benchmarks/fleet_sim.py fleet`
    for line in _demo_ingests():  # demo-store, as `make demo` fills it
        subprocess.run([sys.executable, "-m", "bench.runner", *line], cwd=ws, check=True, capture_output=True)
    return ws


def _demo_ingests() -> list[list[str]]:
    """The `bench ingest` lines of the Makefile's demo target, its variables filled in."""
    make = (REPO / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+) :?= (.*)$", make, re.M))
    target = make.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    lines = [re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), ""), line.strip())
             for line in target.splitlines() if "bench ingest" in line]
    assert len(lines) == 2, target
    return [shlex.split(line)[1:] for line in lines]


def _needs(command: str) -> str | None:
    """Why this command cannot run here (None when it can)."""
    argv = _argv(command)
    if argv[0] == "make":
        return {"demo": "tests/test_journeys.py runs `make demo`"}.get(argv[1], f"`make {argv[1]}` is the suite itself, in CI")
    if "needs" in _comment(command):
        return _comment(command).lstrip("# ")
    for word in argv:
        name = TARBALL_STORES.get(word, word)
        if name in TARBALLS and not TARBALLS[name].is_file():
            return f"{TARBALLS[name]} is absent (../shared)"
    store = argv[argv.index("--store") + 1] if "--store" in argv else None
    if store in UNMADE:
        return f"its store {store} comes from a command skipped here"
    trains = argv[1] in ("run", "sweep") and "--dry-run" not in argv and "--" not in argv and "--shell" not in argv
    if trains and importlib.util.find_spec("tensorflow") is None:
        UNMADE.update([store] if store else [])
        return "the bundled trainer needs TensorFlow (the train extra)"
    return None


def test_the_readme_has_its_commands_and_marks_what_needs_hardware() -> None:
    assert len(COMMANDS) >= 40  # the parser found them (44 when written)
    marked = [c for c in COMMANDS if "needs" in _comment(c)]
    # the examples that need GPUs or a dataset say so (and nothing else is left unrun)
    assert any("--num-gpus 8" in c for c in marked) and any("/data/imagenet" in c for c in marked)
    assert all(_argv(c)[0] in ("bench", "make", "export") for c in COMMANDS)


@pytest.mark.parametrize(("command", "quoted"), QUOTED, ids=[" ".join(_argv(c))[:70] for c in COMMANDS])
def test_readme_command_runs(command: str, quoted: list[str], workspace: Path) -> None:
    why = _needs(command)
    argv = _argv(command)
    if why is not None and "needs" in _comment(command) and argv[1] in ("run", "sweep"):
        cut = argv.index("--") if "--" in argv else len(argv)  # what it cannot run here, it still plans
        _run([*argv[:cut], "--dry-run", *argv[cut:]], workspace)
        pytest.skip(f"{why}: run as --dry-run only")
    if why is not None:
        pytest.skip(why)
    if argv[0] == "export":
        name, _, value = argv[1].partition("=")
        ENV[name] = value  # as the user's shell: for the commands after it
        return
    argv = [a.replace("/tmp/", str(workspace / "tmp") + "/") for a in argv]
    if "..." in argv:  # "the two above": the README's Lambda path patterns
        patterns = [a for a in _argv(next(c for c in COMMANDS if "{system}.logs" in c)) if "{system}" in a]
        argv = [a for a in argv if a not in ("...", "--path-pattern")] + [x for p in patterns for x in ("--path-pattern", p)]
    said = re.search(r"exits (\d+)", _comment(command))
    printed = _run(argv, workspace, exits=int(said.group(1)) if said else None)
    lines = {" ".join(line.split()) for line in printed.splitlines()}
    for want in quoted:  # every line the README quotes is a line the command printed ("..." stands for any text)
        if want.strip().startswith("..."):
            continue  # the README's "... (8 hosts flagged, none of the 56 healthy ones)": what it left out
        pattern = re.compile(".*?".join(re.escape(" ".join(part.split())) for part in want.split("...")))
        assert any(pattern.fullmatch(line) for line in lines), \
            f"{argv}: the README quotes\n{want}\nnot printed:\n{printed[-3000:]}"


def _run(argv: list[str], workspace: Path, exits: int | None = None) -> str:
    """``bench ARGV...`` in the workspace, as the user's shell would run it (with the README's exports); a
    command whose comment says it ``exits N`` (bench check finding a regression: 1; nothing to judge: 3)
    must exit N."""
    res = subprocess.run([sys.executable, "-m", "bench.runner", *argv[1:]], cwd=workspace, env={**os.environ, **ENV},
                         capture_output=True, text=True, timeout=600)
    allowed = {exits} if exits is not None else {0, 1} if "--strict" in argv else {0}
    assert res.returncode in allowed, f"{argv}\nexit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr
