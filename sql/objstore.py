"""Where a store on object storage is, and how bench reaches it: the URL, the file system, deltalake's
storage options, a local cache of its immutable files, and its errors in one line.

``--store s3://bucket/prefix`` (also ``gs://`` and ``az://`` / ``abfs[s]://``). Credentials and the
endpoint come from the variables each cloud's own tools read: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` and ``AWS_ENDPOINT_URL`` (an S3-compatible
server: MinIO, Ceph, moto) for S3, else the AWS default chain (profile, instance role); Google's and
Azure's (``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_ACCOUNT_NAME`` / ``_KEY``) for the others.
Data files go through pyarrow's file systems; the commits table through deltalake, whose commit of a
version is a conditional write (S3's If-None-Match, ``conditional_put=etag``; GCS and Azure natively).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.sql.errors import BenchError, UsageError, one_line
from bench.sql.names import storable

if TYPE_CHECKING:
    import pyarrow.fs as pafs

#: Schemes bench takes as object storage. ``Path("s3://b/p")`` reads "s3:/b/p": both are recognised.
_URL = re.compile(r"^(s3|gs|az|abfss?):/+(.+)$")
#: Files up- or downloaded at once.
TRANSFERS = 8
#: Tries of one read of a whole object, and the wait before the second (doubled each time): the SDK retries a
#: request that fails, not a response cut off while its body is read ("Failed to flush response stream",
#: a connection reset), which S3 and its look-alikes do under load.
READ_TRIES = 4
READ_WAIT_S = 0.2


def url_of(store: os.PathLike[str] | str) -> str | None:
    """The object-storage URL ``store`` names (``s3://bucket/prefix``, without a trailing slash), or None
    for a path on a file system."""
    m = _URL.match(os.fspath(store))
    return f"{m[1]}://{m[2].rstrip('/')}" if m else None


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def storage_options(url: str) -> dict[str, str]:
    """deltalake's storage options for ``url``: what its object store does not take from the environment
    by itself. S3: plain HTTP where the endpoint is ``http://`` (a local server), and commits by
    conditional write unless a locking provider is configured."""
    opts: dict[str, str] = {}
    if url.startswith("s3://"):
        endpoint = _endpoint()
        if endpoint:
            opts["AWS_ENDPOINT_URL"] = endpoint
            if endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if "AWS_S3_LOCKING_PROVIDER" not in os.environ:
            opts["conditional_put"] = "etag"
        opts.setdefault("AWS_REGION", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    return opts


def filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system for ``url`` and the store's root path in it ("bucket/prefix")."""
    import pyarrow.fs as pafs

    scheme, _, rest = url.partition("://")
    if scheme != "s3":
        fs, root = pafs.FileSystem.from_uri(url)
        return fs, root
    kwargs: dict[str, Any] = {"region": storage_options(url)["AWS_REGION"], "connect_timeout": 5, "request_timeout": 30,
                              "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
    if endpoint := _endpoint():
        kwargs["scheme"], _, kwargs["endpoint_override"] = endpoint.partition("://")
    if "AWS_ACCESS_KEY_ID" in os.environ:
        kwargs.update(access_key=os.environ["AWS_ACCESS_KEY_ID"], secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
                      session_token=os.environ.get("AWS_SESSION_TOKEN"))
    return pafs.S3FileSystem(**kwargs), rest


def failure(url: str, e: BaseException, doing: str) -> BenchError:
    """One line for an object-storage error: what was being done, where, and what the service said."""
    text = one_line(e)
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low or "bucket not found" in low:
        why = "the bucket does not exist"
    elif _denied(low):
        why = "access denied: check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile)"
    elif any(s in low for s in ("connection refused", "connect error", "couldn't connect", "could not connect",
                                "network_connection", "timed out", "timeout",
                                "dns", "resolve", "unreachable", "generic s3 error", "error sending request")):
        why = f"the endpoint cannot be reached ({_endpoint() or 'the cloud default'})"
    elif url.startswith("s3://") and not _aws_credentials():
        why = ("no AWS credentials were found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or "
               f"~/.aws/credentials); the service said: {text[:120]}")
    else:
        why = text[:200]
    return BenchError(f"store {url}: {doing} failed: {why}")


#: an HTTP status 401 or 403 on its own: not the digits of a bucket, key, port or address that hold them, nor a
#: time (a bucket ``b540324910015`` read as "access denied" when its endpoint could not be reached)
_DENIED_STATUS = re.compile(r"(?<![\w.:/-])40[13](?![\w.:/-]|\s*ms\b)")


def _denied(low: str) -> bool:
    """Whether an error's text (lower case) says the credentials may not do it."""
    return any(s in low for s in ("accessdenied", "access denied", "access_denied", "invalidaccesskeyid",
                                  "signaturedoesnotmatch", "forbidden", "unauthorized")) or bool(_DENIED_STATUS.search(low))


def _aws_credentials() -> bool:
    """Whether this process names AWS credentials the SDK would find without asking a cloud instance."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
             "AWS_CONTAINER_CREDENTIALS_FULL_URI")
    files = (os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials"),
             os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config"))
    return any(os.environ.get(n) for n in names) or any(os.path.exists(f) for f in files)


def cache_dir() -> Path:
    """Where the store's files are kept once read (``$BENCH_CACHE``, else ``$XDG_CACHE_HOME/bench`` or
    ``~/.cache/bench``): every file of a store on object storage is immutable and named by its content's
    SHA-256 here, so a file is downloaded once per machine, however many stores or queries read it."""
    base = os.environ.get("BENCH_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                         os.path.expanduser("~/.cache"), "bench")
    return Path(base) / "objects"


def cached(sha: str) -> Path:
    return cache_dir() / sha[:2] / f"{sha}.parquet"


def read_all(fs: pafs.FileSystem, path: str, out: Any = None) -> bytes:
    """The bytes of the object ``path`` (or, with ``out``, written to that binary file, emptied before each
    try, and b"" returned), read again when the read fails on the way: an object that is not there, or may
    not be read, fails at once."""
    for attempt in range(READ_TRIES):
        try:
            with fs.open_input_stream(path) as src:
                if out is None:
                    return bytes(src.read())
                out.seek(0)
                out.truncate()
                while chunk := src.read(1 << 22):
                    out.write(chunk)
                return b""
        except (FileNotFoundError, PermissionError):
            raise
        except OSError as e:
            if attempt + 1 == READ_TRIES or _denied(one_line(e).lower()):
                raise
            time.sleep(READ_WAIT_S * 2 ** attempt)
    raise AssertionError("unreachable")


def fetch(fs: pafs.FileSystem, path: str, sha: str) -> Path:
    """The local copy of the object ``path`` whose recorded SHA-256 is ``sha``: from the cache, else
    downloaded and checked. Raises ValueError when the bytes are not those recorded (not cached)."""
    target = cached(sha)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    try:
        with open(part, "w+b") as out:
            read_all(fs, path, out)
            out.seek(0)
            h = hashlib.file_digest(out, "sha256")
        if h.hexdigest() != sha:
            raise ValueError(f"its SHA-256 is {h.hexdigest()[:12]}..., not the {sha[:12]}... recorded when it was committed")
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def fetch_all(fs: pafs.FileSystem, wanted: dict[str, str]) -> tuple[dict[str, Path], dict[str, str]]:
    """Local copies of the objects ``wanted`` (path -> SHA-256), several at a time; and why each that could
    not be had (missing, or other bytes) was not."""
    got: dict[str, Path] = {}
    failed: dict[str, str] = {}

    def one(item: tuple[str, str]) -> None:
        try:
            got[item[0]] = fetch(fs, *item)
        except (OSError, ValueError) as e:
            failed[item[0]] = one_line(e)

    with ThreadPoolExecutor(TRANSFERS) as pool:
        list(pool.map(one, wanted.items()))
    return got, failed


def upload_all(fs: pafs.FileSystem, files: dict[str, Path]) -> None:
    """Copy local files to objects (object path -> local file), several at a time."""

    def one(item: tuple[str, Path]) -> None:
        with open(item[1], "rb") as src, fs.open_output_stream(item[0]) as out:
            while chunk := src.read(1 << 22):
                out.write(chunk)

    with ThreadPoolExecutor(TRANSFERS) as pool:
        list(pool.map(one, files.items()))


def check_text_path(root: Path) -> None:
    """Raise UsageError for a store path that is a URL bench does not write here (``http://``, or an
    object-storage URL where only a local store will do: a folder named ``s3:`` is not what was meant) or
    not UTF-8 text (a Latin-1 name on Linux): Arrow and DuckDB take paths as UTF-8, and could neither
    write nor read the store."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]+:/", str(root)):  # Path("s3://b") reads "s3:/b"
        where = "s3://, gs:// and az:// stores take ingest, --compact, --check and every reading command" if url_of(root) \
            else "a file system (local or mounted) or s3://, gs://, az://"
        raise UsageError(f"--store {root}: not for this command; bench keeps a store on {where} "
                         "(README \"Several hosts and object storage\")")
    text = storable(str(root))
    if text != str(root):
        raise UsageError(f"--store {text}: the path is not UTF-8 text, which Arrow and DuckDB need; give another")
