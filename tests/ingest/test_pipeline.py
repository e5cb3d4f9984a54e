"""bench.ingest.pipeline: directories, archives, idempotency, bad input, path patterns, streaming."""

from __future__ import annotations

import io
import random
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtools import tf_cnn_log, total_of

from bench.ingest import items, parts, pool, read_stage, stages
from bench.ingest.pipeline import ingest
from bench.sql.errors import BenchError
from bench.sql.store import table_files


def read(store: Path, table: str) -> list[dict]:
    files = table_files(store, table)
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default").to_pylist() if files else []


def write_logs(d: Path, n: int = 3) -> list[str]:
    d.mkdir(parents=True, exist_ok=True)
    texts = []
    for i in range(n):
        text = tf_cnn_log(10 + i, seed=i)
        (d / f"run{i}.log").write_text(text)
        texts.append(text)
    return texts


def test_directory_ingest_is_idempotent(tmp_path: Path) -> None:
    texts = write_logs(tmp_path / "logs" / "sub")
    s1 = ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    assert (s1.files_seen, s1.runs_added, s1.duplicates_skipped) == (3, 3, 0)
    s2 = ingest([str(tmp_path / "logs")], tmp_path / "st", workers=2)
    assert (s2.files_seen, s2.runs_added, s2.duplicates_skipped) == (3, 0, 3)
    runs = sorted(read(tmp_path / "st", "runs"), key=lambda r: r["source"])
    assert [r["images_per_sec"] for r in runs] == [total_of(t) for t in texts]
    assert len({r["run_id"] for r in runs}) == 3
    steps = read(tmp_path / "st", "steps")
    # 10+i steps displayed at step 1 and every 10: 2 step lines per log (steps 1 and 10)
    assert len(steps) == 6 and {s["run_id"] for s in steps} == {r["run_id"] for r in runs}


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".tgz", ".zip"])
def test_archives_are_read_in_place(tmp_path: Path, suffix: str) -> None:
    texts = [tf_cnn_log(12, seed=s) for s in (1, 2)]
    archive = tmp_path / f"logs{suffix}"
    if suffix == ".zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for i, t in enumerate(texts):
                zf.writestr(f"a/run{i}.log", t)
    else:
        mode = "w" if suffix == ".tar" else "w:gz"
        with tarfile.open(archive, mode) as tf:
            for i, t in enumerate(texts):
                data = t.encode()
                info = tarfile.TarInfo(f"a/run{i}.log")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    before = set(tmp_path.iterdir())
    s = ingest([str(archive)], tmp_path / "st", workers=0)
    assert s.runs_added == 2
    assert set(tmp_path.iterdir()) - before == {tmp_path / "st"}  # nothing extracted beside the store
    runs = sorted(read(tmp_path / "st", "runs"), key=lambda r: r["source"])
    assert [r["source"] for r in runs] == [f"{archive}::a/run0.log", f"{archive}::a/run1.log"]
    assert [r["images_per_sec"] for r in runs] == [total_of(t) for t in texts]


def test_corrupt_archive_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    good = tmp_path / "ok.tar.gz"
    with tarfile.open(good, "w:gz") as tf:
        for i in range(3):
            data = tf_cnn_log(10, seed=i).encode() * 20
            info = tarfile.TarInfo(f"run{i}.log")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    s = ingest([str(cut)], tmp_path / "st", workers=0)
    assert s.problems_by_kind.get("read_error", 0) >= 1
    problems = read(tmp_path / "st", "problems")
    assert any(p["kind"] == "read_error" and p["source"].startswith(str(cut)) for p in problems)


def _tar_gz(path: Path, texts: list[str]) -> bytes:
    with tarfile.open(path, "w:gz") as tf:
        for i, t in enumerate(texts):
            data = t.encode()
            info = tarfile.TarInfo(f"run{i}.log")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path.read_bytes()


