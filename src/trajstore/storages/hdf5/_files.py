"""Opening ``data.h5`` so that a damaged file fails fast, and what HDF5 does with one.

What a reader meets (measured with h5py 3.16 / HDF5 2.0 on files of the SWMR format,
``libver=("v110", "v110")``, by ``tests/fuzz``):

- Every metadata block of that format (superblock v3, object headers v2, chunk indexes) carries a
  checksum, and HDF5 checks it when it loads the block. A mismatch raises ``OSError`` (opening the
  file: "Unable to synchronously open file (incorrect metadata checksum after all read
  attempts)"), ``RuntimeError`` (visiting objects: "Can't deserialize object header prefix",
  "bad byte number in an address") or ``KeyError`` (opening a dataset). A short file raises
  ``OSError`` ("truncated file: eof = ..., stored_eof = ...") outside SWMR mode. SWMR mode skips that
  end-of-file check, and a SWMR reader of a short file reads the missing chunks as zeros (measured: a
  file cut to 2/3 gave 1,589 zero rows of 5,000, silently), so :func:`open_h5` makes the check
  itself for a SWMR reader (:func:`check_end_of_file`). A damaged compressed chunk
  raises ``OSError`` ("filter returned failure during read"). Raw (uncompressed) chunk bytes have
  no checksum: a flipped bit there reads back as a changed value.
- SWMR mode changes one thing, and it matters: a SWMR reader may catch a block the writer is
  rewriting, so HDF5 retries a block whose checksum fails, ``H5Pset_metadata_read_attempts``
  times (100 by default in SWMR mode, 1 otherwise), sleeping between attempts with a doubling
  interval (``H5C__load_entry``). 100 doublings from a nanosecond never end: a SWMR reader of a
  file with one bad checksum hung for more than 10 minutes, sleeping (measured). Readers here set
  :data:`SWMR_READ_ATTEMPTS` = 27 instead: the sleeps add up to about 0.14 s (measured; 1.1 s at 30
  attempts), still thousands of times what a writer takes to write a metadata block, so a reader
  that races the writer still sees the block whole, and a
  damaged file fails within a fraction of a second. HDF5's C entry point is reached through ctypes
  (h5py does not wrap it); without it the file opens as h5py does by default.
- No crash (segfault, abort) was met in the fuzz runs on these files; the errors above are all
  Python exceptions, which :func:`~trajstore._damage.damaged_file` turns into a ``FormatError``
  naming ``data.h5`` at the two places :class:`~trajstore.storages.hdf5.HDF5Storage` parses the
  file: when it opens it and when it reads rows.
- Not damage: HDF5 refuses an open of a file this process has open in another mode ("file is
  already open for read-only", "... flag values don't match"); that refusal becomes an
  ``AlreadyOpenError`` first (:mod:`~trajstore.storages.hdf5._handles`).
"""

from __future__ import annotations

import ctypes
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import h5py

from trajstore.errors import FormatError

#: Metadata read attempts of a SWMR reader (see the module docstring): ~0.14 s of retries at most.
SWMR_READ_ATTEMPTS = 27

#: Looks at the end of file of a SWMR reader's file this many times, 20 ms apart, before calling it short.
EOF_CHECKS = 5

_LIBVER = {"earliest": h5py.h5f.LIBVER_EARLIEST, "v110": h5py.h5f.LIBVER_V110}
_SET_READ_ATTEMPTS: list[Any] = []


def _set_read_attempts_fn() -> Any:
    """HDF5's ``H5Pset_metadata_read_attempts`` (through the library h5py is linked with), or None."""
    if not _SET_READ_ATTEMPTS:
        try:
            fn = ctypes.CDLL(h5py.h5p.__file__).H5Pset_metadata_read_attempts
            fn.argtypes, fn.restype = [ctypes.c_int64, ctypes.c_uint], ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _SET_READ_ATTEMPTS.append(fn)
    return _SET_READ_ATTEMPTS[0]


