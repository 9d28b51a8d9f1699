"""Turning what a library raises on a damaged file into a :class:`~trajstore.errors.FormatError`
that names the file.

Each file kind is parsed in one place (a storage's open and read, the slot index, a video
segment reader, the metadata and statistics files), and that place wraps its work in
:func:`damaged_file`: whatever h5py, libav, Pillow, NumPy or ``json`` raise there (``OSError``,
``RuntimeError``, ``KeyError``, ``ValueError``, ``MemoryError`` for a size read from a damaged
field...) leaves as a ``FormatError`` naming the file, with the original chained.
Errors trajstore raises on purpose pass through (a :class:`~trajstore.errors.StaleReadError` is a
race with the writer, not damage; a ``LockedError`` is about the lock, and its subclass
``AlreadyOpenError`` about a file this process has open otherwise, which the file's own opener
recognises first, e.g. :func:`trajstore.storages.hdf5._handles.already_open_error`); a
``FormatError`` that does not name the file yet gets its name in front.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from trajstore.errors import FormatError, TrajstoreError


@contextmanager
def damaged_file(path: str | os.PathLike, what: str = "",
                 keep: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Raise any error of the body as a :class:`FormatError` naming ``path`` (and ``what``, e.g.
    ``"frame 3"``); trajstore's own errors, and those of the types in ``keep`` (a caller that
    handles a ``FileNotFoundError`` itself), pass through.

    Raises:
        FormatError: ``path: <what>: damaged or unreadable (<original type>: <message>)``.
    """
    try:
        yield
    except keep:
        raise
    except TrajstoreError as exc:
        if isinstance(exc, FormatError) and str(path) not in str(exc):
            raise type(exc)(f"{path}: {what + ': ' if what else ''}{exc}") from exc
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file may make its parser raise anything
        where = f"{path}: {what}: " if what else f"{path}: "
        raise FormatError(f"{where}damaged or unreadable ({type(exc).__name__}: {exc})") from exc