def test_corrupt_deflate_data_is_a_problem_and_the_members_before_it_are_kept(tmp_path: Path) -> None:
    """Bytes flipped inside the compressed stream: the inflater (ISA-L's, with its own error type) stops
    there. The members read before that are stored (every byte inflated before the damage is given); the
    archive gets a read_error and the ingest says it was not read to its end; nothing raises."""
    rng = random.Random(5)
    filler = "".join(f"noise {rng.getrandbits(128):032x}\n" for _ in range(5000))  # 195 kB that barely compresses
    texts = [tf_cnn_log(50, seed=s).replace("Done warm up\n", "Done warm up\n" + filler) for s in range(16)]
    good = _tar_gz(tmp_path / "ok.tar.gz", texts)
    bad = tmp_path / "bad.tar.gz"
    for at in range(len(good) * 3 // 4, len(good), 997):  # the first place where flipped bytes break the deflate data
        bad.write_bytes(good[:at] + bytes(b ^ 0xFF for b in good[at : at + 64]) + good[at + 64 :])
        with open(bad, "rb") as raw:
            reader = items.gunzip(raw)
            reader.read()  # to the damage, then the end of the stream: what stopped it is kept
        if isinstance(reader.raw.error, items.InflateError):  # not a CRC error (OSError): not this test's case
            break
    else:
        pytest.fail("no corruption gave a data error")
    s = ingest([str(bad)], tmp_path / "st", workers=0)
    problems = read(tmp_path / "st", "problems")
    assert [p["kind"] for p in problems if p["source"] == str(bad)] == ["read_error"]
    (cut,) = s.incomplete
    assert cut.startswith(f"{bad}: archive ends early or is corrupt: ")
    runs = read(tmp_path / "st", "runs")
    assert 5 <= len(runs) < 16 and s.runs_added == len(runs)
    assert [r["source"] for r in runs] == [f"{bad}::run{i}.log" for i in range(len(runs))]
    assert [r["images_per_sec"] for r in runs] == [total_of(t) for t in texts[: len(runs)]]


def test_isal_and_zlib_inflate_give_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ISA-L is a speed-up only: with the standard library's gzip reader the rows are the same."""
    import gzip

    archive = tmp_path / "logs.tar.gz"
    _tar_gz(archive, [tf_cnn_log(40, seed=s) for s in range(4)])
    ingest([str(archive)], tmp_path / "isal", workers=0)
    monkeypatch.setattr(items, "GzipFile", gzip.GzipFile)
    ingest([str(archive)], tmp_path / "zlib", workers=0)
    for table in ("runs", "steps"):
        a, b = read(tmp_path / "isal", table), read(tmp_path / "zlib", table)
        assert len(a) > 0 and [_without_times(r) for r in a] == [_without_times(r) for r in b]


def _without_times(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "ingested_at"}


def _bad_inputs(d: Path) -> dict[str, bytes]:
    log = tf_cnn_log(20, seed=7)
    lines = log.split("\n")
    cases = {
        "binary.bin": b"\x7fELF\x00\x00\x01" + bytes(range(256)) * 4,
        "empty.log": b"",
        "latin1.log": log.replace("Model:       resnet50", "Model:       r\xe9snet50").encode("latin-1"),
        "crlf.log": log.replace("\n", "\r\n").encode(),
        "cut.log": "\n".join(lines[:-5]).encode()[:-3],  # no total, cut mid-line
        "longline.log": ("\n".join(lines[:16]) + "\n" + "x" * 1_048_576 + "\n" + "\n".join(lines[16:])).encode(),
        "unknown.txt": b"hello\nthis is not a benchmark log\n",
    }
    for name, data in cases.items():
        (d / name).write_bytes(data)
    return {"log": log.encode()}


def test_bad_input_never_crashes_and_never_loses_data(tmp_path: Path) -> None:
    d = tmp_path / "bad"
    d.mkdir()
    ref = _bad_inputs(d)["log"].decode()
    s = ingest([str(d)], tmp_path / "st", workers=0)
    assert s.files_seen == 7
    runs = {Path(r["source"]).name: r for r in read(tmp_path / "st", "runs")}
    problems = read(tmp_path / "st", "problems")
    kinds = {(Path(p["source"]).name, p["kind"]) for p in problems}
    assert ("binary.bin", "binary") in kinds
    assert ("empty.log", "empty") in kinds
    assert ("unknown.txt", "unrecognized_format") in kinds
    assert ("latin1.log", "encoding") in kinds
    assert next(p["line_no"] for p in problems if p["kind"] == "encoding") == 2  # the Model: line
    assert ("cut.log", "truncated") in kinds
    assert runs["latin1.log"]["images_per_sec"] == total_of(ref)
    assert runs["crlf.log"]["images_per_sec"] == total_of(ref)
    assert runs["longline.log"]["images_per_sec"] == total_of(ref)
    assert runs["cut.log"]["status"] == "truncated" and runs["cut.log"]["images_per_sec"] is None
    # every file is accounted for: a run or a problem (or both)
    names = {Path(p["source"]).name for p in problems} | set(runs)
    assert names == {p.name for p in d.iterdir()}
    sources = read(tmp_path / "st", "sources")
    assert len(sources) == 7


def test_bad_input_streamed_as_big_files_gives_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bad inputs again, every file now streamed through the large-file path (hashed while parsed,
    rows spilled one by one into parts of 2): the runs,
    steps and problems must be those of the whole-file path, and nothing left in scratch. Hand-counted:
    3 step lines in each of the 3 complete logs, 1 in cut.log (its second is cut to "7.")."""
    from bench.ingest import registry

    d = tmp_path / "bad"
    d.mkdir()
    _bad_inputs(d)
    whole = ingest([str(d)], tmp_path / "whole", workers=0)
    monkeypatch.setattr(registry, "HEAD_CHARS", 512)
    monkeypatch.setattr(read_stage, "BIG_FILE", 0)
    monkeypatch.setattr(read_stage, "CHUNK", 333)
    monkeypatch.setattr(stages, "SPILL_ROWS", 1)
    monkeypatch.setattr(parts.Parts, "PART_ROWS", 2)
    streamed = ingest([str(d)], tmp_path / "streamed", workers=0)
    assert (streamed.files_seen, streamed.runs_added, streamed.steps_added) == (whole.files_seen, whole.runs_added,
                                                                                whole.steps_added) == (7, 4, 10)

    def rows(store: str, table: str, drop: tuple[str, ...]) -> list[tuple]:
        out = [tuple(sorted((k, str(v)) for k, v in r.items() if k not in drop)) for r in read(tmp_path / store, table)]
        return sorted(out)

    assert rows("streamed", "runs", ("ingested_at",)) == rows("whole", "runs", ("ingested_at",))
    assert rows("streamed", "steps", ()) == rows("whole", "steps", ())
    assert rows("streamed", "problems", ("ingested_at",)) == rows("whole", "problems", ("ingested_at",))
    # cut.log keeps 19 of the log's 24 lines, its last cut 3 bytes short: "10\timages/sec: ... 7."
    (cut,) = [p for p in read(tmp_path / "streamed", "problems") if p["kind"] == "truncated"]
    assert (Path(cut["source"]).name, cut["line_no"], cut["text"]) == (
        "cut.log", 19, "10\timages/sec: 326.1 +/- 2.2 (jitter = 9.4)\t7.")
    assert len(table_files(tmp_path / "streamed", "steps")) > len(table_files(tmp_path / "whole", "steps"))
    assert not list((tmp_path / "streamed" / "_tmp").glob("**/*.parquet"))


def test_a_slow_hash_holds_at_most_max_backlog_parts_then_the_parse_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spills of a big file wait for its hash; past MAX_BACKLOG parts the parse waits too, so memory stays
    bounded however slow hashing is. Once the hash is known, every part is written with its run ids."""
    import threading
    from concurrent.futures import Future

    from bench.ingest.sample_tables import StepTable

    monkeypatch.setattr(parts.Parts, "PART_ROWS", 10)
    monkeypatch.setattr(parts.Parts, "MAX_BACKLOG", 3)
    hashed: Future[str] = Future()
    writer = parts.Parts(str(tmp_path), threads=parts.Parts.WRITERS)
    steps = StepTable(spill=writer.sink(writer.file(hashed, "big.log", {}, None), "steps"), spill_rows=10)

    def parse() -> None:
        for i in range(50):
            steps.add(0, i + 1, images_per_sec=100.0 + i, line_no=i + 1)

    parser = threading.Thread(target=parse)
    parser.start()
    try:
        parser.join(timeout=1.0)
        assert parser.is_alive() and steps.total_rows == 40  # 3 parts held, the 4th waits for the hash
    finally:
        hashed.set_result("ab" * 32)  # also when the assert fails: the writer threads wait for it
        parser.join(timeout=30)
    assert not parser.is_alive()
    try:
        files = writer.finish()
    finally:
        writer.close()
    table = pa.concat_tables([pq.read_table(path) for _, path in files], promote_options="default")
    assert [name for name, _ in files] == ["steps"] * 5
    assert table.column("step").to_pylist() == list(range(1, 51))
    assert set(table.column("run_id").to_pylist()) == {"abababababababab-0"}


def test_path_patterns_fill_and_conflict(tmp_path: Path) -> None:
    d = tmp_path / "sysA.logs" / "syn-replicated-fp16-2gpus" / "resnet50-64" / "throughput"
    d.mkdir(parents=True)
    (d / "1").write_text(tf_cnn_log(10, batch_per_device=64, num_gpus=1))
    pattern = "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/throughput/{repeat}"
    s = ingest([str(tmp_path)], tmp_path / "st", path_patterns=[pattern], workers=0)
    (run,) = read(tmp_path / "st", "runs")
    assert run["precision"] == "fp16"  # the log never prints precision: the path fills it
    assert dict(run["tags"])["repeat"] == "1" and dict(run["tags"])["system"] == "sysA"
    assert run["num_gpus"] == 1  # the log says 1 GPU (64 global / 64 per device): the log wins
    assert s.problems_by_kind == {"conflict": 1} and s.pattern_misses == 0


def test_files_with_runs_that_match_no_pattern_are_counted(tmp_path: Path) -> None:
    """Lambda's -inference folders do not match the training template: counted, so the user sees it; a
    second, more specific template placed first matches them (variant becomes a tag)."""
    for folder in ("syn-replicated-fp16-2gpus", "syn-replicated-fp16-2gpus-inference"):
        d = tmp_path / "sysA.logs" / folder / "resnet50-64" / "throughput"
        d.mkdir(parents=True)
        (d / "1").write_text(tf_cnn_log(10, batch_per_device=64, num_gpus=2, seed=len(folder)))
    plain = "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/throughput/{repeat}"
    variant = plain.replace("{num_gpus}gpus/", "{num_gpus}gpus-{variant}/")
    s = ingest([str(tmp_path / "sysA.logs")], tmp_path / "st", path_patterns=[plain], workers=0)
    assert (s.runs_added, s.pattern_misses) == (2, 1)
    s = ingest([str(tmp_path / "sysA.logs")], tmp_path / "st2", path_patterns=[variant, plain], workers=0)
    assert (s.runs_added, s.pattern_misses) == (2, 0)
    tags = sorted(dict(r["tags"]).get("variant", "") for r in read(tmp_path / "st2", "runs"))
    assert tags == ["", "inference"]


def test_bad_path_pattern_and_missing_path_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no such file"):
        ingest([str(tmp_path / "nope")], tmp_path / "st")
    with pytest.raises(BenchError, match="no \\{field\\}"):
        ingest([str(tmp_path)], tmp_path / "st", path_patterns=["plain/path"])
    with pytest.raises(BenchError, match="unknown format"):
        ingest([str(tmp_path)], tmp_path / "st", fmt="nosuch")


def test_big_files_stream_with_the_same_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = tf_cnn_log(3000, display_every=1, seed=3)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "big.log").write_text(text)
    with tarfile.open(tmp_path / "b.tar.gz", "w:gz") as tf:
        tf.add(tmp_path / "a" / "big.log", arcname="m/big2.log")
    (tmp_path / "a" / "big3.log").write_text(text.replace("resnet50", "resnet101"))
    monkeypatch.setattr(read_stage, "BIG_FILE", 10_000)
    monkeypatch.setattr(read_stage, "CHUNK", 4096)
    s = ingest([str(tmp_path / "a"), str(tmp_path / "b.tar.gz")], tmp_path / "st", workers=0)
    assert s.duplicates_skipped == 1  # big2.log has big.log's bytes
    runs = read(tmp_path / "st", "runs")
    assert sorted(r["model"] for r in runs) == ["resnet101", "resnet50"]
    assert {r["images_per_sec"] for r in runs} == {total_of(text)}
    assert len(read(tmp_path / "st", "steps")) == 6000


