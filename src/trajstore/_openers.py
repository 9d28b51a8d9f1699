"""The seam between the buffer and object storage: URL openers, asked for by the buffer.

``ReplayBuffer.load_from("s3://...")`` does not import :mod:`trajstore.remote`. It asks
:func:`url_opener` for the function registered for URLs, which turns a URL into a
:class:`RemoteFolder`: a local folder holding the buffer's small files (metadata, indexes, HDF5)
and a :class:`~trajstore.storages._payload.PayloadSource` for the payload files that stay in the
bucket. The buffer then opens that folder as it opens any other, handing the source to its
storages at open. :mod:`trajstore.remote` registers its opener when it is imported; when none is
registered yet, :func:`url_opener` imports the one module known to provide it (the way numcodecs
finds a codec by a declared name, never by a path read from a file).
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Any, Protocol

#: The module that registers the URL opener on import (fsspec is imported only then).
REMOTE_MODULE = "trajstore.remote"


class RemoteFolder(Protocol):
    """A buffer published at a URL, made openable: what a URL opener returns.

    Attributes:
        url: the URL it was opened from.
        path: a local folder with every small file of one snapshot (the buffer opens it read-only).
        payload: the source of the payload files of ``path`` (relative paths from ``path``).
        snapshot: the snapshot's id (its generation and manifest hash): a copy reopened elsewhere
            reads this snapshot, not whatever the URL holds later.
    """

    url: str
    path: Path
    payload: Any
    snapshot: str

    def reopen_kwargs(self) -> dict[str, Any]:
        """Picklable keyword arguments for the opener that open this same snapshot in another process."""

    def close(self) -> None:
        """Release the local folder (a temporary mirror is removed) and the payload source."""


class UrlOpener(Protocol):
    def __call__(self, url: str, **kwargs: Any) -> RemoteFolder:
        """Open ``url`` (``storage_options=``, ``cache_dir=``, or what :meth:`RemoteFolder.reopen_kwargs`
        gave); raises the opener's errors (FormatError, RemoteStoreError, ...)."""


_OPENER: UrlOpener | None = None
_LOCK = threading.Lock()


def register_url_opener(opener: UrlOpener) -> None:
    """Make ``opener`` the function that opens buffer URLs (called by :mod:`trajstore.remote`)."""
    global _OPENER
    with _LOCK:
        _OPENER = opener


def url_opener() -> UrlOpener:
    """The registered URL opener, importing :data:`REMOTE_MODULE` first if none is registered.

    Raises:
        ImportError: the remote extra (fsspec) is not installed; says how to install it.
    """
    if _OPENER is None:
        try:
            importlib.import_module(REMOTE_MODULE)
        except ImportError as exc:
            raise ImportError(f"reading a buffer from a URL needs the remote extra: pip install 'trajstore[remote]' "
                              f"({exc})") from exc
    if _OPENER is None:
        raise ImportError(f"{REMOTE_MODULE} registered no URL opener")
    return _OPENER
