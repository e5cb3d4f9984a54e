"""bench.ingest.run_dirs: run directories of ``bench run`` (output.log + run.json) in directories, as a PATH,
in archives (both member orders), with bad run.json files and launcher statuses.

Expected values are read by hand from fixtures/runs/*/ (provenance and arithmetic: fixtures/README.md, section runs).
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.ingest import run_dirs
from bench.ingest.pipeline import ingest
from bench.ingest.rebuild import rebuild
from bench.ingest.records import Run
from bench.ingest.sources import iter_items
from bench.sql import runjson
from bench.sql.store import table_files

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
TELEMETRY_CSV = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "telemetry" / "nvidia-smi-query.csv"
OK, TIMEOUT, BAD = RUNS / "hand-ok-2gpu", RUNS / "hand-timeout-truncated", RUNS / "hand-bad-run-json"
# 2026-11-21 00:00 UTC = 1795219200 (see fixtures/README.md, section runs); + 20:15:03.25 and + 20:16:10.75
OK_START, OK_END = 1795219200 + 72903.25, 1795219200 + 72970.75


def read(store: Path, table: str) -> list[dict]:
    files = table_files(store, table)
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default").to_pylist() if files else []


def unix(ts: object) -> float:
    return ts.timestamp()  # type: ignore[attr-defined]


def only_run(store: Path) -> dict:
    runs = read(store, "runs")
    assert len(runs) == 1, [r["source"] for r in runs]
    return {**runs[0], "tags": dict(runs[0]["tags"] or []), "details": dict(runs[0]["details"] or [])}


def assert_ok_run(run: dict) -> None:
    """The overlay of fixtures/runs/hand-ok-2gpu, read by hand from its output.log and run.json."""
    assert run["images_per_sec"] == 1465.31 and run["status"] == "ok"  # log L27
    assert (run["model"], run["num_gpus"], run["batch_size_per_device"]) == ("resnet50", 2, 64)  # log header
    assert run["host"] == "gpu-node07" and run["gpu_model"] == "Tesla V100-SXM2-16GB"  # run.json host, gpus[0]
    assert run["framework_version"] == "2.15.1"  # log "2.15", refined by versions.tensorflow
    assert run["precision"] == "fp16"  # not in the log: spec.precision
    assert unix(run["started_at"]) == OK_START and unix(run["ended_at"]) == OK_END
    assert run["wall_time_s"] == pytest.approx(67.5)  # the log has no step stamps
    assert run["tags"]["repeat"] == "2" and run["tags"]["study"] == "v100-check" and run["tags"]["optimizer"] == "sgd"
    d = run["details"]
    assert (d["run_id"], d["exit_code"], d["launcher_status"]) == ("20261121T201503Z-resnet50-b64-g2-r2-3f9a", "0", "ok")
    assert (d["gpu_driver"], d["cuda_version"], d["nccl_version"]) == ("535.104.05", "12.2", "2.18.5")
    assert d["topology"].startswith("\tGPU0\tGPU1\n") and "horovod_version" not in d
    assert json.loads(d["argv"])[:3] == ["/opt/venv/bin/python", "-m", "bench.runner.trainer"]  # as that run.json recorded it


def test_walked_directory_pairs_log_and_run_json(tmp_path: Path) -> None:
    run_dir = tmp_path / "logs" / "r1"
    shutil.copytree(OK, run_dir)
    shutil.copy(TELEMETRY_CSV, run_dir / "telemetry.csv")
    items = [(Path(i.source).name, i.sidecar) for i in iter_items([str(tmp_path / "logs")])]
    assert items == [("output.log", (OK / "run.json").read_bytes()), ("telemetry.csv", None)]


def test_run_directory_as_path(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    shutil.copytree(OK, run_dir)
    shutil.copy(TELEMETRY_CSV, run_dir / "telemetry.csv")
    s = ingest([str(run_dir)], tmp_path / "st", workers=0)
    # telemetry.csv: 4 samples and its deliberate short line L5 (fixtures/README.md, nvidia-smi-query.csv)
    assert (s.files_seen, s.runs_added, s.telemetry_added, s.problems_by_kind) == (2, 1, 4, {"bad_line": 1})
    run = only_run(tmp_path / "st")
    assert_ok_run(run)
    assert run["source"] == str(run_dir / "output.log")
    sources = {Path(r["source"]).name for r in read(tmp_path / "st", "sources")}
    assert sources == {"output.log", "telemetry.csv"}  # run.json is not a source of its own


def test_output_log_given_directly_reads_its_run_json(tmp_path: Path) -> None:
    ingest([str(OK / "output.log")], tmp_path / "st", workers=0)
    assert_ok_run(only_run(tmp_path / "st"))


def test_timeout_overrides_truncated(tmp_path: Path) -> None:
    s = ingest([str(TIMEOUT)], tmp_path / "st", workers=0)
    run = only_run(tmp_path / "st")
    assert s.runs_by_status == {"timeout": 1}
    assert (run["status"], run["details"]["log_status"], run["details"]["exit_code"]) == ("timeout", "truncated", "-9")
    assert run["status_detail"] == "bench run: status timeout, exit code -9"
    assert run["images_per_sec"] is None and run["num_steps"] == 200  # the cut line L23 starts "200"
    assert run["num_gpus"] is None and run["tags"]["device"] == "cpu"  # 2 logical CPU devices are not GPUs
    assert run["host"] == "laptop" and run["gpu_model"] is None and run["precision"] == "fp32"
    assert unix(run["started_at"]) == 1795379400.0 and run["wall_time_s"] == pytest.approx(60.5)
    assert run["details"]["memory_mib"] == "7940"  # run.json's other spelling of the memory (memory_mib) is read too
    assert [p["kind"] for p in read(tmp_path / "st", "problems")] == ["truncated"]


def test_bad_run_json_is_a_problem_and_the_log_is_plain(tmp_path: Path) -> None:
    s = ingest([str(BAD)], tmp_path / "st", workers=0)
    run = only_run(tmp_path / "st")
    assert (run["status"], run["images_per_sec"], run["framework_version"]) == ("ok", 1465.31, "2.15")
    assert run["host"] is None and run["gpu_model"] is None and run["started_at"] is None and "run_id" not in run["details"]
    (p,) = read(tmp_path / "st", "problems")
    assert (p["kind"], p["line_no"], p["source"]) == ("bad_line", None, str(BAD / "output.log"))
    assert p["message"].startswith("run.json is not valid JSON (Expecting ',' delimiter at line 5")
    assert s.problems_by_kind == {"bad_line": 1}


def _tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("order", ["run.json first", "output.log first"])
def test_tar_gz_members_in_either_order(tmp_path: Path, order: str) -> None:
    log, meta = (OK / "output.log").read_bytes(), (OK / "run.json").read_bytes()
    pair = [("x/run.json", meta), ("x/output.log", log)]
    members = [*(pair if order == "run.json first" else pair[::-1]), ("x/telemetry.csv", TELEMETRY_CSV.read_bytes()),
               ("y/output.log", (TIMEOUT / "output.log").read_bytes())]  # a log without run.json stays plain
    archive = _tar(tmp_path / "runs.tar.gz", members)
    s = ingest([str(archive)], tmp_path / "st", workers=0)
    assert (s.files_seen, s.runs_added, s.telemetry_added) == (3, 2, 4)
    runs = {r["source"]: r for r in read(tmp_path / "st", "runs")}
    ok = runs[f"{archive}::x/output.log"]
    assert_ok_run({**ok, "tags": dict(ok["tags"]), "details": dict(ok["details"])})
    plain = runs[f"{archive}::y/output.log"]
    assert (plain["status"], plain["host"]) == ("truncated", None)


def test_zip_output_log_first(tmp_path: Path) -> None:
    archive = tmp_path / "runs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("x/output.log", (OK / "output.log").read_bytes())
        zf.writestr("x/run.json", (OK / "run.json").read_bytes())
    ingest([str(archive)], tmp_path / "st", workers=0)
    assert_ok_run(only_run(tmp_path / "st"))


def test_rebuild_keeps_the_run_json_overlay(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    shutil.copytree(OK, run_dir)
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    before = only_run(tmp_path / "st")
    s = rebuild(tmp_path / "st")  # re-reads the recorded source, r1/output.log, given directly as a PATH
    assert (s.runs_added, s.duplicates_skipped) == (1, 0)
    after = only_run(tmp_path / "st")
    assert after["run_id"] == before["run_id"]  # same SHA-256: log + run.json
    assert_ok_run(after)


def test_tar_run_json_without_log_is_a_plain_member(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "a.tar.gz", [("x/run.json", (OK / "run.json").read_bytes()),
                                          ("z/output.log", (OK / "output.log").read_bytes())])
    names = [(i.member, i.sidecar) for i in iter_items([str(archive)])]
    assert names == [("x/run.json", None), ("z/output.log", None)]


def test_updated_run_json_is_ingested_again(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    shutil.copytree(OK, run_dir)
    assert ingest([str(run_dir)], tmp_path / "st", workers=0).runs_added == 1
    assert ingest([str(run_dir)], tmp_path / "st", workers=0).duplicates_skipped == 1
    meta = json.loads((run_dir / "run.json").read_text())
    meta["host"]["hostname"] = "gpu-node08"
    (run_dir / "run.json").write_text(json.dumps(meta))
    assert ingest([str(run_dir)], tmp_path / "st", workers=1).runs_added == 1  # through a worker process
    assert sorted(r["host"] for r in read(tmp_path / "st", "runs")) == ["gpu-node07", "gpu-node08"]


def test_empty_log_of_a_failed_run_still_gives_a_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    (run_dir / "output.log").write_bytes(b"")
    meta = {"schema_version": 1, "run_id": "r1", "status": "failed", "exit_code": 1,
            "spec": {"model": "vgg16", "batch_size": 32, "num_gpus": 4}, "versions": {"tensorflow": "2.15.1"}}
    (run_dir / "run.json").write_text(json.dumps(meta))
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    run = only_run(tmp_path / "st")
    assert (run["status"], run["model"], run["batch_size_per_device"], run["num_gpus"]) == ("failed", "vgg16", 32, 4)
    assert (run["framework"], run["framework_version"], run["images_per_sec"]) == ("tensorflow", "2.15.1", None)
    assert run["status_detail"] == "no run found in output.log"
    assert [p["kind"] for p in read(tmp_path / "st", "problems")] == ["empty"]


def test_a_run_without_a_result_keeps_run_jsons_detail_in_the_store(tmp_path: Path) -> None:
    """`bench run -- echo hello`: run.json said "exit code 0, but the log holds no result", the store only
    "no run found in output.log". One run, one record: the store's detail now says both."""
    run_dir = tmp_path / "r2"
    run_dir.mkdir()
    (run_dir / "output.log").write_text("hello\n")
    detail = "exit code 0, but the log holds no result (no throughput, no time to train)"
    meta = {"schema_version": 1, "run_id": "r2", "status": "no_result", "exit_code": 0, "command": ["echo", "hello"],
            "status_detail": detail}
    (run_dir / "run.json").write_text(json.dumps(meta))
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    run = only_run(tmp_path / "st")
    assert (run["status"], run["status_detail"]) == ("no_result", f"no run found in output.log; {detail}")


