"""How should HDF5Storage read a batch of sorted, unique rows from a chunked dataset?

Times, per leaf and index pattern, the median over batches of:

- ``index_list``:  ``ds[positions]`` (h5py's fancy selection)
- ``runs``:        one ``ds[a:b]`` per contiguous run, into a preallocated array
- ``runs_direct``: the same with ``ds.read_direct`` (no intermediate array)
- ``cover``:       one ``ds[first:last + 1]`` and a NumPy gather
- ``row_by_row``:  ``ds[i]`` for every row
- ``chosen``:      what ``trajstore.storages.hdf5.read_rows`` picks

The files are made by ``HDF5Storage`` itself (its chunk shapes and chunk-cache settings) and
sit in the page cache, so these are CPU costs, not disk costs. Ratios are ``index_list`` time
divided by the strategy's time (> 1: faster than the index list). Two more tables back the
other constants of ``hdf5.py``: index list vs runs by row width, and the chunk cache.

Run: ``python benchmarks/hdf5_read_strategy.py [--rows 100000] [--batch 256]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages.hdf5 import DATA_FILE, HDF5Storage, read_rows, runs

Strategy = Callable[[h5py.Dataset, np.ndarray, int], np.ndarray]


def index_list(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    return ds[pos]


def runs_slices(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    out = np.empty((len(pos), *ds.shape[1:]), ds.dtype)
    for row, first, n in runs(pos):
        out[row:row + n] = ds[first:first + n]
    return out


def runs_direct(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    out = np.empty((len(pos), *ds.shape[1:]), ds.dtype)
    for row, first, n in runs(pos):
        ds.read_direct(out, np.s_[first:first + n], np.s_[row:row + n])
    return out


def cover(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    first = int(pos[0])
    return ds[first:int(pos[-1]) + 1][pos - first]


def row_by_row(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    out = np.empty((len(pos), *ds.shape[1:]), ds.dtype)
    for row, p in enumerate(pos.tolist()):
        out[row] = ds[p]
    return out


def chosen(ds: h5py.Dataset, pos: np.ndarray, row_bytes: int) -> np.ndarray:
    return read_rows(ds, pos, row_bytes)


STRATEGIES: dict[str, Strategy] = {"index_list": index_list, "runs": runs_slices, "runs_direct": runs_direct,
                                   "cover": cover, "row_by_row": row_by_row, "chosen": chosen}


def median_time(fn: Strategy, ds: h5py.Dataset, batches: list[np.ndarray], budget_s: float = 0.5) -> float:
    """Median seconds per batch; stops early once ``budget_s`` is spent (at least 2 batches)."""
    row_bytes = ds.dtype.itemsize * int(np.prod(ds.shape[1:]))
    fn(ds, batches[0], row_bytes)  # warm-up (chunk index, page cache)
    times: list[float] = []
    start = time.perf_counter()
    for pos in batches:
        t = time.perf_counter()
        fn(ds, pos, row_bytes)
        times.append(time.perf_counter() - t)
        if len(times) >= 2 and time.perf_counter() - start > budget_s:
            break
    return float(np.median(times))


def make_batches(rng: np.random.Generator, rows: int, batch: int, span: int, count: int) -> list[np.ndarray]:
    """Sorted unique positions: ``batch`` rows drawn from a random window of ``span`` rows."""
    span = min(span, rows)
    out = []
    for _ in range(count):
        lo = int(rng.integers(0, rows - span + 1))
        out.append(np.sort(rng.choice(span, batch, replace=False)) + lo)
    return out


def write_storage(path: Path, leaves: dict[str, tuple[tuple[int, ...], str]], rows: int, rng: np.random.Generator,
                  **kwargs: object) -> None:
    def bounds(dtype):  # the dtype's own range for integer leaves (BoxSpace refuses wider bounds)
        return (0, 255) if np.dtype(dtype).kind in "iu" else (-1e3, 1e3)

    space = DictSpace({k: BoxSpace(*bounds(dtype), shape, dtype) for k, (shape, dtype) in leaves.items()})
    storage = HDF5Storage.create(space, capacity=None, cache_path=path, **kwargs)
    block = max(1, min(rows, (32 << 20) // max(int(np.prod(s)) * np.dtype(d).itemsize for s, d in leaves.values())))
    for a in range(0, rows, block):
        n = min(block, rows - a)
        storage.extend({k: rng.integers(0, 200, (n, *shape)).astype(dtype) for k, (shape, dtype) in leaves.items()})
    storage.close()


def strategy_table(tmp: Path, rows: int, batch: int, rng: np.random.Generator) -> None:
    print(f"\n== strategies: batch {batch}, ms per batch (ratio = index_list / strategy)")
    cases = [("vec16 (16,) float32", {"x": ((16,), "float32")}, rows),
             ("vec2 (2,) float32", {"x": ((2,), "float32")}, rows),
             ("image (96, 96, 3) uint8", {"x": ((96, 96, 3), "uint8")}, min(rows, 2000))]
    for label, leaves, n in cases:
        path = tmp / label.split()[0]
        write_storage(path, leaves, n, rng)
        with h5py.File(path / DATA_FILE, "r", locking=False, rdcc_nbytes=0) as f:
            ds = f["x"]
            print(f"-- {label}: {n} rows, chunks {ds.chunks}")
            for span_label, span in [("sparse", n), ("span 2x", 2 * batch), ("span 8x", 8 * batch),
                                     ("span 32x", 32 * batch), ("span 128x", 128 * batch)]:
                if span > n and span_label != "sparse":
                    continue
                batches = make_batches(rng, n, min(batch, n // 2), span, 20)
                times = {k: median_time(fn, ds, batches) for k, fn in STRATEGIES.items()}
                base = times["index_list"]
                cells = "  ".join(f"{k} {t * 1e3:7.3f} ({base / t:5.2f}x)" for k, t in times.items())
                print(f"   {span_label:9s} {cells}")


def width_table(tmp: Path, batch: int, rng: np.random.Generator) -> None:
    print(f"\n== index_list vs runs by row width: {batch} sparse rows, float32 (ratio = runs / index_list)")
    for width in [2, 16, 64, 256, 1024, 4096]:
        row_bytes = 4 * width
        n = min(400_000, (64 << 20) // row_bytes)
        path = tmp / f"w{width}"
        write_storage(path, {"x": ((width,), "float32")}, n, rng)
        with h5py.File(path / DATA_FILE, "r", locking=False, rdcc_nbytes=0) as f:
            ds = f["x"]
            batches = make_batches(rng, n, batch, n, 20)
            il, rs = median_time(index_list, ds, batches), median_time(runs_slices, ds, batches)
            print(f"   row {row_bytes:6d} B ({n:6d} rows): index_list {il * 1e3:7.3f} ms  runs {rs * 1e3:7.3f} ms"
                  f"  ratio {rs / il:5.2f}")


def cache_table(tmp: Path, batch: int, rng: np.random.Generator) -> None:
    print("\n== chunk cache (rdcc_nbytes): sparse reads, uncompressed (ratio = 1 MiB time / 0 time)")
    for label in ["vec16", "image"]:
        path = tmp / label / DATA_FILE
        for fn in (index_list, runs_slices) if label == "vec16" else (runs_slices,):
            t = {}
            for cache in (0, 1 << 20):
                with h5py.File(path, "r", locking=False, rdcc_nbytes=cache) as f:
                    ds = f["x"]
                    t[cache] = median_time(fn, ds, make_batches(rng, len(ds), min(batch, len(ds) // 2), len(ds), 20))
            print(f"   {label:6s} {fn.__name__:11s} cache 0: {t[0] * 1e3:7.3f} ms  1 MiB: {t[1 << 20] * 1e3:7.3f} ms"
                  f"  ratio {t[1 << 20] / t[0]:5.2f}")
    print("   gzip, 1-row appends of a (16,) float32 leaf (ratio = no cache / 4 MiB):")
    t = {}
    for cache in (0, 4 << 20):
        path = tmp / f"append{cache}.h5"
        with h5py.File(path, "w", locking=False, rdcc_nbytes=cache) as f:
            ds = f.create_dataset("x", (0, 16), "float32", maxshape=(None, 16), chunks=(4096, 16),
                                  compression="gzip", shuffle=True)
            row = rng.standard_normal((1, 16)).astype("float32")
            start = time.perf_counter()
            for i in range(2000):
                ds.resize(i + 1, axis=0)
                ds[i:i + 1] = row
            t[cache] = (time.perf_counter() - start) / 2000
    print(f"   no cache {t[0] * 1e6:7.1f} us/append  4 MiB {t[4 << 20] * 1e6:7.1f} us/append"
          f"  ratio {t[0] / t[4 << 20]:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version}, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        strategy_table(Path(tmp), args.rows, args.batch, rng)
        width_table(Path(tmp), args.batch, rng)
        cache_table(Path(tmp), args.batch, rng)


if __name__ == "__main__":
    main()