@pytest.mark.parametrize("hash_late", [True, False])
def test_big_files_parts_wait_for_the_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hash_late: bool) -> None:
    """A big plain file's spilled rows are written as parts once its hash (hashed while it is parsed) is
    known; ``hash_late``: the hash ends after the parse, so every part waits for it. Either way its steps
    must carry the run_ids of its runs, its telemetry the file's SHA-256, in several parts, and nothing may
    be left in the scratch directory. Hand-checked: 2 runs of 700 steps (two logs appended), and a thermal
    file of 900 samples x 2 GPUs."""
    import hashlib
    import time

    if hash_late:
        hash_file = read_stage._hash_file

        def slow_hash(item: Any, hashing: Any) -> str:
            time.sleep(0.5)
            return hash_file(item, hashing)

        monkeypatch.setattr(read_stage, "_hash_file", slow_hash)

    one, two = tf_cnn_log(700, display_every=1, seed=3), tf_cnn_log(700, display_every=1, seed=4)
    (tmp_path / "two-runs.log").write_text(one + two)
    (tmp_path / "thermal").write_text("".join(f"{1599331669 + i}, 1729.8, 40, 38, \n" for i in range(900)))
    from bench.ingest import registry

    monkeypatch.setattr(registry, "HEAD_CHARS", 4096)  # the rest is read in 4 KiB chunks
    monkeypatch.setattr(read_stage, "BIG_FILE", 10_000)
    monkeypatch.setattr(read_stage, "CHUNK", 4096)
    monkeypatch.setattr(stages, "SPILL_ROWS", 100)
    monkeypatch.setattr(parts.Parts, "PART_ROWS", 300)
    s = ingest([str(tmp_path / "two-runs.log"), str(tmp_path / "thermal")], tmp_path / "st", workers=0)
    assert (s.runs_added, s.steps_added, s.telemetry_added) == (2, 1400, 1800)
    runs = read(tmp_path / "st", "runs")
    log_sha = hashlib.sha256((one + two).encode()).hexdigest()
    assert sorted(r["run_id"] for r in runs if r["format"] == "tf_cnn") == [f"{log_sha[:16]}-0", f"{log_sha[:16]}-1"]
    steps = read(tmp_path / "st", "steps")
    assert [sum(r["run_id"] == f"{log_sha[:16]}-{i}" for r in steps) for i in (0, 1)] == [700, 700]
    assert len(table_files(tmp_path / "st", "steps")) >= 4  # 1400 rows in parts of about 300
    telemetry = read(tmp_path / "st", "telemetry")
    thermal_sha = hashlib.sha256((tmp_path / "thermal").read_bytes()).hexdigest()
    assert {r["source_sha256"] for r in telemetry} == {thermal_sha} and len(telemetry) == 1800
    assert sorted({r["sample_index"] for r in telemetry}) == list(range(900))
    assert not list((tmp_path / "st" / "_tmp").glob("**/*.parquet"))


