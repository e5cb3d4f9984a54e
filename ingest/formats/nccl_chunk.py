"""The C path's reading of nccl-tests (``nccl_tests._Parser.fast_rows``): which lines the line program reads
(``program``), a chunk's rows by kind (``Chunk``), and the runs a chunk holds whole, from one header to the
next, read at once from its columns (``whole_runs``): a 100 MB log of fleet tests holds some 18,000 runs of
50 lines, and a run's Python state, line by line, was most of its time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from bench.ingest.formats.line_scan import Program, Rows
from bench.ingest.formats.nccl_run import Closing, Table, Where, header_details, where_of
from bench.ingest.nulls import INT_NULL

#: The kinds of line the C path reads (``program``), in its order.
ROW_LINE, RANK_LINE, RANK_LINE_2019, BOUNDS_LINE, AVG_LINE, HEADER_LINE, HEADER_LINE_NO_ITERS, PLAIN_COMMENT = range(8)
#: A header line's figures, as the C path's columns and as ``State.header`` names them.
HEADER_COLUMNS = ("threads", "gpus_per_thread", "min_bytes", "max_bytes", "warmup_iters", "iters")
_TEST_WORDS = "Collective test "  # what the general path's _TEST searches for: a line without it is no test line


def program() -> Program:
    """The lines the C path reads, each exactly as the general path's regex does: a table row with its six
    figures (the last eight tokens: ``_row``), a rank line (``_RANK``, with and without ``Group``), the out of
    bounds and Avg bus bandwidth lines, a header line that starts with ``# nThread`` (as ``starts_run`` reads
    it), and a comment line that holds none of what ``_comment`` looks for."""
    p = Program().ws().digits("size").ws(least=1).digits(None).ws(least=1).word().last_tokens(8)
    for prefix in ("", "in_place_"):
        p.token(f"{prefix}time").ws(least=1).token(f"{prefix}algbw").ws(least=1).token(f"{prefix}busbw")
        p.ws(least=1).digits_or_null(f"{prefix}wrong").ws()
    p.count("Collective test starting", 0)  # (such a line would start a run: starts_run)
    for group in (True, False):
        p.otherwise().lit("#").ws(least=1).lit("Rank").ws(least=1).digits("rank")
        if group:
            p.ws(least=1).lit("Group").ws(least=1).digits(None)
        (p.ws(least=1).lit("Pid").ws(least=1).digits(None).ws(least=1).lit("on").ws(least=1).span("host")
         .ws(least=1).lit("device").ws(least=1).digits(None).ws(least=1).lit("[").past("]").ws(least=1)
         .rest("device").count(_TEST_WORDS, 0))
    p.otherwise().lit("#").ws().lit("Out of bounds values").ws().lit(":").ws().digits("out_of_bounds").count(_TEST_WORDS, 0)
    p.otherwise().lit("#").ws().lit("Avg bus bandwidth").ws().lit(":").ws().token("avg").count(_TEST_WORDS, 0)
    for iters in (True, False):  # a header as it starts a run (starts_run), with or without its iterations
        p.otherwise().lit("# nThread ").digits("threads").lit(" nGpus ").digits("gpus_per_thread")
        p.lit(" minBytes ").digits("min_bytes").lit(" maxBytes ").digits("max_bytes")
        if iters:  # _ITERS's search in the rest: its words there once, or the line is left to it
            p.find("warmup iters: ").digits("warmup_iters").lit(" iters: ").digits("iters")
        else:
            p.count("warmup iters: ", 0)
        p.count(_TEST_WORDS, 0)
    p.otherwise().lit("#")
    for word in ("nThread", _TEST_WORDS, "Rank", "Avg bus bandwidth", "Out of bounds values"):
        p.count(word, 0)
    return p


class Kind:
    """The rows of one kind of a chunk's rows: ``index`` (numpy, and ``at``, a list) their places in it."""

    def __init__(self, index: Any):
        self.index, self.at = index, index.tolist()

    def between(self, lo: int, hi: int) -> range:
        """Those of rows lo..hi, as places in ``at``."""
        return range(bisect_left(self.at, lo), bisect_left(self.at, hi))


class Chunk:
    """A chunk's rows (line_scan.Rows) by kind: each kind's places and figures, the table rows' as numpy arrays,
    the others' as lists."""

    def __init__(self, rows: Rows):
        import numpy as np

        self.rows, col, kind = rows, rows.col, rows.kind
        self.nos = rows.no.tolist()
        self.table = t = Kind(np.flatnonzero(kind == ROW_LINE))
        self.size, self.busbw = col["size"][t.index], col["busbw"][t.index]
        self.in_place_busbw = col["in_place_busbw"][t.index]
        #: whole_runs's peak needs busbw without NaN (the C path reads no "nan" now, but a NULL would be one)
        self.finite = bool(np.isfinite(self.busbw).all())
        wrong = np.stack([col["wrong"][t.index], col["in_place_wrong"][t.index]])
        self.wrong = np.where(wrong == INT_NULL, 0, wrong).sum(axis=0)  # two values < 10^18 each
        self.rank = r = Kind(np.flatnonzero((kind == RANK_LINE) | (kind == RANK_LINE_2019)))
        self.rank_of = col["rank"][r.index].tolist()
        self.where = rows.pairs_of("host", "device", r.index)
        self.bounds = b = Kind(np.flatnonzero(kind == BOUNDS_LINE))
        self.bounds_value = col["out_of_bounds"][b.index].tolist()
        self.avg = a = Kind(np.flatnonzero(kind == AVG_LINE))
        avg = col["avg"][a.index]
        self.avg_value = avg.tolist()
        with np.errstate(invalid="ignore"):
            self.avg_good = (np.isfinite(avg) & (avg > 0)).tolist()
        self.header = h = Kind(np.flatnonzero((kind == HEADER_LINE) | (kind == HEADER_LINE_NO_ITERS)))
        self.header_values = list(zip(*(col[name][h.index].tolist() for name in HEADER_COLUMNS), strict=True))

    def dtype(self, table_row: int) -> str:
        """The type column of table row ``table_row`` (a place in ``table.at``)."""
        return self.rows.text(self.table.at[table_row]).split()[2]

    def header_of(self, k: int) -> dict[str, int]:
        """Header ``k``'s figures as ``State.header`` holds them (the iterations where the line gives them)."""
        *figures, warmup, iters = self.header_values[k]
        header = dict(zip(HEADER_COLUMNS[:4], figures, strict=True))
        if iters != INT_NULL:
            header.update(warmup_iters=warmup, iters=iters)
        return header


