"""Reaching object storage through fsspec (the URL helpers are in :mod:`trajstore._urls`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from trajstore._urls import (LOCAL_PROTOCOLS, is_published_folder, is_remote, local_path, protocol_of,  # noqa: F401
                             refuse_remote_write)
from trajstore.errors import InvalidValueError, RemoteStoreError, TrajstoreError


def filesystem(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """``(fsspec file system, root path without the scheme and without a trailing /)`` of ``url``.

    A new file system instance every call (``skip_instance_cache``): fsspec's async clients must not
    cross a fork, and a reopened buffer in a worker process makes its own.

    Raises:
        ImportError: fsspec (or the protocol's package, e.g. s3fs) is missing: ``pip install trajstore[remote]``.
        InvalidValueError: ``url`` is not a string, ``storage_options`` not a dict, or the protocol is unknown.
        RemoteStoreError: the file system refused the storage options.
    """
    if not isinstance(url, str):
        raise InvalidValueError(f"expected a URL string, got {type(url).__name__} {url!r}")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise InvalidValueError(f"{url}: storage_options must be a dict of fsspec options "
                                f"({{'key': ..., 'client_kwargs': {{'endpoint_url': ...}}}}), got "
                                f"{type(storage_options).__name__}")
    try:
        import fsspec
    except ImportError:
        raise ImportError("reading or publishing buffers in object storage needs fsspec: "
                          "pip install 'trajstore[remote]'") from None
    options = dict(storage_options or {})
    options.setdefault("skip_instance_cache", True)
    try:
        fsspec.get_filesystem_class(protocol_of(url) or "file")
    except ValueError:
        raise InvalidValueError(f"{url}: unknown URL scheme {protocol_of(url)!r} (known to fsspec: "
                                f"{', '.join(sorted(fsspec.available_protocols())[:12])}, ...)") from None
    with store_errors(url):
        fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root.rstrip("/")


@contextlib.contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Re-raise what the store's client raises as :class:`RemoteStoreError` naming ``url``.

    Trajstore's own errors and ``OSError`` (s3fs maps S3's answers to ``FileNotFoundError``,
    ``PermissionError``, ...) pass as they are; other exceptions of the client (botocore's
    ``EndpointConnectionError``, a ``TypeError`` for a storage option the client does not take, ...)
    would otherwise reach the caller as types no one catches.
    """
    try:
        yield
    except (TrajstoreError, OSError):
        raise
    except Exception as exc:
        if type(exc).__name__ == "NoCredentialsError":  # botocore's: say where credentials go
            raise RemoteStoreError(f"{url}: {exc} (pass them in storage_options as key=ACCESS_KEY, "
                                   "secret=SECRET_KEY -- on the command line -o key=... -o secret=... -- or set "
                                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)") from exc
        raise RemoteStoreError(f"{url}: the object store request failed ({type(exc).__name__}: {exc})") from exc