def test_a_cpu_run_cut_short_keeps_its_logical_devices_and_node(tmp_path: Path) -> None:
    """A sweep cell on 2 logical CPU devices, interrupted before its log said anything: run.json's spec
    gives its 2 devices (not 1 per process) and its one node (the local launcher), so it lands on its
    configuration's 2-device point."""
    run_dir = tmp_path / "r2"
    run_dir.mkdir()
    (run_dir / "output.log").write_bytes(b"")
    meta = {"schema_version": 1, "run_id": "r2", "status": "interrupted", "exit_code": 130,
            "spec": {"model": "trivial", "batch_size": 8, "num_gpus": 2, "device": "cpu", "launcher": "local"}}
    (run_dir / "run.json").write_text(json.dumps(meta))
    ingest([str(run_dir)], tmp_path / "st", workers=0)
    run = only_run(tmp_path / "st")
    assert (run["status"], run["num_devices"], run["device_type"], run["num_gpus"], run["num_nodes"]) == \
           ("interrupted", 2, "cpu", None, 1)


def _meta(**kw: object) -> dict:
    return {"schema_version": 1, "run_id": "r", "status": "ok", **kw}


@pytest.mark.parametrize(("data", "kind", "words"), [
    (b"[1, 2]", "bad_line", "top level is a JSON list"),
    (b"\xff\xfe{}", "bad_line", "not UTF-8"),
    (json.dumps({"schema_version": 3, "run_id": "r"}).encode(), "bad_line", "schema_version 3 is not one"),
    (json.dumps({"schema_version": "1"}).encode(), "bad_line", "schema_version '1' is not one"),
    (json.dumps({"run_id": "r", "status": "ok"}).encode(), "missing_field", "no schema_version"),
])
def test_unusable_run_json(data: bytes, kind: str, words: str) -> None:
    meta, problems = runjson.load(data)
    assert meta is None and [p.kind for p in problems] == [kind] and words in problems[0].message


