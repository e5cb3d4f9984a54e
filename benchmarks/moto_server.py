"""A local S3-compatible server for the object-storage tests and benchmark: moto in server mode, on 127.0.0.1,
in a process of its own (deltalake's calls hold the GIL while they wait for a reply, so a server thread in
the calling process would never answer them). moto is in the dev extra; bench never imports it.

moto checks a conditional write's condition (``If-None-Match: *``, ``If-Match``) and then writes, in two steps
on its request threads: two writers racing for one key can both succeed, which S3 never allows, and which is
the very race a store's commits and Delta logs rest on. The server here runs moto with one lock around each
object write (a PUT, and the completion of a multipart upload), so that a conditional write is atomic, as on
S3 (``ATOMIC_WRITES``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

#: moto's server, its object writes each under one lock.
ATOMIC_WRITES = """
import sys, threading
from moto.s3.responses import S3Response

lock = threading.Lock()

def atomic(write):
    def locked(*args, **kwargs):
        with lock:
            return write(*args, **kwargs)
    return locked

S3Response.put_object = atomic(S3Response.put_object)
S3Response._key_response_post = atomic(S3Response._key_response_post)  # CompleteMultipartUpload
from moto.server import main
main(sys.argv[1:])
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (as the kernel hands it out now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server(env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> Iterator[str]:
    """The endpoint (``http://127.0.0.1:PORT``) of a moto server started with ``env`` (None: this
    process's), once it accepts connections; stopped on exit. RuntimeError when it does not start."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", ATOMIC_WRITES, "-H", "127.0.0.1", "-p", str(port)],
                            env=None if env is None else dict(env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto did not start on port {port} (exit code {proc.poll()})") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()