def open_h5(path: Path, *, read_only: bool, swmr_read: bool, libver: tuple[str, str], locking: bool,
            rdcc_nbytes: int, swmr_write: bool = False) -> h5py.File:
    """``h5py.File(path, "r" or "r+", swmr=swmr_read, libver=..., locking=..., rdcc_nbytes=...)``,
    with a bounded number of metadata read attempts for a SWMR reader, and for a SWMR writer
    (``swmr_write=True``: the file is opened in SWMR-write mode, ``f.swmr_mode`` is True).

    A writer gets one attempt: nobody else writes the file, so a bad checksum is damage. It opens in
    SWMR-write mode directly rather than through ``f.swmr_mode = True`` after opening, because HDF5
    switches a file to 100 doubling attempts when SWMR writing starts that way, whatever the
    file-access property list says (measured: a writer met a damaged object header and hung).

    Raises:
        OSError, RuntimeError, ...: what HDF5 raises on a missing or damaged file (module docstring).
    """
    mode = "r" if read_only else "r+"
    if swmr_read:
        check_end_of_file(path)
    set_attempts = _set_read_attempts_fn() if (swmr_read or swmr_write) else None
    if set_attempts is None:
        f = h5py.File(path, mode, swmr=swmr_read, libver=libver, locking=locking, rdcc_nbytes=rdcc_nbytes)
        if swmr_write:
            f.swmr_mode = True
        return f
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(_LIBVER[libver[0]], _LIBVER[libver[1]])
    cache = list(fapl.get_cache())
    cache[2] = rdcc_nbytes
    fapl.set_cache(*cache)
    fapl.set_file_locking(locking, True)
    if set_attempts(fapl.id, SWMR_READ_ATTEMPTS if swmr_read else 1) < 0:
        f = h5py.File(path, mode, swmr=swmr_read, libver=libver, locking=locking, rdcc_nbytes=rdcc_nbytes)
        if swmr_write:
            f.swmr_mode = True
        return f
    if swmr_write:
        flags = h5py.h5f.ACC_RDWR | h5py.h5f.ACC_SWMR_WRITE
    else:
        flags = h5py.h5f.ACC_RDONLY | h5py.h5f.ACC_SWMR_READ
    return h5py.File(h5py.h5f.open(os.fsencode(path), flags, fapl=fapl))


def stored_end_of_file(head: bytes) -> int | None:
    """The end-of-file address a version 2/3 superblock at offset 0 stores, or None for another layout.

    Superblock v2/v3 (HDF5 file format specification, "Superblock Version 2"): signature (8 bytes),
    version, size of offsets, size of lengths, flags (1 byte each), then base address, extension
    address, end-of-file address, root object header address (size-of-offsets bytes each), checksum.
    """
    if len(head) < 12 or head[:8] != b"\x89HDF\r\n\x1a\n" or head[8] not in (2, 3):
        return None
    size = head[9]
    at = 12 + 2 * size
    if size not in (4, 8) or len(head) < at + size:
        return None
    return int.from_bytes(head[at:at + size], "little")


def check_end_of_file(path: Path) -> None:
    """Raise ``OSError`` if ``path`` is shorter than its superblock says (a truncated copy or disk).

    A live writer keeps the file at least as long as the end-of-file address it last wrote (it
    extends the file at each flush, in the same call that writes the superblock), so the check is
    repeated :data:`EOF_CHECKS` times, 20 ms apart, before a short file is called damaged (measured:
    400,000 checks against a writer committing 780 episodes met no short file).

    Raises:
        OSError: "truncated file: eof = N, stored_eof = M", HDF5's own words for the same fault.
    """
    for attempt in range(EOF_CHECKS):
        with open(path, "rb") as fh:
            stored = stored_end_of_file(fh.read(48))
            eof = os.fstat(fh.fileno()).st_size
        if stored is None or eof >= stored:
            return
        if attempt + 1 < EOF_CHECKS:
            time.sleep(0.02)
    raise OSError(f"truncated file: eof = {eof}, stored_eof = {stored}")


#: What HDF5 says when a write has to read a damaged chunk or metadata block first (a partly written
#: compressed chunk is read, changed and written back); met by the writers' fuzz (tests/fuzz).
READ_FAILURES = ("during read", "checksum", "deserialize")


@contextmanager
def damage_met_by_a_write(path: Path | None, what: str) -> Iterator[None]:
    """A write that failed while reading damaged bytes raises a ``FormatError`` naming ``path`` and
    ``what`` (e.g. ``"dataset 'action'"``); other write errors, a full disk among them, pass as they are.

    Raises:
        FormatError: ``path: what: damaged: a write had to read it first (<original>)``.
    """
    try:
        yield
    except (OSError, RuntimeError) as exc:
        if path is None or not any(words in str(exc) for words in READ_FAILURES):
            raise
        raise FormatError(f"{path}: {what}: damaged: a write had to read it first ({type(exc).__name__}: {exc})") \
            from exc
