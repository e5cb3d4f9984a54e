"""Student-t intervals: the quantile a 95% interval of a mean (or of a difference of means) is built with."""

from __future__ import annotations

import math
from typing import Any


def t95(df: float) -> float:
    """The two-sided 95% Student-t quantile for ``df`` degrees of freedom (1.96 for a normal: df = inf);
    NaN for df < 1, where no interval exists."""
    from scipy.special import stdtrit

    if not df >= 1:
        return math.nan
    return 1.959963984540054 if math.isinf(df) else float(stdtrit(df, 0.975))


def t95s(df: Any) -> Any:
    """``t95`` of each element of an array of degrees of freedom (the fits of many configurations at once)."""
    import numpy as np

    return np.array([t95(float(d)) for d in np.ravel(df)]).reshape(np.shape(df))
