"""The store's own records are as safe as its data: damage to the commits table or to a
table's Delta log (flipped bits, a cut or deleted commit, a deleted checkpoint or table) never lets a
query answer wrong without a warning, and ``--rebuild`` restores every run, from the logs when they are
still there and from the readable data files when they are not; it never ends with fewer runs and exit 0."""

from __future__ import annotations

import json
import random
import shutil
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log, total_of
from typer.testing import CliRunner

from bench.ingest.pipeline import ingest
from bench.runner.cli import app
from bench.sql import delta

runner = CliRunner()
INGESTS = 11  # past the runs table's first checkpoint (version 10: delta.CONFIG)


@pytest.fixture(scope="module")
def eleven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[float]]:
    """A store of 11 ingests of one log each (each log's own folder), and the 11 totals, as the logs' seeds
    make them (logtools.total_of reads them back from each log's text)."""
    base = tmp_path_factory.mktemp("eleven")
    totals = []
    for k in range(INGESTS):
        (base / f"src{k}").mkdir()
        text = tf_cnn_log(10, seed=k)
        (base / f"src{k}" / "0.log").write_text(text)
        totals.append(total_of(text))
        ingest([str(base / f"src{k}")], base / "orig", workers=0)
    return base, base / "orig", sorted(totals)


def _totals(st: Path) -> tuple[int, list[float] | None, str]:
    result = runner.invoke(app, ["sql", "SELECT images_per_sec FROM runs ORDER BY 1", "--store", str(st),
                                 "--format", "json"])
    try:
        return result.exit_code, [r["images_per_sec"] for r in json.loads(result.stdout)], result.stderr
    except ValueError:
        return result.exit_code, None, result.output


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _places(orig: Path) -> list[tuple[str, Path, str]]:
    """(what, file, how): 10 flips in each of the commits table's log, its files, the runs table's log and
    its checkpoint's; cuts and deletions of each."""
    rng = random.Random(41)
    commits, runs = orig / "tables" / "commits", orig / "tables" / "runs" / "_delta_log"
    logs, files = sorted((commits / "_delta_log").glob("*.json")), sorted(commits.glob("*.parquet"))
    run_logs, checkpoints = sorted(runs.glob("*.json")), sorted(runs.glob("*.checkpoint.parquet"))
    assert len(logs) == len(files) + 1 == INGESTS + 1 and checkpoints
    out = [("commits log", rng.choice(logs), "flip") for _ in range(10)]
    out += [("commits file", rng.choice(files), "flip") for _ in range(10)]
    out += [("runs log", rng.choice(run_logs), "flip") for _ in range(10)]
    out += [("runs checkpoint", checkpoints[-1], "flip") for _ in range(10)]
    out += [("commits log", logs[-1], "cut"), ("commits log", logs[-1], "delete"), ("commits log", logs[5], "delete"),
            ("commits file", files[-1], "cut"), ("commits file", files[0], "delete"), ("commits table", commits, "delete"),
            ("runs log", run_logs[-1], "cut"), ("runs log", run_logs[-1], "delete"),
            ("runs checkpoint", checkpoints[-1], "delete"), ("runs checkpoint", runs / "_last_checkpoint", "cut")]
    return out