def test_fields_of_the_wrong_type_are_dropped() -> None:
    data = json.dumps(_meta(tags=["a"], started_at="yesterday", status="weird", gpus=["V100"], ended_at=10)).encode()
    meta, problems = runjson.load(data)
    assert meta is not None and meta["ended_at"] == 10.0
    assert "tags" not in meta and "gpus" not in meta and meta["started_at"] is None and "status" not in meta
    assert [p.kind for p in problems] == ["bad_line"] * 4
    assert [p.message.split()[1] for p in problems] == ["tags", "started_at", "status", "gpus"]
    _, missing = runjson.load(json.dumps({"schema_version": 1}).encode())
    assert [(p.kind, p.message) for p in missing] == [("missing_field", "run.json has no run_id"),
                                                      ("missing_field", "run.json has no status")]


def test_iso_times() -> None:
    assert runjson.unix_seconds("2026-11-21T20:15:03.250000+00:00") == OK_START
    assert runjson.unix_seconds("2026-11-21T20:15:03.25") == OK_START  # naive = UTC
    assert runjson.unix_seconds("2026-11-21T21:15:03.25+01:00") == OK_START
    assert runjson.unix_seconds(True) is None and runjson.unix_seconds("soon") is None


@pytest.mark.parametrize(("log", "launcher", "exit_code", "want"), [
    ("ok", "ok", 0, "ok"),
    ("ok", "running", None, "ok"),
    ("ok", "ok", 3, "failed"),  # a result, then a non-zero exit: the launcher knows better
    ("ok", "timeout", -9, "timeout"),
    ("truncated", "timeout", -9, "timeout"),
    ("truncated", "interrupted", -2, "interrupted"),
    ("no_result", "failed", 1, "failed"),
    ("truncated", "ok", 0, "truncated"),  # a clean exit does not make a cut log whole
    ("failed", "timeout", -9, "failed"),  # the log names the cause (e.g. a crashed rank, others hung)
    ("failed", "oom", 1, "oom"),
    ("oom", "failed", 1, "oom"),
    ("no_result", None, None, "no_result"),
])
def test_resolve_status(log: str, launcher: str | None, exit_code: int | None, want: str) -> None:
    assert run_dirs.resolve_status(log, launcher, exit_code) == want


