"""The format registry: names, detection order, lookup. Modules are imported on first use."""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Protocol, cast

from bench.ingest.native import ext as native_ext
from bench.ingest.native import pure_python
from bench.ingest.records import ParseResult, Problem

#: Characters of a file's start that ``sniff`` sees.
HEAD_CHARS = 256 * 1024

#: Detection order: the most specific markers first. MLPerf logs embed framework lines (MXNet
#: Speedometer, PyTorch "Tok/s"), DLLogger and Horovod output embed TF stderr, so they go before the
#: framework parsers; the loosest formats (forward/backward timers, telemetry CSV) go last.
FORMAT_MODULES: tuple[str, ...] = (
    "mlperf_power",  # MLLOG lines too, of power readings: before mlperf, which would read them as runs
    "mlperf",
    "mlperf_system",
    "mlperf_scaling",
    "bench_sweep",
    "dllogger",
    "tf_cnn",
    "horovod",
    "caffe_time",
    "caffe",
    "mxnet",
    "hf_trainer",
    "megatron",
    "deepspeed",
    "torchtitan",
    "pytorch_imagenet",
    "nccl_tests",
    "convnet",
    "host_metadata",
    "telemetry",
)
#: The built-in formats asked after any plugin: their markers are loose enough to accept other logs.
LOOSE_FORMATS: tuple[str, ...] = ("convnet", "host_metadata", "telemetry")

#: The entry-point group through which an installed package adds a format. Each entry names a module
#: with ``NAME`` (the entry's name), ``DESCRIPTION``, ``sniff(head)`` and ``parse_lines`` (see
#: ``FormatModule``); in the package's pyproject.toml::
#:
#:     [project.entry-points."dlbench.formats"]
#:     my_format = "my_package.my_format"
#:
#: Plugins are asked after the built-in formats with specific markers and before ``LOOSE_FORMATS``, in
#: the order of their names. A name that a built-in format has is not taken.
PLUGIN_GROUP = "dlbench.formats"


class FormatModule(Protocol):
    NAME: str
    DESCRIPTION: str

    def sniff(self, head: str) -> bool: ...

    def parse_lines(
        self, lines: Iterable[str], *, source: str, result: ParseResult | None = None
    ) -> ParseResult: ...


_LOADED: dict[str, FormatModule] = {}
_PLUGINS: dict[str, str] | None = None  # format name -> module path, read once per process
_NAMES: tuple[str, ...] | None = None
#: Plugins that could not be imported, name -> the exception line; they are left out of detection.
BROKEN_PLUGINS: dict[str, str] = {}


def plugins() -> dict[str, str]:
    """The formats installed packages add (name -> module path), without names the built-ins have."""
    global _PLUGINS
    if _PLUGINS is None:
        from importlib.metadata import entry_points

        found = {ep.name: ep.value.split(":")[0] for ep in entry_points(group=PLUGIN_GROUP)}
        _PLUGINS = {name: found[name] for name in sorted(found) if name not in FORMAT_MODULES}
    return _PLUGINS


def format_names() -> tuple[str, ...]:
    """Every format's name in detection order: built-in, plugins, then the loose built-ins."""
    global _NAMES
    if _NAMES is None:
        specific = tuple(n for n in FORMAT_MODULES if n not in LOOSE_FORMATS)
        _NAMES = specific + tuple(plugins()) + LOOSE_FORMATS
    return _NAMES


def module_path(name: str) -> str:
    """The importable module of the format called ``name``; raises KeyError for an unknown name."""
    if name in FORMAT_MODULES:
        return f"bench.ingest.formats.{name}"
    return plugins()[name]


def check_format(fmt: str | None) -> None:
    """UsageError (exit 2) for a forced format that names no parser; None forces nothing."""
    from bench.sql.errors import UsageError

    if fmt is not None and fmt not in format_names():
        raise UsageError(f"unknown format {fmt!r}; `bench ingest --list-formats` lists them")


