"""The one user-error type. The CLI prints ``Error: <message>`` and exits 1 (2 for a ``UsageError``);
anything else is a bug, except the faults of the machine (``fault_message``: a full disk, a read-only file
system), which are not the user's input and not bench's bug, and get one line too."""

import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


class BenchError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""


class UsageError(BenchError):
    """An option or argument the command cannot take (an unknown factor, a --where that is not SQL over
    the view, an --out of an unknown kind): exit code 2, as for Typer's own usage errors."""


#: errno -> what it means for the command that met it. Whatever was being written is not committed: a
#: store's ingest is published by one commit or not at all, and a run.json is written atomically.
FAULTS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def fault_message(e: BaseException) -> str | None:
    """One line for an error that is a fault of the machine (FAULTS), None for any other: an OSError with
    its errno, or an error of deltalake's Rust core, whose message ends "(os error 28)"."""
    code = getattr(e, "errno", None)
    if code is None:
        found = re.search(r"\(os error (\d+)\)", str(e))
        code = int(found.group(1)) if found else 0
    what = FAULTS.get(code)
    if what is None:
        return None
    filename = getattr(e, "filename", None)
    where = f" ({filename})" if filename else ""
    fix = "give" if code in (errno.EACCES, errno.EPERM, errno.EROFS) else "free space or give"
    return (f"{what}{where}: what was being written was not committed (a store commits an ingest whole, or "
            f"nothing of it); {fix} a --store / --out you may write to, and run it again")


def one_line(e: BaseException) -> str:
    """An exception as one short line: its type and its message's first line (deltalake's errors are
    several lines long)."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


@contextmanager
def native_stderr_held() -> Iterator[None]:
    """File descriptor 2 sent to a temporary file while deltalake's Rust core works: what it prints when it
    fails (tokio's "panicked ... Already shut down" stack, on a full disk) is dropped, the error being
    reported in one line; when it succeeds, what it printed is passed on."""
    sys.stderr.flush()
    try:
        held = tempfile.TemporaryFile()
    except OSError:  # no room for even that: nothing held
        yield
        return
    saved = os.dup(2)
    os.dup2(held.fileno(), 2)
    ok = False
    try:
        yield
        ok = True
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if ok:
            held.seek(0)
            if text := held.read():
                os.write(2, text)
        held.close()