def test_nonzero_exit_after_a_total_clears_metrics_and_keeps_the_total() -> None:
    run = Run(format="tf_cnn", model="resnet50", images_per_sec=1465.31, images_per_sec_mean=1463.5, status="ok")
    problems: list = []
    out = run_dirs.apply_run_json(run, _meta(status="failed", exit_code=134), problems)
    assert (out.status, out.images_per_sec, out.images_per_sec_mean) == ("failed", None, None)
    assert out.details["log_images_per_sec"] == "1465.31" and out.details["log_status"] == "ok"
    assert out.status_detail == "bench run: status failed, exit code 134" and problems == []


def test_conflicts_keep_the_log_value() -> None:
    run = Run(model="resnet50", framework_version="2.14", started_at=100.0, tags={"device": "gpu"})
    problems: list = []
    meta = _meta(spec={"model": "inception3", "device": "cpu"}, versions={"tensorflow": "2.15.1"}, started_at=90.0)
    out = run_dirs.apply_run_json(run, meta, problems)
    assert (out.model, out.framework_version, out.started_at, out.tags["device"]) == ("resnet50", "2.14", 100.0, "gpu")
    # model, framework_version ("2.15.1" does not refine "2.14"), tag device; not started_at (times differ by design)
    assert [p.message.split("=")[0] for p in problems] == ["run.json says framework_version", "run.json says model",
                                                           "run.json tag device"]
    assert all(p.kind == "conflict" for p in problems) and "model='inception3'" in problems[1].message


def _ingested_run_dir_with_telemetry(tmp_path: Path) -> tuple[Path, dict]:
    """A run directory with a telemetry.csv, ingested into tmp_path/st: (the directory, its runs row)."""
    run_dir = tmp_path / "logs" / "r1"
    shutil.copytree(OK, run_dir)
    shutil.copy(TELEMETRY_CSV, run_dir / "telemetry.csv")
    ingest([str(tmp_path / "logs")], tmp_path / "st", workers=0)
    return run_dir, only_run(tmp_path / "st")


def test_telemetry_run_id_is_the_id_of_its_runs_row(tmp_path: Path) -> None:
    run_dir, run = _ingested_run_dir_with_telemetry(tmp_path)
    assert run_dirs.telemetry_run_id(str(run_dir / "telemetry.csv")) == run["run_id"]
    assert run["run_id"].endswith("-0") and len(run["run_id"]) == 18


def test_telemetry_run_id_needs_a_run_directory(tmp_path: Path) -> None:
    shutil.copy(TELEMETRY_CSV, tmp_path / "telemetry.csv")
    assert run_dirs.telemetry_run_id(str(tmp_path / "telemetry.csv")) is None  # no output.log / run.json
    (tmp_path / "output.log").write_text("x\n")
    assert run_dirs.telemetry_run_id(str(tmp_path / "telemetry.csv")) is None  # still no run.json
    shutil.copy(OK / "run.json", tmp_path / "run.json")
    assert run_dirs.telemetry_run_id(str(tmp_path / "telemetry.csv")) is not None
    assert run_dirs.telemetry_run_id(str(tmp_path / "output.log")) is None  # only telemetry.csv is linked


