"""``--path-pattern`` templates: facts encoded in a file's path, filled in where the log is silent.

A template such as ``{system}.logs/{data}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/throughput/{repeat}``
is matched against the END of a file's path (for an archive member, its path inside the archive).
Each ``{field}`` matches within one path segment (integer columns match digits only). Fields that
name a ``runs`` column fill that column when the log does not give it; where the log says something
else, the log wins and a ``conflict`` problem is recorded. Other fields become tags.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.ingest.records import Problem, Run
from bench.sql.columns import WHOLE_NUMBER_COLUMNS
from bench.sql.errors import BenchError

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FLOAT_COLUMNS = {"images_per_sec", "wall_time_s"}
#: Columns a pattern may fill (identity and metric columns derived by parsers are excluded on purpose).
COLUMNS = {
    f.name for f in dataclasses.fields(Run)
} - {"run_index", "tags", "details", "status", "status_detail", "first_line", "last_line", "images_per_sec_ranks"}


@dataclass(frozen=True)
class PathPattern:
    template: str
    regex: re.Pattern[str]

    @classmethod
    def compile(cls, template: str) -> PathPattern:
        parts, pos, seen = [], 0, set()
        for m in _FIELD.finditer(template):
            name = m.group(1)
            if name in seen:
                raise BenchError(f"--path-pattern {template!r}: field {{{name}}} appears twice")
            seen.add(name)
            parts.append(re.escape(template[pos : m.start()]))
            body = r"\d+" if name in WHOLE_NUMBER_COLUMNS else r"[^/]+?"
            parts.append(f"(?P<{name}>{body})")
            pos = m.end()
        if not seen:
            raise BenchError(f"--path-pattern {template!r} has no {{field}}; example: '{{model}}-{{batch_size_per_device}}/{{repeat}}'")
        parts.append(re.escape(template[pos:]))
        return cls(template, re.compile(r"(?:^|/)" + "".join(parts) + "$"))

    def match(self, path: str) -> dict[str, str] | None:
        m = self.regex.search(path)
        return m.groupdict() if m else None


def match_first(patterns: Sequence[PathPattern | V05Place], path: str) -> dict[str, str]:
    """Values of the first pattern that matches ``path`` (empty when none does)."""
    for p in patterns:
        values = p.match(path)
        if values is not None:
            return values
    return {}


def _typed(name: str, value: str) -> object:
    if name in WHOLE_NUMBER_COLUMNS:
        return int(value) if value.isdigit() else None
    if name in _FLOAT_COLUMNS:
        return float(value)
    return value


def _same(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    return a == b


def apply(run: Run, values: dict[str, str], problems: list[Problem], said_by: str = "path") -> Run:
    """``run`` with pattern ``values`` filled in; conflicts with the log are appended to ``problems``.

    ``said_by`` names where the values come from in those problems (a path, or run.json's tags, which fill
    columns the same way). A value an integer column cannot hold stays a tag, with an invalid_value problem.
    """
    if not values:
        return run
    changes: dict[str, Any] = {}
    tags = dict(run.tags)
    for name, raw in values.items():
        value = _typed(name, raw) if name in COLUMNS else raw
        if value is None:
            problems.append(Problem("invalid_value", f"{said_by} says {name}={raw!r}, not a whole number; kept as a tag"))
            tags.setdefault(name, raw)
            continue
        current = getattr(run, name) if name in COLUMNS else tags.get(name)
        if current is None:
            if name in COLUMNS:
                changes[name] = value
            else:
                tags[name] = raw
        elif not _same(current, value):
            problems.append(
                Problem("conflict", f"{said_by} says {name}={raw!r} but the log says {current!r}; keeping the log's value")
            )
    return dataclasses.replace(run, **changes, tags=tags)


@dataclass(frozen=True)
class V05Place:
    """MLPerf v0.5's layout, ``v0.5.0/<submitter>/<entry folders>/results/<system>/<file>`` (``file``: a
    regex), in which a result set is named by its entry folders and its system together: each of Google's
    entries holds a system called ``tpu``, NVIDIA's one entry ``submission`` holds all of its systems. So
    ``system`` is ``<entry folders>/<system>`` (``cloud_v2.8/resnet-tpuv2-8/tpu``), the same for the result
    files and the ``entry.json`` (the system description) beside them; the round is 0.5."""

    file: str

    @functools.cached_property
    def _regex(self) -> re.Pattern[str]:
        return re.compile(r"(?:^|/)v0\.5\.0/(?P<submitter>[^/]+)/(?P<entry>[^/].*?)/results/(?P<system>[^/]+)/"
                          + self.file + "$")

    def match(self, path: str) -> dict[str, str] | None:
        m = self._regex.search(path)
        if m is None:
            return None
        values = m.groupdict()
        entry = values.pop("entry")
        return {**values, "round": "0.5", "system": f"{entry}/{values['system']}"}


#: An MLCommons results repository (a clone, a subfolder of one, or a tarball): what the path of an MLPerf
#: result file says, used for every file parsed as ``mlperf`` without --path-pattern. The result index is
#: the ``repeat`` tag (result_0..result_4 are repetitions of one configuration); the round comes from a
#: ``training_results_v<round>`` folder when the path has one (v0.5's own layout: ``V05Place``).
RESULTS_TREE = (
    V05Place(r"(?P<benchmark>[^/]+)/result_(?P<repeat>[^/]+)\.txt"),
    PathPattern.compile("training_results_v{round}/{submitter}/results/{system}/{benchmark}/result_{repeat}.txt"),
    PathPattern.compile("{submitter}/results/{system}/{benchmark}/result_{repeat}.txt"),
    # without a benchmark folder (Alibaba v0.7): the log names the benchmark
    PathPattern.compile("training_results_v{round}/{submitter}/results/{system}/result_{repeat}.txt"),
    PathPattern.compile("{submitter}/results/{system}/result_{repeat}.txt"),
)
#: A result set's score factor (the review committee's RCP normalisation), beside its result files.
SCALING_TREE = (
    PathPattern.compile("training_results_v{round}/{submitter}/results/{system}/{benchmark}/scaling.json"),
    PathPattern.compile("{submitter}/results/{system}/{benchmark}/scaling.json"),
)
#: A system description's place in the same repository: ``<submitter>/systems/<system>.json`` (v0.5: the
#: result set's ``entry.json``).
SYSTEMS_TREE = (
    V05Place(r"entry\.json"),
    PathPattern.compile("training_results_v{round}/{submitter}/systems/{system}.json"),
    PathPattern.compile("{submitter}/systems/{system}.json"),
)
