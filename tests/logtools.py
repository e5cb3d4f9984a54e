"""Helpers for tests (importable as ``logtools`` through pytest's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from synth_logs import tf_cnn_lines


def tf_cnn_log(num_steps: int = 20, **kw: object) -> str:
    """A generated tf_cnn_benchmarks-style log (benchmarks/synth_logs.py), as text with a final newline."""
    return "\n".join(tf_cnn_lines(num_steps, **kw)) + "\n"  # type: ignore[arg-type]


def assert_same_parse(a: Any, b: Any) -> None:
    """Two ParseResults hold the same runs, problems and step rows: numeric columns bit for bit (NaN
    payloads too, so NULL stays NULL and a printed nan stays NaN), the metrics column by repr (a NaN in a
    dict is not equal to itself)."""
    assert repr(a.runs) == repr(b.runs)
    assert repr(a.problems) == repr(b.problems)
    ca, cb = a.steps.columns(), b.steps.columns()
    for name in ca:
        va, vb = ca[name], cb[name]
        assert (va.tobytes() if hasattr(va, "tobytes") else repr(va)) == (vb.tobytes() if hasattr(vb, "tobytes") else repr(vb)), name


def total_of(text: str) -> float:
    """The value on the log's own `total images/sec:` line (read independently of the parser)."""
    line = next(x for x in text.splitlines() if x.startswith("total images/sec:"))
    return float(line.split(":")[1])


def runs_table(rows: list[dict[str, Any]]) -> Any:
    """A pyarrow table of the store's exact runs schema from dicts; columns a row does not give are NULL,
    status is 'ok' unless given (for given/expect tests of the sql/ views). A row that gives only its GPU
    columns gets the device columns ingest would give it (``bench.ingest.devices.device_columns``)."""
    import pyarrow as pa

    from bench.ingest.devices import device_columns
    from bench.sql.schema import RUNS

    rows = [r if "device_type" in r or "num_devices" in r else
            r | dict(zip(("num_devices", "device_type", "device_model"),
                         device_columns(r.get("num_gpus"), r.get("gpu_model"), r.get("tags"), r.get("num_ranks")), strict=True))
            for r in rows]
    cols: dict[str, list[Any]] = {f.name: [r.get(f.name) for r in rows] for f in RUNS}
    cols["status"] = [r.get("status", "ok") for r in rows]
    for name in ("tags", "details"):
        cols[name] = [None if r.get(name) is None else list(r[name].items()) for r in rows]
    return pa.table(cols, schema=RUNS)


