"""What ``data.h5`` looks like: its file names, HDF5 format bounds, dataset names, dtypes and chunking."""

from __future__ import annotations

import h5py
import numpy as np

from trajstore.spaces import Space, TextSpace, tree
from trajstore.storages._names import safe_name

DATA_FILE = "data.h5"
#: A copy of ``data.h5`` being written (compaction, conversion, recovery); renamed over it when complete.
TEMP_FILE = "data.h5.tmp"
#: Dataset name of a storage whose space is a single leaf.
ROOT_DATASET = "data"
#: ``libver`` bounds of the SWMR format (every file on disk) and of the old format (read, converted on write).
SWMR_LIBVER = ("v110", "v110")
PLAIN_LIBVER = ("earliest", "v110")
COMPRESSIONS = (None, "gzip", "lzf")
#: Target chunk size along axis 0 (a chunk is at least one row). HDF5 allocates a chunk whole on
#: its first write, so every leaf carries up to one chunk of unused rows: at 256 KiB that was
#: 0.67 MB of a 2048-step buffer's 0.86 MB data.h5 (four joint/action/reward leaves); at 64 KiB
#: it is a quarter of that. Sparse reads of compressed leaves also decompress less.
CHUNK_BYTES = 64 << 10
#: Cap on rows per chunk, for narrow leaves (a bool flag: 1 B/row).
CHUNK_MAX_ROWS = 8192
#: HDF5 refuses chunks of 4 GiB or more in the file format these files use (v110).
MAX_CHUNK_BYTES = 4 << 30
# Uncompressed chunks are read and written in place without a chunk cache: sparse reads by
# runs are 1.1-2x faster (index-list reads: within 20%). Compressed chunks need a cache of
# several chunks, or every small append recompresses its chunk (1-row gzip appends: 11x slower).
# Measured by benchmarks/hdf5_read_strategy.py (see _rows.py).
COMPRESSED_CACHE_BYTES = 4 << 20

# HDF5 file locks are off for every open: readers must open a file that a writer in another
# process holds, and HDF5 refuses two handles on one file in one process unless their lock
# flags match. One writer at a time is the replay buffer's job (its lock file).
LOCKING = False


def dataset_name(keys: tuple[str, ...]) -> str:
    """The HDF5 dataset of the leaf at ``keys``: each key through :func:`safe_name`, joined by ``/``."""
    return "/".join(safe_name(k) for k in keys) if keys else ROOT_DATASET


def file_dtype(space: Space) -> np.dtype:
    """The dtype a leaf is stored with: fixed-width UTF-8 for text (at most 4 bytes per code point)."""
    if isinstance(space, TextSpace):
        return h5py.string_dtype("utf-8", 4 * space.max_length)
    return np.dtype(space.dtype)


def row_bytes(space: Space) -> int:
    """Bytes of one row of the leaf ``space`` in the file."""
    return int(np.prod(space.shape, dtype=np.int64)) * file_dtype(space).itemsize


def chunk_rows(rows_option: int | None, leaf_row_bytes: list[int], capacity: int | None) -> list[int]:
    """Rows per chunk of each leaf: the ``chunk_rows`` option, else about :data:`CHUNK_BYTES` (at least
    one row, at most :data:`CHUNK_MAX_ROWS`), never more than a ring's ``capacity``."""
    rows = [rows_option or min(CHUNK_MAX_ROWS, max(1, CHUNK_BYTES // max(b, 1))) for b in leaf_row_bytes]
    return [min(r, capacity) if capacity is not None else r for r in rows]


def cache_bytes(compression: str | None, rows: list[int], leaf_row_bytes: list[int]) -> int:
    """HDF5's chunk cache size: none for uncompressed leaves, else room for two of the biggest chunks
    (at least :data:`COMPRESSED_CACHE_BYTES`)."""
    if compression is None:
        return 0
    return max(COMPRESSED_CACHE_BYTES, 2 * max(r * b for r, b in zip(rows, leaf_row_bytes)))


def check_chunk_rows(space: Space, rows: int | None) -> None:
    """Raises:
        ValueError: ``rows`` rows of the widest leaf make a chunk of :data:`MAX_CHUNK_BYTES` or more.
    """
    if rows is not None:
        widest = max(row_bytes(leaf) for _, leaf in tree.leaves(space))
        if rows * max(widest, 1) >= MAX_CHUNK_BYTES:
            raise ValueError(f"HDF5Storage option chunk_rows: {rows} rows of {widest} bytes make chunks of "
                             f"{rows * widest} bytes; HDF5 chunks must stay under {MAX_CHUNK_BYTES} bytes")
