"""Files this process holds open for reading that a writer in this process could not open as well.

HDF5 keeps one state per file and process, found by device and inode, and cannot turn a
read-only state into a writable one: while a reader here has ``data.h5`` open, a writable open of
it fails ("file is already open for read-only"). A storage registers such a file while it holds it
(:func:`hold`, :func:`release`), and :func:`~trajstore._folder.lock_for` calls
:func:`refuse_writer_while_read` before it takes (or creates) any lock file, so the refused writer
gets an :class:`~trajstore.errors.AlreadyOpenError` that names the file and leaves nothing behind.

Why a registry rather than HDF5's error: h5py raises that refusal as an ``OSError`` without an
errno, so its message is the only sign, it does not say which object holds the file, and it
comes after the writer has taken its locks. The registry knows before anything is touched.
A file is matched by device and inode, as HDF5 matches it: a reader of a file that a writer has
since replaced (a compaction renames a new ``data.h5`` over the old) does not hold the new one.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from trajstore.errors import AlreadyOpenError

# token -> (file, st_dev, st_ino, holder's description, holder)
_HELD: dict[int, tuple[Path, int, int, str, "weakref.ref[Any]"]] = {}
_TOKENS = itertools.count(1)
_GUARD = threading.Lock()


def hold(path: Path, fd: int, owner: Any, holder: str) -> int:
    """Register the file ``path`` (open as descriptor ``fd``) as open for reading by ``owner``, which
    the error message calls ``holder`` (e.g. ``"an HDF5Storage opened read-only"``); returns the
    token for :func:`release`. An owner that is garbage-collected without a release holds nothing
    (its file closed with it)."""
    st = os.fstat(fd)
    with _GUARD:
        token = next(_TOKENS)
        _HELD[token] = (Path(os.path.abspath(path)), st.st_dev, st.st_ino, holder, weakref.ref(owner))
    return token


def release(token: int | None) -> None:
    """Forget a :func:`hold`; ``None`` and unknown tokens are ignored."""
    if token is not None:
        with _GUARD:
            _HELD.pop(token, None)


def refuse_writer_while_read(folder: Path) -> None:
    """Raise if this process holds a file inside ``folder`` (or ``folder`` itself) open for reading.

    Raises:
        AlreadyOpenError: names the file and the kind of object holding it.
    """
    with _GUARD:
        held = list(_HELD.values())
    if not held:
        return
    top = Path(os.path.abspath(folder))
    for path, dev, ino, holder, owner in held:
        if owner() is None or (path != top and top not in path.parents):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue  # gone: the holder has a file that is no longer there
        if (st.st_dev, st.st_ino) == (dev, ino):
            raise AlreadyOpenError(
                f"{path} is already open for reading in this process (by {holder}, or a ReplayBuffer opened "
                f"with read_only=True), and the file library cannot open it for writing as well; close that "
                f"object first, then open {folder} for writing. The folder is not damaged.")
