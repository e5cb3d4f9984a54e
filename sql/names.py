"""Names as the store holds them (file and member names: text every table can hold, and back), and as a
terminal or a page is shown them (``shown``: their control characters as text)."""

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


#: C0 controls but tab and newline, DEL and the C1 controls (0x9b is a one-byte CSI on some terminals).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with every control character but tab and newline escaped as ``\\xNN`` (``\\x1b[2J``): a name
    in a log (a host, a model) is data, and reaches no terminal as a command (an OSC 52 clipboard write)."""
    return CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
