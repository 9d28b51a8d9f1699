"""Reading and writing rows of one ``data.h5`` dataset: the read strategy and the block write.

Read strategy, measured by benchmarks/hdf5_read_strategy.py (h5py 3.16, HDF5 2.0; batches of 256
sorted positions; chunked, uncompressed, in the page cache; ranges over 3 runs). "Nx" = index-list
time / strategy time.

- One covering slice read + a NumPy gather moves 4-9 GB/s, while the other strategies pay
  2-5 us per row (index list, narrow rows) or 10-40 us per run. Cover when it reads at most
  :data:`COVER_WASTE_PER_ROW` unwanted bytes per wanted row: (16,) float32 within 8x the batch: cover
  17-30x, runs 0.27-0.30x, row by row 0.36-0.53x; (2,) float32 anywhere in 100k rows: cover
  5.8-8x, runs 0.17-0.22x, row by row 0.26-0.31x.
- Beyond that, h5py's index-list read beats one slice read per run for narrow rows and loses
  more the wider the row (runs time / index-list time: 2.3-4.0 at 8 B, 1.5-2.3 at 256 B,
  0.7-0.8 at 1 KiB, 0.08-0.10 at 16 KiB); for a (96, 96, 3) uint8 image it is 130-160x
  slower than runs (650-880 ms per batch). Runs use ds[a:b]: read_direct costs 5-10x more.
"""

from __future__ import annotations

import h5py
import numpy as np

from trajstore.storages._selection import Selection

COVER_WASTE_PER_ROW = 16 << 10
COVER_MAX_BYTES = 64 << 20  # never allocate more than this for one covering read
INDEX_LIST_MAX_ROW_BYTES = 256


def write_rows(ds: h5py.Dataset, first: int, rows: np.ndarray) -> None:
    """``ds[first:first + len(rows)] = rows`` through h5py's low-level calls: a quarter of the time of the
    slice assignment for the small blocks of write-behind (its selection parsing dominates there).
    ``rows`` must be C-contiguous, non-empty, and of the dataset's dtype."""
    space = ds.id.get_space()
    space.select_hyperslab((first, *(0,) * (rows.ndim - 1)), rows.shape)
    ds.id.write(h5py.h5s.create_simple(rows.shape), space, rows)


def write_runs(ds: h5py.Dataset, sel: Selection, arr: np.ndarray) -> None:
    """Rows ``arr`` (in ``sel.slots`` order) into ``ds``: one slice write per run, never an index list."""
    for row, first, n in sel.runs:
        part = arr[row:row + n]
        if part.dtype == ds.dtype and part.flags.c_contiguous and part.size:
            write_rows(ds, first, part)
        else:
            ds[first:first + n] = part


def read_rows(ds: h5py.Dataset, sel: Selection, row_bytes: int) -> np.ndarray:
    """Rows ``sel.slots`` of ``ds``: shape ``(M, *ds.shape[1:])``, dtype ``ds.dtype``.

    One slice read when the rows are contiguous or close together (then a NumPy gather),
    h5py's index-list read for narrow rows, else one slice read per contiguous run.
    """
    slots = sel.slots
    m = len(slots)
    if m == 0:
        return np.empty((0, *ds.shape[1:]), ds.dtype)
    first, stop = int(slots[0]), int(slots[-1]) + 1
    if stop - first == m:
        return ds[first:stop]
    if ((stop - first - m) * row_bytes <= m * COVER_WASTE_PER_ROW
            and (stop - first) * row_bytes <= COVER_MAX_BYTES):
        return ds[first:stop][slots - first]
    if row_bytes <= INDEX_LIST_MAX_ROW_BYTES:
        return ds[slots]
    out = np.empty((m, *ds.shape[1:]), ds.dtype)
    for row, first, n in sel.runs:
        out[row:row + n] = ds[first:first + n]  # faster than read_direct (see the benchmark)
    return out
