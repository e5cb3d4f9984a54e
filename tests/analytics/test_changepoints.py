"""The change-point method (bench.analytics.changepoints) on series whose answer is known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bench.analytics.changepoints import binary_segmentation, detect, find_outliers, noise, welch


def test_binary_segmentation_splits_where_the_squares_drop_most() -> None:
    x = np.array([0.0, 0, 0, 0, 5, 5, 5, 5, 4, 4, 4])
    # by hand (cost = sum of squares about the mean): all 11: 148 - 32^2/11 = 54.91; split at 4: 0 for
    # the zeros, 148 - 32^2/7 = 1.714 for the rest, a gain of 53.2; that rest split at 8 gains 1.714
    assert binary_segmentation(x, penalty=1.0, min_size=3) == [4, 8]
    assert binary_segmentation(x, penalty=10.0, min_size=3) == [4]
    assert binary_segmentation(x, penalty=60.0, min_size=3) == []
    # segments keep min_size points: the 3-point level at the end cannot be cut off with min_size 4
    assert binary_segmentation(x, penalty=1.0, min_size=4) == [4]
    assert binary_segmentation(np.ones(10), penalty=0.0, min_size=2) == []


def test_noise_ignores_a_step_and_an_outlier() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.01, 400)
    sigma = noise(x)
    x[200:] += 0.5
    x[100] -= 1.0
    assert noise(x) == pytest.approx(sigma, rel=0.05)
    assert 0.009 < sigma < 0.011


def test_welch_is_scipys() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(0, 1, 12), rng.normal(0.8, 2, 7)
    d, low, high, p = welch(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (low, high) == pytest.approx(tuple(ref.confidence_interval()), rel=1e-9)
    assert d == pytest.approx(b.mean() - a.mean())


def test_outliers_are_lone_runs_and_a_level_is_not() -> None:
    x = np.zeros(30)
    x[10] = -1.0  # lone
    x[20:22] = 1.0  # two in a row: still outliers
    assert find_outliers(x, sigma=0.01) == [10, 20, 21]
    x[20:23] = 1.0  # three in a row (min_runs): a level, not outliers
    assert find_outliers(x, sigma=0.01) == [10]
    # the first run on a new level differs from the runs before only: not an outlier
    y = np.r_[np.zeros(10), np.ones(10)]
    assert find_outliers(y, sigma=0.01) == []


def test_a_step_is_found_where_it_is_with_its_size() -> None:
    rng = np.random.default_rng(5)
    values = np.exp(np.r_[rng.normal(0, 0.01, 60), rng.normal(math.log(0.93), 0.01, 60)]) * 1000
    values[30] *= 0.7  # a throttled run before the step
    det = detect(values)
    assert [s.index for s in det.steps] == [60]
    assert [o.index for o in det.outliers] == [30]
    step = det.steps[0]
    assert step.ci_low < step.change < step.ci_high and -0.075 < step.change < -0.065
    assert step.before.n == 59 and step.after.n == 60  # the outlier is in neither level's mean
    ratio = np.exp(np.log(values[60:]).mean() - np.log(np.delete(values[:60], 30)).mean())
    assert step.change == pytest.approx(ratio - 1)
    assert step.p_value < 1e-20


def test_noise_alone_rarely_makes_a_change() -> None:
    rng = np.random.default_rng(6)
    found = sum(len(detect(np.exp(rng.normal(0, 0.01, 200))).steps) for _ in range(200))
    assert found <= 4  # p < 0.001 per kept candidate: a handful at most in 200 series of 200 runs


def test_min_change_drops_small_steps() -> None:
    rng = np.random.default_rng(8)
    values = np.exp(np.r_[rng.normal(0, 0.001, 50), rng.normal(0.01, 0.001, 50)])
    assert [s.index for s in detect(values).steps] == [50]
    assert detect(values, min_change=0.02).steps == []