def load(name: str) -> FormatModule:
    """The format module called ``name`` (imported once, then cached: detection asks for every format of
    every file); raises KeyError for an unknown name. A plugin whose import raises is recorded in
    ``BROKEN_PLUGINS`` and raises KeyError from then on."""
    module = _LOADED.get(name)
    if module is None:
        if name in BROKEN_PLUGINS:
            raise KeyError(name)
        path = module_path(name)
        try:
            found: ModuleType = importlib.import_module(path)
            if getattr(found, "NAME", None) != name:
                raise ImportError(f"its NAME is {getattr(found, 'NAME', None)!r}, not the entry's name")
        except Exception as e:  # a broken plugin must not stop the formats that work
            if name in FORMAT_MODULES:
                raise
            BROKEN_PLUGINS[name] = f"{type(e).__name__}: {e}"
            print(f"bench: format plugin {name!r} ({path}) could not be imported and is left out: "
                  f"{BROKEN_PLUGINS[name]}", file=sys.stderr)
            raise KeyError(name) from e
        module = _LOADED[name] = cast(FormatModule, found)
    return module


def all_formats() -> list[FormatModule]:
    """Every format that can be loaded, in detection order."""
    return [m for m in map(_loaded_plugin, format_names()) if m is not None]


#: Characters of a head that holds only numbers (a Lambda thermal file). Every sniffer but telemetry's
#: looks for a marker with a letter, a colon, '=' or '>' in it first, so none of them can accept such a
#: head and ``detect`` asks only ``NUMERIC_FORMATS`` (tests/ingest/test_registry.py checks each sniffer).
_NUMERIC = re.compile(r"[0-9 \t\r\n.,+-]*")
NUMERIC_FORMATS: tuple[str, ...] = ("telemetry",)


#: Markdown structure: a heading, a code fence or a table's separator row at a line start.
_MARKDOWN = re.compile(r"^(?:#{1,6} \S|```|~~~|\|? *:?-{3,}:? *\|)", re.MULTILINE)
#: A document shows it is Markdown by a heading line in its first characters; looking for that first, and
#: no further, keeps the test cheap for the logs, which have none.
MARKDOWN_CHARS = 4096
#: What a document quotes: fenced blocks, table rows, block quotes, `code spans`.
_QUOTED = re.compile(r"^(```|~~~).*?(?:^\1[^\n]*$|\Z)|^ *[|>][^\n]*$|`[^`\n]*`", re.MULTILINE | re.DOTALL)


def detect(head: str, problems: list[Problem] | None = None) -> FormatModule | None:
    """The first format whose ``sniff`` accepts ``head``, or None. A Markdown document is sniffed without
    what it quotes (code, tables, block quotes): a README that cites log lines is not a log, while a log
    with a stray ``# comment`` line still reads as one."""
    hashes = head.find("#", 0, MARKDOWN_CHARS) >= 0  # one memchr first: a "\n#" search is slow, and most logs have no "#"
    if hashes and (head.startswith("#") or head.find("\n#", 0, MARKDOWN_CHARS) >= 0) \
            and _MARKDOWN.search(head, 0, MARKDOWN_CHARS):
        head = _QUOTED.sub("", head)
    if _NUMERIC.fullmatch(head):
        return next((load(n) for n in NUMERIC_FORMATS if load(n).sniff(head)), None)
    for name in format_names():
        if name in FORMAT_MODULES:
            fmt = load(name)
            if fmt.sniff(head):
                return fmt
        elif (plugin := _loaded_plugin(name)) is not None and _plugin_sniff(plugin, head, problems):
            return plugin
    return None


def _loaded_plugin(name: str) -> FormatModule | None:
    """The format called ``name``, or None for a plugin that could not be imported."""
    try:
        return load(name)
    except KeyError:  # it could not be imported (load said so once)
        return None


def _plugin_sniff(fmt: FormatModule, head: str, problems: list[Problem] | None) -> bool:
    """A plugin's ``sniff``; one that raises does not match, and says so in a problem row."""
    try:
        return bool(fmt.sniff(head))
    except Exception as e:
        if problems is not None:
            problems.append(Problem("parser_error", f"format plugin {fmt.NAME!r}: sniff raised "
                                    f"{type(e).__name__}: {e}; the plugin was not asked to parse this file"))
        return False


