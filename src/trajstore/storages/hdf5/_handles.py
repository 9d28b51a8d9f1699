"""The HDF5 handles this process holds: readers and writers of one file in one process, and forks.

HDF5 keeps one state per file and process (found by device and inode, as its ``sec2`` driver
compares them), and a second open of a file joins that state. What follows, measured with
h5py 3.16 / HDF5 2.0 (every open here uses ``locking=False``):

- A reader opened while a writer of this process has the file open joins the writer's state:
  it works, and sees the writer's rows at once (its ``refresh`` has nothing to do).
- A writer opened while only readers have it fails in HDF5 ("file is already open for
  read-only"): a read-only state cannot become writable. The writer's ``load_from`` refuses this
  before it takes a lock (:mod:`trajstore._held_files`, fed by :func:`hold_for_reading`) with an
  :class:`~trajstore.errors.AlreadyOpenError`; :func:`already_open_error` turns HDF5's own
  refusal into the same error for handles opened outside the storages (``h5py.File`` by the user).
  HDF5 gives no errno, so its message is matched (:data:`ALREADY_OPEN`), never as damage.
- Readers of one file must agree on SWMR mode ("SWMR read access flag not the same for file
  that is already open"): a reader opened while others have the file takes their mode
  (:func:`joined_swmr_read`).
- A writer that closes while readers joined it would leave them holding its writable state,
  and the last of them to close would write that state's superblock into the file: measured,
  after a writer in another process had grown the file meanwhile, the stale end-of-allocation
  mark made the next writer fail ("addr overflow") and cleared the open-for-writing flags of the
  live writer. So the writer detaches them first (:func:`joined_readers`); each reopens the file
  read-only on its next use.

Forks: an HDF5 handle must not be used across ``fork``. Right after a fork, the child points
every inherited descriptor of these files at ``/dev/null`` (``os.register_at_fork``), so
nothing the child's copy of HDF5 does (flush, close, exit) can reach the parent's file.
"""

from __future__ import annotations

import os
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from trajstore import _held_files
from trajstore.errors import AlreadyOpenError

if TYPE_CHECKING:
    from trajstore.storages.hdf5.storage import HDF5Storage

#: Storages with a file on disk open in this process.
LIVE: "weakref.WeakSet[HDF5Storage]" = weakref.WeakSet()
#: Inherited h5py files that HDF5 failed to close in a child: kept so they are never collected.
INHERITED: list[Any] = []

#: HDF5's words when a file is already open in this process in a way that excludes the new open.
ALREADY_OPEN = ("already open", "flag values don't match", "close degree doesn't match")


@contextmanager
def already_open_error(path: Path, *, read_only: bool) -> Iterator[None]:
    """HDF5's refusal of an open because this process has the file open otherwise (:data:`ALREADY_OPEN`)
    leaves as an :class:`AlreadyOpenError` naming ``path``; other errors pass as they are.

    Raises:
        AlreadyOpenError: ``path is already open in this process (...)``.
    """
    try:
        yield
    except (OSError, RuntimeError) as exc:
        said = str(exc)
        if not any(words in said for words in ALREADY_OPEN):
            raise
        how = "for reading" if "read-only" in said else "with other settings (file locking, SWMR mode)"
        raise AlreadyOpenError(
            f"{path} is already open {how} in this process, and HDF5 cannot open it "
            f"{'read-only' if read_only else 'for writing'} as well (HDF5: {said}); close the other object "
            "or h5py file first. The file is not damaged.") from exc


def holders(fd_stat: os.stat_result, exclude: Any = None) -> list["HDF5Storage"]:
    """Storages of this process whose open file is the file of ``fd_stat`` (device and inode)."""
    pid = os.getpid()
    out = []
    for storage in list(LIVE):
        if storage is exclude or storage._file_pid != pid or storage._fd is None:
            continue
        try:
            if os.path.samestat(os.fstat(storage._fd), fd_stat):
                out.append(storage)
        except OSError:
            continue
    return out


def joined_swmr_read(path: Path, wanted: bool) -> bool:
    """The SWMR-read flag a new reader of ``path`` must use: that of the readers of this process that
    have it open already (HDF5 refuses a mix), else ``wanted``."""
    try:
        st = os.stat(path)
    except OSError:
        return wanted
    for storage in holders(st):
        if storage.read_only:
            return storage._opened_swmr_read
    return wanted


def joined_readers(writer: "HDF5Storage") -> list["HDF5Storage"]:
    """Readers of this process that share ``writer``'s open file (they opened it while it was open)."""
    if writer._fd is None or writer._file_pid != os.getpid():
        return []
    try:
        st = os.fstat(writer._fd)
    except OSError:
        return []
    return [s for s in holders(st, exclude=writer) if s.read_only]


def hold_for_reading(reader: "HDF5Storage", path: Path, fd: int) -> int:
    """Register a reader's open ``data.h5`` so that a writer of its folder is refused up front."""
    return _held_files.hold(path, fd, reader, "an HDF5Storage opened read-only")


release = _held_files.release


def redirect_inherited_files() -> None:
    """In a forked child, point every inherited HDF5 descriptor at /dev/null.

    Whatever HDF5 later does with the parent's handles in this process (a close, a flush at
    exit, garbage collection) then cannot write into the parent's file. Only ``os`` calls:
    no h5py lock is taken while another thread of the parent may have held it at the fork.
    """
    fds = {s._fd for s in list(LIVE) if s._fd is not None}
    if not fds:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)


os.register_at_fork(after_in_child=redirect_inherited_files)