def test_a_big_duplicate_spills_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two plain big files with the same bytes: the second is hashed while it is parsed, and its rows
    must not reach the store even though they start spilling before its hash is known."""
    text = tf_cnn_log(2000, display_every=1, seed=3)
    for name in ("a.log", "b.log"):
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(read_stage, "BIG_FILE", 10_000)
    monkeypatch.setattr(read_stage, "CHUNK", 4096)
    monkeypatch.setattr(stages, "SPILL_ROWS", 300)
    s = ingest([str(tmp_path / "a.log"), str(tmp_path / "b.log")], tmp_path / "st", workers=0)
    assert (s.duplicates_skipped, s.runs_added, s.steps_added) == (1, 1, 2000)
    assert len(read(tmp_path / "st", "steps")) == 2000
    assert len(read(tmp_path / "st", "sources")) == 1
    assert not list((tmp_path / "st" / "_tmp").glob("**/*.parquet"))  # the duplicate's parts were deleted


def test_store_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    write_logs(tmp_path / "logs", 1)
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    meta = tmp_path / "st" / "STORE.json"
    meta.write_text(re.sub(r'"schema_version": \d+', '"schema_version": 99', meta.read_text()))
    with pytest.raises(BenchError, match="written by schema 99, this bench reads schema 6"):
        ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)


def test_exclude_globs_skip_files_in_directories_and_archives(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "a.log").write_text(tf_cnn_log(10, seed=1))
    (d / "a.expected.json").write_text('{"format": "tf_cnn"}')
    with tarfile.open(d / "more.tar", "w") as tf:
        for name, text in (("b.log", tf_cnn_log(10, seed=2)), ("notes.md", "# notes\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"x/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    s = ingest([str(d)], tmp_path / "st", workers=0, skip_globs=("*.expected.json", "*.md"))
    assert (s.files_seen, s.runs_added, s.unrecognized) == (2, 2, 0)


def test_store_opens_without_bench_as_the_readme_shows(tmp_path: Path) -> None:
    """The README's recipe ("Reading the store without `bench`"), run as it is written there, on a store."""
    from deltalake import DeltaTable

    texts = write_logs(tmp_path / "logs", 2)
    (tmp_path / "logs" / "thermal").write_text("1599331669, 1729.8, 40, 38, \n")
    st = tmp_path / "st"
    ingest([str(tmp_path / "logs")], st, workers=0)
    ingest([str(tmp_path / "logs")], st, workers=0)  # a second (empty) ingest commits nothing
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    recipe = readme.split("### Reading the store without `bench`")[1].split("```python\n")[1].split("```")[0]
    found: dict = {}
    exec(recipe.replace('"bench-store/', f'"{st}/'), found)  # the README's own code
    assert found["runs"].num_rows == 2 and len(found["commits"]) == 1
    versions = found["versions"]
    assert found["steps"].num_rows == sum(t.count("\timages/sec: ") for t in texts)  # step lines, not totals
    model = found["runs"].column("model")[0].as_py()
    assert found["per_model"] == [(model, 2)]
    telemetry = DeltaTable(f"{st}/tables/telemetry", version=versions["telemetry"]).to_pyarrow_table()
    assert telemetry.column("temperature_c").to_pylist() == [40.0, 38.0]
    meta = pq.read_metadata(table_files(st, "runs")[0]).metadata
    assert meta[b"bench.schema_version"] == b"6"


