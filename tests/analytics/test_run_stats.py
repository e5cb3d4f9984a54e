"""run_stats: MSER-5 warm-up cut, CV stability, and the batch-means CI of a run's mean throughput."""

from __future__ import annotations

import math
import random
import statistics

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from bench.analytics.run_stats import batch_means_ci, compute_run_stats, mser5, schema
from bench.sql.schema import STEPS


def _steps(rows: list[tuple[str, int | None, int, float | None]]) -> duckdb.DuckDBPyConnection:
    """A connection whose ``steps`` view holds (run_id, rank, step, interval rate) rows, in the store's
    schema (run_id dictionary-encoded, every other column NULL but the printed rate and line_no)."""
    con = duckdb.connect()
    con.register("steps", pa.Table.from_pylist([
        {"run_id": run_id, "rank": rank, "step": step, "interval_images_per_sec": rate, "line_no": i,
         "images_per_sec": -1.0}  # the printed (cumulative) rate: must be ignored
        for i, (run_id, rank, step, rate) in enumerate(rows)
    ], schema=STEPS))
    return con


def _naive_ci(y: list[float]) -> tuple[float, float]:
    """The textbook t-interval that assumes independent observations."""
    half = stats.t.ppf(0.975, len(y) - 1) * statistics.stdev(y) / math.sqrt(len(y))
    return statistics.fmean(y) - half, statistics.fmean(y) + half


def test_mser5_cuts_a_warm_up_ramp_of_ten_slow_intervals() -> None:
    rng = random.Random(42)
    ramp = [200.0 + 70.0 * i for i in range(10)]  # 200 .. 830 images/s, then steady at 1000
    steady = [1000.0 + rng.gauss(0, 10) for _ in range(50)]
    assert mser5(np.array(ramp + steady)) == 10


def test_mser5_keeps_a_series_without_warm_up_and_searches_only_the_first_half() -> None:
    flat = np.array([100.0, 101.0] * 25)
    assert mser5(flat) == 0
    # A slow tail is not a warm-up: the cut may not pass the first half of the batches (k=4: d < 2).
    late_drop = np.array([100.0] * 10 + [50.0] * 10)
    assert mser5(late_drop) == 0  # d=2 would leave two equal batch means (MSER 0) but is not searched
    with pytest.raises(ValueError):
        mser5(np.ones(9))


def test_white_noise_with_cv_one_percent_is_stable_and_five_percent_is_not() -> None:
    rng = random.Random(42)
    calm = [1000.0 + rng.gauss(0, 10) for _ in range(100)]
    noisy = [1000.0 + rng.gauss(0, 50) for _ in range(100)]
    rows = [("calm", 0, i, v) for i, v in enumerate(calm)] + [("noisy", 0, i, v) for i, v in enumerate(noisy)]
    out = {r["run_id"]: r for r in compute_run_stats(_steps(rows)).to_pylist()}
    calm_steady = calm[out["calm"]["warmup_intervals"]:]
    assert out["calm"]["cv"] == pytest.approx(statistics.stdev(calm_steady) / statistics.fmean(calm_steady))
    assert 0.007 < out["calm"]["cv"] < 0.013
    assert out["calm"]["stable"] is True
    assert out["noisy"]["cv"] > 0.03
    assert out["noisy"]["stable"] is False


def test_batch_means_ci_of_an_ar1_series_is_wider_than_the_naive_one() -> None:
    rng = random.Random(42)
    y, e = [], 0.0
    for _ in range(200):
        e = 0.8 * e + rng.gauss(0, 10)
        y.append(1000.0 + e)
    (low,), (high,) = batch_means_ci([np.array(y)])
    naive_low, naive_high = _naive_ci(y)
    assert low is not None and high is not None
    assert (high - low) > 1.5 * (naive_high - naive_low)  # positive autocorrelation: far less information
    assert (low + high) / 2 == pytest.approx(statistics.fmean(y))  # 200 = 5 batches of 40: nothing left out


def test_batch_means_ci_by_hand() -> None:
    # 52 rates, 5 batches of 10 after leaving out the first 2: batch means 2, 4, 6, 8, 10 -> mean 6, sd sqrt(10)
    y = np.array([100.0, -100.0] + [v for m in (2, 4, 6, 8, 10) for v in (m - 1, m + 1) * 5])
    (low,), (high,) = batch_means_ci([y])
    half = stats.t.ppf(0.975, 4) * math.sqrt(10) / math.sqrt(5)
    assert (low, high) == (pytest.approx(6 - half), pytest.approx(6 + half))
    # fewer than MIN_CI_RATES steady rates: no interval (one run cannot know their correlation)
    assert batch_means_ci([None, np.array([1.0]), np.arange(49.0)]) == ([None] * 3, [None] * 3)


def test_run_stats_given_expect() -> None:
    alternating = [99.0, 101.0] * 5  # 10 intervals: the minimum
    rows = (
        # Rank 1 of run "a" is written first and is faster: the lowest rank (0) is the one used.
        [("a", 1, i, 500.0) for i in range(10)]
        + [("a", 0, i, v) for i, v in reversed(list(enumerate(alternating)))]  # out of order on purpose
        + [("a", 0, 10, None), ("a", 0, 11, float("nan"))]  # a rate-less line and a NaN are not intervals
        + [("short", None, i, 100.0) for i in range(9)]  # 9 intervals: too few, NULL statistics
        + [("no_rates", 0, 1, None)]
    )
    got = compute_run_stats(_steps(rows)).to_pylist()
    # By hand for "a": MSER-5 batch means 99.8, 100.2 (k=2, only d=0 allowed), so no warm-up; mean 100;
    # sd = sqrt(10/9); 10 steady rates are fewer than a CI needs (MIN_CI_RATES): NULL
    half = None
    assert got[0] == {"run_id": "a", "n_intervals": 10, "warmup_intervals": 0, "steady_mean": 100.0,
                      "cv": pytest.approx(math.sqrt(10 / 9) / 100), "stable": True,
                      "ci95_low": half, "ci95_high": half}
    assert got[1:] == [
        {"run_id": "no_rates", "n_intervals": 0, "warmup_intervals": None, "steady_mean": None, "cv": None,
         "stable": None, "ci95_low": None, "ci95_high": None},
        {"run_id": "short", "n_intervals": 9, "warmup_intervals": None, "steady_mean": None, "cv": None,
         "stable": None, "ci95_low": None, "ci95_high": None},
    ]


def test_ten_thousand_runs_are_summarised_in_one_pass() -> None:
    gen = np.random.default_rng(42)
    n_runs, n_int = 10_000, 30
    rates = 1000.0 + gen.normal(0, 10, n_runs * n_int)
    con = duckdb.connect()
    con.register("steps", pa.table({
        "run_id": np.repeat([f"r{i:05d}" for i in range(n_runs)], n_int),
        "rank": np.zeros(n_runs * n_int, dtype=np.int64),
        "step": np.tile(np.arange(n_int), n_runs),
        "interval_images_per_sec": rates,
        "line_no": np.arange(n_runs * n_int),
    }))
    out = compute_run_stats(con)
    assert out.num_rows == n_runs
    assert out.column("n_intervals").to_pylist() == [n_int] * n_runs
    last = rates[-n_int:][out.column("warmup_intervals")[-1].as_py():]
    assert out.column("steady_mean")[-1].as_py() == pytest.approx(last.mean())


def test_no_steps_give_an_empty_table_of_the_right_schema() -> None:
    con = duckdb.connect()
    con.register("steps", STEPS.empty_table())
    out = compute_run_stats(con)
    assert out.num_rows == 0 and out.schema == schema()
