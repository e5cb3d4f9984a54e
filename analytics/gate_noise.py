"""The noise of one run as ``bench check`` takes it: recent, robust, and nearly as precise as a standard deviation.
bench.analytics.changepoints.noise (the median of neighbour differences) stays what bench changes uses."""

from __future__ import annotations

import math

import numpy as np

#: bench check's noise is measured on the last RECENT runs (the noise as it is now, not as it was two seasons ago)
RECENT = 60
#: neighbour differences further than this many robust sigmas (of the differences) from their median are left
#: out of the scale: a night of 20% does not inflate it
TRIM = 3.0
#: the variance a normal keeps within +-TRIM sigma, as a share of its whole: 1 - 2 c phi(c) / (2 Phi(c) - 1)
_KEPT = 1 - 2 * TRIM * math.exp(-TRIM * TRIM / 2) / math.sqrt(2 * math.pi) / math.erf(TRIM / math.sqrt(2))


def scale(x: np.ndarray) -> float:
    """sigma of one run from the differences of neighbours of log values ``x``: their root mean square about
    their median, once those further than TRIM robust sigmas (1.4826 MAD) from it are left out, over sqrt(2).
    Divided by what a normal keeps within the trim (``_KEPT``), so that it estimates a normal's sigma. As robust
    as bench.analytics.changepoints.noise to a step or a lone slow night, and nearly as precise as a standard deviation."""
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    d = d - np.median(d)
    mad = 1.4826 * float(np.median(np.abs(d)))
    if mad == 0:
        return 0.0
    kept = d[np.abs(d) <= TRIM * mad]
    return float(np.sqrt(np.mean(kept * kept) / _KEPT / 2))


def recent_noise(x: np.ndarray) -> tuple[float, float]:
    """(sigma, degrees of freedom) of one run as the noise is now: :func:`scale` of the last RECENT + 1 log
    values ``x``. Neighbour differences overlap, so k of them count as about 2k/3 independent squares: the
    degrees of freedom. (A shorter window would follow a growing noise sooner, but its few degrees of freedom
    cost the gate its power at a thousand series' corrected alpha: Student's t at 1e-6 is 5.6 on 39 degrees of
    freedom, 6.7 on 19.)"""
    return scale(x[-RECENT - 1:]), max((min(len(x), RECENT + 1) - 2) * 2 / 3, 1.0)
