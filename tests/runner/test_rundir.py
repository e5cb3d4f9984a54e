"""Run directory naming, atomic run.json writing, and the host / version / GPU facts (no TensorFlow import)."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import sys
from pathlib import Path

import pytest

from bench.runner import rundir
from bench.runner.spec import RunSpec


def test_run_id_is_sortable_and_describes_the_run() -> None:
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    rid = rundir.new_run_id(RunSpec(model="resnet50", batch_size=64, num_gpus=4), now, repeat=2)
    assert re.fullmatch(r"20231114T221320Z-resnet50-b64-g4-r2-[0-9a-f]{4}", rid)
    assert re.fullmatch(r"20231114T221320Z-default-[0-9a-f]{4}", rundir.new_run_id(RunSpec(), now))
    assert rundir.new_run_id(RunSpec(model="a/b c"), now).split("-")[1] == "a_b_c"


def test_create_run_dir_refuses_an_existing_one(tmp_path: Path) -> None:
    path = rundir.create_run_dir(tmp_path / "logs", "r1")
    assert path == tmp_path / "logs" / "r1" and path.is_dir()
    with pytest.raises(FileExistsError):
        rundir.create_run_dir(tmp_path / "logs", "r1")


def test_run_json_is_written_atomically_and_only_in_the_current_version(tmp_path: Path) -> None:
    from bench.sql import runjson

    target = tmp_path / "run.json"
    runjson.write(target, {"schema_version": 2, "status": "running"})
    runjson.write(target, {"schema_version": 2, "status": "ok", "path": Path("/x")})
    assert json.loads(target.read_text()) == {"schema_version": 2, "status": "ok", "path": "/x"}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    with pytest.raises(ValueError, match="schema_version 2"):
        runjson.write(target, {"schema_version": 1})


def test_matching_env_keeps_only_the_prefixes() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO", "HOROVOD_FUSION_THRESHOLD": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "4", "SLURM_JOB_ID": "7", "HOME": "/root",
           "MY_TF_VAR": "no", "PATH": "/bin", "TF_CONFIG": "{}", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2",
           "TF_CLI_CONFIG_FILE": "/root/.terraformrc", "TF_LOG": "DEBUG", "TF_VAR_region": "eu"}  # the last 3: Terraform's
    assert list(rundir.matching_env(env)) == ["CUDA_VISIBLE_DEVICES", "HOROVOD_FUSION_THRESHOLD", "NCCL_DEBUG",
                                              "OMP_NUM_THREADS", "SLURM_JOB_ID", "TF_CONFIG", "TF_CPP_MIN_LOG_LEVEL",
                                              "TF_XLA_FLAGS"]


def test_host_facts() -> None:
    facts = rundir.host_facts()
    assert facts["hostname"] == socket.gethostname()
    assert 1 <= facts["physical_cores"] <= os.cpu_count()
    assert facts["memory_total_mib"] > 0
    assert facts["kernel"] == os.uname().release
    assert facts["python"] == ".".join(map(str, sys.version_info[:3]))
    if Path("/proc/cpuinfo").exists() and "model name" in Path("/proc/cpuinfo").read_text():
        assert facts["cpu_model"] and facts["cpu_model"] == facts["cpu_model"].strip()


def _fake(bin_dir: Path, name: str, text: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}'\n")  # printf: a builtin, PATH may hold only bin_dir
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_versions_without_tools_are_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    got = rundir.versions()
    assert got["mpi"] is None
    if rundir._package_version(rundir._PACKAGES["cuda"]) is None:
        assert got["cuda"] is None
    assert set(got) == {"tensorflow", "cuda", "cudnn", "nccl", "horovod", "torch", "jax", "mpi"}


def test_versions_read_mpirun_and_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake(tmp_path / "bin", "mpirun", "mpirun (Open MPI) 4.1.5\n\nReport bugs to http://www.open-mpi.org/")
    _fake(tmp_path / "bin", "nvcc", "Cuda compilation tools, release 12.1, V12.1.105")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    got = rundir.versions()
    assert got["mpi"] == "mpirun (Open MPI) 4.1.5"
    if rundir._package_version(rundir._PACKAGES["cuda"]) is None:
        assert got["cuda"] == "12.1"


def test_gpu_facts_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert rundir.gpu_facts() == (None, None, None)


def test_initial_doc_has_the_contract_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = RunSpec(model="m", tags=(("a", "1"),))
    doc = rundir.initial_doc(spec, "rid", ["t", "--model", "m"], {"NCCL_X": "1", "HOME": "/"}, repeat=3)
    assert doc["schema_version"] == rundir.SCHEMA_VERSION == 2
    assert (doc["run_id"], doc["argv"], doc["status"]) == ("rid", ["t", "--model", "m"], "running")
    assert doc["tags"] == {"a": "1", "repeat": "3"} and doc["env"] == {"NCCL_X": "1"}
    assert doc["gpus"] is None and doc["gpu_topology"] is None
    assert {"started_at", "ended_at", "wall_time_s", "exit_code", "host", "versions", "spec"} <= set(doc)
