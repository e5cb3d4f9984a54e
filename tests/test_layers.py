"""The layers: only the command layer crosses packages.

``bench.sql`` (the store, its SQL and the contracts every package shares: errors, run.json, the schemas)
imports nothing else of bench. ``bench.ingest``, ``bench.analytics`` and the runner's library modules import
their own package and ``bench.sql`` only. The command layer (``runner/commands/``, ``runner/cli.py``, the
console entry point) is the one place that composes them. Imports inside functions count as much as those at
the top: a lazy import is still an import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ingest", "runner", "analytics", "sql")
#: Folders and modules of the command layer, relative to the project root
COMMAND_LAYER = ("runner/commands/", "runner/cli.py", "runner/console.py", "runner/__main__.py")


def _imported(path: Path, root: Path) -> set[str]:
    """The bench modules ``path`` imports, relative imports resolved against its package."""
    package = ["bench", *path.relative_to(root).parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] == "bench"}


def crossings(root: Path) -> list[str]:
    """``"<module file> imports <module>"`` for each import that crosses from one package into another
    outside the command layer; bench.sql may be imported by every package, and imports none."""
    out = []
    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(COMMAND_LAYER):
                continue
            for module in sorted(_imported(path, root)):
                parts = module.split(".")
                target = parts[1] if len(parts) > 1 else ""
                if target != top and (target != "sql" or top == "sql"):
                    out.append(f"{rel} imports {module}")
    return out


def test_only_the_command_layer_crosses_packages() -> None:
    assert crossings(ROOT) == []


def test_the_command_layer_does_compose_the_packages() -> None:
    """The exemption is used where it is meant to be: the commands import the ingest and the analytics."""
    commands = set().union(*(_imported(p, ROOT) for p in (ROOT / "runner" / "commands").glob("*.py")))
    assert any(m.startswith("bench.ingest.") for m in commands)
    assert any(m.startswith("bench.analytics.") for m in commands)


def test_the_check_finds_a_crossing_at_the_top_or_inside_a_function(tmp_path: Path) -> None:
    for top in PACKAGES:
        (tmp_path / top).mkdir()
    (tmp_path / "runner" / "commands").mkdir()
    (tmp_path / "runner" / "launch.py").write_text("def f():\n    from bench.ingest.parse import has_result\n")
    (tmp_path / "runner" / "spec.py").write_text("from bench.sql.errors import UsageError\nfrom . import launch\n")
    (tmp_path / "runner" / "commands" / "run_cmd.py").write_text("from bench.ingest import parse\n")
    (tmp_path / "analytics" / "plots.py").write_text("import bench.runner.launch\n")
    (tmp_path / "sql" / "store.py").write_text("from ..ingest import records\n")
    assert crossings(tmp_path) == ["runner/launch.py imports bench.ingest.parse",
                                   "analytics/plots.py imports bench.runner.launch",
                                   "sql/store.py imports bench.ingest"]


def test_make_bench_runs_every_benchmark_and_its_readme_names_each() -> None:
    """Every script of benchmarks/ (a module with a ``__main__`` block; the others are helpers it and the
    tests import) is in the Makefile's BENCHMARKS, which ``make bench`` runs, and benchmarks/README.md names it.
    ``fleet_sim`` is a script that measures nothing: it writes the simulated fleet of the README's walk-through."""
    import re

    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if '__name__ == "__main__"' in p.read_text()}
    scripts.discard("fleet_sim")
    make = (ROOT / "Makefile").read_text()
    listed = re.search(r"^BENCHMARKS = ((?:.*\\\n)*.*)$", make, re.M)
    assert listed is not None
    assert set(listed.group(1).replace("\\\n", " ").split()) == scripts
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    assert [s for s in sorted(scripts) if f"`{s}.py`" not in readme] == []
