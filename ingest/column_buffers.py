"""Column buffers: how parsers hand over rows of a per-sample table without an object per row.

A ``ColumnBuffer`` (``bench.ingest.sample_tables`` declares the step and telemetry tables) holds rows as columns (``array('q')``, ``array('d')``, a list for
metrics, or whole numpy blocks from a fast path). NULL is a sentinel inside a numeric column:
``INT_NULL`` in an int64 column, the NaN with payload ``NULL_BITS`` (``NULL_FLOAT``) in a float64 one,
so that a real NaN (a diverged ``loss = nan``) stays NaN while a missing value becomes NULL on write
(``bench.sql.schema``). With a ``spill`` callback, every ``spill_rows`` rows are handed on as a dict
of columns and the buffer is cleared, so a 10-million-row log never sits in memory.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, cast

from bench.ingest.map_columns import MapBlock
from bench.ingest.nulls import INT_NULL, NULL_BITS, NULL_FLOAT, null_mask

__all__ = ["INT_NULL", "NULL_BITS", "NULL_FLOAT", "ColumnBuffer", "Fill", "MapBlock"]

#: A time stamp outside these (unix seconds) is a misprint: 1980-01-01 .. 2100-01-01 UTC.
MIN_UNIX, MAX_UNIX = 315532800.0, 4102444800.0
MAX_INT = 2**53  # a step or epoch beyond this is refused (a float, and so DuckDB's DOUBLE, cannot hold it)
_NULL_Q, _NULL_D = array("q", (INT_NULL,)), array("d", (NULL_FLOAT,))  # one NULL, to repeat
_NULL_KEY = struct.pack("<d", NULL_FLOAT)


def _is_null_float(v: float) -> bool:
    return v != v and struct.pack("<d", v) == struct.pack("<Q", NULL_BITS)


class Fill:
    """A column of ``n`` copies of one value, not stored: the columns a block of rows does not have (NULL
    sentinels, or None for metrics) and its run index. Reads like a sequence of that value."""

    __slots__ = ("n", "value")

    def __init__(self, n: int, value: Any):
        self.n, self.value = n, value

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.value

    def __iter__(self) -> Iterator[Any]:
        return iter([self.value] * self.n)

    def key(self) -> Any:
        """The value as compared between Fills: bit for bit for a float (NULL is a NaN)."""
        return struct.pack("<d", self.value) if isinstance(self.value, float) else self.value

    def is_null(self) -> bool:
        """Whether every value is NULL: None (metrics) or the NULL sentinel of an int64 / float64 column."""
        v = self.value
        return v is None or (self.key() == _NULL_KEY if isinstance(v, float) else v == INT_NULL)

    @staticmethod
    def joined(buffers: list[Any]) -> Fill | None:
        """The Fill that ``buffers`` make together when every one is a Fill of the same value, else None."""
        first = buffers[0] if buffers else None
        if isinstance(first, Fill) and all(isinstance(b, Fill) and b.key() == first.key() for b in buffers[1:]):
            return Fill(sum(b.n for b in buffers), first.value)
        return None


def joined_values(buffers: list[Any], dtype: Any) -> Any:
    """One numpy array of the 8-byte values of ``buffers`` (array('q'/'d'), contiguous numpy arrays,
    bytes, ``Fill``): the buffer itself for one, else a single join (thousands of small files' columns at
    once). A Fill is made into values here."""
    import numpy as np

    buffers = [np.full(b.n, b.value, dtype) if isinstance(b, Fill) else b for b in buffers]
    return np.frombuffer(buffers[0] if len(buffers) == 1 else b"".join(buffers), dtype=dtype)


def _appender(columns: dict[str, str]) -> Callable[[Any, tuple[Any, ...]], None]:
    """``_append`` for a table of ``columns``, written out one statement per column as a hand-written one
    would be (the way ``dataclasses`` writes ``__init__``): a loop over the columns costs a third more per
    row, and parsers add rows one at a time."""
    nulls = {"i": "INT_NULL if v{0} is None else v{0}", "d": "NULL_FLOAT if v{0} is None else v{0}", "m": "v{0}"}
    body = [f"    c[{name!r}].append({nulls[kind].format(i)})" for i, (name, kind) in enumerate(columns.items())]
    values = "".join(f"v{i}, " for i in range(len(columns)))
    source = "\n".join(["def _append(self, row):", "    c = self._cols or self._row_buffer()", f"    ({values}) = row",
                        *body, "    self._added()"])
    namespace: dict[str, Any] = {}
    exec(source, {"INT_NULL": INT_NULL, "NULL_FLOAT": NULL_FLOAT}, namespace)
    return cast(Callable[[Any, tuple[Any, ...]], None], namespace["_append"])


class ColumnBuffer:
    """Columnar buffer of rows (array('q') / array('d') / list per column) with bounded memory.

    ``COLUMNS`` maps column name -> kind ("i" int64, "d" float64, "m" metrics map). NULL is stored as a
    sentinel (``INT_NULL`` / the ``NULL_BITS`` NaN) and becomes NULL on write. When ``spill`` is
    given, every ``spill_rows`` rows are handed to it as a dict of columns and the buffer is cleared,
    so a 10-million-row log never sits in memory. Subclasses define a fast ``add``.
    """

    COLUMNS: ClassVar[dict[str, str]] = {}
    #: What indexing and iteration give for a row, called with the row's columns (None for NULL).
    ROW: ClassVar[Callable[..., Any]] = dict
    #: float column -> (low, high, low included): a value outside, NaN or infinite becomes NULL when the
    #: rows leave the buffer (spilled, or checked at the end of the parse) and is counted in ``nulled``
    #: (column -> (count, first such value, where it was: the ``POSITION`` column's value)), which
    #: ``bench.ingest.checks`` reports.
    CHECKED: ClassVar[dict[str, tuple[float, float, bool]]] = {}
    #: The int column that says where a row came from (a line number, a sample index), for ``nulled``.
    POSITION: ClassVar[str | None] = None
    _cols: dict[str, Any] | None

    def __init__(self, spill: Callable[[dict[str, Any]], None] | None = None, spill_rows: int = 500_000):
        self._spill = spill
        self._spill_rows = spill_rows
        self.total_rows = 0
        #: Rows not taken because an integer was beyond MAX_INT: (run_index, line_no, "step 123...").
        #: ``bench.ingest.checks`` reports them and marks their runs.
        self.refused: list[tuple[int | None, int | None, str]] = []
        self.nulled: dict[str, tuple[int, float, int | None]] = {}
        self._reset()

    def _fresh(self) -> dict[str, Any]:
        return {name: (array("q") if kind == "i" else array("d") if kind == "d" else [])
                for name, kind in self.COLUMNS.items()}

    def _row_buffer(self) -> dict[str, Any]:
        """The row buffer's columns, made on first use: most files fill only one of their two tables."""
        cols = self._cols
        if cols is None:
            cols = self._cols = self._fresh()
        return cols

    def _reset(self) -> None:
        self._cols = None  # the row buffer, made by _row_buffer() when first needed
        self._n = 0
        self._clean = 0  # rows already checked (check_values) and unchanged since
        # Blocks added whole (add_block), in order before the rows in ``_cols``: (rows, columns), where a
        # numeric column is any buffer of native 8-byte values.
        self._blocks: list[tuple[int, dict[str, Any]]] = []
        self._block_rows = 0

    def __len__(self) -> int:
        return self.total_rows

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        setattr(cls, "_append", _appender(cls.COLUMNS))  # noqa: B010 - a method made for this class

    def _append(self, row: tuple[Any, ...]) -> None:
        """Add one row: its values in ``COLUMNS`` order, None for NULL. The one row-at-a-time path of
        every table: a subclass's ``add`` names the columns and calls it, and each subclass gets its own
        copy made from its ``COLUMNS`` (``_appender``)."""
        raise NotImplementedError

    def _added(self) -> None:
        self._n += 1
        self.total_rows += 1
        if self._spill is not None and self._n >= self._spill_rows:
            self.flush()

    def _add_block(self, n: int, block: dict[str, Any]) -> None:
        """Append ``n`` rows given as whole columns, kept as they are until the buffer is taken."""
        if self._n > self._block_rows:  # rows added one at a time since the last block come first
            self._blocks.append((self._n - self._block_rows, self._row_buffer()))
            self._cols = None
        self._blocks.append((n, block))
        self._n += n
        self._block_rows = self._n
        self.total_rows += n
        if self._spill is not None and self._n >= self._spill_rows:
            self.flush()

    def add_block(self, run_index: Any, n: int, columns: dict[str, Any]) -> None:
        """``n`` rows of one run (or of the runs ``run_index`` gives row by row, an int64 array) at once:
        ``columns`` maps column names to buffers of n native int64 /
        float64 values with the NULL sentinels already in place (e.g. numpy arrays), a metrics column a
        ``MapBlock``; a column not given is NULL. The bulk path of the C step scanner; the same rows as ``n`` calls of
        :meth:`add`."""
        import numpy as np

        block: dict[str, Any] = {}
        for name, kind in self.COLUMNS.items():
            if kind == "m":
                block[name] = columns.get(name, Fill(n, None))  # a MapBlock (bench.ingest.map_columns)
                if len(block[name]) != n:
                    raise ValueError(f"column {name}: {len(block[name])} maps for {n} rows")
            elif name == "run_index":
                block[name] = Fill(n, run_index) if isinstance(run_index, int) else np.asarray(run_index, np.int64)
                if len(block[name]) != n:
                    raise ValueError(f"{len(block[name])} run indexes for {n} rows")
            elif name in columns:
                values = np.frombuffer(columns[name], np.int64 if kind == "i" else np.float64)
                if len(values) != n:
                    raise ValueError(f"column {name}: {len(values)} values for {n} rows")
                block[name] = values
            else:
                block[name] = Fill(n, INT_NULL if kind == "i" else NULL_FLOAT)
        self._add_block(n, block)

    def add_raw(self, n: int, columns: dict[str, Any], run_index: int = INT_NULL) -> None:
        """Append ``n`` rows to the row buffer, the same rows as ``n`` calls of ``add``: ``columns`` maps
        numeric column names to byte buffers (bytes, a memoryview of them, a uint8 numpy view) of n native
        int64 / float64 values with the NULL sentinels in place; every other column is ``run_index`` (for
        that column) or NULL. Copies the bytes, so the buffers may be reused. The bulk path of the C
        scanner's short step stretches and of its thermal rows, where ``add_block`` would cost a block per
        few rows."""
        kinds = self.COLUMNS
        for name, buf in columns.items():
            if kinds.get(name, "m") == "m" or len(buf) != 8 * n:
                raise ValueError(f"column {name}: not a numeric column of {n} rows")
        c = self._cols or self._row_buffer()
        null_i = null_d = None
        for name, kind in kinds.items():
            buf = columns.get(name)
            if buf is not None:
                c[name].frombytes(buf)
            elif kind == "m":
                c[name].extend([None] * n)
            elif name == "run_index":
                c[name].extend(array("q", (run_index,)) * n)
            elif kind == "i":
                c[name].extend(null_i if null_i is not None else (null_i := _NULL_Q * n))
            else:
                c[name].extend(null_d if null_d is not None else (null_d := _NULL_D * n))
        self._n += n
        self.total_rows += n
        if self._spill is not None and self._n >= self._spill_rows:
            self.flush()

    def _parts(self) -> list[dict[str, Any]]:
        """The buffered rows as a list of column dicts, in order: the blocks, then the row buffer."""
        parts = [*self._blocks, (self._n - self._block_rows, self._cols)]
        return [cols for n, cols in parts if n and cols is not None]

    def _merged(self) -> dict[str, Any]:
        """All buffered rows as one dict of columns: the row buffer itself when no block was added, else
        numpy arrays (each block copied once), a list of metrics, and a Fill for a column that is one
        value in every block."""
        if not self._blocks:
            return self._row_buffer()
        import numpy as np

        parts = self._parts()
        out: dict[str, Any] = {}
        for name, kind in self.COLUMNS.items():
            buffers = [cols[name] for cols in parts]
            if (fill := Fill.joined(buffers)) is not None:
                out[name] = fill
            elif kind == "m":
                blocks = any(isinstance(b, MapBlock) for b in buffers)
                out[name] = (MapBlock.joined(buffers) if blocks else None) or [m for b in buffers for m in b]
            else:
                out[name] = joined_values(buffers, np.int64 if kind == "i" else np.float64)
        return out

    def flush(self) -> None:
        """Hand buffered rows to the spill callback (if any), one call per block (blocks are not copied),
        and clear the buffer."""
        if self._spill is not None and self._n:
            checked = self._clean == self._n
            for cols in self._parts():
                self._spill(cols if checked else self._checked(cols))
            self._reset()

    def _checked(self, cols: dict[str, Any]) -> dict[str, Any]:
        """``cols`` with every value of a CHECKED column outside its range made NULL (copies, never writing
        into a buffer a parser or a view may share), counted in ``nulled``."""
        if not self.CHECKED:
            return cols
        import numpy as np

        out = cols
        for name, (low, high, closed) in self.CHECKED.items():
            col = cols[name]
            values = np.array([col.value]) if isinstance(col, Fill) else np.frombuffer(col, np.float64)
            with np.errstate(invalid="ignore"):
                above = values >= low if closed else values > low
                bad = ~(above & (values <= high) | null_mask(values))
            if not bad.any():
                continue
            first = int(np.argmax(bad))
            count, value, where = self.nulled.get(name, (0, float(values[first]), self._position(cols, first)))
            if isinstance(col, Fill):
                fixed: Any = Fill(col.n, NULL_FLOAT)
                count += col.n
            else:
                fixed = np.where(bad, NULL_FLOAT, values)
                count += int(bad.sum())
            self.nulled[name] = (count, value, where)
            out = {**out, name: fixed}
        return out

    def _position(self, cols: dict[str, Any], i: int) -> int | None:
        """Row ``i``'s ``POSITION`` value (None when there is none)."""
        if self.POSITION is None:
            return None
        col = cols[self.POSITION]
        value = col.value if isinstance(col, Fill) else memoryview(col).cast("B").cast("q")[i]
        return None if value == INT_NULL else int(value)

    def check_values(self) -> None:
        """Check the buffered rows' CHECKED columns now (the end of a parse), as a spill does."""
        if not self.CHECKED or not self._n:
            return
        n, cols = self._n, self._merged()
        checked = self._checked(cols)
        if checked is not cols:
            self._reset()
            self.total_rows -= n
            self._add_block(n, checked)
        self._clean = self._n

    def _consolidated(self) -> dict[str, Any]:
        """The buffered rows as one dict of columns, kept as the only block (so reading rows one by one
        does not merge the blocks again each time); the row buffer itself when no block was added."""
        if not self._blocks:
            return self._row_buffer()
        if len(self._blocks) > 1 or self._n > self._block_rows:
            merged = self._merged()
            self._blocks = [(self._n, merged)]
            self._block_rows = self._n
            self._cols = None
        return self._blocks[0][1]

    def columns(self) -> dict[str, Any]:
        """The buffered (unspilled) rows as columns (read-only when blocks were added), a Fill made into
        values (numpy), the metrics a list."""
        import numpy as np

        cols = self._consolidated()
        kinds = self.COLUMNS
        return {name: list(c) if kinds[name] == "m" and not isinstance(c, list) else
                joined_values([c], np.int64 if kinds[name] == "i" else np.float64) if isinstance(c, Fill) else c
                for name, c in cols.items()}

    def take(self) -> dict[str, Any]:
        """The buffered rows as columns, emptying the buffer (``total_rows`` keeps counting)."""
        cols = self._merged()
        if self._n:  # an empty buffer is handed out as is: nothing can be added to it through ``cols``
            self._reset()
        return cols

    def run_indices(self) -> set[int]:
        """The run indices of the buffered rows (a row of no run, NULL, left out)."""
        import numpy as np

        if not self._n:
            return set()
        index = self._consolidated()["run_index"]
        if isinstance(index, Fill):
            return set() if index.value == INT_NULL else {int(index.value)}
        values = np.unique(np.frombuffer(index, np.int64) if not isinstance(index, np.ndarray) else index)
        return {int(v) for v in values.tolist() if v != INT_NULL}

    def spilled(self) -> bool:
        """Whether rows were already handed to the spill callback (out of reach of this buffer)."""
        return self.total_rows != self._n

    def drop_runs(self, runs: set[int]) -> bool:
        """Remove the buffered rows of the runs ``runs`` (by run index); False, changing nothing, when rows
        were already spilled (they are out of reach)."""
        if self.total_rows != self._n:
            return False
        if not self._n or not runs:
            return True
        import numpy as np

        n, cols = self._n, self.take()
        index = cols["run_index"]
        index = np.full(n, index.value, np.int64) if isinstance(index, Fill) else np.frombuffer(index, np.int64)
        keep = ~np.isin(index, np.fromiter(runs, np.int64))
        kept = int(keep.sum())
        block: dict[str, Any] = {}
        for name, kind in self.COLUMNS.items():
            col = cols[name]
            if isinstance(col, Fill):
                block[name] = Fill(kept, col.value)
            elif kind == "m":
                block[name] = [m for m, k in zip(col, keep.tolist(), strict=True) if k]
            else:
                block[name] = np.frombuffer(col, np.int64 if kind == "i" else np.float64)[keep]
        self.total_rows -= n
        if kept:
            self._add_block(kept, block)
        return True

    def __getitem__(self, i: int) -> Any:
        n = self._n
        if not -n <= i < n:
            raise IndexError(i)
        return self.ROW(**self._row(i % n, self._consolidated()))

    def __iter__(self) -> Iterator[Any]:
        cols = self._consolidated()
        return (self.ROW(**self._row(i, cols)) for i in range(self._n))

    def rows(self) -> list[dict[str, Any]]:
        """Buffered rows as dicts with None for NULL (for tests and small files)."""
        cols = self._consolidated()
        return [self._row(i, cols) for i in range(self._n)]

    def _row(self, i: int, cols: dict[str, Any] | None = None) -> dict[str, Any]:
        row: dict[str, Any] = {}
        cols = self._row_buffer() if cols is None else cols
        for name, kind in self.COLUMNS.items():
            v = cols[name][i]
            v = v.item() if hasattr(v, "item") else v
            if kind == "i":
                row[name] = None if v == INT_NULL else v
            elif kind == "d":
                row[name] = None if _is_null_float(v) else v
            else:
                row[name] = v
        return row
