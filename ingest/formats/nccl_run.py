"""What the nccl-tests parser keeps of one run while its lines go by (``State``), and the stored run made from
what it read (``build_run``): from a State (``run_of``), or from a whole run's figures that the C path reads
at once from a chunk's columns (``nccl_chunk.whole_runs``). The module docstring of ``nccl_tests`` says how
the numbers and the status are defined."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from bench.ingest.records import Run

NAME = "nccl_tests"
OOM = re.compile(r"out of memory", re.IGNORECASE)
_DTYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8", "uint8": "uint8",
           "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "fp8_e4m3": "fp8",
           "fp8_e5m2": "fp8"}


@dataclass
class State:
    first_line: int
    last_line: int = 0
    collective: str | None = None
    dtype: str | None = None
    header: dict[str, int] = field(default_factory=dict)
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, device)
    # the size table's rows: each one's size and its out-of-place and in-place busbw (None where it would not read)
    sizes: list[int] = field(default_factory=list)
    busbw: list[float | None] = field(default_factory=list)
    in_place_busbw: list[float | None] = field(default_factory=list)
    holes: bool = False  # a None in busbw (a figure the general path could not read; the C path reads all)
    wrong: int = 0
    out_of_bounds: int = 0
    avg: float | None = None
    concluded: bool = False
    warnings: int = 0
    error: str | None = None


#: A run's table as emit reads it: its last row's size, out-of-place and in-place busbw, and the peak busbw
#: with its size (None where no busbw read); None for a run without table rows.
Table = tuple[int, "float | None", "float | None", "tuple[float, int] | None"]
#: Where a run ran, from its rank lines: the hosts (sorted), the device model (the commonest, the first listed
#: of equals) and the number of ranks (the highest rank + 1: a listing cut in the middle still names its last).
Where = tuple[list[str], "str | None", "int | None"]


def where_of(ranks: dict[int, tuple[str, str]]) -> Where:
    pairs = set(ranks.values())  # (host, device): the ranks' few pairs (one tuple per pair: Rows.pairs_of)
    hosts = sorted({host for host, _ in pairs})
    devices = {device for _, device in pairs}
    model: str | None
    if len(devices) > 1:
        model = Counter(device for _, device in ranks.values()).most_common(1)[0][0]
    else:
        model = next(iter(devices), None)
    return hosts, model, (max(ranks) + 1 if ranks else None)


def table_of(st: State) -> Table | None:
    if not st.sizes:
        return None
    busbw = st.busbw
    if st.holes:
        peak = max((i for i, b in enumerate(busbw) if b is not None), key=lambda i: busbw[i] or 0.0, default=None)
    else:  # the same place: max keeps the first of equal values, and index finds it (a NaN by identity)
        peak = busbw.index(max(cast("list[float]", busbw)))
    return (st.sizes[-1], busbw[-1], st.in_place_busbw[-1],
            None if peak is None else (cast(float, busbw[peak]), st.sizes[peak]))


class Closing(NamedTuple):
    """What a run's lines other than its table and rank lines said, as ``build_run`` reads it."""

    first_line: int
    last_line: int
    collective: str | None
    dtype: str | None
    header: dict[str, int]
    avg: float | None
    wrong: int
    out_of_bounds: int
    concluded: bool
    warnings: int = 0
    error: str | None = None


def header_details(header: dict[str, int]) -> dict[str, str]:
    """The header's figures as the run's details hold them."""
    return {k: str(v) for k, v in header.items()}


def run_of(index: int, st: State) -> Run:
    closing = Closing(st.first_line, st.last_line, st.collective, st.dtype, st.header, st.avg, st.wrong,
                      st.out_of_bounds, st.concluded, st.warnings, st.error)
    return build_run(index, closing, table_of(st), where_of(st.ranks), header_details(st.header))


def build_run(index: int, st: Closing, table: Table | None, where: Where, details: dict[str, str]) -> Run:
    """The run of ``st`` (its header's ``details``, a dict of its own), its ``table`` and ``where``."""
    hosts, model, n = where
    last_size, last_busbw, in_place, peak = table if table is not None else (None, None, None, None)
    if st.avg is not None:
        details["avg_busbw"] = f"{st.avg:g}"
    if peak is not None:
        details["peak_busbw"], details["peak_busbw_bytes"] = f"{peak[0]:g}", str(peak[1])
    if in_place is not None:
        details["in_place_busbw"] = f"{in_place:g}"
    if len(hosts) > 1:
        details["hosts"] = ",".join(hosts)
    if st.warnings:
        details["nccl_warnings"] = str(st.warnings)
    status, why = "ok", st.error
    maximum = st.header.get("max_bytes")
    if st.error is not None:
        status = "oom" if OOM.search(st.error) else "failed"
    elif st.wrong or st.out_of_bounds:
        status, why = "failed", f"{st.wrong or st.out_of_bounds} wrong values: the collective gave wrong data"
    elif last_size is None:
        status, why = "no_result", "no row of the size table"
    elif not st.concluded and maximum is not None and last_size < maximum:
        status, why = "truncated", f"the table stops at {last_size} of {maximum} bytes"
    kw: dict[str, Any] = {}
    if status == "ok" and last_size is not None:
        if last_busbw is None or not (math.isfinite(last_busbw) and last_busbw > 0):
            status, why = "no_result", f"the busbw at {last_size} bytes reads {last_busbw}: no rate"
        else:
            kw = {"throughput": last_busbw, "throughput_unit": "busbw GB/s", "throughput_derived": False}
    return Run(
        run_index=index, format=NAME, framework="nccl-tests", model=st.collective,
        precision=_DTYPES.get(st.dtype or "", st.dtype), mode="collective", num_ranks=n, num_devices=n,
        num_gpus=n, num_nodes=len(hosts) or None, host=hosts[0] if len(hosts) == 1 else None,
        gpu_model=model, device_model=model, device_type="gpu" if model else None,
        status=status, status_detail=why, first_line=st.first_line, last_line=st.last_line or st.first_line,
        tags={"message_bytes": str(last_size)} if last_size is not None else {}, details=details, **kw)
