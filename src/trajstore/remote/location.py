"""Reaching object storage through fsspec (the URL helpers are in :mod:`trajstore._urls`)."""

from __future__ import annotations

from typing import Any

from trajstore._urls import (LOCAL_PROTOCOLS, is_published_folder, is_remote, local_path, protocol_of,  # noqa: F401
                             refuse_remote_write)


def filesystem(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """``(fsspec file system, root path without the scheme and without a trailing /)`` of ``url``.

    A new file system instance every call (``skip_instance_cache``): fsspec's async clients must not
    cross a fork, and a reopened buffer in a worker process makes its own.

    Raises:
        ImportError: fsspec (or the protocol's package, e.g. s3fs) is missing: ``pip install trajstore[remote]``.
        ValueError: an unknown protocol.
    """
    try:
        import fsspec
    except ImportError:
        raise ImportError("reading or publishing buffers in object storage needs fsspec: "
                          "pip install 'trajstore[remote]'") from None
    options = dict(storage_options or {})
    options.setdefault("skip_instance_cache", True)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root.rstrip("/")