def test_ingested_telemetry_rows_carry_their_runs_id(tmp_path: Path) -> None:
    _, run = _ingested_run_dir_with_telemetry(tmp_path)
    assert {t["run_id"] for t in read(tmp_path / "st", "telemetry")} == {run["run_id"]}


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_archived_telemetry_rows_carry_their_runs_id(tmp_path: Path, order: tuple[int, ...], kind: str) -> None:
    """A run directory inside an archive: its telemetry.csv joins its run whatever the member order
    (telemetry first, between or last), and a second run directory's telemetry joins that run."""
    files = [("output.log", (OK / "output.log").read_bytes()), ("run.json", (OK / "run.json").read_bytes()),
             ("telemetry.csv", TELEMETRY_CSV.read_bytes())]
    other_log = (OK / "output.log").read_bytes() + b"\n"  # another log, so another run id
    members = [(f"logs/r1/{files[i][0]}", files[i][1]) for i in order]
    members += [("logs/r2/telemetry.csv", TELEMETRY_CSV.read_bytes() + b"\n"),  # not a duplicate of r1's
                ("logs/r2/run.json", files[1][1]),
                ("logs/r2/output.log", other_log)]
    if kind == "zip":
        archive = tmp_path / "runs.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
    else:
        archive = _tar(tmp_path / "runs.tar.gz", members)
    ingest([str(archive)], tmp_path / "st", workers=0)
    runs = {r["source"].rsplit("/", 2)[-2]: r["run_id"] for r in read(tmp_path / "st", "runs")}
    assert set(runs) == {"r1", "r2"} and runs["r1"] != runs["r2"]
    by_source = {}
    for t in read(tmp_path / "st", "telemetry"):
        by_source.setdefault(t["source"].rsplit("/", 2)[-2], set()).add(t["run_id"])
    assert by_source == {"r1": {runs["r1"]}, "r2": {runs["r2"]}}


def test_a_version_1_run_json_is_read_through_the_upgrade() -> None:
    """Version 1 writers also spelt gpu_topology "topology", a GPU's driver_version "driver", its
    sm_clock_max_mhz "clocks_max_sm_mhz" and the host's memory_total_mib "memory_mib": read as version 2."""
    old = _meta(topology="GPU0 X", host={"memory_mib": 64000}, gpus=[{"driver": "535.1", "clocks_max_sm_mhz": 1980}])
    meta, problems = runjson.load(json.dumps(old).encode())
    assert problems == [] and meta is not None
    assert (meta["schema_version"], meta["gpu_topology"], meta["host"], meta["gpus"]) == (
        2, "GPU0 X", {"memory_total_mib": 64000}, [{"driver_version": "535.1", "sm_clock_max_mhz": 1980}])
    assert "topology" not in meta
    details = run_dirs.run_details(meta)
    assert (details["topology"], details["memory_mib"], details["gpu_driver"]) == ("GPU0 X", "64000", "535.1")



def test_a_real_h100_run_keeps_the_gpu_settings_nvidia_smi_gave() -> None:
    """fixtures/gpu: the run.json bench run wrote on an H100, against nvidia-smi's own CSV of that machine
    (read here with the csv module): the power limit and clocks become details a change can be traced to."""
    import csv

    fixtures = Path(__file__).parents[2] / "fixtures" / "gpu"
    header, values = list(csv.reader((fixtures / "h100-smi-settings.csv").read_text().splitlines(), skipinitialspace=True))
    smi = dict(zip(header, values, strict=True))
    details = run_dirs.run_details(json.loads((fixtures / "h100-env-check.run.json").read_text()))
    assert float(details["gpu_power_limit_w"]) == float(smi["enforced.power.limit [W]"].split()[0]) == 700.0
    assert float(details["gpu_clocks_applications_sm_mhz"]) == float(smi["clocks.applications.graphics [MHz]"].split()[0])
    assert float(details["gpu_clocks_applications_memory_mhz"]) == float(smi["clocks.applications.memory [MHz]"].split()[0])
    assert (details["gpu_persistence_mode"], details["gpu_ecc_mode"], details["gpu_vbios"]) == \
        (smi["persistence_mode"], smi["ecc.mode.current"], smi["vbios_version"])
    assert (details["gpu_driver"], details["cudnn_version"], details["nccl_version"]) == ("580.159.04", "9.14.0", "2.28.3")
