"""effects(): multiplicative factor effects recovered from synthetic log-linear runs."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from bench.analytics.effects import effect_lines, effects
from bench.sql.errors import BenchError

MODEL = {"inception3": 1.0, "resnet50": 1.61}
DATA = {"synthetic": 1.0, "real": 0.99}
GPU = {"K80": 1.0, "P100": 4.4}
SPEEDUP = {1: 1.0, 2: 1.9, 4: 3.7, 8: 7.2}


def _runs(rows: list[dict[str, object]]) -> duckdb.DuckDBPyConnection:
    cols = {"status": pa.string(), "images_per_sec": pa.float64(), "model": pa.string(), "device_model": pa.string(),
            "data": pa.string(), "mode": pa.string(), "batch_size_per_device": pa.int64(), "variable_update": pa.string(),
            "precision": pa.string(), "num_devices": pa.int64()}
    con = duckdb.connect()
    con.register("runs", pa.table({c: pa.array([r.get(c) for r in rows], t) for c, t in cols.items()}))
    return con


def _grid(noise_sd: float, repeats: int, seed: int = 42) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    for (m, d, g, n), _ in itertools.product(itertools.product(MODEL, DATA, GPU, SPEEDUP), range(repeats)):
        rate = 100.0 * MODEL[m] * DATA[d] * GPU[g] * SPEEDUP[n] * math.exp(rng.gauss(0, noise_sd))
        rows.append({"status": "ok", "images_per_sec": rate, "model": m, "data": d, "device_model": g,
                     "num_devices": n, "batch_size_per_device": 64, "variable_update": "parameter_server",
                     "precision": "fp32"})
    return rows


def _by_level(result: object) -> dict[tuple[str, object], object]:
    return {(e.factor, e.level): e for e in result.effects}  # type: ignore[attr-defined]


def test_exact_log_linear_data_gives_back_every_multiplicative_effect() -> None:
    r = effects(_runs(_grid(0.0, 1)), reference={"data": "synthetic"})
    got = _by_level(r)
    assert r.factors == ("model", "device_model", "data", "num_devices")
    assert r.fixed == {"mode": None, "batch_size_per_device": 64, "variable_update": "parameter_server", "precision": "fp32"}
    assert r.reference == {"model": "inception3", "device_model": "K80", "data": "synthetic", "num_devices": 1}
    assert got["model", "resnet50"].ratio == pytest.approx(1.61, rel=1e-9)
    assert got["data", "real"].ratio == pytest.approx(0.99, rel=1e-9)
    assert got["device_model", "P100"].ratio == pytest.approx(4.4, rel=1e-9)
    assert [got["num_devices", n].ratio for n in (2, 4, 8)] == pytest.approx([1.9, 3.7, 7.2], rel=1e-9)
    assert r.reference_images_per_sec == pytest.approx(100.0)
    assert (r.n_runs, r.n_excluded, r.df_resid) == (32, 0, 32 - 7)


def test_noisy_data_gives_cis_that_cover_the_truth_and_balanced_marginal_ratios() -> None:
    rows = _grid(0.02, 3)
    r = effects(_runs(rows))  # default reference: the first level, so data's reference is "real"
    got = _by_level(r)
    # In a balanced design the OLS main effect is the ratio of the marginal geometric means.
    def gmean(key: str, value: object) -> float:
        return math.exp(statistics.fmean(math.log(x["images_per_sec"]) for x in rows if x[key] == value))

    assert got["model", "resnet50"].ratio == pytest.approx(gmean("model", "resnet50") / gmean("model", "inception3"))
    synthetic = got["data", "synthetic"]
    assert synthetic.reference == "real"
    assert synthetic.ratio == pytest.approx(gmean("data", "synthetic") / gmean("data", "real"))
    for e, truth in [(got["model", "resnet50"], 1.61), (synthetic, 1 / 0.99), (got["num_devices", 8], 7.2)]:
        assert e.ci95_low < truth < e.ci95_high
        assert e.ci95_low < e.ratio < e.ci95_high
    assert got["model", "resnet50"].p_value < 1e-20
    assert got["model", "resnet50"].n_runs == 48


def test_failed_runs_are_excluded_and_counted_and_null_is_not_a_level() -> None:
    """An unstated device (a log that does not say) is never a level: one run of eleven without it is left
    out and counted; in half the runs, the factor is left out of the model and named instead."""
    rows = [{"status": "ok", "images_per_sec": 100.0 * (1 + i % 2), "model": "a" if i % 2 == 0 else "b",
             "device_model": "P100"} for i in range(10)]
    rows += [{"status": "ok", "images_per_sec": 20.0, "model": "a", "device_model": None},  # says no device
             {"status": "oom", "images_per_sec": None, "model": "a", "device_model": "P100"},
             {"status": "ok", "images_per_sec": 0.0, "model": "a", "device_model": "P100"}]  # no throughput
    r = effects(_runs(rows))
    (e,) = r.effects
    assert (r.n_runs, r.n_excluded, r.unstated, r.reference) == (10, 2, {"device_model": 1}, {"model": "a"})
    assert (e.level, e.ratio) == ("b", pytest.approx(2.0))  # 200 / 100: the NULL run's 20 is in neither
    assert "1 ok run(s) left out: their logs do not say their device_model" in "\n".join(effect_lines(r))
    half = [{"status": "ok", "images_per_sec": v, "model": m, "device_model": d}
            for v, m, d in ((100.0, "a", "P100"), (200.0, "b", "P100"), (20.0, "a", None), (40.0, "b", None))]
    r = effects(_runs(half))
    assert r.confounded == {"device_model": "not stated in 2 of the 4 ok runs (an unstated value is not a level), "
                                            "so its effect is not separated from the others'"}
    assert [(e.level, e.ratio) for e in r.effects] == [("b", pytest.approx(2.0))]
    with pytest.raises(BenchError, match="no factor varies among the 4 ok runs selected; device_model is not stated in 2"):
        effects(_runs([{**row, "model": "a"} for row in half]))


def test_a_model_is_one_model_however_it_is_spelled() -> None:
    rows = [{"status": "ok", "images_per_sec": v, "model": m, "device_model": "V100"}
            for v, m in ((300.0, "ResNet-50"), (310.0, "resnet50"), (290.0, "resnet50"), (100.0, "VGG16"), (110.0, "vgg16"))]
    r = effects(_runs(rows), reference={"model": "ResNet50"})  # any spelling names it
    (e,) = r.effects
    assert (e.reference, e.level, e.n_runs) == ("resnet50", "VGG16", 2)  # the spelling most runs use; ties: the first
    assert e.ratio == pytest.approx(math.sqrt(100 * 110) / (300 * 310 * 290) ** (1 / 3))
    assert r.spellings == {"resnet50": ["ResNet-50"], "VGG16": ["vgg16"]}


def test_user_errors() -> None:
    rows = _grid(0.01, 1)
    with pytest.raises(BenchError, match="no factor varies"):
        effects(_runs(rows), where="model = 'resnet50' AND data = 'real' AND device_model = 'K80' AND num_devices = 1")
    with pytest.raises(BenchError, match="no ok run"):
        effects(_runs(rows), where="model = 'vgg16'")
    with pytest.raises(BenchError, match="nope"):
        effects(_runs(rows), where="nope = 1")
    with pytest.raises(BenchError, match="reference data='imagenet'"):
        effects(_runs(rows), reference={"data": "imagenet"})



def test_a_confounded_factor_is_flagged_not_estimated() -> None:
    """Every P100 run is fp16, every K80 run fp32: the precision effect cannot be told from the GPU's. It
    is left out and named; the other factors' effects are those of the model without it."""
    rows = _grid(0.01, 1)
    confounded = [dict(x, precision="fp16" if x["device_model"] == "P100" else "fp32") for x in rows]
    r = effects(_runs(confounded))
    assert r.confounded == {"precision": "device_model"}
    assert "precision" not in r.factors and all(e.factor != "precision" for e in r.effects)
    plain = effects(_runs(rows))
    assert [(e.factor, e.level) for e in r.effects] == [(e.factor, e.level) for e in plain.effects]
    assert [e.ratio for e in r.effects] == pytest.approx([e.ratio for e in plain.effects])
    assert any(line.startswith("precision: not estimated, confounded with device_model") for line in effect_lines(r))


