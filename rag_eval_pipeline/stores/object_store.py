"""Parquet tables in an S3-compatible object store, one object per (tenant, version, table).

Keys are `<prefix>/<tenant>/<version>/<table>.parquet` under `s3://<bucket>/<prefix>`, the
layout of the local warehouse; tenant and version pass `validate_name`, so no key leaves its tenant's
prefix. A table is written as one object in one request: S3 replaces an object atomically, so a
reader sees the old table or the new one, never a part. Above S3's 5 GiB limit for one PUT the
upload is multi-part, which S3 also publishes only when the last request (complete) succeeds.
A table is read in one GET, so a table replaced during a read is never mixed with its successor.

Every failure of the store itself (down, wrong endpoint, unknown bucket, refused credentials) is an
`ObjectStoreError` in one line naming the endpoint and bucket; s3fs and botocore load only when a
store is used.
"""

from __future__ import annotations

import functools
import io
import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pandas as pd

from rag_eval_pipeline.core.names import validate_name

SCHEME = "s3"
SINGLE_PUT_LIMIT = 5 * 2**30  # bytes: the largest object S3 takes in one PUT
CONNECT_TIMEOUT_S = 2.0  # a store that does not accept a connection in 2 s is down, not slow
READ_TIMEOUT_S = 60.0  # a large PUT may take a while to be acknowledged
MAX_ATTEMPTS = 3  # botocore's attempts per request (connection errors and 5xx included)
_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # S3's bucket naming rules
_TABLE_PATTERN = re.compile(r"^[A-Za-z0-9_]{1,128}$")  # Dagster asset names


class ObjectStoreError(OSError):
    """The object store cannot be used as configured; the message says which store and what to fix."""


class MissingTableError(FileNotFoundError):
    """A table that was never materialized for this tenant and dataset version."""


@dataclass(frozen=True)
class ObjectStoreSettings:
    base_url: str  # s3://bucket/prefix
    endpoint_url: str  # the S3 server, e.g. http://127.0.0.1:8333
    access_key_id: str
    secret_access_key: str = field(repr=False)
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    max_attempts: int = MAX_ATTEMPTS

    def __post_init__(self) -> None:
        parse_base_url(self.base_url)
        endpoint = urlsplit(self.endpoint_url)
        if endpoint.scheme not in ("http", "https") or not endpoint.netloc:
            raise ObjectStoreError(
                f"invalid object store endpoint {self.endpoint_url!r}: use http(s)://host:port of the S3 server"
            )
        if not self.access_key_id or not self.secret_access_key:
            raise ObjectStoreError(
                f"no credentials for the object store at {self.endpoint_url}: "
                "set its access key id and secret access key"
            )

    @property
    def bucket(self) -> str:
        return parse_base_url(self.base_url)[0]

    @property
    def prefix(self) -> str:
        return parse_base_url(self.base_url)[1]

    def storage_options(self) -> dict:
        """s3fs options: short connect timeout and few attempts, so a down store fails in seconds."""
        return {
            "endpoint_url": self.endpoint_url,
            "key": self.access_key_id,
            "secret": self.secret_access_key,
            "use_listings_cache": False,  # another worker may write at any time
            "config_kwargs": {
                "connect_timeout": self.connect_timeout_s,
                "read_timeout": self.read_timeout_s,
                "retries": {"max_attempts": self.max_attempts, "mode": "standard"},
            },
        }

    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint_url}"


def parse_base_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; the prefix may be empty."""
    parts = urlsplit(url or "")
    prefix = parts.path.strip("/")
    if (
        parts.scheme != SCHEME
        or not _BUCKET_PATTERN.fullmatch(parts.netloc)
        or parts.query
        or parts.fragment
        or any(segment in ("", ".", "..") for segment in prefix.split("/") if prefix)
    ):
        raise ObjectStoreError(
            f"invalid object store URL {url!r}: use s3://<bucket>/<prefix> (bucket: 3 to 63 lowercase letters, "
            "digits, '.' and '-'; prefix: folder names without '.', '..' or '//')"
        )
    return parts.netloc, prefix


def table_key(tenant: str, version: str, name: str) -> str:
    """`<tenant>/<version>/<name>.parquet`, relative to the store's prefix."""
    if not isinstance(name, str) or not _TABLE_PATTERN.fullmatch(name):
        raise ValueError(f"invalid table name {name!r}: use letters, digits and '_'")
    return f"{validate_name('tenant', tenant)}/{validate_name('dataset version', version)}/{name}.parquet"


def to_parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


