"""A new ``data.h5`` of :class:`~trajstore.storages.hdf5.storage.HDF5Storage`: the file and one dataset per leaf.

On disk the file is in the HDF5 1.10 format and switched to SWMR mode once every dataset exists
(SWMR cannot add objects); ``path=None`` makes an in-memory file (HDF5's ``core`` driver, no backing
store) in the plain format. Each dataset has shape ``(capacity or 0, *leaf.shape)``, may grow along
its first axis (unbounded when ``capacity`` is None), and is chunked ``(rows, *leaf.shape)``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import h5py

from trajstore.spaces import Space
from trajstore.storages.hdf5._layout import DATA_FILE, LOCKING, PLAIN_LIBVER, SWMR_LIBVER, file_dtype


def create_file(path: Path | None, leaves: list[tuple[tuple[str, ...], Space]], names: list[str],
                chunk_rows: list[int], capacity: int | None, compression: str | None, cache_bytes: int) -> h5py.File:
    """The new file ``<path>/data.h5`` (``path=None``: in memory), open for writing, with dataset ``names[i]``
    for leaf ``leaves[i]`` (``(keys, space)`` pairs) of ``chunk_rows[i]`` rows per chunk. ``compression``:
    None, ``"gzip"`` or ``"lzf"`` (compressed datasets also get the byte-shuffle filter). ``cache_bytes``:
    HDF5's chunk cache size.

    Raises:
        FileExistsError: ``data.h5`` already exists. OSError: HDF5 could not create the file.
    """
    if path is None:
        f = h5py.File(f"trajstore-{uuid.uuid4().hex}.h5", "w", driver="core", backing_store=False,
                      libver=PLAIN_LIBVER, locking=LOCKING, rdcc_nbytes=cache_bytes)
    else:
        f = h5py.File(path / DATA_FILE, "x", libver=SWMR_LIBVER, locking=LOCKING, rdcc_nbytes=cache_bytes)
    try:
        for (_, leaf), name, rows in zip(leaves, names, chunk_rows):
            # A zero-length axis gets chunk size 1, which HDF5 allows only if that axis may grow.
            f.create_dataset(name, shape=(capacity or 0, *leaf.shape), dtype=file_dtype(leaf),
                             maxshape=(capacity, *(d or None for d in leaf.shape)),
                             chunks=(rows, *(max(d, 1) for d in leaf.shape)),
                             compression=compression, shuffle=compression is not None)
        if path is not None:
            f.swmr_mode = True  # after every dataset exists: SWMR cannot add objects
    except BaseException:
        f.close()
        raise
    return f