def test_each_paragraph_of_the_readme_recipe_exits_cleanly_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """Each paragraph of the README's recipe, with those before it (as a user copies it: the first alone, the
    first two, the whole), run 20 times each in a fresh interpreter: every run exits 0 and prints its result.
    deltalake's own to_pyarrow_table() aborted at exit in 14 of 30 such runs (exit 134); a test run in-process,
    as the one above, cannot see that."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    write_logs(tmp_path / "logs", 2)
    st = tmp_path / "st"
    ingest([str(tmp_path / "logs")], st, workers=0)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    recipe = readme.split("### Reading the store without `bench`")[1].split("```python\n")[1].split("```")[0]
    paragraphs = recipe.replace('"bench-store/', f'"{st}/').strip().split("\n\n")
    assert len(paragraphs) == 3
    scripts = []
    for n, last in enumerate(("runs.num_rows", "len(steps)", "per_model"), 1):
        script = tmp_path / f"recipe{n}.py"
        script.write_text("\n\n".join(paragraphs[:n]) + f"\nprint({last})\n")
        scripts.append(script)

    def run(script: Path) -> tuple[int, str]:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout.strip()

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, [s for s in scripts for _ in range(20)]))
    assert [code for code, _ in results] == [0] * 60
    assert {out for _, out in results[:20]} == {"2"} and results[40][1].endswith(", 2)]")


def test_forked_workers_read_their_chunks_from_the_job_area(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks reach forked workers through the shared job area, a chunk larger than a slot through
    the pipe, and the stored runs and steps are those of an ingest in this process."""
    import threading

    if threading.active_count() != 1:
        pytest.skip("another Python thread runs here: the workers come from a forkserver, without the job area")
    logs = tmp_path / "logs"
    logs.mkdir()
    texts = [tf_cnn_log(10 + i, seed=i) for i in range(6)] + [tf_cnn_log(2000, seed=9)]
    for i, text in enumerate(texts):
        (logs / f"r{i}.log").write_text(text)
    monkeypatch.setattr(pool.ParserPool, "INLINE_BYTES", 0)  # workers from the first chunk on
    monkeypatch.setattr(pool.ParserPool, "CHUNK_BYTES", 1)  # one file per chunk
    monkeypatch.setattr(pool.ParserPool, "SLOT_BYTES", 4096)  # the 2000-step log does not fit
    slots: list[int | None] = []
    take = pool.ParserPool._take

    def noting(self: pool.ParserPool):  # type: ignore[no-untyped-def]
        slots.append(self._pending[0][2])
        return take(self)

    monkeypatch.setattr(pool.ParserPool, "_take", noting)
    ingest([str(logs)], tmp_path / "forked", workers=2)
    assert len(slots) == 7 and slots.count(None) == 1 and len({s for s in slots if s is not None}) >= 2
    ingest([str(logs)], tmp_path / "here", workers=0)

    def rows(store: Path) -> tuple[list, int]:
        runs = sorted((r["source"].rsplit("/", 1)[-1], r["run_id"], r["images_per_sec"], r["num_steps"])
                      for r in read(store, "runs"))
        return runs, len(read(store, "steps"))

    assert rows(tmp_path / "forked") == rows(tmp_path / "here")
    assert sorted(ips for _, _, ips, _ in rows(tmp_path / "here")[0]) == sorted(total_of(t) for t in texts)