#: Markers that name a format wherever they are: a log whose head is all framework output is still
#: recognized when one of these begins a line (behind a prefix of at most 80 bytes, not quoted in
#: backticks) after the head. NVIDIA's MLPerf v1.0 UNet3D logs print 256 KiB and more before their
#: first compliance line. Files held whole only (a streamed file is detected from its head).
DEEP_MARKERS: tuple[tuple[bytes, str], ...] = ((b":::MLLOG {", "mlperf"), (b":::MLL ", "mlperf"), (b":::MLPv", "mlperf"),
                                                (b"MLPerf: ", "mlperf"),
                                                # tf_cnn_benchmarks after pages of TensorFlow's own info lines
                                                (b"Step\tImg/sec\t", "tf_cnn"), (b"total images/sec: ", "tf_cnn"))


def detect_beyond_head(data: bytes) -> FormatModule | None:
    """The format a ``DEEP_MARKERS`` marker after the first ``HEAD_CHARS`` bytes names, or None."""
    for marker, name in DEEP_MARKERS:
        at = data.find(marker, max(0, HEAD_CHARS - len(marker)))
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            if at - start <= 80 and b"`" not in data[start:at]:
                return load(name)
            at = data.find(marker, at + 1)
    return None


#: Optional fast entries of a format, chosen here and nowhere else (a third, ``MARKERS``, is read by
#: ``marked_lines`` below). Each is a public function of a module
#: under ``bench.ingest.formats`` that gives the same rows as the format's ``parse_lines`` (tests compare
#: them byte for byte): ``parse_chunks(blocks, *, source, result, check_utf8)`` reads line-aligned byte
#: blocks of a whole or streamed file; a whole-file entry ``(data, result) -> bool`` reads an ASCII file
#: at once, or returns False having added nothing (the lines are then parsed). Both need the optional C
#: extension (``module.AVAILABLE``) and are off with ``BENCH_PURE_PYTHON=1``.
CHUNK_PARSERS: dict[str, tuple[str, str]] = {"tf_cnn": ("tf_cnn_scan", "parse_chunks")}
#: The line formats read through a line program in C (formats/line_scan.py): each module's ``C_PATH`` is its
#: parser class, with a ``PROGRAM`` and ``fast_rows``; ``line_scan.parse_chunks`` is their chunk parser.
LINE_SCANNED = ("torchtitan", "deepspeed", "pytorch_imagenet", "megatron", "nccl_tests")
WHOLE_PARSERS: dict[str, tuple[str, str]] = {"telemetry": ("telemetry", "parse_thermal_bytes")}


def marked_lines(module: FormatModule, data: bytes) -> list[str] | None:
    """The lines of the ASCII ``data`` for the format's ``parse_lines``, those that hold none of its
    ``MARKERS`` given as "" (the C scan ``_native.marked_lines``); None when the format declares no markers
    or the C extension is off. A format that declares markers promises that such a line, like an empty
    one, does nothing in its ``parse_lines``, so both give the same rows; it skips them at the cost of one
    test (tests/ingest/test_mlperf_markers.py checks the promise)."""
    markers = getattr(module, "MARKERS", None)
    if markers is None or native_ext is None or pure_python():
        return None
    return cast(list[str], native_ext.marked_lines(data, markers))


def chunk_parser(module: FormatModule) -> Callable[..., ParseResult] | None:
    """The format's ``parse_chunks`` fast path, or None to parse decoded lines."""
    if module.NAME in LINE_SCANNED:
        scan = _fast(("line_scan", "parse_chunks"))
        return None if scan is None else functools.partial(scan, module.C_PATH)  # type: ignore[attr-defined]
    return _fast(CHUNK_PARSERS.get(module.NAME))


def whole_parser(module: FormatModule) -> Callable[[bytes, ParseResult], bool] | None:
    """The format's whole-file fast path, or None."""
    return _fast(WHOLE_PARSERS.get(module.NAME))


def _fast(entry: tuple[str, str] | None) -> Any:
    if entry is None or pure_python():
        return None
    name = f"bench.ingest.formats.{entry[0]}"
    found = sys.modules.get(name) or importlib.import_module(name)  # the module's attribute is read each time
    return getattr(found, entry[1]) if getattr(found, "AVAILABLE", False) else None
