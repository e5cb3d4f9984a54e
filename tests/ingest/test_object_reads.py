"""A read of a whole object (bench.sql.objstore.read_all) is tried again when its response is cut off on the
way, as S3 and moto do under load ("Failed to flush response stream"), and not when the object is missing or
the credentials may not read it: those fail at once, with the service's words."""

from __future__ import annotations

import io
from typing import Any

import pytest

from bench.sql import objstore


class _Flaky:
    """A file system whose first ``failures`` reads raise ``error`` after a part of the body was read."""

    def __init__(self, body: bytes, failures: int, error: OSError) -> None:
        self.body, self.failures, self.error, self.opened = body, failures, error, 0

    def open_input_stream(self, path: str) -> Any:
        self.opened += 1
        if self.opened <= self.failures:
            fs = self

            class Cut(io.BytesIO):
                def read(self, n: int | None = -1) -> bytes:
                    if self.tell() or n is None or n < 0:  # a part of the body is read, then it is cut
                        raise fs.error
                    return super().read(3)

            return Cut(self.body)
        return io.BytesIO(self.body)


CUT = OSError("AWS Error INTERNAL_FAILURE during GetObject operation: Failed to flush response stream (eof: 0, bad: 1)")


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objstore, "READ_WAIT_S", 0.0)


def test_a_read_cut_off_twice_is_read_whole_on_the_third_try(tmp_path: Any) -> None:
    fs = _Flaky(b"0123456789" * 1000, failures=2, error=CUT)
    with open(tmp_path / "part", "w+b") as out:
        assert objstore.read_all(fs, "b/x", out) == b""
        out.seek(0)
        assert out.read() == fs.body  # the first tries' bytes were emptied, not kept ahead of the whole
    assert fs.opened == 3


def test_a_read_cut_off_every_time_fails_after_the_last_try_with_the_services_words() -> None:
    fs = _Flaky(b"0123456789" * 10, failures=99, error=CUT)
    with pytest.raises(OSError, match="Failed to flush response stream"):
        objstore.read_all(fs, "b/x")
    assert fs.opened == objstore.READ_TRIES == 4


@pytest.mark.parametrize("error", [FileNotFoundError("b/x"), PermissionError("b/x"),
                                   OSError("AWS Error ACCESS_DENIED during GetObject operation: HTTP 403")])
def test_a_missing_or_forbidden_object_fails_at_once(error: OSError) -> None:
    fs = _Flaky(b"0123456789" * 10, failures=99, error=error)
    with pytest.raises(OSError):
        objstore.read_all(fs, "b/x")
    assert fs.opened == 1