@pytest.mark.parametrize("suffix", [".zip", ".tar.gz"])
def test_a_decompression_bomb_member_is_stopped_and_the_next_member_is_read(tmp_path: Path, suffix: str) -> None:
    """30 MB of one repeated line compress about 1000x: past the default 100x it is a read_error problem
    naming the limit, read no further; the log after it in the archive is ingested. With the limit
    raised, the same member is read (and is no known format)."""
    bomb, log = b"x" * 30_000_000 + b"\n", tf_cnn_log(10).encode()
    path = tmp_path / f"bomb{suffix}"
    if suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("bomb.log", bomb)
            zf.writestr("after.log", log)
    else:
        with tarfile.open(path, "w:gz") as tf:
            for name, data in (("bomb.log", bomb), ("after.log", log)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    s = ingest([str(path)], tmp_path / "st", workers=0)
    assert (s.runs_added, s.problems_by_kind) == (1, {"read_error": 1})
    (problem,) = read(tmp_path / "st", "problems")
    assert problem["source"].endswith("::bomb.log") and "--max-expansion limit of 100x" in problem["message"]
    from bench.ingest.items import Limits

    s = ingest([str(path)], tmp_path / "st2", workers=0, limits=Limits(max_expansion=1e5))
    assert s.problems_by_kind == {"unrecognized_format": 1} and s.runs_added == 1


def test_a_chunk_whose_part_cannot_be_written_is_problems_and_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held files share their chunk's part file. When it cannot be written (a full disk), each of the
    chunk's files with rows in it is one store_error problem and none of their rows are stored; the ingest
    goes on, and no sources row keeps them out of the next ingest, which stores them."""
    for i in range(3):
        (tmp_path / f"r{i}.log").write_text(tf_cnn_log(10, display_every=1, seed=i))  # 10 step lines each
    real = parts.write_part

    def full_disk(table: Any, path: Path, **kw: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parts, "write_part", full_disk)
    s = ingest([str(tmp_path)], tmp_path / "st", workers=0)
    assert (s.runs_added, s.problems_by_kind) == (0, {"store_error": 3})
    assert read(tmp_path / "st", "runs") == [] and read(tmp_path / "st", "steps") == []
    monkeypatch.setattr(parts, "write_part", real)
    again = ingest([str(tmp_path)], tmp_path / "st", workers=0)
    assert (again.runs_added, again.steps_added, again.duplicates_skipped) == (3, 30, 0)
    assert len(read(tmp_path / "st", "steps")) == 30


def test_a_big_file_whose_part_cannot_be_written_stores_nothing_and_the_ingest_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.ingest import registry

    """A write of one of a big file's parts fails (a full disk, say): the parser is not interrupted (the
    spill never raises), the file is one store_error problem with none of its rows, and the small file
    beside it is stored."""
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    big.write_text(tf_cnn_log(2000, display_every=1, seed=3))
    small.write_text(tf_cnn_log(10, seed=4))
    monkeypatch.setattr(read_stage, "BIG_FILE", 10_000)
    monkeypatch.setattr(read_stage, "CHUNK", 4096)  # small chunks: many spills, several parts
    monkeypatch.setattr(registry, "HEAD_CHARS", 4096)
    monkeypatch.setattr(stages, "SPILL_ROWS", 300)
    monkeypatch.setattr(parts.Parts, "PART_ROWS", 300)
    real = parts.write_part
    calls = []

    def full_disk(table: Any, path: Path, **kw: Any) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(table, path, **kw)

    monkeypatch.setattr(parts, "write_part", full_disk)
    s = ingest([str(big), str(small)], tmp_path / "st", workers=0)
    assert s.runs_added == 1 and s.problems_by_kind == {"store_error": 1}
    (run,) = read(tmp_path / "st", "runs")
    assert run["source"] == str(small)
    assert len(read(tmp_path / "st", "steps")) == small.read_text().count("\timages/sec: ")  # its step lines only
    (problem,) = read(tmp_path / "st", "problems")
    assert problem["source"] == str(big) and "No space left on device" in problem["message"]
    assert not list((tmp_path / "st" / "_tmp").glob("**/*.parquet"))
    # with room on the disk again, the next ingest reads the big file again (no sources row kept it out)
    monkeypatch.setattr(parts, "write_part", real)
    again = ingest([str(big), str(small)], tmp_path / "st", workers=0)
    assert (again.runs_added, again.duplicates_skipped) == (1, 1)
    steps = [r for r in read(tmp_path / "st", "steps") if r["run_id"] != run["run_id"]]
    assert len(steps) == big.read_text().count("\timages/sec: ") == 2000


def test_a_fifo_or_socket_in_a_walked_directory_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer that never comes: the ingest ran until killed. Now such an entry
    is a read_error problem and the directory's logs are stored. (In a child process, so that a return of
    the hang fails the test instead of stopping the suite.)"""
    import os
    import socket
    import subprocess
    import sys

    d = tmp_path / "logs"
    write_logs(d, 1)
    os.mkfifo(d / "pipe.log")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(d / "sock.log"))
    try:
        done = subprocess.run([sys.executable, "-m", "bench.runner", "ingest", str(d), "--store", str(tmp_path / "st")],
                              capture_output=True, text=True, timeout=120, check=False)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    assert [Path(r["source"]).name for r in read(tmp_path / "st", "runs")] == ["run0.log"]
    problems = {Path(p["source"]).name: (p["kind"], p["message"]) for p in read(tmp_path / "st", "problems")}
    assert problems == {"pipe.log": ("read_error", "a FIFO, not a regular file: not read"),
                        "sock.log": ("read_error", "a socket, not a regular file: not read")}


