"""The NULL sentinels inside the column buffers' numeric columns (bench.ingest.column_buffers)."""

import struct
from typing import Any

#: NULL inside array('d'): a NaN with a payload of our own, so that a real NaN (a diverged ``loss = nan``)
#: stays NaN in the store while a missing value becomes NULL.
NULL_BITS = 0x7FF8_DEAD_BEEF_0001
NULL_FLOAT = struct.unpack("<d", struct.pack("<Q", NULL_BITS))[0]
INT_NULL = -(2**63)  # sentinel for a NULL integer inside array('q'); converted to NULL on write


def null_mask(values: Any) -> Any:
    """Where the numpy int64 or float64 array ``values`` holds the NULL sentinel (a bool array)."""
    import numpy as np

    return values == INT_NULL if values.dtype == np.int64 else values.view(np.uint64) == NULL_BITS