@contextmanager
def child(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """A child process for a test that signals or waits on it: however the test ends, a child still running
    is killed (its whole group when it was started in a session of its own), reaped, and its pipes are
    closed. A test that fails while its child runs otherwise leaves the child and open pipes behind, whose
    ResourceWarning then surfaces inside another test's garbage collection, far from its cause."""
    with subprocess.Popen(argv, **popen) as proc:  # on exit: the pipes closed, the child waited for
        try:
            yield proc
        finally:
            if proc.poll() is None:
                if popen.get("start_new_session"):
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()


def run_concurrently(argvs: dict[str, list[str]], env: dict[str, str], tmp: Path,
                     timeout: float = 240) -> dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]:
    """Start every argv at once (real multi-process runs are slow; they overlap), then wait for each:
    name -> (its completed process, ``tmp``)."""
    with ExitStack() as stack:
        procs = {k: stack.enter_context(child(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
                 for k, a in argvs.items()}
        done = {}
        for k, p in procs.items():
            out, err = p.communicate(timeout=timeout)
            done[k] = (subprocess.CompletedProcess(p.args, p.returncode, out, err), tmp)
    return done


def bench_run_result(out: Path, store: Path) -> tuple[Path, bytes, dict[str, Any]]:
    """What one ``bench run --out OUT --store STORE`` left: its only run directory, that run's output.log,
    and the one ``runs`` row ingested from it."""
    import pyarrow.parquet as pq

    from bench.sql.store import table_files

    (run_dir,) = out.iterdir()
    rows = [r for part in table_files(store, "runs") for r in pq.read_table(part).to_pylist()]
    (row,) = [r for r in rows if run_dir.name in Path(r["source"]).parts]
    return run_dir, (run_dir / "output.log").read_bytes(), row


def bench_run_ok(runs: dict[str, tuple[subprocess.CompletedProcess[bytes], Path]], key: str = "bench"
                 ) -> tuple[Path, bytes, dict[str, Any]]:
    """``bench_run_result`` of the concurrent run ``key`` (``run_concurrently``), which must have exited 0
    into ``logs/`` and ``store/`` of its folder."""
    proc, tmp = runs[key]
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()[-3000:]
    return bench_run_result(tmp / "logs", tmp / "store")


def lambda_members(corpus: Path, suffix: str) -> Any:
    """(name, bytes) of each file in Lambda's tarball whose name ends with ``suffix``, streamed in order."""
    import tarfile

    with tarfile.open(corpus / "tf_cnn_benchmarks" / "lambda-logs.tar.gz", mode="r|gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(suffix):
                f = tar.extractfile(member)
                assert f is not None
                yield member.name, f.read()


def parse_or_die(jobs: Any, fmt: Any, patterns: Any, scratch: Any) -> Any:
    """``bench.ingest.pool.parse_many``, except that a chunk holding the bytes ``KILL-THIS-WORKER`` kills its
    process with SIGKILL, as the OS's OOM killer does (a test patches it in; forked workers inherit it)."""
    import os
    import signal

    from bench.ingest import pool

    if any(b"KILL-THIS-WORKER" in bytes(data) for data, _ in jobs):
        os.kill(os.getpid(), signal.SIGKILL)
    return pool.__dict__["_parse_many_unpatched"](jobs, fmt, patterns, scratch)


#: The start of a child program (``python -c``) that SIGKILLs itself at its Nth event (``sys.argv[1]``; 0:
#: never): ``hooked(fn)`` counts an event before and after each call of ``fn``; ``count[0]`` is how many it met.
#: A kill test appends what to hook and what to run.
KILL_AT_EVENT = """
import os, signal, sys
n = int(sys.argv[1])
count = [0]
def event():
    count[0] += 1
    if count[0] == n:
        os.kill(os.getpid(), signal.SIGKILL)
def hooked(fn):
    def wrapped(*args, **kwargs):
        event()
        out = fn(*args, **kwargs)
        event()
        return out
    return wrapped
"""


def slurm_cluster_reason() -> str | None:
    """Why the one-machine Slurm cluster (tests/cluster/slurm-up.sh: nodes n1 and n2) cannot be used, or None."""
    if shutil.which("scontrol") is None:
        return "Slurm is not installed (tests/cluster/slurm-up.sh installs it as root)"
    try:
        up = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed: {e}"
    nodes = dict(line.split() for line in up.stdout.splitlines() if len(line.split()) == 2)
    if up.returncode != 0 or sorted(nodes) != ["n1", "n2"]:
        return f"no one-machine cluster with nodes n1 and n2 is up (run tests/cluster/slurm-up.sh as root): {up.stderr.strip() or nodes}"
    return None


def stored_runs(store: Path) -> list[dict[str, Any]]:
    """Every row of the store's runs table."""
    import pyarrow.parquet as pq

    from bench.sql.store import table_files

    return [r for part in table_files(store, "runs") for r in pq.read_table(part).to_pylist()]


def only_run_dir(out: Path) -> Path:
    """The one run directory (with its run.json) under ``out``."""
    (run_dir,) = [d for d in out.iterdir() if (d / "run.json").exists()]
    return run_dir


def nccl_log(host: str, busbw: float) -> str:
    """One node's all_reduce_perf on 8 GPUs: three sizes, the largest at ``busbw`` GB/s."""
    lines = ["# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20",
             "#", "# Using devices"]
    lines += [f"#  Rank  {r} Group  0 Pid {100 + r} on {host:>10} device  {r} [0x1b] NVIDIA H100 80GB HBM3"
              for r in range(8)]
    lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw  "
                 " busbw #wrong")
    for size, bw in ((1048576, busbw / 3), (2097152, busbw / 2), (4194304, busbw)):
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1    30.00  {bw / 1.75:6.2f}  {bw:6.2f}      0"
                     f"    29.00  {bw / 1.75:6.2f}  {bw:6.2f}      0")
    return "\n".join([*lines, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 50.0", "#", ""])


def bench_run_dir(folder: Path, host: str, log: str, *, topology: str | None = None, pcie: tuple[int, int] | None = None,
            nics: list[dict[str, Any]] | None = None, nodes: list[str] | None = None, n: int = 0,
            day: str | None = None) -> None:
    """A run directory as `bench run` writes it (the H100 fixture's run.json, the facts given changed); it
    started on ``day`` (ISO date), else on 2026-11-2``n``."""
    doc = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "h100-env-check.run.json").read_text())
    gpu = dict(doc["gpus"][0], **({"pcie_gen_max": float(pcie[0]), "pcie_width_max": float(pcie[1])} if pcie else {}))
    doc.update(run_id=f"{host}-{n}", status="ok", exit_code=0, gpu_topology=topology, gpus=[gpu] * 8, nics=nics,
               command=["all_reduce_perf", "-b", "1M", "-e", "4M"], started_at=f"{day or f'2026-11-2{n}'}T01:00:00+00:00",
               ended_at=f"{day or f'2026-11-2{n}'}T01:05:00+00:00", tags={})
    doc.pop("failure_cause")
    doc["host"]["hostname"] = host
    if nodes:
        doc["nodes"] = [{"node": name} for name in nodes]
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(doc))
    (folder / "output.log").write_text(log)


