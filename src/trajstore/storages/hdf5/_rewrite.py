"""Writing ``data.h5`` anew: compaction of leaked chunk copies, conversion of the old format, and
recovery from a writer that died with the file open (see :mod:`~trajstore.storages.hdf5.storage`).

Every function here runs in a writer that holds the folder's writer lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import h5py

from trajstore._fs import fsync_dir
from trajstore.storages.hdf5 import _recovery
from trajstore.storages.hdf5._handles import already_open_error
from trajstore.storages.hdf5._layout import DATA_FILE, LOCKING, PLAIN_LIBVER, SWMR_LIBVER, TEMP_FILE

#: A compressed file is compacted at a flush when it exceeds twice its live chunk bytes plus this.
COMPACT_SLACK = 4 << 20


def replace_file(folder: Path, src: h5py.File, names: Sequence[str]) -> None:
    """Copy the datasets ``names`` of ``src`` into a new SWMR-format file, then rename it over ``data.h5``.

    Each dataset is made like its source (shape, chunks, filters) and gets its stored chunks as
    they are (``H5Dread_chunk``/``H5Dwrite_chunk``: nothing is decompressed, unwritten chunks
    stay unallocated). The new file has fresh chunk indexes of the SWMR format. ``data.h5.tmp`` is
    fsynced before the rename and removed if anything fails.
    """
    tmp = folder / TEMP_FILE
    try:
        with h5py.File(tmp, "w", libver=SWMR_LIBVER, locking=LOCKING) as dst:
            for name in names:
                _recovery.copy_chunks(src[name], dst.create_dataset_like(name, src[name]))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, folder / DATA_FILE)
        fsync_dir(folder)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def needs_compaction(size: int, datasets: Sequence[h5py.Dataset]) -> tuple[bool, int]:
    """``(compact?, live chunk bytes)`` for a compressed file of ``size`` bytes: compact once SWMR's
    leaked copies of rewritten chunks take over half of it (plus :data:`COMPACT_SLACK`)."""
    live = sum(ds.id.get_storage_size() for ds in datasets)
    return size > 2 * live + COMPACT_SLACK, live


def next_compaction_check(size: int, live: int) -> int:
    """The file size at which the next flush looks again: once the file has doubled while it only
    grows, sooner while it leaks."""
    return max(2 * live + COMPACT_SLACK, size + size // 4)


def convert_old_format(folder: Path, names: Sequence[str]) -> None:
    """Rewrite a file of the old (non-SWMR) format in the SWMR format, once, before writing it."""
    with already_open_error(folder / DATA_FILE, read_only=False):
        src = h5py.File(folder / DATA_FILE, "r", libver=PLAIN_LIBVER, locking=LOCKING)
    with src:
        replace_file(folder, src, names)


def recover_crashed_writer(folder: Path, names: Sequence[str]) -> None:
    """Clear the "open for writing" flags a dead writer left in ``data.h5`` (``h5clear -s``), or,
    where HDF5's C entry points cannot be reached, copy the datasets into a fresh file."""
    path = folder / DATA_FILE
    try:
        with already_open_error(path, read_only=False):
            _recovery.clear_status_flags(path)
    except _recovery.NoH5Clear:
        # The same result through public h5py only: copy the datasets into a new file.
        with already_open_error(path, read_only=False):
            src = h5py.File(path, "r", swmr=True, libver=SWMR_LIBVER, locking=LOCKING)
        with src:
            replace_file(folder, src, names)
