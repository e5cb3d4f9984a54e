"""File and member names as the store holds them: text every table can hold, and back."""

from __future__ import annotations

import re


def storable(name: str) -> str:
    """A file or member name as text every table can hold. Linux names are bytes: those that are not
    UTF-8 (a Latin-1 name, say) reach Python as lone surrogates, which Arrow refuses; they become ``\\xNN``
    escapes (``fs_name`` undoes them). Any other lone surrogate becomes ``\\udNNN``."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("ascii")


_BYTE_ESCAPE = re.compile(r"\\x([89a-f][0-9a-f])")


def fs_name(text: str) -> str:
    """The name ``storable`` made ``text`` of, as the file system gives it to Python."""
    return _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m[1], 16)), text)