class ObjectStore:
    """The tables of every tenant in one bucket; `write`/`read`/`exists` as on the local Warehouse."""

    def __init__(self, config: ObjectStoreSettings):
        self.config = config
        self._fs = None
        self._pid = os.getpid()

    @property
    def fs(self):
        """This store's own s3fs filesystem (not fsspec's shared instance: its retries are set here),
        made again in a forked child, where s3fs refuses to run the parent's."""
        if self._fs is None or self._pid != os.getpid():
            from s3fs import S3FileSystem

            fs = S3FileSystem(skip_instance_cache=True, **self.config.storage_options())
            fs.retries = self.config.max_attempts  # s3fs's own loop around botocore's, for read errors
            self._fs, self._pid = fs, os.getpid()
        return self._fs

    def path(self, tenant: str, version: str, name: str) -> str:
        """`bucket/prefix/tenant/version/name.parquet`, as s3fs names objects."""
        key = table_key(tenant, version, name)
        return "/".join(part for part in (self.config.bucket, self.config.prefix, key) if part)

    def url(self, tenant: str, version: str, name: str) -> str:
        return f"{SCHEME}://{self.path(tenant, version, name)}"

    def write(self, tenant: str, version: str, name: str, frame: pd.DataFrame) -> str:
        """The whole table in one PUT (serialized first, so a failed serialization uploads nothing)."""
        path = self.path(tenant, version, name)
        data = to_parquet_bytes(frame)
        with self.errors("write", path):
            # chunksize: s3fs uses one put_object below 2 x chunksize (capped at 5 GiB), else multi-part.
            self.fs.pipe_file(path, data, chunksize=SINGLE_PUT_LIMIT)
        return f"{SCHEME}://{path}"

    def read(self, tenant: str, version: str, name: str) -> pd.DataFrame:
        path = self.path(tenant, version, name)
        data = b""
        with self.errors("read", path):
            try:
                data = self.fs.cat_file(path)  # one GET of the whole object
            except FileNotFoundError as error:
                if _error_code(error) == "NoSuchBucket":
                    raise
                raise MissingTableError(
                    f"no {name!r} table for tenant {tenant!r}, dataset version {version!r} at "
                    f"{SCHEME}://{path} ({self.config.endpoint_url}): materialize it first"
                ) from error
        return pd.read_parquet(io.BytesIO(data if isinstance(data, bytes) else data.encode()))

    def exists(self, tenant: str, version: str, name: str) -> bool:
        path = self.path(tenant, version, name)
        found = False
        with self.errors("look up", path):
            found = self._object_exists(path)
        return found

    def delete(self, tenant: str, version: str, name: str) -> None:
        path = self.path(tenant, version, name)
        with self.errors("delete", path):
            if self._object_exists(path):
                self.fs.rm_file(path)

    def check(self) -> None:
        """Raise ObjectStoreError unless the bucket answers to these credentials (a startup check)."""
        with self.errors("reach", self.config.bucket):
            self.fs.call_s3("list_objects_v2", Bucket=self.config.bucket, MaxKeys=1)

    def _object_exists(self, path: str) -> bool:
        try:
            return self.fs.info(path)["type"] == "file"  # not a "folder": a prefix of other keys
        except FileNotFoundError as error:
            if _error_code(error) == "NoSuchBucket":
                raise
            return False

    def errors(self, action: str, path: str) -> _StoreErrors:
        """Context manager: a failure of the store becomes one ObjectStoreError line; a missing
        table and errors of our own (a bad frame, a bad name) pass unchanged."""
        return _StoreErrors(self.config, action, path)


@functools.cache
def shared_object_store(config: ObjectStoreSettings) -> ObjectStore:
    """One ObjectStore (and its connection pool) per configuration and process."""
    return ObjectStore(config)


class _StoreErrors:
    def __init__(self, config: ObjectStoreSettings, action: str, path: str):
        self.config, self.action, self.path = config, action, path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or isinstance(error, (ObjectStoreError, MissingTableError)) or not _is_store_error(error):
            return False
        raise ObjectStoreError(describe(self.config, self.action, self.path, error)) from error


def _is_store_error(error: BaseException) -> bool:
    """Raised by the transport or the server, not by our code."""
    if isinstance(error, (OSError, TimeoutError)):
        return True
    module = type(error).__module__.split(".")[0]
    return module in ("botocore", "aiobotocore", "aiohttp", "s3fs", "urllib3")


def _error_code(error: BaseException) -> str:
    """The S3 error code (NoSuchKey, NoSuchBucket, ...) behind an error s3fs translated, if any."""
    cause = error if getattr(error, "response", None) else error.__cause__
    response = getattr(cause, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def describe(config: ObjectStoreSettings, action: str, path: str, error: BaseException) -> str:
    """One line: what failed, on which store, and what to check."""
    code = _error_code(error)
    if code == "NoSuchBucket" or isinstance(error, FileNotFoundError):
        fix = f"bucket {config.bucket!r} does not exist: create it, or fix the object store URL {config.base_url!r}"
    elif isinstance(error, PermissionError) or code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
        fix = "credentials refused: check the access key id and secret access key"
    elif _is_connection_error(error):
        fix = "cannot connect: is the S3 server running at that endpoint?"
    else:
        fix = "check the endpoint, bucket and credentials"
    detail = " ".join(str(error).split()) or type(error).__name__
    if len(detail) > 200:
        detail = detail[:200] + "..."
    return (
        f"object store error: could not {action} s3://{path} in {config.where()}: {fix} "
        f"({type(error).__name__}: {detail})"
    )


def _is_connection_error(error: BaseException) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(
        names
        & {
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ConnectionError",
            "ClientConnectorError",
            "ServerDisconnectedError",
            "ConnectionClosedError",
            "ReadTimeoutError",
            "TimeoutError",
        }
    )