def test_cli_effects_text_json_and_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench.runner.commands import effects_cmd as cli
    from bench.sql import read as store

    app = typer.Typer()
    app.command()(cli.effects_command)
    runner = CliRunner()
    assert "Example: bench effects" in runner.invoke(app, ["--help"]).output
    missing = runner.invoke(app, ["--store", str(tmp_path / "nowhere")])
    assert isinstance(missing.exception, BenchError) and "not a bench store" in str(missing.exception)
    monkeypatch.setattr(store, "connect", lambda root: _runs(_grid(0.0, 1)))  # --where narrows the connection
    text = runner.invoke(app, ["--where", "device_model = 'P100' AND num_devices = 1"])
    assert text.exit_code == 0, text.output
    assert "OLS of log(images/sec) over 4 ok runs (0 excluded)" in text.output
    assert "model: resnet50 is 1.61× inception3 (+61.0%, 95% CI +61.0%..+61.0%, p < 0.001; 2 runs)" in text.output
    assert "data: synthetic is 1.01× real (+1.0%" in text.output
    doc = json.loads(runner.invoke(app, ["--json"]).output)
    assert doc["n_runs"] == 32 and doc["reference"]["num_devices"] == 1
    assert {(e["factor"], e["level"]): e["ratio"] for e in doc["effects"]}["device_model", "P100"] == pytest.approx(4.4)


def test_ratios_print_without_a_dangling_point() -> None:
    from bench.analytics.effects import fmt_ratio

    # `bench effects` printed "364.× AlexNet" (Python's "#.3g" keeps the point)
    assert [fmt_ratio(r) for r in (364.2, 1234.5, 36.44, 3.6449, 1.6, 0.3644, 0.01234)] == \
        ["364", "1,234", "36.4", "3.64", "1.60", "0.364", "0.0123"]