def chromium_or_skip() -> str:
    """Chromium's path; skips the test (with the Debian package to install) when it is missing."""
    import pytest

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None or shutil.which("pdftotext") is None:
        pytest.skip("chromium or pdftotext not installed (Debian packages `chromium`, `poppler-utils`)")
    return found


def print_to_pdf(html: Path, pdf: Path) -> tuple[int, str, list[str]]:
    """``html`` printed by headless Chromium as a reader's browser would print it (default paper, no header
    or footer), read back with poppler: the page count, the text as drawn, and each word that reaches past
    its page's right edge."""
    import re

    subprocess.run([chromium_or_skip(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", html.resolve().as_uri()], capture_output=True, timeout=300, check=True)
    # -raw: the text in the order it was drawn (the page's order), so that a table cell wrapped over two lines
    # or a row split at a page's end reads whole; the default orders it by position, and a row's second line
    # can come after the next row's first
    text = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    boxes = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    beyond = []
    for width, page in re.findall(r'<page width="([0-9.]+)" height="[0-9.]+">(.*?)</page>', boxes, re.S):
        beyond += [w for x_max, w in re.findall(r'<word xMin="[0-9.-]+" yMin="[0-9.-]+" xMax="([0-9.-]+)" '
                                                 r'yMax="[0-9.-]+">([^<]*)</word>', page) if float(x_max) > float(width)]
    return text.count("\f"), text, beyond


def figure_problems(store: Path) -> dict[str, list[str]]:
    """``bench report``'s figures of ``store``, each measured as it is saved (bench.analytics.legibility:
    tick labels and notes that overlap, text past the figure's edge, labels cut in the middle, notes over
    data): {figure's title: problems} for those with any."""
    import bench.analytics.report.drawing as drawing
    from bench.analytics.legibility import problems
    from bench.analytics.report.build import Options, build_report
    from bench.sql.read import connect

    found: dict[str, list[str]] = {}
    save = drawing.svg_bytes

    def measured(fig: Any) -> bytes:
        titles = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes)]
        if problems(fig):
            found[" / ".join(t for t in titles if t) or f"figure {len(found)}"] = problems(fig)
        return save(fig)

    drawing.svg_bytes = measured  # type: ignore[assignment]
    try:
        build_report(connect(store), Options())  # figures drawn in this process (no workers)
    finally:
        drawing.svg_bytes = save  # type: ignore[assignment]
    return found


def bench_counts(store: str) -> dict[str, int]:
    """Each table's rows as `bench sql` counts them (through the commits table)."""
    from bench.analytics.query import run_sql
    from bench.sql.layout import TABLE_NAMES

    sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in TABLE_NAMES)
    return {name: int(n) for name, n in run_sql(Path(store), sql)[1]}  # type: ignore[arg-type]


def delta_rows_of(fs: Any, dt: Any) -> int:
    """The rows in the files a deltalake DeltaTable of a store on object storage names, from their footers read
    through ``fs`` (the store's pyarrow filesystem: bench.sql.remote.Remote's ``fs``)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(u.removeprefix("s3://"), filesystem=fs).num_rows for u in dt.file_uris())


def delta_counts(store: str, tables: tuple[str, ...] | None = None,
                 version_of: dict[str, int] | None = None) -> dict[str, int]:
    """Each table's rows in its Delta log's latest version (what Spark reads by default), or ``version_of``'s,
    read with pyarrow as the README's recipe reads them."""
    from deltalake import DeltaTable

    from bench.sql import remote
    from bench.sql.layout import TABLE_NAMES

    r = remote.Remote(store)
    return {t: delta_rows_of(r.fs, DeltaTable(f"{store}/tables/{t}", storage_options=r.options,
                                              version=None if version_of is None else version_of[t]))
            for t in tables or TABLE_NAMES}