def _damage(path: Path, how: str, rng: random.Random) -> None:
    if how == "flip":
        data = bytearray(path.read_bytes())
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
    elif how == "cut":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_damage_to_the_protocol_tables_never_loses_a_run_and_never_answers_wrong_silently(
        eleven: tuple[Path, Path, list[float]], tmp_path: Path) -> None:
    """Each place is damaged in a copy of the store; every other case also moves the logs away before the
    rebuild, so that it must restore from the store's own files. Printed: the damage table of the note."""
    base, orig, want = eleven
    rng = random.Random(7)
    rows = []
    for n, (what, path, how) in enumerate(_places(orig)):
        st = tmp_path / f"st{n}"  # a path of its own: readers cache a table's files by path and version
        shutil.copytree(orig, st)
        _damage(st / path.relative_to(orig), how, rng)
        _, got, warned = _totals(st)
        check, said = _cli("ingest", "--check", "--store", str(st))
        if got != want:  # a wrong or partial answer is never silent, and --check sees it
            assert warned and check == 1, (what, how, path.name, got, said)
        gone = n % 2 == 1
        if gone:
            for k in range(INGESTS):
                (base / f"src{k}").rename(base / f"away{k}")
        try:
            rebuilt, out = _cli("ingest", "--rebuild", "--store", str(st))
        finally:
            if gone:
                for k in range(INGESTS):
                    (base / f"away{k}").rename(base / f"src{k}")
        assert rebuilt == 0, (what, how, path.name, out)
        assert _totals(st) == (0, want, ""), (what, how, path.name, out)
        assert _cli("ingest", "--check", "--store", str(st))[0] == 0, (what, how, path.name)
        rows.append(f"{what:16s} {how:6s} {path.name[:30]:30s} logs {'gone' if gone else 'kept'}: query "
                    f"{'?' if got is None else len(got)} runs{' +warning' if warned else ''}{' (right)' if got == want else ''}"
                    f", --check {check}, rebuild {rebuilt} -> {INGESTS} runs")
    print("\n".join(rows))


def _store_of(tmp_path: Path, logs: int, ingested: int | None = None, folder: str = "") -> tuple[Path, list[str]]:
    """A store at tmp_path/st of one-log ingests: ``logs`` tf_cnn logs written (seeds 0, 1, ...) into
    tmp_path/``folder`` as <i>.log, the first ``ingested`` of them (all by default) ingested one at a time."""
    where = tmp_path / folder
    where.mkdir(exist_ok=True)
    texts = [tf_cnn_log(10, seed=s) for s in range(logs)]
    for i, text in enumerate(texts):
        (where / f"{i}.log").write_text(text)
    for i in range(logs if ingested is None else ingested):
        ingest([str(where / f"{i}.log")], tmp_path / "st", workers=0)
    return tmp_path / "st", texts


def test_the_issue_repro_a_flipped_commits_log_no_longer_empties_the_store(tmp_path: Path) -> None:
    """Was: bit 4 of byte 192 of the commits log's newest commit: queries gave 0 runs, and --rebuild exited 0
    with "files seen 0" and 0 runs left."""
    st, texts = _store_of(tmp_path, 3, folder="logs")
    log = sorted((delta.table_path(st, "commits") / "_delta_log").glob("*.json"))[-1]
    data = bytearray(log.read_bytes())
    data[192] ^= 1 << 4
    log.write_bytes(bytes(data))
    code, got, warned = _totals(st)  # each table read at its newest version, with one warning
    assert code == 0 and got == sorted(map(total_of, texts)) and "commits is damaged" in warned
    assert _cli("ingest", "--check", "--store", str(st))[0] == 1
    code, out = _cli("ingest", str(tmp_path / "logs"), "--store", str(st))  # a plain ingest refuses; undoes nothing
    assert code == 1 and "--rebuild" in out
    code, out = _cli("ingest", "--rebuild", "--store", str(st))
    assert code == 0 and "made again from the tables' own logs" in out and "runs added              │ 3" in out
    assert _totals(st) == (0, sorted(map(total_of, texts)), "")
    assert list((st / "damaged").glob("commits-*"))  # kept aside, not deleted


def test_a_deleted_commits_table_is_refused_by_a_plain_ingest_and_recovered_by_rebuild(tmp_path: Path) -> None:
    """Was: a plain ingest "undid what a killed writer committed" in 6 tables and left 1 run of 3."""
    st, texts = _store_of(tmp_path, 4, ingested=3)
    shutil.rmtree(delta.table_path(st, "commits"))
    code, out = _cli("ingest", str(tmp_path / "3.log"), "--store", str(st))
    assert code == 1 and "commits is missing" in out and "--rebuild" in out
    assert _totals(st)[1] == sorted(map(total_of, texts[:3]))  # nothing rolled back
    assert _cli("ingest", "--rebuild", "--store", str(st))[0] == 0
    assert _cli("ingest", str(tmp_path / "3.log"), "--store", str(st))[0] == 0
    assert _totals(st) == (0, sorted(map(total_of, texts)), "")


