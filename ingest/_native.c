/* bench.ingest._native: the ingest's optional C hot paths, one function each (module docstring and
 * methods[] at the end list them). Without a C compiler it is not built, and each caller's pure-Python
 * path gives the same bytes (tests/ingest/test_tf_cnn_scan.py, test_telemetry.py, test_tarstream.py):
 *
 *   scan        tf_cnn log lines: step lines to columns, the others to the Python reader (below)
 *   advance     tf_cnn step stretches: interval rates and sums, as _Series.advance computes them
 *   thermal     a whole Lambda thermal file to telemetry columns
 *   tar_header  one 512-byte tar header
 *   contains    substring search for the format sniffers
 *   marked_lines  the lines of a file that hold one of a format's markers (MLPerf logs)
 *   fields      a line format's step lines to columns, by a small line program (fields() below)
 *
 * scan() in detail:
 *
 * scan(buf, lines_before, null_bits, labels, rare) reads the lines of ``buf`` (split on LF, one CR before it dropped, exactly as
 * bench.ingest.text.split_lines does) and sorts them into these kinds:
 *
 *   - step lines that match a strict subset of tf_cnn.py's _STEP regex, optionally behind an Open MPI
 *     ``[j,r]<stdout>:``, Gloo ``[r]<stdout>:`` or Slurm ``" r: "`` prefix: their numbers go to columns;
 *   - TF stderr lines (``2020-09-05 18:47:50.1: I ...``): the parser only keeps the first and the last
 *     stamp of a consecutive run of them, so only those two are returned, and the lines inside it with an
 *     OOM / ResourceExhausted / GPU name marker; a line that only names a GPU does not end the run;
 *   - lines the Python reader ignores in every state (see quiet()), dropped; so are GPU-name lines
 *     once a line returned before them certainly gave the reader its GPU (see names_gpu()), since it
 *     only looks for one while it has none;
 *   - every other non-empty line, returned as (line_no, str) for the Python state machine.
 *
 * A line the scanner is not sure about is always an "other" line, so the Python parser sees it and
 * decides exactly as before; the scanner only takes lines whose every field it reads the way Python's
 * regex + float() would (decimals are converted with the exact Clinger fast path, else with CPython's own
 * PyOS_string_to_double). tests/ingest/test_tf_cnn_scan.py checks this against the pure-Python parser.
 *
 * The lines are read without the GIL (taken back only to grow the columns and for CPython's own float
 * conversion), so the threads that encode Parquet parts meanwhile are not held up by the scan, nor the
 * scan by them: on the 1 GB benchmark log the ingest took 1.64 s instead of 1.83 s (median of 4).
 *
 * Line numbers are 1-based and continue from lines_before (the lines of earlier chunks).
 * Returns (n_lines, columns, others, all_ascii): columns is a tuple of 10 bytes objects of native 8-byte values,
 * one per step line: line_no, rank, step (int64; NULL rank = INT64_MIN), mean, stderr, jitter, loss,
 * top1, top5, timestamp (float64; NULL = the NaN with payload ``null_bits``). all_ascii is False when
 * the buffer holds a byte >= 0x80 (the caller then checks it for invalid UTF-8).
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

enum { C_LINE, C_RANK, C_STEP, C_MEAN, C_STDERR, C_JITTER, C_LOSS, C_TOP1, C_TOP5, C_TS, NCOL };

typedef struct {
    PyObject *col[NCOL]; /* the columns: bytes objects written in place, shrunk to n values at the end */
    uint64_t *at[NCOL];  /* their values (PyBytes_AS_STRING), kept here for the write of every row */
    Py_ssize_t n, cap;   /* rows written, rows allocated (the same for every column) */
    Py_ssize_t hint;     /* rows to allocate first: one per 64 bytes of input (a step line is longer) */
    uint64_t null_bits;
    PyObject *others;
    PyObject *labels; /* tuple of bytes: the header labels tf_cnn.py dispatches on (its _LABELS) */
    PyObject *rare;   /* tuple of bytes: the prefixes of its rare lines (its _RARE) */
    int gpu_known;    /* a line returned earlier in this buffer certainly gave the reader its GPU name */
    /* The scan runs without the GIL: ``ts`` is this thread's state while it is released (NULL while it is
     * held), and the lines to return are noted as (line number, start, length) in ``ev``, a PyMem_Raw
     * array, and made into Python objects once the GIL is back. */
    PyThreadState *ts;
    Py_ssize_t (*ev)[3];
    Py_ssize_t n_ev, cap_ev;
    const char *base;
} Out;

/* Take the GIL back for a call into Python, and release it again after. */
static void gil_on(Out *o) {
    if (o->ts != NULL) {
        PyEval_RestoreThread(o->ts);
        o->ts = NULL;
    }
}

static void gil_off(Out *o) {
    if (o->ts == NULL)
        o->ts = PyEval_SaveThread();
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_ws(char c) { return c == ' ' || c == '\t'; }

/* Room for one more row in every column (grown together, doubling; with the GIL). 0, or -1 with an
 * error set (and the GIL held). */
static int room(Out *o) {
    if (o->n < o->cap)
        return 0;
    int released = o->ts != NULL;
    gil_on(o);
    Py_ssize_t cap = o->cap ? o->cap * 2 : o->hint;
    for (int i = 0; i < NCOL; i++) {
        if (o->col[i] == NULL)
            o->col[i] = PyBytes_FromStringAndSize(NULL, cap * (Py_ssize_t)sizeof(uint64_t));
        else
            _PyBytes_Resize(&o->col[i], cap * (Py_ssize_t)sizeof(uint64_t));
        if (o->col[i] == NULL)
            return -1;
        o->at[i] = (uint64_t *)PyBytes_AS_STRING(o->col[i]);
    }
    o->cap = cap;
    if (released)
        gil_off(o);
    return 0;
}

static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* CPython's own conversion of the text [s, e): bit-identical to float(text). -1 with an error set. */
static int slow_double(const char *s, const char *e, double *out) {
    char tmp[64];
    size_t n = (size_t)(e - s);
    if (n >= sizeof tmp)
        return 1; /* not a number we take: the line goes to Python */
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end = NULL;
    PyGILState_STATE gil = PyGILState_Ensure(); /* scan() runs without the GIL; this is the rare path */
    double d = PyOS_string_to_double(tmp, &end, NULL);
    int failed = d == -1.0 && PyErr_Occurred();
    if (failed)
        PyErr_Clear();
    PyGILState_Release(gil);
    if (failed)
        return 1;
    if (end != tmp + n)
        return 1;
    *out = d;
    return 0;
}

/* The unsigned decimal \d+(\.\d*)? that starts at p (not necessarily the whole rest), read in one pass:
 * its end, or NULL when p holds no digit or the value is not convertible here. *frac_digits tells how many
 * digits follow the point (-1: no point). Values are exactly float()'s: Clinger's fast path when the digits
 * fit (m and 10^frac are exact doubles, so one IEEE division rounds correctly), else CPython's own. */
static inline const char *number(const char *p, const char *e, double *out, int *frac_digits) {
    const char *s = p;
    uint64_t m = 0;
    int nd = 0, frac = -1;
    for (; p < e && is_digit(*p); p++, nd++)
        m = nd < 19 ? m * 10 + (uint64_t)(*p - '0') : m;
    if (nd == 0)
        return NULL;
    if (p < e && *p == '.') {
        frac = 0;
        for (p++; p < e && is_digit(*p); p++, nd++, frac++)
            m = nd < 19 ? m * 10 + (uint64_t)(*p - '0') : m;
    }
    *frac_digits = frac;
    if (nd <= 19 && m <= (1ULL << 53) && frac <= 22) {
        *out = frac > 0 ? (double)m / POW10[frac] : (double)m;
        return p;
    }
    return slow_double(s, p, out) == 0 ? p : NULL;
}

/* An unsigned decimal that is the whole of [s, e): \d+(\.\d*)? when frac_optional, \d+\.\d+ otherwise.
 * 0 = ok, 1 = not that shape (or not convertible here). */
static int decimal(const char *s, const char *e, int frac_optional, double *out) {
    int frac;
    const char *p = number(s, e, out, &frac);
    return p == e && (frac_optional || frac > 0) ? 0 : 1;
}

/* \d+(\.\d*)? or "nan" at p (not necessarily the whole rest): its end, or NULL. */
static const char *stat_value(const char *p, const char *e, double *out) {
    if (e - p >= 3 && memcmp(p, "nan", 3) == 0)
        return slow_double(p, p + 3, out) == 0 ? p + 3 : NULL;
    int frac;
    return number(p, e, out, &frac);
}

/* One whitespace-free token of a step line's tail, read once: whether it is an _F token of tf_cnn.py
 * ([-+]?(?:\d+\.\d+|nan|inf)) and whether it is a stamp (\d{9,11}), with its value. Returns its end. */
typedef struct {
    double v;
    int f_ok, ts_ok;
} Tok;

static const char *tail_token(const char *s, const char *e, Tok *t) {
    const char *p = s, *end;
    int neg = 0, frac = -1;
    t->f_ok = t->ts_ok = 0;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    const char *q = p < e && is_digit(*p) ? number(p, e, &t->v, &frac) : NULL;
    for (end = q ? q : p; end < e && !is_ws(*end); end++)
        ;
    if (q == NULL) {
        if (end - p == 3 && (memcmp(p, "nan", 3) == 0 || memcmp(p, "inf", 3) == 0))
            t->f_ok = slow_double(s, end, &t->v) == 0;
        return end;
    }
    if (q != end)
        return end;
    if (frac > 0 && is_digit(p[0])) {
        t->f_ok = 1;
        if (neg)
            t->v = -t->v;
    } else if (frac < 0 && p == s && end - s >= 9 && end - s <= 11) {
        t->ts_ok = 1;
    }
    return end;
}

static const char *digits(const char *p, const char *e, int max, long long *out) {
    long long v = 0;
    int n = 0;
    while (p < e && is_digit(*p)) {
        if (++n > max)
            return NULL;
        v = v * 10 + (*p++ - '0');
    }
    if (n == 0)
        return NULL;
    *out = v;
    return p;
}

static int has(const char *s, Py_ssize_t n, const char *needle) {
    return memmem(s, (size_t)n, needle, strlen(needle)) != NULL;
}

/* Marker sets, each searched for in one pass over a line (a byte that starts no marker costs one table
 * lookup) instead of one memmem per marker. */
typedef struct {
    const char *text;
    size_t n;
} Mark;

#define MARK(t) {t, sizeof t - 1}
/* TensorFlow's line when it compiled with XLA (tf_cnn.XLA_MARK) */
#define XLA_MARK "Compiled cluster using XLA"
/* a TF C++ stderr line that the Python reader must see */
static const Mark STDERR_MARKS[] = {MARK("OOM"), MARK("ResourceExhausted"), MARK("name: "), MARK("device ("),
                                    MARK("OP_REQUIRES failed"), MARK(XLA_MARK), {NULL, 0}};
/* a line that is not inert (a GPU name, "name: ", is looked for apart: see quiet()) */
static const Mark INERT_MARKS[] = {MARK("/sec"), MARK("rror"),   MARK("xception"), MARK("OOM"),
                                   MARK("Traceback ("), MARK(" --"), {NULL, 0}};

typedef struct {
    const Mark *marks;
    unsigned char first[256]; /* 1: a marker starts with this byte; 2: the byte alone is a hit */
} MarkSet;

static MarkSet STDERR_SET, INERT_SET;

static void mark_set_init(MarkSet *m, const Mark *marks, int stop_non_ascii_and_cr) {
    memset(m->first, 0, sizeof m->first);
    m->marks = marks;
    for (const Mark *k = marks; k->text; k++)
        m->first[(unsigned char)k->text[0]] = 1;
    if (stop_non_ascii_and_cr) {
        for (int c = 0x80; c < 256; c++)
            m->first[c] = 2;
        m->first['\r'] = 2;
    }
}

/* Whether [s, s + n) holds a marker of the set (or one of its hit bytes). */
static int any_mark(const MarkSet *m, const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (m->first[c] == 0)
            continue;
        if (m->first[c] == 2)
            return 1;
        for (const Mark *k = m->marks; k->text; k++)
            if ((unsigned char)k->text[0] == c && (size_t)(n - i) >= k->n && s[i + 1] == k->text[1] &&
                memcmp(s + i + 2, k->text + 2, k->n - 2) == 0) /* every marker is 3+ bytes long */
                return 1;
    }
    return 0;
}

