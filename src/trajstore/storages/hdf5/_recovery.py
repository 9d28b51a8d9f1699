"""Repairing an HDF5 file left open by a writer that died (kill -9, OOM, power cut of the process).

HDF5 sets "open for write" flags in the superblock while a writer has a file open; a dead
writer leaves them set, and HDF5 then refuses a writable open. :func:`clear_status_flags`
does what ``h5clear -s --increment=0`` does, through the same HDF5 calls (ctypes, since
h5py does not wrap them); :func:`copy_chunks` is the fallback that rewrites a file chunk by
chunk. Both run only while the caller holds the folder's writer lock.
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import os
import sys
from pathlib import Path
from typing import Any

import h5py
from h5py._objects import phil

def copy_chunks(src: h5py.Dataset, dst: h5py.Dataset) -> None:
    """Copy the stored chunks of ``src`` into ``dst`` (same shape, chunks and filters) byte for byte."""
    grid = [range(0, n, c) for n, c in zip(src.shape, src.chunks)]
    for offset in itertools.product(*grid):
        if src.id.get_chunk_info_by_coord(offset).byte_offset is None:
            continue  # never written
        mask, chunk = src.id.read_direct_chunk(offset)
        dst.id.write_direct_chunk(offset, chunk, mask)


_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def status_flags(path: Path) -> int:
    """The file consistency flags of ``path``'s superblock: non-zero while a writer has it open, or
    after one died with it open (superblock versions 2 and 3, at offset 0: we never add a user block)."""
    with open(path, "rb") as fh:
        head = fh.read(12)
    if len(head) < 12 or head[:8] != _SIGNATURE or head[8] < 2:
        return 0
    return head[11]


def lock_is_held(path: Path) -> bool:
    """True if some open file description holds ``flock`` on ``path``. Called while opening a
    storage for writing, whose ``load_from`` took this lock first or failed: so the holder is us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the lock if we just took it
    return False


class NoH5Clear(Exception):
    """HDF5's C functions that ``h5clear`` uses cannot be called from here."""


_H5LIB: list[Any] = []


def _hdf5_library() -> Any:
    """The HDF5 shared library h5py is linked with (its symbols resolved through an h5py extension)."""
    if not _H5LIB:
        try:
            lib = ctypes.CDLL(h5py.h5f.__file__)
            hid, herr = ctypes.c_int64, ctypes.c_int
            for name, args in [("H5Pget_size", [hid, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]),
                               ("H5Pset", [hid, ctypes.c_char_p, ctypes.c_void_p]),
                               ("H5Fincrement_filesize", [hid, ctypes.c_uint64])]:
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, herr
        except (OSError, AttributeError) as exc:
            raise NoH5Clear(str(exc)) from exc
        _H5LIB.append(lib)
    return _H5LIB[0]


def clear_status_flags(path: Path) -> None:
    """What ``h5clear -s --increment=0 path`` does, through the same HDF5 calls.

    Opens the file for writing with the file-access properties that tell HDF5 to reset the
    superblock's flags and to skip its end-of-file check, and sets the end-of-allocation mark to
    ``max(EOA, EOF)``: the dead writer may have allocated (and even referenced, from metadata it
    wrote after its last flush) space past the EOA it last stored, which new allocations must
    not overwrite. These properties are HDF5's own (``H5Fpkg.h``), registered in every file-access
    property list since HDF5 1.10.0; h5py does not wrap them.

    Raises:
        NoH5Clear: the library or a property cannot be reached; nothing was changed.
    """
    lib = _hdf5_library()
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_file_locking(False, True)
    with phil:  # h5py's global lock around calls into HDF5
        for name in (b"clear_status_flags", b"skip_eof_check", b"null_fsm_addr"):
            size = ctypes.c_size_t()
            if lib.H5Pget_size(fapl.id, name, ctypes.byref(size)) < 0 or not 0 < size.value <= 8:
                raise NoH5Clear(f"HDF5 has no file-access property {name.decode()!r}")
            true = ctypes.create_string_buffer((1).to_bytes(size.value, sys.byteorder), size.value)
            if lib.H5Pset(fapl.id, name, true) < 0:
                raise NoH5Clear(f"HDF5 refused to set {name.decode()!r}")
    fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDWR, fapl=fapl)
    try:
        with phil:
            if lib.H5Fincrement_filesize(fid.id, 0) < 0:
                raise OSError(f"{path}: HDF5 could not move the end-of-allocation mark of a crashed file")
    finally:
        fid.close()
