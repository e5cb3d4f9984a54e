"""The one user-error type. The CLI prints ``Error: <message>`` and exits 1 (2 for a ``UsageError``);
anything else is a bug."""


class BenchError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""


class UsageError(BenchError):
    """An option or argument the command cannot take (an unknown factor, a --where that is not SQL over
    the view, an --out of an unknown kind): exit code 2, as for Typer's own usage errors."""