/* The rank prefix, as text.split_rank reads it (only the forms the Python dispatcher would strip).
 * Returns the body start, sets *rank (-1 = none); NULL when the line must go to Python. */
static const char *strip_rank(const char *s, const char *e, long long *rank) {
    *rank = -1;
    if (*s == '[') {
        long long a, b;
        const char *p = digits(s + 1, e, 9, &a);
        if (p == NULL)
            return NULL;
        if (p < e && *p == ',') {
            p = digits(p + 1, e, 9, &b);
            if (p == NULL)
                return NULL;
            a = b;
        }
        if (e - p >= 10 && (memcmp(p, "]<stdout>:", 10) == 0 || memcmp(p, "]<stderr>:", 10) == 0)) {
            *rank = a;
            return p + 10;
        }
        return NULL;
    }
    int slurm = *s == ' ';
    if (is_digit(*s)) /* the dispatcher splits a digit-led line only with ": " inside its first 8 chars */
        for (const char *p = s + 1; p + 1 < e && p + 2 <= s + 8; p++)
            if (p[0] == ':' && p[1] == ' ')
                slurm = 1;
    if (!slurm)
        return s;
    const char *p = s;
    while (p < e && *p == ' ')
        p++;
    long long r;
    const char *q = digits(p, e, 5, &r);
    if (q == NULL || e - q < 2 || q[0] != ':' || q[1] != ' ')
        return NULL;
    *rank = r;
    return q + 2;
}

/* The trailing tokens: (loss (top1 (top5)?)?)? (stamp)? as the regex reads them. */
static int tail_tokens(const char *p, const char *e, double v[4], uint64_t nullb) {
    Tok tok[5];
    int n = 0;
    if (p < e && !is_ws(*p))
        return 1;
    while (p < e) {
        while (p < e && is_ws(*p))
            p++;
        if (p == e)
            break;
        if (n == 5)
            return 1;
        p = tail_token(p, e, &tok[n++]);
    }
    double nul;
    memcpy(&nul, &nullb, sizeof nul);
    for (int i = 0; i < 4; i++)
        v[i] = nul;
    if (n > 0 && tok[n - 1].ts_ok)
        v[3] = tok[--n].v;
    for (int i = 0; i < n; i++)
        if (!tok[i].f_ok)
            return 1;
    if (n == 1) {
        v[0] = tok[0].v;
    } else if (n == 2) { /* by position, as the regex: the loss, then top-1 (a field never shifts) */
        v[0] = tok[0].v;
        v[1] = tok[1].v;
    } else if (n == 3) {
        v[0] = tok[0].v;
        v[1] = tok[1].v;
        v[2] = tok[2].v;
    } else if (n != 0) {
        return 1;
    }
    return 0;
}

/* A step line body ``<step>\s+images/sec: <mean>[ +/- <se> (jitter = <j>)][tokens]``: 0 = taken. */
static int step_body(const char *p, const char *e, long long rank, Py_ssize_t no, Out *o) {
    long long step;
    double mean, se, jit, t[4], nul;
    memcpy(&nul, &o->null_bits, sizeof nul);
    p = digits(p, e, 18, &step);
    if (p == NULL || p == e || !is_ws(*p))
        return 1;
    while (p < e && is_ws(*p))
        p++;
    if (e - p < 12 || memcmp(p, "images/sec: ", 12) != 0)
        return 1;
    p += 12;
    int frac;
    p = number(p, e, &mean, &frac);
    if (p == NULL)
        return 1;
    se = jit = nul;
    if (e - p >= 5 && memcmp(p, " +/- ", 5) == 0) {
        p = stat_value(p + 5, e, &se);
        if (p == NULL || e - p < 11 || memcmp(p, " (jitter = ", 11) != 0)
            return 1;
        p = stat_value(p + 11, e, &jit);
        if (p == NULL || p == e || *p != ')')
            return 1;
        p++;
    }
    if (tail_tokens(p, e, t, o->null_bits) != 0)
        return 1;
    uint64_t row[NCOL] = {(uint64_t)no, rank < 0 ? (uint64_t)INT64_MIN : (uint64_t)rank, (uint64_t)step,
                          dbits(mean), dbits(se), dbits(jit), dbits(t[0]), dbits(t[1]), dbits(t[2]), dbits(t[3])};
    if (room(o) != 0)
        return -1;
    for (int i = 0; i < NCOL; i++)
        memcpy(o->at[i] + o->n, &row[i], sizeof row[i]);
    o->n++;
    return 0;
}

/* Note a line to return (made into (line_no, str) by returned_lines() once the GIL is back). 0, or -1
 * when out of memory (the GIL taken back and the error set). */
static int emit(Out *o, Py_ssize_t no, const char *s, Py_ssize_t n) {
    if (o->n_ev == o->cap_ev) {
        Py_ssize_t cap = o->cap_ev ? o->cap_ev * 2 : 256;
        void *ev = PyMem_RawRealloc(o->ev, (size_t)cap * sizeof *o->ev);
        if (ev == NULL) {
            gil_on(o);
            PyErr_NoMemory();
            return -1;
        }
        o->ev = ev;
        o->cap_ev = cap;
    }
    o->ev[o->n_ev][0] = no;
    o->ev[o->n_ev][1] = s - o->base;
    o->ev[o->n_ev][2] = n;
    o->n_ev++;
    return 0;
}

