"""A format from a package outside this repository: pip installs a tiny plugin package (a wheel) into a
temporary folder, and `bench ingest`, run with that folder on its path, finds it through the ``dlbench.formats``
entry-point group. Plugins that raise (on import, in ``sniff``, in ``parse_lines``) give problem rows or
a warning, never a crash, and the formats that work still work."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ENTRY_POINTS = """\
[dlbench.formats]
demo_rate = demo_rate
broken_import = broken_import
raising_parse = raising_parse
raising_sniff = raising_sniff
"""
DIST = "dlbench_demo_formats-0.1.dist-info"

# A complete line format in the style the ingest README describes: header, step lines, closing total.
DEMO_RATE = '''\
import re

from bench.ingest.formats.lines import LineFormat, drive
from bench.ingest.records import Run

NAME = "demo_rate"
DESCRIPTION = "demo trainer: 'step N: X samples/sec' lines and a total"
_STEP = re.compile(r"step (\\d+): (\\S+) samples/sec$")
_TOTAL = re.compile(r"total: (\\S+) samples/sec$")


def sniff(head):
    return head.startswith("DEMO TRAINER")


class _Parser(LineFormat):
    MUST_READ = ("samples/sec",)

    def new_run(self, no):
        return {"first": no, "last": no, "total": None, "model": None}

    def read(self, line):
        if line.msg.startswith("DEMO TRAINER"):
            self.open(line.no)["model"] = line.msg.split()[-1]
            return True
        run = self.run
        if run is None:
            return False
        run["last"] = line.no
        m = _STEP.match(line.msg) or _TOTAL.match(line.msg)
        try:
            value = float(m.group(m.lastindex)) if m else None
        except ValueError:
            return False
        if value is None:
            return False
        if m.re is _STEP:
            self.step(int(m.group(1)), images_per_sec=value, line_no=line.no)
        else:
            run["total"] = value
        return True

    def emit(self, run):
        ok = run["total"] is not None
        self.result.runs.append(Run(run_index=self.index, format=NAME, model=run["model"], mode="train",
                                    throughput=run["total"], throughput_unit="samples/sec",
                                    status="ok" if ok else "truncated", first_line=run["first"],
                                    last_line=run["last"]))


def parse_lines(lines, *, source, result=None):
    return drive(_Parser, lines, result)
'''

BROKEN_IMPORT = 'raise ImportError("this plugin needs a library that is not installed")\n'
RAISING_PARSE = '''\
NAME = "raising_parse"
DESCRIPTION = "a plugin whose parser raises"


def sniff(head):
    return head.startswith("RAISE IN PARSE")


def parse_lines(lines, *, source, result=None):
    raise RuntimeError("plugin bug")
'''
RAISING_SNIFF = '''\
NAME = "raising_sniff"
DESCRIPTION = "a plugin whose sniff raises"


def sniff(head):
    raise ValueError("sniff bug")


def parse_lines(lines, *, source, result=None):
    raise AssertionError("never asked")
'''


def _wheel(path: Path, modules: dict[str, str]) -> None:
    """A wheel of the plugin package, written directly (a zip with its dist-info), so that no build backend
    is needed: pip installs it as it installs any wheel."""
    files = {f"{name}.py": text for name, text in modules.items()}
    files[f"{DIST}/METADATA"] = "Metadata-Version: 2.1\nName: dlbench-demo-formats\nVersion: 0.1\n"
    files[f"{DIST}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: test_plugins\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{DIST}/entry_points.txt"] = ENTRY_POINTS
    record = [f"{name},sha256={_digest(text)},{len(text.encode())}" for name, text in files.items()]
    files[f"{DIST}/RECORD"] = "\n".join([*record, f"{DIST}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin package, pip-installed (with its entry points) into a folder of its own."""
    root = tmp_path_factory.mktemp("plugin")
    wheel = root / "dlbench_demo_formats-0.1-py3-none-any.whl"
    _wheel(wheel, {"demo_rate": DEMO_RATE, "broken_import": BROKEN_IMPORT, "raising_parse": RAISING_PARSE,
                   "raising_sniff": RAISING_SNIFF})
    site = root / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--target", str(site), str(wheel)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"pip could not install the plugin: {done.stderr}")
    assert (site / DIST / "entry_points.txt").read_text() == ENTRY_POINTS
    return site


def bench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "bench.runner", *args], capture_output=True, text=True, env=env)


def test_list_formats_shows_plugins_before_the_loose_formats(plugin_site: Path) -> None:
    done = bench(plugin_site, "ingest", "--list-formats")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    from bench.ingest.registry import FORMAT_MODULES, LOOSE_FORMATS

    last_specific = [n for n in FORMAT_MODULES if n not in LOOSE_FORMATS][-1]
    assert names.index("demo_rate") == names.index(last_specific) + 1
    assert names.index("raising_sniff") < names.index("convnet")
    assert "demo_rate" in names and "(plugin: demo_rate)" in done.stdout
    assert "broken_import" in done.stdout and "this plugin needs a library that is not installed" in done.stdout


def test_ingest_with_plugins(plugin_site: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "demo.log").write_text(textwrap.dedent("""\
        DEMO TRAINER resnet50
        step 10: 120.5 samples/sec
        step 20: fast samples/sec
        step 30: 130.5 samples/sec
        total: 125.0 samples/sec
        DEMO TRAINER vgg16
        step 10: 50.0 samples/sec
        """))
    (logs / "raise.log").write_text("RAISE IN PARSE\nstep 1\n")
    (logs / "other.txt").write_text("nothing any format reads\n")
    store = tmp_path / "st"
    done = bench(plugin_site, "ingest", str(logs), "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("format plugin 'broken_import'") >= 1
    sql = bench(plugin_site, "sql", "SELECT model, throughput, throughput_unit, status, format FROM runs ORDER BY "
                "first_line", "--store", str(store), "--format", "json")
    assert json.loads(sql.stdout) == [
        {"model": "resnet50", "throughput": 125.0, "throughput_unit": "samples/sec", "status": "ok", "format": "demo_rate"},
        {"model": "vgg16", "throughput": None, "throughput_unit": "samples/sec", "status": "truncated", "format": "demo_rate"},
    ]
    steps = bench(plugin_site, "sql", "SELECT step, images_per_sec FROM steps ORDER BY line_no", "--store", str(store),
                  "--format", "json")
    assert json.loads(steps.stdout) == [{"step": 10, "images_per_sec": 120.5}, {"step": 30, "images_per_sec": 130.5},
                                        {"step": 10, "images_per_sec": 50.0}]
    problems = bench(plugin_site, "sql", "SELECT source, kind, line_no, message FROM problems ORDER BY source, kind",
                     "--store", str(store), "--format", "json")
    rows = [(Path(p["source"]).name, p["kind"], p["line_no"], p["message"]) for p in json.loads(problems.stdout)]
    by_file = {(name, kind): (line, message) for name, kind, line, message in rows}
    assert by_file[("demo.log", "bad_line")][0] == 3  # "fast" is not a number: reported, not dropped
    assert "raising_parse parser raised RuntimeError: plugin bug" in by_file[("raise.log", "parser_error")][1]
    assert "format plugin 'raising_sniff': sniff raised ValueError: sniff bug" in by_file[("other.txt", "parser_error")][1]
    assert ("other.txt", "unrecognized_format") in by_file