#: What ``whole_runs`` gives of a run: what its other lines said, its table and where, its details so far (a
#: dict of its own), and its table rows (the first's place in ``table.at``, how many).
Whole = tuple[Closing, "Table | None", Where, dict[str, str], int, int]


def whole_runs(c: Chunk, k0: int, k1: int, collective: str | None, where_seen: dict[Any, Where]) -> Iterator[Whole]:
    """The runs that open at headers k0..k1 - 1 of the chunk, each closed by the next header, read from the
    chunk's columns as ``_run_rows`` and ``emit`` would read them row by row: the last table row, the wrong
    values' sum, the first row of the highest busbw, the last out-of-bounds and Avg bus bandwidth lines, the
    rank lines as one dict (``where_seen`` keeps each listing's ``Where``: a fleet's runs repeat their hosts;
    the headers and types are read once per distinct line too)."""
    import numpy as np

    heads = c.header.index[k0:k1 + 1]
    lo, hi = heads[:-1] + 1, heads[1:]  # each run's rows
    t = c.table.index
    first, end = np.searchsorted(t, lo), np.searchsorted(t, hi)
    n = end - first
    wrong = np.concatenate([[0], np.cumsum(c.wrong)])
    wrong_sum = (wrong[end] - wrong[first]).tolist()
    last = np.maximum(end - 1, 0)
    peak = last.copy()
    if (full := np.flatnonzero(n > 0)).size:  # the table rows of runs with some are one stretch, run after run
        a, b = first[full[0]], end[full[-1]]
        busbw, starts = c.busbw[a:b], first[full] - a
        top = busbw == np.repeat(np.maximum.reduceat(busbw, starts), n[full])  # (no NaN: Chunk.finite)
        places = np.flatnonzero(top)
        peak[full] = a + places[np.minimum(np.searchsorted(places, starts), len(places) - 1)]

    def of(column: Any, at: Any) -> list[Any]:  # (a run without table rows takes none)
        return column[at].tolist() if len(t) else [None] * len(at)

    lasts = zip(of(c.size, last), of(c.busbw, last), of(c.in_place_busbw, last), strict=True)
    peaks = zip(of(c.busbw, peak), of(c.size, peak), strict=True)
    spans = c.rows.spans[t[first]].tolist() if len(t) else [None] * len(first)  # the first table row's line
    bounds, avg = _last_of(c.bounds, lo, hi), _last_of(c.avg, lo, hi)
    ranks = zip(np.searchsorted(c.rank.index, lo).tolist(), np.searchsorted(c.rank.index, hi).tolist(), strict=True)
    nos, rank_of, where, data = c.nos, c.rank_of, c.where, c.rows.data
    heads_seen: dict[tuple[int, ...], tuple[dict[str, int], dict[str, str]]] = {}
    types: dict[bytes, str] = {}
    for k, a, b, f, count, w, (size, bw, in_place), pk, span, bd, av, (r0, r1) in zip(
            range(k0, k1), lo.tolist(), hi.tolist(), first.tolist(), n.tolist(), wrong_sum, lasts, peaks, spans,
            bounds, avg, ranks, strict=True):
        if (head := heads_seen.get(values := c.header_values[k])) is None:
            header = c.header_of(k)
            head = heads_seen[values] = header, header_details(header)
        dtype = None
        if count:
            token = data[span[0]:span[1]].split(None, 3)[2]
            if (dtype := types.get(token)) is None:
                dtype = types[token] = token.decode("ascii")
        closing = Closing(nos[a - 1], nos[b - 1] if b > a else 0, collective, dtype, head[0],
                          c.avg_value[av] if av >= 0 else None, w, c.bounds_value[bd] if bd >= 0 else 0, av >= 0)
        key = (tuple(rank_of[r0:r1]), tuple(where[r0:r1]))
        if (place := where_seen.get(key)) is None:
            if len(where_seen) > 1000:
                where_seen.clear()
            place = where_seen[key] = where_of(dict(zip(key[0], key[1], strict=True)))
        yield closing, (size, bw, in_place, pk) if count else None, place, dict(head[1]), f, count


def _last_of(kind: Kind, lo: Any, hi: Any) -> list[int]:
    """For each stretch of rows lo..hi, the place in ``kind.at`` of its last row of that kind, or -1."""
    import numpy as np

    last = np.searchsorted(kind.index, hi) - 1
    inside = last >= 0
    inside[inside] = kind.index[last[inside]] >= lo[inside]
    return np.where(inside, last, -1).tolist()