/* The noted lines as a list of (line_no, str), invalid UTF-8 replaced (with the GIL). */
static PyObject *returned_lines(const Out *o) {
    PyObject *list = PyList_New(o->n_ev);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < o->n_ev; i++) {
        PyObject *text = PyUnicode_DecodeUTF8(o->base + o->ev[i][1], o->ev[i][2], "replace");
        PyObject *item = text == NULL ? NULL : Py_BuildValue("(nN)", o->ev[i][0], text);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static int in_tuple(PyObject *t, const char *s, Py_ssize_t n, int prefix) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *b = PyTuple_GET_ITEM(t, i);
        Py_ssize_t m = PyBytes_GET_SIZE(b);
        if ((prefix ? m <= n : m == n) && memcmp(PyBytes_AS_STRING(b), s, (size_t)m) == 0)
            return 1;
    }
    return 0;
}

enum { LOUD, INERT, GPU_ONLY };

/* What tf_cnn.py's _Reader.line() does with a line, whatever its state: INERT, nothing (no rank prefix,
 * no rate, no header label, no rare line, no error, GPU name, flag or absl stamp); GPU_ONLY, nothing but
 * look for a GPU name in it; LOUD, anything else. Conservative: ASCII only, and any doubt means LOUD. */
static int quiet(const Out *o, const char *s, Py_ssize_t n) {
    char c = s[0];
    if (c == '[' || c == ' ' || is_digit(c))
        return LOUD;
    if (n > 3 && s[3] == ' ' && has(s, n < 40 ? n : 40, "]<std"))
        return LOUD;
    if (any_mark(&INERT_SET, s, n)) /* a marker, a non-ASCII byte or a CR */
        return LOUD;
    if (c >= 'A' && c <= 'Z') {
        const char *colon = memchr(s + 1, ':', (size_t)(n - 1 < 16 ? n - 1 : 16));
        if (colon != NULL && in_tuple(o->labels, s, colon - s, 0))
            return LOUD;
        if (in_tuple(o->rare, s, n, 1))
            return LOUD;
    }
    if (n >= 12 && memcmp(s + 1, "0000 00:00:", 11) == 0)
        return LOUD;
    return has(s, n, "name: ") ? GPU_ONLY : INERT;
}

/* Whether tf_cnn.py's _GPU regex certainly finds a GPU name in the line: its third form, ``name: (.+?)
 * (?:major: \d|computeCapability: )``, after the first "name: ". (False means "maybe not".) */
static int names_gpu(const char *s, Py_ssize_t n) {
    const char *name = memmem(s, (size_t)n, "name: ", 6);
    if (name == NULL)
        return 0;
    const char *from = name + 7, *e = s + n; /* .+? takes one character at least */
    for (const char *q = from; q < e && (q = memchr(q, ' ', (size_t)(e - q))) != NULL; q++) {
        if (e - q >= 9 && memcmp(q, " major: ", 8) == 0 && is_digit(q[8]))
            return 1;
        if (e - q >= 20 && memcmp(q, " computeCapability: ", 20) == 0)
            return 1;
    }
    return 0;
}

static int has_oom(const char *s, Py_ssize_t n) { return has(s, n, "OOM") || has(s, n, "ResourceExhausted"); }

/* A stretch of consecutive stamped TF stderr lines: the reader keeps only its first and its last stamp.
 * Lines inside it that the reader must see anyway (a stamped line with a marker, a line that only names
 * the GPU) are returned where they are without ending it, after its first line, so the reader's stamps
 * come out the same; ``*_out`` notes a boundary line already returned that way. */
typedef struct {
    Py_ssize_t count, first_no, last_no;
    const char *first, *last;
    Py_ssize_t first_n, last_n;
    int first_out, last_out;
} Run;

/* Before a line returned from inside the stretch: return the stretch's first line (once), and with
 * ``latest`` its latest line too, so that every line comes back in file order and the reader's stamps
 * are those it would have read line by line. (A stamped line returned from inside the stretch becomes
 * its latest line itself.) */
static int catch_up(Out *o, Run *r, int latest) {
    if (r->count > 0 && !r->first_out) {
        r->first_out = 1;
        if (emit(o, r->first_no, r->first, r->first_n) != 0)
            return -1;
    }
    if (latest && r->count > 1 && !r->last_out) {
        r->last_out = 1;
        return emit(o, r->last_no, r->last, r->last_n);
    }
    return 0;
}

static int flush_run(Out *o, Run *r) {
    if (r->count == 0)
        return 0;
    if (catch_up(o, r, 1) != 0)
        return -1;
    r->count = 0;
    return 0;
}

/* One non-empty line: 0 = handled, -1 = error set. */
static int one_line(Out *o, Run *run, const char *s, Py_ssize_t n, Py_ssize_t no) {
    const char *e = s + n;
    if (s[0] == '2' && n > 4 && s[4] == '-') { /* TF C++ stderr: boring unless it carries a marker */
        int marked = any_mark(&STDERR_SET, s, n), oom = marked && has_oom(s, n);
        int xla = marked && !oom && has(s, n, XLA_MARK);
        if (marked && !oom && !xla && o->gpu_known) /* only a GPU marker, and the reader has its GPU: a plain line */
            marked = 0;
        if (marked && !oom && names_gpu(s, n)) /* stderr_line() looks for the GPU here, and finds it */
            o->gpu_known = 1;
        if (marked && catch_up(o, run, 0) != 0)
            return -1;
        if (run->count == 0) {
            run->first = s, run->first_n = n, run->first_no = no;
            run->first_out = marked;
        }
        run->last = s, run->last_n = n, run->last_no = no;
        run->last_out = marked;
        run->count++;
        return marked ? emit(o, no, s, n) : 0;
    }
    int kind = quiet(o, s, n);
    if (kind == INERT)
        return 0;
    if (kind == GPU_ONLY) {
        if (o->gpu_known)
            return 0;
        o->gpu_known = names_gpu(s, n);
        if (catch_up(o, run, 1) != 0)
            return -1;
        return emit(o, no, s, n);
    }
    if (flush_run(o, run) != 0)
        return -1;
    long long rank;
    const char *body = strip_rank(s, e, &rank);
    int rc = 1;
    if (body != NULL && body < e && is_digit(*body) && !(body[0] == '2' && e - body > 4 && body[4] == '-'))
        rc = step_body(body, e, rank, no, o);
    if (rc == 1)
        return emit(o, no, s, n);
    return rc;
}

/* Whether every byte of [s, s + n) is ASCII (then the block needs no UTF-8 check): 32 bytes a step, in
 * four independent words (the compiler keeps them in one vector register), stopping at the first 4 KiB
 * that holds a byte >= 0x80. */
static int all_ascii(const char *s, Py_ssize_t n) {
    uint64_t acc = 0, w[4];
    Py_ssize_t i = 0;
    while (i + 32 <= n) {
        Py_ssize_t stop = i + 4096 < n ? i + 4096 : n;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (; i + 32 <= stop; i += 32) {
            memcpy(w, s + i, sizeof w);
            a |= w[0], b |= w[1], c |= w[2], d |= w[3];
        }
        acc |= a | b | c | d;
        if (acc & 0x8080808080808080ULL)
            return 0;
    }
    for (; i < n; i++)
        acc |= (unsigned char)s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t no0;
    unsigned long long null_bits;
    PyObject *labels, *rare;
    if (!PyArg_ParseTuple(args, "y*nKO!O!", &buf, &no0, &null_bits, &PyTuple_Type, &labels, &PyTuple_Type, &rare))
        return NULL;
    Out o;
    memset(&o, 0, sizeof o);
    o.null_bits = null_bits;
    o.hint = buf.len / 64 + 64;
    o.labels = labels;
    o.rare = rare;
    for (int k = 0; k < 2; k++) {
        PyObject *t = k ? rare : labels;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(t, i))) {
                PyBuffer_Release(&buf);
                PyErr_SetString(PyExc_TypeError, "labels and rare prefixes must be bytes");
                return NULL;
            }
    }
    Run run = {0};
    PyObject *result = NULL, *cols = NULL;
    const char *data = buf.buf, *end = data + buf.len, *p = data;
    Py_ssize_t no = no0;
    o.base = data;
    if (room(&o) != 0) /* the first hint's worth of rows, with the GIL */
        goto done;
    gil_off(&o); /* the lines are read without the GIL: other threads run Python meanwhile */
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        Py_ssize_t n = le - p;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        no++;
        if (n > 0 && one_line(&o, &run, p, n, no) != 0)
            goto done;
        p = nl ? nl + 1 : end;
    }
    if (flush_run(&o, &run) != 0)
        goto done;
    int ascii = all_ascii(data, buf.len);
    gil_on(&o);
    o.others = returned_lines(&o);
    if (o.others == NULL)
        goto done;
    cols = PyTuple_New(NCOL);
    if (cols == NULL)
        goto done;
    for (int i = 0; i < NCOL; i++) {
        if (o.col[i] == NULL)
            o.col[i] = PyBytes_FromStringAndSize(NULL, 0);
        else if (o.n < o.cap)
            _PyBytes_Resize(&o.col[i], o.n * (Py_ssize_t)sizeof(uint64_t));
        if (o.col[i] == NULL)
            goto done;
        PyTuple_SET_ITEM(cols, i, o.col[i]); /* the tuple takes the reference */
        o.col[i] = NULL;
    }
    result = Py_BuildValue("(nOOO)", no - no0, cols, o.others, ascii ? Py_True : Py_False);
