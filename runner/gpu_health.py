"""What a fleet's GPUs fail on, as ``bench run`` records it: read once at the start of a run into each GPU of
run.json's ``gpus`` (``bench.runner.rundir.gpu_facts``), and sampled through the run by the telemetry loop.

At the start (``HEALTH_FIELDS``, each under nvidia-smi's own ``--query-gpu`` name): the PCIe link (current and
maximum generation and width), ECC error counts (corrected and uncorrected; volatile, since the driver loaded,
and aggregate, over the GPU's life), retired pages (single- and double-bit, pending) and row remaps
(correctable, uncorrectable, pending, failure; Ampere and later). A field the driver does not report
(``[N/A]``, ``[Not Supported]``) is None. An nvidia-smi that does not know a field rejects the whole query: each
field is then asked on its own, and one it rejects is None too. Row remaps, which older drivers answer only
to ``--query-remapped-rows``, are read there (matched by PCI bus id) when ``--query-gpu`` has none of them.

NVLink, from ``nvidia-smi nvlink --status`` (no query field has it): ``nvlink.links_active``, the GPU's links
that report a speed, and ``nvlink.links_inactive``, those that say ``<inactive>``; absent without NVLink.

During the run (``telemetry_fields``): the current PCIe link generation and width, since an idle GPU slows its
link to save power and only a link under load says how it trained, and the active clock-throttle reasons
(``clocks_event_reasons.active``, the name since driver 535, else ``clocks_throttle_reasons.active``), a bit mask
the ingest decodes (``bench.ingest.gpu_load``). Each is probed once: a field the
driver rejects is left out of the loop's query, which would otherwise print nothing at all.

AMD GPUs are read through amd-smi instead (``bench.runner.amd_health``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

HEALTH_FIELDS = (
    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure",
)
REMAP_FIELDS = tuple(f for f in HEALTH_FIELDS if f.startswith("remapped_rows."))
#: the fields the telemetry loop adds when the driver accepts them: one of each tuple, the first accepted
TELEMETRY_CHOICES = (("pcie.link.gen.current",), ("pcie.link.width.current",),
                     ("clocks_event_reasons.active", "clocks_throttle_reasons.active"))
_NO_VALUE = re.compile(r"^\[.*\]$|^(N/A|Not Supported|Unknown Error)$", re.IGNORECASE)


def command_output(argv: list[str], timeout_s: float = 10.0) -> str | None:
    """stdout of ``argv`` when it exists and exits 0 within the timeout, else None."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def number(text: str) -> float | None:
    """The number a cell starts with (``250.00 W`` -> 250.0), else None."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)", text)
    return float(m.group(1)) if m else None


def value(cell: str) -> int | float | str | None:
    """A ``--format=csv,noheader,nounits`` cell: None for what the driver does not report, an int for a count,
    a float for another number, else the text (``Yes``, ``No``)."""
    cell = cell.strip()
    if not cell or _NO_VALUE.match(cell):
        return None
    if re.fullmatch(r"\d+", cell):
        return int(cell)
    try:
        return float(cell)
    except ValueError:
        return cell


def query(fields: tuple[str, ...] | list[str], what: str = "--query-gpu") -> list[list[str]] | None:
    """One row of cells per GPU for ``fields``, or None when nvidia-smi is missing or rejects the query."""
    text = command_output(["nvidia-smi", f"{what}={','.join(fields)}", "--format=csv,noheader,nounits"])
    if text is None:
        return None
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    return rows if all(len(r) == len(fields) for r in rows) else None


def health(n_gpus: int) -> list[dict[str, Any]]:
    """Each GPU's ``HEALTH_FIELDS`` (and NVLink state), by nvidia-smi index; [] when nothing could be read."""
    columns: dict[str, list[str | None]] = {}
    rows = query(HEALTH_FIELDS)
    if rows is not None and len(rows) == n_gpus:
        columns = {f: [r[i] for r in rows] for i, f in enumerate(HEALTH_FIELDS)}
    else:
        for f in HEALTH_FIELDS:  # an older driver: each field alone
            one = query((f,))
            columns[f] = [r[0] for r in one] if one is not None and len(one) == n_gpus else [None] * n_gpus
        if all(c is None for f in REMAP_FIELDS for c in columns[f]):
            columns.update(_remapped_rows(n_gpus))
    out: list[dict[str, Any]] = [{f: value(cell) if (cell := c[i]) is not None else None for f, c in columns.items()}
                                 for i in range(n_gpus)]
    links = nvlinks(command_output(["nvidia-smi", "nvlink", "--status"]) or "")
    for i, gpu in enumerate(out):
        if i in links:
            gpu["nvlink.links_active"], gpu["nvlink.links_inactive"] = links[i]
    return out if any(v is not None for gpu in out for v in gpu.values()) else []


def _remapped_rows(n_gpus: int) -> dict[str, list[str | None]]:
    """``REMAP_FIELDS`` from ``--query-remapped-rows``, put in nvidia-smi index order by PCI bus id."""
    buses = query(("pci.bus_id",))
    remaps = query(("gpu_bus_id", *REMAP_FIELDS), what="--query-remapped-rows")
    if buses is None or remaps is None or len(buses) != n_gpus:
        return {}
    by_bus = {r[0].lower(): r[1:] for r in remaps}
    cells = [by_bus.get(b[0].lower()) for b in buses]
    return {f: [c[k] if c else None for c in cells] for k, f in enumerate(REMAP_FIELDS)}


def nvlinks(text: str) -> dict[int, tuple[int, int]]:
    """GPU index -> (links with a speed, links ``<inactive>``) from ``nvidia-smi nvlink --status``."""
    out: dict[int, tuple[int, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        if m := re.match(r"GPU (\d+):", line):
            gpu = int(m.group(1))
            out[gpu] = (0, 0)
        elif gpu is not None and (m := re.match(r"\s*Link \d+:\s*(.*)$", line)):
            active, inactive = out[gpu]
            out[gpu] = (active, inactive + 1) if "inactive" in m.group(1).lower() else (active + 1, inactive)
    return {g: links for g, links in out.items() if sum(links)}


def telemetry_fields() -> list[str]:
    """The ``TELEMETRY_CHOICES`` this nvidia-smi accepts, each probed once with a query of its own."""
    fields = []
    for choices in TELEMETRY_CHOICES:
        fields += [f for f in choices if query((f,)) is not None][:1]
    return fields