def test_a_worker_killed_by_the_os_costs_one_file_not_the_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ingest of 2,030 fuzzed files lost its worker to the OOM killer: a BrokenProcessPool traceback,
    exit 1, 0 of 2,030 files stored. Now the chunk is parsed again a file per process: the file that kills
    its process is a `resource` problem row, the rest is committed."""
    import threading

    from logtools import parse_or_die, tf_cnn_log

    from bench.analytics.query import run_sql
    from bench.ingest import pool

    # forked workers inherit the patched parser (a forkserver's would import it fresh); whatever threads the
    # test process runs, fork as an ingest that runs no other thread does
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(pool, "_parse_many_unpatched", pool.parse_many, raising=False)
    monkeypatch.setattr(pool, "parse_many", parse_or_die)
    monkeypatch.setattr(pool.ParserPool, "INLINE_BYTES", 0)  # workers from the first chunk
    monkeypatch.setattr(pool.ParserPool, "CHUNK_BYTES", 10_000)  # a few files per chunk
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(8):
        text = tf_cnn_log(20, seed=i)
        (logs / f"r{i}.log").write_text(text + ("KILL-THIS-WORKER\n" if i == 3 else ""))
    summary = ingest([str(logs)], tmp_path / "st", workers=2)
    assert summary.runs_added == 7 and summary.problems_by_kind.get("resource") == 1 and summary.unrecognized == 0
    got = run_sql(tmp_path / "st", "SELECT source, message FROM problems WHERE kind = 'resource'")[1]
    assert len(got) == 1 and got[0][0].endswith("r3.log") and "killed" in got[0][1]
    assert run_sql(tmp_path / "st", "SELECT count(*) FROM runs")[1] == [(7,)]
