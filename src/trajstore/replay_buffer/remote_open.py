"""A buffer opened from a URL: the opener is asked for a folder, and the buffer opens that folder.

``ReplayBuffer.load_from("s3://...")`` imports nothing of :mod:`trajstore.remote`: it asks
:func:`trajstore._openers.url_opener` (which :mod:`trajstore.remote` registers) to turn the URL into a
:class:`~trajstore._openers.RemoteFolder`, a local folder with the buffer's small files and the
:class:`~trajstore.storages._payload.PayloadSource` of its payload files, and opens that folder
read-only like any other, handing the source to its storages at open
(``storage/`` for the step storage, ``final_observations/`` for the final observations). The buffer
keeps the folder (``published_snapshot``, closed with the buffer) and
pickles as the folder's :meth:`~trajstore._openers.RemoteFolder.reopen_kwargs`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajstore import _openers
from trajstore._urls import is_published_folder, is_remote, local_path

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer


class RemoteOrigin:
    """What a buffer opened from a URL reads: ``self._remote``, its :class:`~trajstore._openers.RemoteFolder`
    (``None`` for a local folder), set by :func:`load_url`."""

    _remote: Any

    @property
    def published_snapshot(self) -> tuple[str, str] | None:
        """``(url, snapshot id)`` of a buffer opened from a URL (the pushed snapshot it reads), else ``None``."""
        return None if self._remote is None else (self._remote.url, self._remote.snapshot)

    @property
    def payload_source(self) -> Any:
        """The payload source of a buffer opened from a URL (its request and byte counters), else ``None``."""
        return None if self._remote is None else self._remote.payload


def is_url(cache_path: str | os.PathLike) -> bool:
    """True for a URL of object storage, and for a local folder holding a pushed copy (a manifest, no
    ``trajstore.json``): both open through the URL opener."""
    return is_remote(cache_path) or is_published_folder(local_path(cache_path))


def load_url(cls: type["ReplayBuffer"], cache_path: str | os.PathLike, *, read_only: bool, multiprocessing: bool,
             **opener_kwargs: Any) -> "ReplayBuffer":
    """``cls.load_from`` of a URL (see the module docstring); ``opener_kwargs`` go to the opener
    (``storage_options``, ``cache_dir``, or what :meth:`RemoteFolder.reopen_kwargs` gave).

    Raises:
        ImportError: the remote extra is not installed.
        ReadOnlyError, FormatError, RemoteStoreError, ...: as the opener and :meth:`ReplayBuffer.load_from`.
    """
    url = cache_path if is_remote(cache_path) else Path(local_path(cache_path)).resolve().as_uri()
    folder = _openers.url_opener()(str(url), read_only=read_only, **opener_kwargs)
    try:
        rb = cls.load_from(folder.path, read_only=True, multiprocessing=multiprocessing, payload=folder.payload)
    except BaseException:
        folder.close()
        raise
    rb._remote = folder
    return rb


def reopen_url(reopen_kwargs: dict[str, Any], multiprocessing: bool) -> "ReplayBuffer":
    """The unpickling side of a buffer opened from a URL: the same snapshot, from the folder's
    ``reopen_kwargs`` (the ``url`` among them)."""
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    kwargs = dict(reopen_kwargs)
    return load_url(ReplayBuffer, kwargs.pop("url"), read_only=True, multiprocessing=multiprocessing, **kwargs)

