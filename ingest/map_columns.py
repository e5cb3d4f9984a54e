"""A metrics MAP column given as columns: ``n`` maps whose keys are a fixed few, each key's values in one float64
array (the NULL sentinel where a map lacks the key). A parser that adds a block of step rows at once
(``ColumnBuffer.add_block``) hands its metrics this way; it reads as a list of dicts where one is wanted and
becomes an Arrow MAP column without a dict per row (``arrow``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from bench.ingest.nulls import NULL_FLOAT, null_mask


class MapBlock:
    """``n`` maps: ``items`` maps each key, in the order a map lists them, to n float64 values."""

    def __init__(self, n: int, items: dict[str, Any]):
        import numpy as np

        self.n = n
        self.keys = list(items)
        self.values = np.stack([np.asarray(v, np.float64) for v in items.values()], axis=1) if items else \
            np.zeros((n, 0))
        if self.values.shape[0] != n:
            raise ValueError(f"{self.values.shape[0]} values for {n} maps")
        self.present = ~null_mask(self.values)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, float]:
        values, present = self.values[i].tolist(), self.present[i].tolist()
        return {k: v for k, v, p in zip(self.keys, values, present, strict=True) if p}

    def __iter__(self) -> Iterator[dict[str, float]]:
        keys = self.keys
        for values, present in zip(self.values.tolist(), self.present.tolist(), strict=True):
            yield {k: v for k, v, p in zip(keys, values, present, strict=True) if p}

    @staticmethod
    def joined(buffers: list[Any]) -> MapBlock | None:
        """One block of the maps of ``buffers`` (blocks, and lists of dicts such as a parser adds row by row),
        when there is a block and every map lists its keys in the order of the first block's; else None."""
        import numpy as np

        blocks = [b for b in buffers if isinstance(b, MapBlock)]
        if not blocks or any(b.keys != blocks[0].keys for b in blocks):
            return None
        keys = blocks[0].keys
        parts = []
        for b in buffers:
            if isinstance(b, MapBlock):
                parts.append(b.values)
            elif isinstance(b, list) and all(m is not None and list(m) == [k for k in keys if k in m] for m in b):
                parts.append(np.array([[m.get(k, NULL_FLOAT) for k in keys] for m in b], np.float64).reshape(-1, len(keys)))
            else:
                return None
        values = np.concatenate(parts)
        return MapBlock(len(values), dict(zip(keys, values.T, strict=True)))

    def arrow(self, arrow_type: pa.MapType) -> pa.Array:
        """The maps as an Arrow MAP column: the same array as ``table_rows`` makes of the dicts."""
        import numpy as np

        offsets = np.zeros(self.n + 1, np.int32)
        np.cumsum(self.present.sum(axis=1, dtype=np.int32), out=offsets[1:])
        flat = self.present.ravel()
        codes = np.tile(np.arange(len(self.keys), dtype=np.int32), self.n)[flat]
        keys = pa.array(self.keys, arrow_type.key_type).take(pa.array(codes))
        items = pa.array(self.values.ravel()[flat], arrow_type.item_type)
        return pa.MapArray.from_arrays(pa.array(offsets), keys, items)
