"""Buffers beyond one machine: publish a buffer folder to object storage and read it from there.

* ``ReplayBuffer.load_from("s3://bucket/path", storage_options={...})`` opens a published buffer
  read-only: importing this package registers the URL opener the buffer asks for
  (:mod:`trajstore._openers`, :func:`~trajstore.remote.mirror.open_url`).
* :func:`push` publishes a local folder (closed or live) under a URL, incrementally;
  :func:`pull` copies a published buffer into a new local folder (:mod:`~trajstore.remote.publish`,
  :mod:`~trajstore.remote.download`).

Needs the ``remote`` extra (fsspec, and s3fs for ``s3://``); any fsspec URL works with the
package of its protocol installed. The layout in the bucket is described in
:mod:`~trajstore.remote.layout` and :mod:`~trajstore.remote.manifest`.
"""

from typing import Any

from trajstore._openers import register_url_opener
from trajstore.remote.location import is_remote

__all__ = ["is_remote", "push", "pull", "PushReport", "PullReport"]


def _open_url(url: str, **kwargs: Any) -> Any:
    """The URL opener of :mod:`trajstore._openers` (:func:`trajstore.remote.mirror.open_url`; fsspec is
    imported on the first open)."""
    from trajstore.remote.mirror import open_url

    return open_url(url, **kwargs)


register_url_opener(_open_url)


def __getattr__(name: str):  # push/pull import fsspec-using modules only when used
    if name in ("push", "PushReport"):
        from trajstore.remote import publish
        return getattr(publish, name)
    if name in ("pull", "PullReport"):
        from trajstore.remote import download
        return getattr(download, name)
    raise AttributeError(name)
