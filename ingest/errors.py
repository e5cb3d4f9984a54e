"""The one user-error type. The CLI prints ``Error: <message>`` and exits 1 (2 for a ``UsageError``);
anything else is a bug, except the faults of the machine (``fault_message``: a full disk, a read-only file
system), which are not the user's input and not bench's bug, and get one line too."""

import errno


class BenchError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""


class UsageError(BenchError):
    """An option or argument the command cannot take (an unknown factor, a --where that is not SQL over
    the view, an --out of an unknown kind): exit code 2, as for Typer's own usage errors."""


#: errno -> what it means for the command that met it. Whatever was being written is not committed: a
#: store's batch is renamed into place whole or not at all, and a run.json is written atomically.
FAULTS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
}


def fault_message(e: OSError) -> str | None:
    """One line for an OSError that is a fault of the machine (FAULTS), None for any other."""
    what = FAULTS.get(e.errno or 0)
    if what is None:
        return None
    where = f" ({e.filename})" if e.filename else ""
    return (f"{what}{where}: what was being written was not committed (an ingest keeps the batches it "
            "committed before); free space or give a --store / --out you may write to, and run it again")
