"""The bench command: help, one success and one user error per command, the installed entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from logtools import child, tf_cnn_log, total_of
from typer.testing import CliRunner

from bench.ingest.registry import FORMAT_MODULES
from bench.runner.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "args", [["--help"], ["ingest", "--help"], ["sql", "--help"], ["compare", "--help"], ["fit", "--help"], ["effects", "--help"],
             ["run", "--help"], ["sweep", "--help"], ["plot", "--help"]]
)
def test_help(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_list_formats_names_every_registered_format() -> None:
    result = runner.invoke(app, ["ingest", "--list-formats"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert listed == list(FORMAT_MODULES)


def test_ingest_then_sql(tmp_path: Path) -> None:
    text = tf_cnn_log(20)
    (tmp_path / "a.log").write_text(text)
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01\x02")
    st = str(tmp_path / "st")
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.log"), str(tmp_path / "junk.bin"), "--store", st, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["runs_added"] == 1 and summary["problems_by_kind"] == {"binary": 1}
    strict = runner.invoke(app, ["ingest", str(tmp_path / "junk.bin"), "--store", str(tmp_path / "st2"), "--strict"])
    assert strict.exit_code == 1
    result = runner.invoke(app, ["sql", "SELECT images_per_sec, status FROM runs", "--store", st, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{"images_per_sec": total_of(text), "status": "ok"}]
    result = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM problems", "--store", st, "--format", "csv"])
    assert result.output == "n\n1\n"


def test_user_errors_exit_1_with_a_message(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path / "missing.log"), "--store", str(tmp_path / "st")])
    assert result.exit_code == 2  # a bad PATH is a usage error
    assert "no such file or directory" in result.output and "missing.log" in result.output
    result = runner.invoke(app, ["sql", "SELECT 1", "--store", str(tmp_path / "nostore")])
    assert result.exit_code == 2 and "is not a bench store" in result.output  # a --store that is not one
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(tmp_path / "st")])
    result = runner.invoke(app, ["sql", "SELECT nosuchcolumn FROM runs", "--store", str(tmp_path / "st")])
    assert result.exit_code == 1 and "SQL failed" in result.output


def test_usage_error_exits_2() -> None:
    result = runner.invoke(app, ["sql"])
    assert result.exit_code == 2


def test_cli_start_up_imports_no_heavy_library() -> None:
    code = "import sys, bench.runner.cli; print(sorted(m for m in ('pyarrow','duckdb','pandas','numpy','matplotlib','statsmodels','tensorflow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_installed_entry_point(tmp_path: Path) -> None:
    exe = shutil.which("bench") or str(Path(sys.executable).with_name("bench"))
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    env_store = tmp_path / "envstore"
    proc = subprocess.run([exe, "ingest", str(tmp_path / "a.log"), "--json"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "BENCH_STORE": str(env_store)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs_added"] == 1
    assert (env_store / "STORE.json").exists()  # $BENCH_STORE is the default store


def test_an_ingest_process_runs_without_pandas_and_stores_the_same_rows(tmp_path: Path) -> None:
    """`bench ingest` keeps pandas out of its own process (pyarrow would import it, unused, for 0.3 s);
    the parser processes are forked from it. The rows are those of an ingest run in-process, where
    pandas is importable."""
    import pyarrow.parquet as pq

    from bench.ingest.pipeline import ingest
    from bench.sql.store import table_files

    logs = tmp_path / "logs"
    logs.mkdir()
    texts = [tf_cnn_log(20 + i, seed=i) for i in range(40)]
    for i, text in enumerate(texts):
        (logs / f"r{i}.log").write_text(text + "x" * 300_000)  # 12 MB in all: past INLINE_BYTES, so workers run
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "bench.runner", "ingest", str(logs),
                           "--store", str(tmp_path / "cli"), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "pyarrow" in imported and not any(m.startswith("pandas.") for m in imported)  # (a refused import is listed as 'pandas')
    ingest([str(logs)], tmp_path / "lib", workers=0)

    def runs(store: Path) -> list[tuple]:
        rows = [r for f in table_files(store, "runs") for r in pq.read_table(f).to_pylist()]
        return sorted((r["source"].rsplit("/", 1)[-1], r["run_id"], r["images_per_sec"], r["num_steps"]) for r in rows)

    got = runs(tmp_path / "cli")
    assert got == runs(tmp_path / "lib") and len(got) == 40
    assert {ips for *_, ips, _ in got} == {total_of(t) for t in texts}


OFFICIAL = Path(__file__).resolve().parents[1] / "fixtures" / "official-2017" / "tf-official-2017"
OFFICIAL_PATTERN = "{source}/{host}/{dataset}-{data}-{precision}/{model}-bs{batch_size_per_device}-{num_gpus}gpus.log"


def test_analytics_commands_on_the_official_sheet(tmp_path: Path) -> None:
    """The composed commands end to end: ingest the official 2017 fixtures, then compare and run_stats."""
    st = str(tmp_path / "st")
    assert runner.invoke(app, ["ingest", str(OFFICIAL), "--store", st, "--path-pattern", OFFICIAL_PATTERN]).exit_code == 0
    result = runner.invoke(app, ["compare", "--factor", "gpu_model", "--a", "P100", "--b", "K80", "--store", st, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert summary["n"] == 32 and round(summary["median"], 2) == 4.40  # the sheet's "P100 is 4.40x K80"
    result = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM run_stats", "--store", st, "--format", "json"])
    assert json.loads(result.output) == [{"n": 64}]
    bad = runner.invoke(app, ["compare", "--factor", "gpu_model", "--a", "H100", "--b", "K80", "--store", st])
    assert bad.exit_code == 2 and "Error:" in bad.output  # a value no run has: a bad option value
    # No pair: P100 only on synthetic data, K80 only on real. The advice names --ignore data, because running
    # it forms the 16 pairs; the advice itself is checked by running it.
    apart = "(device_model LIKE '%P100%' AND data = 'synthetic') OR (device_model LIKE '%K80%' AND data = 'real')"
    args = ["compare", "--factor", "device_model", "--a", "P100", "--b", "K80", "--store", st, "--where", apart]
    result = runner.invoke(app, args)
    flat = " ".join(result.output.split())
    assert result.exit_code == 1 and "no pairs" in flat and "Pairs form with --ignore data (16 pairs)." in flat, flat
    followed = json.loads(runner.invoke(app, [*args, "--ignore", "data", "--json"]).output)
    assert followed["summary"]["n"] == 16
    # apart in data and in GPU count: no --ignore forms a pair, and none is offered
    result = runner.invoke(app, ["compare", "--factor", "device_model", "--a", "P100", "--b", "K80", "--store", st,
                                 "--where", f"({apart}) AND ((device_model LIKE '%P100%') = (num_devices = 1))"])
    flat = " ".join(result.output.split())
    assert "Letting them differ (--ignore) forms no pair either." in flat and "Pairs form" not in flat, flat
    # each suggestion is one the command takes (was: "compare that factor instead", and --factor num_devices
    # then failed "unknown factor")
    assert result.exit_code == 1 and "compare data instead (--factor data)" in flat
    assert 'compared only within one count: --where "num_devices = N"' in flat
    followed = runner.invoke(app, ["compare", "--factor", "data", "--a", "synthetic", "--b", "real", "--store", st])
    assert followed.exit_code == 0 and "ratio" in followed.output, followed.output


def test_an_ingest_process_asks_for_one_blas_thread_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.runner.commands.ingest_cmd import one_blas_thread

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


def test_sql_prints_data_as_text_never_as_markup_or_emoji(tmp_path: Path) -> None:
    """Values that Rich would read as markup ("[/0]", "[exp]") or as an emoji code (":x:") are printed as
    they are, in the default table format."""
    st = str(tmp_path / "st")
    (tmp_path / "a.log").write_text(tf_cnn_log(20))
    assert runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", st]).exit_code == 0
    result = runner.invoke(app, ["sql", "SELECT 'a [/0] b' AS x, 'runs/[exp]/:x:' AS y", "--store", st])
    assert result.exit_code == 0, result.output
    assert "a [/0] b" in result.output and "runs/[exp]/:x:" in result.output


def test_bad_options_are_usage_errors_that_exit_2_with_one_line(tmp_path: Path) -> None:
    st = str(tmp_path / "st")
    (tmp_path / "a.log").write_text(tf_cnn_log(20))
    assert runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", st]).exit_code == 0
    cases = [
        (["sql", "", "--store", st], "the SQL query is empty"),
        (["compare", "--factor", "nosuch", "--a", "x", "--b", "y", "--store", st], "unknown factor 'nosuch'"),
        (["compare", "--factor", "gpu_model", "--a", "x", "--b", "y", "--where", "nosuchcolumn = 1", "--store", st],
         "--where 'nosuchcolumn = 1' failed"),
        (["effects", "--where", "nosuchcolumn = 1", "--store", st], "--where 'nosuchcolumn = 1' failed"),
        (["fit", "--where", "nosuchcolumn = 1", "--store", st], "--where 'nosuchcolumn = 1' failed"),
        (["plot", "throughput", "--out", str(tmp_path / "x.gif"), "--store", st], "--out must end in"),
        (["report", "--where", "nosuchcolumn = 1", "--out", str(tmp_path / "r"), "--store", st],
         "--where 'nosuchcolumn = 1' failed"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output, (args, result.output)


def test_a_store_path_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    """Arrow and DuckDB take paths as UTF-8: ingesting into ``st\\xff`` raised inside pyarrow (a traceback,
    exit 1) after creating the store's directories, and every later command saw an empty store."""
    (tmp_path / "a.log").write_text(tf_cnn_log(10))
    store = os.fsdecode(os.fsencode(tmp_path) + b"/st\xff")
    for args in (["ingest", str(tmp_path / "a.log")], ["sql", "SELECT 1"]):
        result = subprocess.run([sys.executable, "-m", "bench.runner", *args, "--store", store],
                                capture_output=True, text=True, check=False)
        assert result.returncode == 2, result.stderr
        assert "st\\xff: the path is not UTF-8 text" in result.stderr + result.stdout
        assert "Traceback" not in result.stderr
    assert not os.path.exists(store)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_during_an_ingest_says_what_was_stored(tmp_path: Path, inherited: str) -> None:
    """Ctrl-C while the ingest reads a file. The signal is sent once the child has opened the named pipe it
    is given to read (a writer's non-blocking open succeeds only then), not after a fixed sleep: on a loaded
    machine the child took longer than 2 s to start. ``ignored``: started as a shell starts a background job,
    SIGINT ignored (the ingest then never saw the signal, and this test, run from a background script, hung
    until its timeout); the ingest takes SIGINT back while it reads."""
    import errno
    import os
    import signal
    import time

    disposition = signal.SIG_IGN if inherited == "ignored" else signal.SIG_DFL
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # named as a PATH it is read, and waits for data that never comes
    argv = [sys.executable, "-m", "bench.runner", "ingest", str(fifo), "--store", str(tmp_path / "st")]
    with child(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
               preexec_fn=lambda: signal.signal(signal.SIGINT, disposition)) as proc:
        writer, deadline = None, time.monotonic() + 300
        while writer is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the child has it open to read
            except OSError as e:
                assert e.errno == errno.ENXIO, e
                time.sleep(0.01)
        assert writer is not None, "the ingest never opened the pipe"
        try:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            os.close(writer)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Interrupted: nothing of this ingest is in the store" in err and "Traceback" not in err