done:
    gil_on(&o);
    PyMem_RawFree(o.ev);
    Py_XDECREF(cols);
    Py_XDECREF(o.others);
    for (int i = 0; i < NCOL; i++)
        Py_XDECREF(o.col[i]);
    PyBuffer_Release(&buf);
    return result;
}


/* advance(steps, means, losses, stamps, lo, hi, last_step, last_t, interval_sum, interval_n, null_bits)
 *   -> (rates, last_step, last_t, interval_sum, interval_n, nan_losses, first_stamp, last_stamp)
 *
 * Rows lo..hi of scanned step columns (native int64 / float64 bytes) for one rank's series, as
 * tf_cnn._Series.advance does them one by one, in the same double operations and order: t = step / mean
 * (inf unless mean > 0), the interval rate (step - last_step) / (t - last_t) where 0 < dt < inf, else NULL,
 * summed in order. Also the printed nan losses (NaN, not the NULL payload) and the first and last stamp
 * that is not NULL (None if none). rates is float64 bytes with NULL as the ``null_bits`` NaN. */
static PyObject *advance(PyObject *self, PyObject *args) {
    Py_buffer st, mn, ls, ts;
    Py_ssize_t lo, hi, n_int;
    long long last_step;
    double last_t, sum;
    unsigned long long null_bits;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nnLddnK", &st, &mn, &ls, &ts, &lo, &hi, &last_step, &last_t, &sum, &n_int,
                          &null_bits))
        return NULL;
    PyObject *rates = NULL, *result = NULL;
    Py_ssize_t rows = st.len / 8;
    if (lo < 0 || hi < lo || hi > rows || mn.len / 8 < hi || ls.len / 8 < hi || ts.len / 8 < hi) {
        PyErr_SetString(PyExc_ValueError, "rows out of range");
        goto done;
    }
    rates = PyBytes_FromStringAndSize(NULL, (hi - lo) * 8);
    if (rates == NULL)
        goto done;
    const int64_t *steps = st.buf;
    const double *means = mn.buf, *loss = ls.buf, *stamp = ts.buf;
    const uint64_t *loss_bits = ls.buf, *stamp_bits = ts.buf;
    char *out = PyBytes_AS_STRING(rates);
    Py_ssize_t nan_losses = 0, first = -1, last = -1;
    Py_BEGIN_ALLOW_THREADS /* plain arithmetic over buffers: other threads run Python meanwhile */
    for (Py_ssize_t i = lo; i < hi; i++) {
        long long step = steps[i];
        double t = means[i] > 0 ? (double)step / means[i] : INFINITY;
        double dt = t - last_t;
        uint64_t bits = null_bits;
        if (0 < dt && dt < INFINITY) {
            double rate = (double)(step - last_step) / dt;
            sum += rate;
            n_int++;
            memcpy(&bits, &rate, 8);
        }
        memcpy(out + (i - lo) * 8, &bits, 8);
        last_step = step, last_t = t;
        if (loss[i] != loss[i] && loss_bits[i] != null_bits)
            nan_losses++;
        if (stamp_bits[i] != null_bits) {
            if (first < 0)
                first = i;
            last = i;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *f = first < 0 ? Py_NewRef(Py_None) : PyFloat_FromDouble(stamp[first]);
    PyObject *l = last < 0 ? Py_NewRef(Py_None) : PyFloat_FromDouble(stamp[last]);
    if (f != NULL && l != NULL)
        result = Py_BuildValue("(OLddnnOO)", rates, last_step, last_t, sum, n_int, nan_losses, f, l);
    Py_XDECREF(f);
    Py_XDECREF(l);
done:
    Py_XDECREF(rates);
    PyBuffer_Release(&st);
    PyBuffer_Release(&mn);
    PyBuffer_Release(&ls);
    PyBuffer_Release(&ts);
    return result;
}

/* ---- Lambda thermal files ------------------------------------------------------------------------ */

typedef struct {
    double *v;
    Py_ssize_t n, cap;
} Dbl;

static int dbl_push(Dbl *d, double x) {
    if (d->n == d->cap) {
        Py_ssize_t cap = d->cap * 2 + 256;
        double *v = PyMem_Realloc(d->v, (size_t)cap * sizeof(double));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        d->v = v, d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

/* One thermal field [s, e) as float() reads it, for the shapes taken here: blanks, -?\d+(\.\d*)?, blanks.
 * 0 = a number, 2 = only blanks, 1 = anything else (the caller gives the file to Python). */
static int thermal_field(const char *s, const char *e, double *out) {
    while (s < e && is_ws(*s))
        s++;
    while (e > s && is_ws(e[-1]))
        e--;
    if (s == e)
        return 2;
    int neg = *s == '-';
    if (decimal(s + neg, e, 1, out) != 0 || !isfinite(*out))
        return 1;
    if (neg)
        *out = -*out;
    return 0;
}

/* thermal(buf, min_time, max_time, null_bits) -> None or (n, g, columns): see thermal_rows for the columns.
 *
 * The whole of a Lambda thermal file when it is the usual one, exactly as telemetry._thermal_block reads
 * each of its batches: every non-blank line has the same number k >= 2 of commas; the field after the
 * last comma is blank on every line (the trailing comma) or on none; the first field is the time (within
 * [min_time, max_time]), the second the rate (blank = NULL), the rest g >= 1 temperatures. Lines are split
 * as text.split_lines does. Only ASCII digits, '.', '-', ',', blanks and a CR before LF are taken, and
 * numbers only in the shape above (converted as float() does): anything else returns None and the file
 * goes through the Python parser, which also owns every problem report.
 */
/* The telemetry rows of n samples of g GPUs, one row per sample per GPU, as
 * TelemetryTable.add_gpu_matrix(0, times, times - times[0], rates, present, temps) makes them: (n, g,
 * (sample_index, timestamp, elapsed_s, gpu_index, images_per_sec, temperature_c)), native int64 /
 * float64 bytes, a rate not present being the ``null_bits`` NaN. */
static PyObject *thermal_rows(Py_ssize_t n, Py_ssize_t g, const double *t, const double *rate, const char *present,
                              const double *temps, uint64_t null_bits) {
    Py_ssize_t k = n * g;
    PyObject *cols[6] = {NULL};
    for (int c = 0; c < 6; c++)
        if ((cols[c] = PyBytes_FromStringAndSize(NULL, k * 8)) == NULL)
            goto fail;
    int64_t *sample = (int64_t *)PyBytes_AS_STRING(cols[0]), *gpu = (int64_t *)PyBytes_AS_STRING(cols[3]);
    double *stamp = (double *)PyBytes_AS_STRING(cols[1]), *elapsed = (double *)PyBytes_AS_STRING(cols[2]);
    char *rates = PyBytes_AS_STRING(cols[4]);
    for (Py_ssize_t i = 0; i < n; i++) {
        double since = t[i] - t[0];
        for (Py_ssize_t j = 0; j < g; j++) {
            Py_ssize_t r = i * g + j;
            sample[r] = i, gpu[r] = j, stamp[r] = t[i], elapsed[r] = since;
            if (present[i])
                memcpy(rates + r * 8, &rate[i], 8);
            else
                memcpy(rates + r * 8, &null_bits, 8);
        }
    }
    memcpy(PyBytes_AS_STRING(cols[5]), temps, (size_t)k * 8);
    PyObject *tuple = PyTuple_New(6);
    if (tuple == NULL)
        goto fail;
    for (int c = 0; c < 6; c++)
        PyTuple_SET_ITEM(tuple, c, cols[c]); /* the tuple takes the references */
    return Py_BuildValue("(nnN)", n, g, tuple);
fail:
    for (int c = 0; c < 6; c++)
        Py_XDECREF(cols[c]);
    return NULL;
}

static PyObject *thermal(PyObject *self, PyObject *args) {
    Py_buffer buf;
    double tmin, tmax;
    unsigned long long null_bits;
    if (!PyArg_ParseTuple(args, "y*ddK", &buf, &tmin, &tmax, &null_bits))
        return NULL;
    const char *p = buf.buf, *end = p + buf.len;
    Dbl t = {0}, rate = {0}, temps = {0};
    PyObject *present = NULL, *result = NULL;
    Py_ssize_t k = -1, width = 0, pcap = 0, n = 0;
    int ok = 1;
    while (ok && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p && le[-1] == '\r')
            le--;
        Py_ssize_t commas = 0, blank = 1;
        for (const char *q = p; q < le; q++) {
            char c = *q;
            if (c == ',')
                commas++;
            else if (!is_digit(c) && c != '.' && c != '-' && !is_ws(c)) {
                ok = 0;
                break;
            }
            if (!is_ws(c))
                blank = 0;
        }
        if (ok && !blank) {
            const char *fs[64], *fe[64];
            Py_ssize_t nf = 0;
            if (k < 0)
                k = commas;
            if (k < 2 || commas != k || k >= 63) {
                ok = 0;
                break;
            }
            for (const char *q = p, *f = p;; q++)
                if (q == le || *q == ',') {
                    fs[nf] = f, fe[nf++] = q, f = q + 1;
                    if (q == le)
                        break;
                }
            double last;
            int last_kind = thermal_field(fs[k], fe[k], &last);
            if (last_kind == 1 || (width != 0 && (last_kind == 2) != (width == k))) {
                ok = 0;
                break;
            }
            width = last_kind == 2 ? k : k + 1; /* the fields used: the blank last one is dropped */
            if (width < 3) {
                ok = 0;
                break;
            }
            double v, r;
            int rk;
            if (thermal_field(fs[0], fe[0], &v) != 0 || !(v >= tmin && v <= tmax) ||
                (rk = thermal_field(fs[1], fe[1], &r)) == 1 || dbl_push(&t, v) || dbl_push(&rate, rk == 2 ? 0.0 : r)) {
                ok = 0;
                break;
            }
            for (Py_ssize_t i = 2; i < width; i++)
                if (thermal_field(fs[i], fe[i], &v) != 0 || dbl_push(&temps, v)) {
                    ok = 0;
                    break;
                }
            if (!ok)
                break;
            if (n == pcap) {
                pcap = pcap * 2 + 256;
                if (present == NULL)
                    present = PyBytes_FromStringAndSize(NULL, pcap);
                else
                    _PyBytes_Resize(&present, pcap);
                if (present == NULL) {
                    ok = 0;
                    break;
                }
            }
            PyBytes_AS_STRING(present)[n++] = rk != 2;
        }
        p = nl ? nl + 1 : end;
    }
    if (PyErr_Occurred())
        goto done;
    if (!ok || n == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = thermal_rows(n, width - 2, t.v, rate.v, PyBytes_AS_STRING(present), temps.v, null_bits);
done:
    Py_XDECREF(present);
    PyMem_Free(t.v);
    PyMem_Free(rate.v);
    PyMem_Free(temps.v);
    PyBuffer_Release(&buf);
    return result;
}


/* ---- tar headers --------------------------------------------------------------------------------- */

static int ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* A tar number field as tarstream._number reads the usual form: the bytes before the first NUL, ASCII
 * blanks stripped, octal digits only (none = 0). -1 for anything else (base-256, signs, junk). */
static long long octal_field(const unsigned char *f, int len) {
    int end = 0, s = 0;
    while (end < len && f[end] != 0)
        end++;
    while (s < end && ascii_space(f[s]))
        s++;
    while (end > s && ascii_space(f[end - 1]))
        end--;
    long long v = 0;
    for (int i = s; i < end; i++) {
        if (f[i] < '0' || f[i] > '7')
            return -1;
        v = v * 8 + (f[i] - '0');
    }
    return v;
}

/* tar_header(block) -> None or (type, size, name): one 512-byte tar header read as tarstream.py reads it,
 * when it is the usual one (octal number fields and a right checksum, unsigned or signed); ``name`` is the
 * ustar name (prefix/name) for a regular-file type, else None. None sends the header to the Python reader,
 * which also raises for a wrong checksum. */
static PyObject *tar_header(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *h = buf.buf;
    if (buf.len != 512)
        goto fallback;
    long long stored = octal_field(h + 148, 8), size = octal_field(h + 124, 12);
    if (stored < 0 || size < 0)
        goto fallback;
    long long sum = 8 * 32, high = 0;
    for (int i = 0; i < 512; i++) {
        if (i >= 148 && i < 156)
            continue;
        sum += h[i];
        high += h[i] > 127;
    }
    if (stored != sum && stored != sum - 256 * high)
        goto fallback;
    char type = (char)h[156];
    if (type == '0' || type == '\0' || type == '7') {
        const unsigned char *nul = memchr(h, 0, 100);
        Py_ssize_t n = nul ? nul - h : 100;
        char name[256];
        Py_ssize_t len = 0;
        if (memcmp(h + 257, "ustar", 5) == 0) {
            const unsigned char *pnul = memchr(h + 345, 0, 155);
            Py_ssize_t pn = pnul ? pnul - (h + 345) : 155;
            if (pn > 0) {
                memcpy(name, h + 345, (size_t)pn);
                name[pn] = '/';
                len = pn + 1;
            }
        }
        memcpy(name + len, h, (size_t)n);
        len += n;
        result = Py_BuildValue("(y#Ly#)", &type, (Py_ssize_t)1, size, name, len);
    } else {
        result = Py_BuildValue("(y#LO)", &type, (Py_ssize_t)1, size, Py_None);
    }
    PyBuffer_Release(&buf);
    return result;
fallback:
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

/* contains(text, needle) -> bool: ``needle in text``, with glibc's memmem when both are 1-byte-kind str
 * (ASCII or Latin-1: one byte per character, so a byte match is a character match), which scans a log head
 * about 2.5 times faster than CPython's own search; any other pair goes to ``in`` itself. */
static PyObject *contains(PyObject *self, PyObject *args) {
    PyObject *text, *needle;
    if (!PyArg_ParseTuple(args, "OO", &text, &needle))
        return NULL;
    if (PyUnicode_CheckExact(text) && PyUnicode_CheckExact(needle) && PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND &&
        PyUnicode_KIND(needle) == PyUnicode_1BYTE_KIND) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = PyUnicode_GET_LENGTH(needle);
        if (m == 0)
            Py_RETURN_TRUE;
        return PyBool_FromLong(memmem(PyUnicode_1BYTE_DATA(text), (size_t)n, PyUnicode_1BYTE_DATA(needle), (size_t)m) != NULL);
    }
    int r = PySequence_Contains(text, needle);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* marked_lines(buf, marks) -> list of str: the lines of the ASCII ``buf``, split as text.split_lines
 * splits them (on LF, one CR before it dropped, no empty line after a final LF), with every line that
 * holds none of ``marks`` (a tuple of 1 to 16 non-empty bytes without LF or CR) given as "" instead. A
 * format that declares its markers (registry.line_markers) does nothing with such lines, nor with empty
 * ones, so its parser reads the same rows from this list, and skips the others at the cost of a test.
 *
 * The scan looks for every marker at once, 16 positions at a time: a position is a candidate when it
 * holds a marker's first byte and the marker's last byte is where it would end (GCC vector extensions:
 * SSE2 on x86-64, NEON on ARM); candidates are compared in full. It runs without the GIL. */
typedef signed char V16 __attribute__((vector_size(16)));
enum { MAX_MARKS = 16 };

typedef struct {
    const char *s;
    Py_ssize_t n;
    V16 first, last;
} Needle;

static inline V16 load16(const char *p) {
    V16 v;
    memcpy(&v, p, 16);
    return v;
}

static inline int is_marker_at(const char *p, const char *e, const Needle *nd, int k) {
    for (int j = 0; j < k; j++)
        if (e - p >= nd[j].n && p[0] == nd[j].s[0] && memcmp(p, nd[j].s, (size_t)nd[j].n) == 0)
            return 1;
    return 0;
}

/* The first place in [p, e) where a marker starts, or e. */
static const char *next_marker(const char *p, const char *e, const Needle *nd, int k, Py_ssize_t longest) {
    while (e - p >= 16 + longest - 1) {
        V16 a = load16(p), hit = {0};
        for (int j = 0; j < k; j++)
            hit |= (a == nd[j].first) & (load16(p + nd[j].n - 1) == nd[j].last);
        uint64_t half[2];
        memcpy(half, &hit, 16);
        if (half[0] | half[1])
            for (int b = 0; b < 16; b++)
                if (hit[b] && is_marker_at(p + b, e, nd, k))
                    return p + b;
        p += 16;
    }
    for (; p < e; p++)
        if (is_marker_at(p, e, nd, k))
            return p;
    return e;
}

/* The LF bytes in [p, e). */
static Py_ssize_t count_lf(const char *p, const char *e) {
    Py_ssize_t n = 0;
    const V16 lf = {'\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n'};
    while (e - p >= 16) {
        V16 acc = {0};
        for (int i = 0; i < 127 && e - p >= 16; i++, p += 16)
            acc -= (load16(p) == lf); /* each LF adds 1: the comparison gives -1 */
        for (int b = 0; b < 16; b++)
            n += acc[b];
    }
    for (; p < e; p++)
        n += *p == '\n';
    return n;
}

typedef struct {
    Py_ssize_t index, start, len;
} Hit;

static PyObject *marked_lines(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *marks;
    if (!PyArg_ParseTuple(args, "y*O!", &buf, &PyTuple_Type, &marks))
        return NULL;
    PyObject *result = NULL;
    Hit *hits = NULL;
    Needle nd[MAX_MARKS];
    int k = (int)PyTuple_GET_SIZE(marks);
    Py_ssize_t longest = 1;
    if (k < 1 || k > MAX_MARKS) {
        PyErr_SetString(PyExc_ValueError, "marked_lines: 1 to 16 markers");
        goto done;
    }
    for (int j = 0; j < k; j++) {
        PyObject *m = PyTuple_GET_ITEM(marks, j);
        if (!PyBytes_Check(m) || PyBytes_GET_SIZE(m) == 0 || memchr(PyBytes_AS_STRING(m), '\n', PyBytes_GET_SIZE(m)) ||
            memchr(PyBytes_AS_STRING(m), '\r', PyBytes_GET_SIZE(m))) {
            PyErr_SetString(PyExc_ValueError, "marked_lines: a marker is non-empty bytes without LF or CR");
            goto done;
        }
        nd[j].s = PyBytes_AS_STRING(m);
        nd[j].n = PyBytes_GET_SIZE(m);
        for (int b = 0; b < 16; b++) {
            nd[j].first[b] = nd[j].s[0];
            nd[j].last[b] = nd[j].s[nd[j].n - 1];
        }
        if (nd[j].n > longest)
            longest = nd[j].n;
    }
    const char *s = buf.buf, *e = s + buf.len, *line = s;
    Py_ssize_t n_hits = 0, cap = 0, lines = 0;
    int no_memory = 0;
    Py_BEGIN_ALLOW_THREADS
    while (line < e) {
        const char *at = next_marker(line, e, nd, k, longest);
        if (at == e)
            break;
        const char *before = memrchr(line, '\n', (size_t)(at - line));
        if (before != NULL) {
            lines += count_lf(line, before + 1);
            line = before + 1;
        }
        const char *end = memchr(at, '\n', (size_t)(e - at));
        const char *next = end ? end + 1 : e;
        end = end ? end : e;
        if (n_hits == cap) {
            cap = cap * 2 + 1024;
            Hit *grown = PyMem_RawRealloc(hits, (size_t)cap * sizeof(Hit));
            if (grown == NULL) {
                no_memory = 1;
                break;
            }
            hits = grown;
        }
        Py_ssize_t len = end - line - (end > line && end[-1] == '\r');
        hits[n_hits++] = (Hit){lines, line - s, len};
        lines++;
        line = next;
    }
    if (!no_memory && line < e)
        lines += count_lf(line, e) + (e[-1] != '\n');
    Py_END_ALLOW_THREADS
    if (no_memory) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *empty = PyUnicode_New(0, 0);
    result = empty ? PyList_New(lines) : NULL;
    if (result == NULL) {
        Py_XDECREF(empty);
        goto done;
    }
    for (Py_ssize_t i = 0; i < lines; i++) {
        Py_INCREF(empty);
        PyList_SET_ITEM(result, i, empty);
    }
    Py_DECREF(empty);
    for (Py_ssize_t h = 0; h < n_hits; h++) {
        PyObject *text = PyUnicode_New(hits[h].len, 127);
        if (text == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        memcpy(PyUnicode_1BYTE_DATA(text), s + hits[h].start, (size_t)hits[h].len);
        PyObject *old = PyList_GET_ITEM(result, hits[h].index);
        PyList_SET_ITEM(result, hits[h].index, text);
        Py_DECREF(old);
    }
done:
    PyMem_RawFree(hits);
    PyBuffer_Release(&buf);
    return result;
}

/* fields(buf, lines_before, null_bits, programs, ncols, int_cols, stamp) -> (n_lines, line_nos, spans, columns, stamps,
 * kinds, others, all_ascii): a line format's commonest lines read by small line programs (ingest/formats/line_scan.py
 * writes the programs and says what each op matches, as the format's regex does). Lines are split as
 * text.split_lines splits them. ``programs`` is a tuple of 1 to 16 programs (one per kind of line), tried in
 * order. A line a program reads whole is a row: its number (int64), its span in ``buf`` (start, end: int64
 * pairs), a value per column (``ncols`` bytes objects of 8-byte values: an int64 for 'D', 'N', 'Z' and 'z', a
 * float64 for the others, as the bit mask ``int_cols`` says; NULL = the NaN with payload ``null_bits``, or
 * -2^63 for an int, for a column
 * its program does not set or a pair not in the line), its stamp (float64, NULL where it has none or it is no
 * date) and its kind (one byte: the index of the program that read it). Every other line, and every line with a byte
 * >= 0x80, ESC or another control byte but tab, is returned as (line_no, str) in ``others``: the format reads it
 * the slow way. A figure is taken only when it converts as float() converts it (Clinger's exact fast path,
 * else CPython's own); any doubt makes the line an "other". Ops (one byte, then its arguments):
 *   'f' n lit   the literal, once only in the rest of the line; continue after it
 *   'F' n lit   the same, with no word character before it (regex \b)
 *   'G' n lit   the literal's first place in the rest with no word character before it; continue after it
 *   'L' n lit   the literal, right here
 *   'K' n lit k the literal exactly k times in the whole line (where the program is: unchanged)
 *   'w' / 'W'   whitespace, any / at least one
 *   'M' b n {len lit col}*  the rest of the line (to its end, or to a last '|' where it says "elapsed"), as
 *               fields between bars ("head: value" or
 *               "head=value", a regex findall of ([^|:=]*)[:=]([^|]*)): each head, stripped, one of the n labels
 *               (col 255: a field read past), each stored value a figure, no column twice; column b gets the
 *               line's number of '|'
 *   'D' col     \d+ (at most 18 digits), an int64 (col 255: not stored)
 *   'N' col     \S+: an int64 when it is \d+ (at most 18 digits), else NULL
 *   'Q'         \S+ whose first character is not a digit, not stored
 *   'E' n       on to the last n whitespace-separated tokens of the line (they begin here or after)
 *   'Z' a b     \S+, its span in buf as two int64 columns (start, end)
 *   'z' a b     the rest of the line, trailing whitespace left out, not empty: its span as for 'Z'
 *   'U' c       on past the first c
 *   'S' col c   \S+: with c != 0 its last character must be c and is left out; col 255 stores nothing
 *   'R' col c   \S+ with every trailing c left out
 *   'T' col c   [^c\s]+
 *   'P' n lit col  a pair in the rest: the literal once only, after no [\w/] character (or at the rest's
 *               start), then whitespace and a figure [\d,.eE+-]+ read with its commas left out; NULL when the literal
 *               is not there
 * stamp: 0 none; 1 "[YYYY-MM-DD hh:mm:ss" at the line's start; 2 the first "YYYY-MM-DD[ T]hh:mm:ss" in it;
 * read as text.utc_seconds reads it. */
/* An output column of fields: a bytes object made at its largest (a value for every line of the chunk), filled
 * in place and cut to what was written (no growing, no copy). */
typedef struct {
    PyObject *b;
    char *p;
    Py_ssize_t n;
} Column;

static int column_new(Column *o, Py_ssize_t cap) {
    o->b = PyBytes_FromStringAndSize(NULL, cap);
    o->p = o->b ? PyBytes_AS_STRING(o->b) : NULL;
    o->n = 0;
    return o->b ? 0 : -1;
}

static void column_put(Column *o, const void *v, Py_ssize_t size) {
    memcpy(o->p + o->n, v, (size_t)size);
    o->n += size;
}

/* The column cut to its values (a new reference; NULL on failure, the column let go either way). */
static PyObject *column_take(Column *o) {
    PyObject *b = o->b;
    o->b = NULL;
    if (b != NULL && _PyBytes_Resize(&b, o->n) < 0)
        return NULL;
    return b;
}

static int is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The first place of the literal [l, l + n) in [p, e), or NULL: memchr for its first byte, then a compare
 * (on a log line, where the first byte is rare, this is several times faster than glibc's memmem). */
static const char *find_lit(const char *p, const char *e, const char *l, Py_ssize_t n) {
    for (const char *last = e - n; p <= last; p++) {
        p = memchr(p, l[0], (size_t)(last - p + 1));
        if (p == NULL)
            return NULL;
        if (memcmp(p + 1, l + 1, (size_t)n - 1) == 0)
            return p;
    }
    return NULL;
}

/* The literal [l, l + n) in [p, e) exactly once: where it starts, or NULL. */
static const char *once(const char *p, const char *e, const char *l, Py_ssize_t n) {
    const char *at = memmem(p, (size_t)(e - p), l, (size_t)n);
    if (at == NULL || memmem(at + 1, (size_t)(e - at - 1), l, (size_t)n) != NULL)
        return NULL;
    return at;
}

/* float() of the text [s, e), which holds only [\d.eE+-]: 0, or 1 when it is not a number taken here. */
static int to_double(const char *s, const char *e, double *out) {
    const char *p = s;
    uint64_t m = 0;
    int nd = 0, frac = 0, neg = 0;
    if (p < e && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    for (; p < e && is_digit(*p); p++, nd++)
        m = nd < 19 ? m * 10 + (uint64_t)(*p - '0') : m;
    if (p < e && *p == '.')
        for (p++; p < e && is_digit(*p); p++, nd++, frac++)
            m = nd < 19 ? m * 10 + (uint64_t)(*p - '0') : m;
    int exp = 0, exp_digits = 0, exp_neg = 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '-' || *p == '+'))
            exp_neg = *p++ == '-';
        for (; p < e && is_digit(*p) && exp_digits < 4; p++, exp_digits++)
            exp = exp * 10 + (*p - '0');
        if (exp_digits == 0)
            return 1;
    }
    if (nd == 0 || p != e)
        return slow_double(s, e, out);
    int k = (exp_neg ? -exp : exp) - frac;
    if (nd <= 19 && m <= (1ULL << 53) && k >= -22 && k <= 22) {
        double v = k < 0 ? (double)m / POW10[-k] : (double)m * POW10[k];
        *out = neg ? -v : v;
        return 0;
    }
    return slow_double(s, e, out);
}

/* A figure's 8 bytes into *out when [s, e) holds only [\d.eE+-] and reads as a number: 0, else 1. */
static int figure(const char *s, const char *e, uint64_t *out) {
    for (const char *q = s; q < e; q++)
        if (!(is_digit(*q) || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-'))
            return 1;
    double d;
    if (to_double(s, e, &d))
        return 1;
    *out = dbits(d);
    return 0;
}

/* Days from 1970-01-01 to the first of month mo of year y (proleptic Gregorian). */
static long long days_to(long long y, int mo) {
    y -= mo <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int dd(const char *p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return 1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* The stamp "YYYY-MM-DD?hh:mm:ss" at p (sep: the characters allowed between date and time): 1 when p holds
 * none; else 0, with *out the unix seconds or NaN for a date text.utc_seconds refuses. */
static int stamp_at(const char *p, const char *e, const char *sep, double *out) {
    int y, mo, d, hh, mi, ss;
    if (e - p < 19 || dd(p, 4, &y) || p[4] != '-' || dd(p + 5, 2, &mo) || p[7] != '-' || dd(p + 8, 2, &d) ||
        strchr(sep, p[10]) == NULL || p[10] == '\0' || dd(p + 11, 2, &hh) || p[13] != ':' || dd(p + 14, 2, &mi) ||
        p[16] != ':' || dd(p + 17, 2, &ss))
        return 1;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31 || hh > 24 || mi > 59 || ss >= 62) {
        *out = NAN;
        return 0;
    }
    long long s = (days_to(y, mo) + d - 1) * 86400LL + hh * 3600LL + mi * 60LL;
    *out = (double)s + (double)ss;
    return 0;
}

static double line_stamp(const char *s, const char *e, int mode) {
    double t = NAN;
    if (mode == 1) {
        if (e - s > 0 && *s == '[' && stamp_at(s + 1, e, " ", &t) == 0)
            return t;
    } else if (mode == 2) {
        for (const char *p = s; p + 19 <= e; p++)
            if (is_digit(*p) && p[4] == '-' && stamp_at(p, e, " T", &t) == 0)
                return t;
    }
    return NAN;
}

/* Run the program over the line [s, e): 0 with the values in v[], else 1. */
static int run_program(const char *prog, Py_ssize_t plen, const char *base, const char *s, const char *e, uint64_t *v,
                       uint64_t nullb) {
    const char *cur = s, *pc = prog, *pe = prog + plen;
    while (pc < pe) {
        char op = *pc++;
        if (op == 'f' || op == 'F' || op == 'L') {
            Py_ssize_t n = (unsigned char)*pc++;
            const char *at;
            if (op == 'L')
                at = e - cur >= n && memcmp(cur, pc, (size_t)n) == 0 ? cur : NULL;
            else
                at = once(cur, e, pc, n);
            if (at == NULL || (op == 'F' && at > s && is_word(at[-1])))
                return 1;
            cur = at + n;
            pc += n;
        } else if (op == 'G') {
            Py_ssize_t n = (unsigned char)*pc++;
            const char *at = cur;
            while ((at = memmem(at, (size_t)(e - at), pc, (size_t)n)) != NULL && at > s && is_word(at[-1]))
                at++;
            if (at == NULL)
                return 1;
            cur = at + n;
            pc += n;
        } else if (op == 'M') {
            /* 'M' bars_col count {len lit col}*: the rest, to a last '|', as fields "head: value" or "head=value"
             * between bars; each head (stripped) one of the labels, each value (stripped) a figure, no column twice */
            int bars_col = (unsigned char)*pc++, count = (unsigned char)*pc++;
            const char *labels = pc;
            for (int j = 0; j < count; j++)
                pc += 1 + (unsigned char)pc[0] + 1;
            const char *last = e; /* where the fields end: after the last '|', or the line's end (below) */
            while (last > cur && is_space(last[-1]))
                last--;
            int open_end = last > cur && last[-1] != '|';
            if (last == cur || (open_end && memmem(s, (size_t)(e - s), "elapsed", 7) != NULL))
                return 1; /* megatron.py drops the text after the last bar of such a line (it may be cut) */
            long long bars = 0;
            for (const char *q = s; q < e; q++)
                bars += *q == '|';
            memcpy(&v[bars_col], &bars, sizeof bars);
            uint32_t set = 0;
            for (const char *seg = cur; seg < last;) {
                const char *bar = memchr(seg, '|', (size_t)(last - seg));
                if (bar == NULL)
                    bar = last; /* the open end's last field */
                const char *sep = seg;
                while (sep < bar && *sep != ':' && *sep != '=')
                    sep++;
                if (sep < bar) {
                    const char *h = seg, *he = sep, *val = sep + 1, *ve = bar;
                    while (h < he && is_space(*h))
                        h++;
                    while (he > h && is_space(he[-1]))
                        he--;
                    while (val < ve && is_space(*val))
                        val++;
                    while (ve > val && is_space(ve[-1]))
                        ve--;
                    const char *l = labels;
                    int col = -1;
                    for (int j = 0; j < count && col < 0; j++) {
                        int n = (unsigned char)l[0];
                        if (n == he - h && memcmp(l + 1, h, (size_t)n) == 0)
                            col = (unsigned char)l[1 + n];
                        l += 1 + n + 1;
                    }
                    if (col < 0)
                        return 1;
                    if (col != 255) {
                        if (ve == val || (set >> col) & 1 || figure(val, ve, &v[col]))
                            return 1;
                        set |= 1u << col;
                    }
                }
                seg = bar + 1;
            }
            cur = e;
        } else if (op == 'K') {
            Py_ssize_t n = (unsigned char)*pc++;
            int want = (unsigned char)pc[n], seen = 0;
            for (const char *q = s; (q = find_lit(q, e, pc, n)) != NULL; q++)
                seen++;
            if (seen != want)
                return 1;
            pc += n + 1;
        } else if (op == 'w' || op == 'W') {
            const char *from = cur;
            while (cur < e && is_space(*cur))
                cur++;
            if (op == 'W' && cur == from)
                return 1;
        } else if (op == 'D') {
            int col = (unsigned char)*pc++;
            long long x = 0;
            int nd = 0;
            for (; cur < e && is_digit(*cur); cur++, nd++)
                if (nd < 18) /* no overflow: a 19th digit is refused below */
                    x = x * 10 + (*cur - '0');
            if (nd == 0 || nd > 18)
                return 1;
            if (col != 255)
                memcpy(&v[col], &x, sizeof x);
        } else if (op == 'N') {
            int col = (unsigned char)*pc++;
            const char *from = cur;
            int all = 1;
            long long x = 0;
            for (; cur < e && !is_space(*cur); cur++)
                if (!is_digit(*cur))
                    all = 0;
                else if (cur - from < 18) /* no overflow: a 19th digit is refused below */
                    x = x * 10 + (*cur - '0');
            if (cur == from || (all && cur - from > 18))
                return 1;
            if (all)
                memcpy(&v[col], &x, sizeof x);
        } else if (op == 'Q') {
            const char *from = cur;
            while (cur < e && !is_space(*cur))
                cur++;
            if (cur == from || is_digit(*from))
                return 1;
        } else if (op == 'E') {
            int n = (unsigned char)*pc++;
            const char *q = e;
            for (int k = 0; k < n; k++) {
                while (q > cur && is_space(q[-1]))
                    q--;
                if (q == cur)
                    return 1;
                while (q > cur && !is_space(q[-1]))
                    q--;
            }
            cur = q;
        } else if (op == 'Z' || op == 'z') {
            int c0 = (unsigned char)*pc++, c1 = (unsigned char)*pc++;
            const char *from = cur, *end;
            if (op == 'Z') {
                while (cur < e && !is_space(*cur))
                    cur++;
                end = cur;
            } else {
                end = e;
                while (end > from && is_space(end[-1]))
                    end--;
                cur = e;
            }
            if (end == from)
                return 1;
            long long a = from - base, b = end - base;
            memcpy(&v[c0], &a, sizeof a);
            memcpy(&v[c1], &b, sizeof b);
        } else if (op == 'U') {
            const char *at = memchr(cur, *pc++, (size_t)(e - cur));
            if (at == NULL)
                return 1;
            cur = at + 1;
        } else if (op == 'S' || op == 'R' || op == 'T') {
            int col = (unsigned char)*pc++;
            char c = *pc++;
            const char *from = cur;
            while (cur < e && !is_space(*cur) && !(op == 'T' && *cur == c))
                cur++;
            const char *end = cur;
            if (op == 'S' && c != 0) {
                if (end == from || end[-1] != c)
                    return 1;
                end--;
            } else if (op == 'R') {
                while (end > from && end[-1] == c)
                    end--;
            }
            if (end == from)
                return 1;
            if (col != 255 && figure(from, end, &v[col]))
                return 1;
        } else if (op == 'P') {
            Py_ssize_t n = (unsigned char)*pc++;
            const char *lit = pc;
            pc += n;
            int col = (unsigned char)*pc++;
            const char *at = memmem(cur, (size_t)(e - cur), lit, (size_t)n);
            if (at == NULL) {
                v[col] = nullb;
                continue;
            }
            if (once(cur, e, lit, n) == NULL || (at > cur && (is_word(at[-1]) || at[-1] == '/')))
                return 1;
            const char *from = at + n;
            while (from < e && is_space(*from))
                from++;
            char tmp[64];
            int k = 0;
            const char *q = from;
            for (; q < e && (is_digit(*q) || *q == ',' || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-'); q++)
                if (*q != ',') {
                    if (k == (int)sizeof tmp)
                        return 1;
                    tmp[k++] = *q;
                }
            if (q == from || k == 0)
                return 1;
            double d;
            if (to_double(tmp, tmp + k, &d))
                return 1;
            v[col] = dbits(d);
        } else {
            return 1;
        }
    }
    return 0;
}

static PyObject *fields(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t before;
    unsigned long long nullb;
    PyObject *progs;
    int ncols, mode;
    unsigned int int_cols;
    if (!PyArg_ParseTuple(args, "y*nKO!iIi", &buf, &before, &nullb, &PyTuple_Type, &progs, &ncols, &int_cols, &mode))
        return NULL;
    PyObject *result = NULL, *others = NULL, *tuple = NULL;
    Column nos = {0}, spans = {0}, stamps = {0}, kinds = {0}, cols[32] = {{0}};
    uint64_t v[32];
    const char *prog[16];
    Py_ssize_t plen[16], nprog = PyTuple_GET_SIZE(progs);
    if (ncols < 0 || ncols > 32 || nprog < 1 || nprog > 16) {
        PyErr_SetString(PyExc_ValueError, "fields: 0 to 32 columns, 1 to 16 programs");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nprog; k++) {
        PyObject *b = PyTuple_GET_ITEM(progs, k);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "fields: each program is bytes");
            goto done;
        }
        prog[k] = PyBytes_AS_STRING(b), plen[k] = PyBytes_GET_SIZE(b);
    }
    const char *s = buf.buf, *end = s + buf.len;
    Py_ssize_t lines = 1; /* at most: a line per line end, and one after the last */
    for (const char *q = s; q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    if (column_new(&nos, 8 * lines) || column_new(&spans, 16 * lines) || column_new(&stamps, 8 * lines) ||
        column_new(&kinds, lines))
        goto done;
    for (int i = 0; i < ncols; i++)
        if (column_new(&cols[i], 8 * lines))
            goto done;
    others = PyList_New(0);
    if (others == NULL)
        goto done;
    Py_ssize_t no = before;
    int ascii = 1;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (e > s && e[-1] == '\r')
            e--;
        no++;
        unsigned char high = 0, control = 0; /* without a branch, so that the compiler vectorises it */
        for (const unsigned char *q = (const unsigned char *)s; q < (const unsigned char *)e; q++) {
            high |= *q & 0x80;
            control |= (*q < 0x20) & (*q != '\t');
            control |= *q == 0x7f;
        }
        int plain = !high && !control;
        ascii &= !high;
        unsigned char kind = 0;
        int taken = 0;
        for (; plain && !taken && kind < nprog; kind += !taken) {
            for (int i = 0; i < ncols; i++)
                v[i] = (int_cols >> i) & 1 ? (uint64_t)1 << 63 : nullb;
            taken = run_program(prog[kind], plen[kind], buf.buf, s, e, v, nullb) == 0;
        }
        if (taken) {
            double t = line_stamp(s, e, mode);
            uint64_t tb = isnan(t) ? nullb : dbits(t);
            long long span[2] = {s - (const char *)buf.buf, e - (const char *)buf.buf};
            long long n64 = no;
            column_put(&nos, &n64, 8);
            column_put(&spans, span, 16);
            column_put(&stamps, &tb, 8);
            column_put(&kinds, &kind, 1);
            for (int i = 0; i < ncols; i++)
                column_put(&cols[i], &v[i], 8);
        } else {
            PyObject *text = PyUnicode_DecodeUTF8(s, e - s, "replace");
            PyObject *item = text ? Py_BuildValue("(nN)", no, text) : NULL;
            if (item == NULL || PyList_Append(others, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        s = next;
    }
    tuple = PyTuple_New(ncols);
    if (tuple == NULL)
        goto done;
    for (int i = 0; i < ncols; i++) {
        PyObject *b = column_take(&cols[i]);
        if (b == NULL)
            goto done;
        PyTuple_SET_ITEM(tuple, i, b);
    }
    PyObject *nos_b = column_take(&nos), *spans_b = column_take(&spans), *stamps_b = column_take(&stamps),
             *kinds_b = column_take(&kinds);
    if (nos_b && spans_b && stamps_b && kinds_b)
        result = Py_BuildValue("(nNNONNOO)", no - before, nos_b, spans_b, tuple, stamps_b, kinds_b, others,
                               ascii ? Py_True : Py_False);
    else {
        Py_XDECREF(nos_b);
        Py_XDECREF(spans_b);
        Py_XDECREF(stamps_b);
        Py_XDECREF(kinds_b);
    }
done:
    Py_XDECREF(nos.b);
    Py_XDECREF(spans.b);
    Py_XDECREF(stamps.b);
    Py_XDECREF(kinds.b);
    for (int i = 0; i < 32; i++)
        Py_XDECREF(cols[i].b);
    Py_XDECREF(tuple);
    Py_XDECREF(others);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, lines_before, null_bits, labels, rare) -> (n_lines, columns, others, all_ascii)"},
    {"contains", contains, METH_VARARGS, "contains(text, needle) -> needle in text"},
    {"thermal", thermal, METH_VARARGS,
     "thermal(buf, min_time, max_time, null_bits) -> None or (n, g, (sample_index, timestamp, elapsed_s, "
     "gpu_index, images_per_sec, temperature_c))"},
    {"advance", advance, METH_VARARGS,
     "advance(steps, means, losses, stamps, lo, hi, last_step, last_t, interval_sum, interval_n, null_bits) -> "
     "(rates, last_step, last_t, interval_sum, interval_n, nan_losses, first_stamp, last_stamp)"},
    {"tar_header", tar_header, METH_VARARGS, "tar_header(block) -> None or (type, size, name or None)"},
    {"marked_lines", marked_lines, METH_VARARGS, "marked_lines(buf, marks) -> lines, those without a marker as \"\""},
    {"fields", fields, METH_VARARGS,
     "fields(buf, lines_before, null_bits, program, ncols, stamp) -> (n_lines, line_nos, spans, columns, stamps, "
     "others, all_ascii)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "the C hot paths of the ingest: tf_cnn scan and advance, thermal files, tar headers, substring search, marked lines, line programs", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    mark_set_init(&STDERR_SET, STDERR_MARKS, 0);
    mark_set_init(&INERT_SET, INERT_MARKS, 1);
    return PyModule_Create(&module);
}
