"""The one user-error type. The CLI prints ``Error: <message>`` and exits 1; anything else is a bug."""


class BenchError(Exception):
    """A problem the user can fix; the message says what was wrong and what to do."""