@pytest.mark.parametrize("fmt", ["caffe", "dllogger", "mlperf", "caffe_time"])
def test_a_forced_format_that_reads_nothing_leaves_a_problem_row(tmp_path: Path, fmt: str) -> None:
    """`bench ingest horovod-2ranks.log --format caffe` stored 0 runs and 0 problems and exited 0. The file
    holds none of these formats' markers: a wrong_format problem (a file that holds them and still gives
    nothing is a no_run one: test_detection)."""
    log = tmp_path / "horovod-2ranks.log"
    shutil.copy(Path(__file__).parent.parent / "fixtures/logs/horovod/synthetic-gloo.log", log)
    st = str(tmp_path / "st")
    result = runner.invoke(app, ["ingest", str(log), "--store", st, "--format", fmt, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["runs_added"] == 0 and summary["problems_by_kind"] == {"wrong_format": 1}
    result = runner.invoke(app, ["sql", "SELECT source, kind, message FROM problems", "--store", st, "--format", "json"])
    (row,) = json.loads(result.output)
    assert row["source"].endswith("horovod-2ranks.log") and row["kind"] == "wrong_format"
    assert f"read as {fmt} (--format)" in row["message"]


def test_version_and_dry_run_checks_its_numbers() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"bench (dlbench) {version('dlbench')}\n"
    for args in (["--batch-size", "-5"], ["--num-gpus", "0"], ["--timeout", "0"], ["--num-epochs", "-1"]):
        result = runner.invoke(app, ["run", "--dry-run", *args])
        assert result.exit_code == 2 and "Invalid value" in result.output, (args, result.output)


def test_a_copy_at_another_path_is_counted_and_listed(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "a").mkdir(parents=True)
    (logs / "b").mkdir()
    (logs / "a" / "x.log").write_text(tf_cnn_log(20))
    shutil.copy(logs / "a" / "x.log", logs / "b" / "x.log")
    st = str(tmp_path / "st")
    summary = json.loads(runner.invoke(app, ["ingest", str(logs), "--store", st, "--json"]).output)
    assert (summary["runs_added"], summary["duplicates_skipped"], summary["problems_by_kind"]) == (1, 1, {"duplicate": 1})
    result = runner.invoke(app, ["sql", "SELECT source, message FROM duplicates", "--store", st, "--format", "json"])
    (row,) = json.loads(result.output)
    assert row["source"].endswith("b/x.log") and f"the same bytes as {logs / 'a' / 'x.log'}" in row["message"]
    again = json.loads(runner.invoke(app, ["ingest", str(logs), "--store", st, "--json"]).output)
    assert (again["runs_added"], again["duplicates_skipped"], again["problems_by_kind"]) == (0, 2, {})
    result = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM duplicates", "--store", st, "--format", "csv"])
    assert result.output == "n\n1\n"  # listed once, however often the folder is ingested


@pytest.mark.parametrize(("code", "what"), [(28, "the disk is full"), (30, "the file system is read-only"),
                                            (13, "permission denied")])
def test_a_full_disk_or_read_only_store_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     code: int, what: str) -> None:
    """A full disk (ENOSPC, 19 of 19 times) and a read-only mount printed Python tracebacks."""
    import errno

    import pyarrow.parquet as pq

    assert code == {28: errno.ENOSPC, 30: errno.EROFS, 13: errno.EACCES}[code]
    (tmp_path / "a.log").write_text(tf_cnn_log(20))
    st = tmp_path / "st"

    def fail(table: object, path: object, **kw: object) -> None:  # every Parquet file the store writes
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(pq, "write_table", fail)
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(st)])
    assert result.exit_code == 1, result.output
    assert f"Error: {what} (" in result.output and "Traceback" not in result.output
    assert "was not committed (a store commits an ingest whole" in " ".join(result.output.split())
    from bench.sql import delta

    assert delta.snapshot(st) is None  # nothing of it committed
    monkeypatch.undo()
    assert runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(st)]).exit_code == 0  # space again


def test_a_table_folder_the_user_may_not_write_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: a PermissionError traceback from store.add's os.rename (a table folder of another user; root may
    write anywhere, so the rename is made to refuse as it would)."""
    import errno

    from bench.sql import store

    (tmp_path / "a.log").write_text(tf_cnn_log(20))
    real = os.rename

    def refuse(src: str, dst: str) -> None:
        if "/tables/" in str(dst):
            raise PermissionError(errno.EACCES, "Permission denied", str(dst))
        real(src, dst)

    monkeypatch.setattr(store.os, "rename", refuse)
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.log"), "--store", str(tmp_path / "st")])
    assert result.exit_code == 1 and "Error: permission denied (" in result.output, result.output
    assert "Traceback" not in result.output and "give a --store / --out you may write to" in " ".join(result.output.split())


def test_a_ctrl_c_while_bench_is_starting_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C during bench's imports (before any command has its own handler) is one line, exit 130."""
    import sys

    from bench.runner import console

    class Interrupting:  # the import of the command layer is where the Ctrl-C lands
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "bench.runner.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "bench.runner.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    with pytest.raises(SystemExit) as stopped:
        console.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "Interrupted: bench stopped while starting; nothing was done.\n"