def test_a_commits_row_whose_sources_do_not_decompress_is_found_by_check_and_rebuilt(tmp_path: Path) -> None:
    """Was: --check exited 0, and --rebuild died with zlib.error in delta.recorded_sources. The row is
    written again with a damaged source record but valid Parquet (as a flip inside the compressed bytes
    that the page checksum of a file written before them could not catch)."""
    st, texts = _store_of(tmp_path, 2)
    first = sorted(delta.table_path(st, "commits").glob("commit-*.parquet"))[0]
    table = pq.read_table(first)
    chunk = bytearray(table.column("sources")[0].as_py()[0])
    chunk[len(chunk) // 2] ^= 0xFF
    table = table.set_column(table.schema.get_field_index("sources"), "sources",
                             pa.array([[bytes(chunk)]], pa.list_(pa.binary())))
    size = first.stat().st_size
    pq.write_table(table, first, compression="zstd")
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(chunk))
    code, out = _cli("ingest", "--check", "--store", str(st))
    assert code == 1 and "commits is damaged" in out and first.name in out, (size, out)
    code, out = _cli("ingest", "--rebuild", "--store", str(st))
    assert code == 0, out
    assert _totals(st) == (0, sorted(map(total_of, texts)), "")
    assert _cli("ingest", "--check", "--store", str(st))[0] == 0


def test_a_rebuild_that_would_lose_runs_replaces_nothing_unless_told(tmp_path: Path) -> None:
    """A runs file cut in half whose log was deleted: the rebuild cannot restore its run; it says so, exits 1
    and leaves the store as it was; --accept-loss keeps what it can."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kept, gone = tf_cnn_log(10, seed=1), tf_cnn_log(10, seed=2)
    (tmp_path / "a" / "0.log").write_text(kept)
    (tmp_path / "b" / "0.log").write_text(gone)
    st = tmp_path / "st"
    ingest([str(tmp_path / "a")], st, workers=0)
    ingest([str(tmp_path / "b")], st, workers=0)
    (tmp_path / "b" / "0.log").unlink()
    (row,) = [r for r in delta.commit_rows(st, ["checksums"]) if r["seq"] == 1]
    (key,) = [k for k, _ in row["checksums"] if k.startswith("runs/")]
    damaged = delta.table_path(st, "runs") / key.split("/", 1)[1]
    damaged.write_bytes(damaged.read_bytes()[:100])
    code, out = _cli("ingest", "--rebuild", "--store", str(st))
    assert code == 1 and "would leave 1 runs where the store holds 2" in out and "nothing was replaced" in out
    assert "b/0.log" in out  # named as not restored
    assert _totals(st)[1] == [total_of(kept)]  # as before, with its warning
    code, out = _cli("ingest", "--rebuild", "--accept-loss", "--store", str(st))
    assert code == 0 and "not restored" in out
    assert _totals(st) == (0, [total_of(kept)], "")
    assert _cli("ingest", "--check", "--store", str(st))[0] == 0
    (tmp_path / "b" / "0.log").write_text(gone)  # found again: its source was forgotten, so it is read again
    assert ingest([str(tmp_path / "b")], st, workers=0).runs_added == 1
    assert _totals(st) == (0, sorted([total_of(kept), total_of(gone)]), "")


def test_a_commit_whose_log_entry_was_lost_is_read_and_recorded_by_the_next_writer(tmp_path: Path) -> None:
    """The newest commits row is on disk but its Delta commit is gone (a writer killed at its commit point,
    or damage): readers read it as committed, --check says so, and the next ingest records it rather than
    rolling the tables back (which lost that ingest's runs)."""
    st, texts = _store_of(tmp_path, 3, ingested=2)
    sorted((delta.table_path(st, "commits") / "_delta_log").glob("*.json"))[-1].unlink()
    assert _totals(st) == (0, sorted(map(total_of, texts[:2])), "")
    code, out = _cli("ingest", "--check", "--store", str(st))
    assert code == 1 and "is not in the table's log" in out
    summary = ingest([str(tmp_path / "2.log")], st, workers=0)
    assert summary.rolled_back == [] and summary.rolled_forward and summary.rolled_forward[0].startswith("commit-0000000001-")
    assert _totals(st) == (0, sorted(map(total_of, texts)), "")
    assert _cli("ingest", "--check", "--store", str(st))[0] == 0
