"""What crash safety costs HDF5Storage: SWMR mode (every file on disk since) vs HDF5's default mode.

The two modes write the same datasets (chunks and cache settings of ``HDF5Storage``) through
h5py directly, one resize and one slice write per leaf per batch like the storage, so the ratios
are HDF5's own cost without trajstore's (validation, dict handling), which is the same in both
modes; the ``storage`` column is ``HDF5Storage`` itself (SWMR) for scale. Files sit in the page
cache: CPU and syscall costs, not disk costs. ``flush`` = ``File.flush()`` + ``fsync``. Each case
alternates the modes ``--repeats`` times; times are medians, ratios ``swmr / plain`` with their
range over the repeats (> 1: SWMR is slower).

Then the costs only SWMR has: bytes leaked by rewriting compressed chunks (and what compaction at
flush brings back), and reopening for writing after a crash (clear the flags, or copy the file).

Run: ``python benchmarks/hdf5_crash_cost.py [--repeats 5] [--recovery-mb 200]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

import trajstore.storages.hdf5 as hdf5_module
from trajstore.storages.hdf5 import _recovery as _hdf5_recovery
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import HDF5Storage, SpaceStorage
from trajstore.storages.hdf5 import CHUNK_BYTES, CHUNK_MAX_ROWS, COMPRESSED_CACHE_BYTES, DATA_FILE

MODES = {"plain": hdf5_module.PLAIN_LIBVER, "swmr": hdf5_module.SWMR_LIBVER}

SMALL = DictSpace({"state": BoxSpace(-1, 1, (7,), np.float32), "action": BoxSpace(-1, 1, (3,), np.float32),
                   "done": BinarySpace(), "task": TextSpace(8)})
IMAGE = DictSpace({"rgb": BoxSpace(0, 255, (96, 96, 3), np.uint8), "state": BoxSpace(-1, 1, (7,), np.float32)})


def file_leaves(space: DictSpace, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A batch of ``n`` rows per leaf, in the dtypes the file stores."""
    batch = space.sample(rng, batch_size=n)
    return {k: (np.strings.encode(v, "utf-8").astype("S32") if v.dtype.kind == "U" else v) for k, v in batch.items()}


class RawWriter:
    """The writes HDF5Storage makes, through h5py, in either mode."""

    def __init__(self, path: Path, mode: str, example: dict[str, np.ndarray], capacity: int | None,
                 compression: str | None):
        cache = 0 if compression is None else COMPRESSED_CACHE_BYTES
        self.path = path
        self.f = h5py.File(path, "w", libver=MODES[mode], locking=False, rdcc_nbytes=cache)
        self.capacity, self.length = capacity, 0
        self.ds = {}
        for k, v in example.items():
            row_bytes = v[0].nbytes
            rows = min(CHUNK_MAX_ROWS, max(1, CHUNK_BYTES // max(row_bytes, 1)), capacity or CHUNK_MAX_ROWS)
            self.ds[k] = self.f.create_dataset(k, shape=(capacity or 0, *v.shape[1:]), dtype=v.dtype,
                                               maxshape=(capacity, *v.shape[1:]), chunks=(rows, *v.shape[1:]),
                                               compression=compression, shuffle=compression is not None)
        if mode == "swmr":
            self.f.swmr_mode = True
        self.fd = self.f.id.get_vfd_handle()

    def extend(self, batch: dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        for k, ds in self.ds.items():
            ds.resize(self.length + n, axis=0)
            ds[self.length:self.length + n] = batch[k]
        self.length += n

    def set(self, start: int, batch: dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        for k, ds in self.ds.items():
            ds[start:start + n] = batch[k]

    def flush(self) -> None:
        self.f.flush()
        os.fsync(self.fd)

    def close(self) -> None:
        self.f.close()


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(label: str, unit: str, per: int, run: Callable[[str, Path], float], tmp: Path, repeats: int,
            storage_run: Callable[[Path], float] | None = None) -> None:
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(repeats):
        for mode in MODES:
            times[mode].append(run(mode, tmp / f"{''.join(c for c in label if c.isalnum())}-{mode}-{r}.h5") / per)
    ratios = [s / p for s, p in zip(times["swmr"], times["plain"])]
    p, s = np.median(times["plain"]), np.median(times["swmr"])
    storage = ""
    if storage_run is not None:
        key = "".join(c for c in label if c.isalnum())
        storage = f"  storage {np.median([storage_run(tmp / f'{key}-{r}') / per for r in range(repeats)]) * 1e6:9.1f}"
    print(f"  {label:44s} plain {p * 1e6:9.1f}  swmr {s * 1e6:9.1f} {unit}  ratio {np.median(ratios):5.2f}"
          f" ({min(ratios):.2f}-{max(ratios):.2f}){storage}")


def write_cases(tmp: Path, repeats: int) -> None:
    print("\n== writes (us per unit; storage = HDF5Storage, SWMR, same work)")
    rng = np.random.default_rng(0)
    one = file_leaves(SMALL, rng, 1)
    small = file_leaves(SMALL, rng, 256)
    images = file_leaves(IMAGE, rng, 32)

    def appends(space_batch, n_batches, flush_every, compression=None):
        def run(mode, path):
            w = RawWriter(path, mode, space_batch, None, compression)

            def go():
                for i in range(n_batches):
                    w.extend(space_batch)
                    if (i + 1) % flush_every == 0:
                        w.flush()
                w.flush()
            t = timed(go)
            w.close()
            return t
        return run

    def storage_appends(space, batch, n_batches, flush_every, compression=None):
        value = space.sample(np.random.default_rng(1), batch_size=len(next(iter(batch.values()))))

        def run(path):
            s = HDF5Storage.create(space, capacity=None, cache_path=path, compression=compression)

            def go():
                for i in range(n_batches):
                    s.extend(value)
                    if (i + 1) % flush_every == 0:
                        s.flush()
                s.flush()
            t = timed(go)
            s.close()
            return t
        return run

    compare("1-row appends, 4 leaves, flush every 100", "/row", 2000, appends(one, 2000, 100), tmp, repeats,
            storage_appends(SMALL, one, 2000, 100))
    compare("1-row appends, flush every row", "/row", 300, appends(one, 300, 1), tmp, repeats,
            storage_appends(SMALL, one, 300, 1))
    compare("256-row appends, flush every 4", "/row", 256 * 80, appends(small, 80, 4), tmp, repeats,
            storage_appends(SMALL, small, 80, 4))
    compare("32 x (96,96,3) image appends, flush every 8", "/row", 32 * 64, appends(images, 64, 8), tmp, repeats,
            storage_appends(IMAGE, images, 64, 8))
    compare("gzip 1-row appends, flush every 100", "/row", 2000, appends(one, 2000, 100, "gzip"), tmp, repeats,
            storage_appends(SMALL, one, 2000, 100, "gzip"))

    def ring(run_compression):
        def run(mode, path):
            w = RawWriter(path, mode, images, 1024, run_compression)

            def go():
                for i in range(128):
                    w.set((i * 32) % 1024, images)
                    if (i + 1) % 8 == 0:
                        w.flush()
            t = timed(go)
            w.close()
            return t
        return run

    compare("ring: 32-image sets into 1024 slots, flush/8", "/row", 32 * 128, ring(None), tmp, repeats)

    def flush_only(mode, path):
        w = RawWriter(path, mode, one, None, None)
        w.extend(file_leaves(SMALL, rng, 5000))
        w.flush()
        t = 0.0
        for _ in range(50):
            w.extend(one)
            t += timed(w.flush)
        w.close()
        return t

    compare("flush + fsync after a 1-row append", "/flush", 50, flush_only, tmp, repeats)


def read_cases(tmp: Path, repeats: int) -> None:
    print("\n== reads of a closed file (us per batch of 256 random rows; plain opened without SWMR, swmr with)")
    rng = np.random.default_rng(2)
    for label, space, rows in [("4 small leaves, 100k rows", SMALL, 100_000), ("image + state, 4k rows", IMAGE, 4096)]:
        batch = file_leaves(space, rng, 1024)
        paths = {}
        for mode in MODES:
            w = RawWriter(tmp / f"read-{label[:6]}-{mode}.h5", mode, batch, None, None)
            for _ in range(rows // 1024):
                w.extend(batch)
            w.close()
            paths[mode] = w.path
        rows = rows // 1024 * 1024
        batches = [np.sort(rng.choice(rows, 256, replace=False)) for _ in range(30)]

        def run(mode, _path, paths=paths, batches=batches):
            with h5py.File(paths[mode], "r", swmr=mode == "swmr", locking=False, rdcc_nbytes=0) as f:
                dss = list(f.values())
                return timed(lambda: [hdf5_module.read_rows(ds, pos, ds.dtype.itemsize * int(np.prod(ds.shape[1:])))
                                      for pos in batches for ds in dss])
        compare(label, "/batch", len(batches), run, tmp, repeats)

        def reopen(mode, _path, paths=paths):
            def go():
                for _ in range(20):
                    with h5py.File(paths[mode], "r", swmr=mode == "swmr", locking=False) as f:
                        for ds in f.values():
                            ds[0]
            return timed(go)
        compare(label + ": open + first read", "/open", 20, reopen, tmp, repeats)


def leak_cases(tmp: Path) -> None:
    print("\n== compressed chunks rewritten (file KiB; live = sum of the datasets' chunk bytes)")
    rng = np.random.default_rng(3)
    state = {"x": rng.normal(size=(50, 64)).astype(np.float32)}
    for label, capacity in [("gzip appends of 50 rows, flush after each, 200 times", None),
                            ("gzip ring of 4096 rows, 10 passes of 64-row sets, flush every 512 rows", 4096)]:
        sizes = {}
        for mode in MODES:
            w = RawWriter(tmp / f"leak-{capacity}-{mode}.h5", mode, state, capacity, "gzip")
            for i in range(200 if capacity is None else 10 * capacity // 64):
                if capacity is None:
                    w.extend(state)
                    w.flush()
                else:
                    w.set((i * 64) % capacity, {"x": rng.normal(size=(64, 64)).astype(np.float32)})
                    if (i + 1) % 8 == 0:
                        w.flush()
            live = w.ds["x"].id.get_storage_size()
            w.close()
            sizes[mode] = (os.path.getsize(w.path), live)
        space = DictSpace({"x": BoxSpace(-1e3, 1e3, (64,), np.float32)})
        folder = tmp / f"leak-storage-{capacity}"
        s = HDF5Storage.create(space, capacity=capacity, cache_path=folder, compression="gzip")
        start = time.perf_counter()
        for i in range(200 if capacity is None else 10 * capacity // 64):
            if capacity is None:
                s.extend(state)
                s.flush()
            else:
                s.set(slice((i * 64) % capacity, (i * 64) % capacity + 64),
                      {"x": rng.normal(size=(64, 64)).astype(np.float32)})
                if (i + 1) % 8 == 0:
                    s.flush()
        t = time.perf_counter() - start
        s.close()
        size = os.path.getsize(folder / DATA_FILE)
        print(f"  {label}")
        print(f"    plain {sizes['plain'][0] >> 10:7d} KiB (live {sizes['plain'][1] >> 10})   "
              f"swmr {sizes['swmr'][0] >> 10:7d} KiB (live {sizes['swmr'][1] >> 10}, "
              f"{sizes['swmr'][0] / sizes['plain'][0]:.1f}x)   storage (swmr + compaction at flush when > 2x live + "
              f"{hdf5_module.COMPACT_SLACK >> 20} MiB) {size >> 10:7d} KiB, {t:.2f} s")


def _crashed_writer(path: Path, megabytes: int) -> None:
    space = DictSpace({"rgb": BoxSpace(0, 255, (96, 96, 3), np.uint8), "t": BoxSpace(0, 1e9, (), np.float64)})
    s = HDF5Storage.create(space, capacity=None, cache_path=path)
    rng = np.random.default_rng(4)
    batch = {"rgb": rng.integers(0, 255, (64, 96, 96, 3), np.uint8), "t": np.arange(64.0)}
    for _ in range(max(1, (megabytes << 20) // (64 * 96 * 96 * 3))):
        s.extend(batch)
    s.flush()
    s.extend(batch)  # unflushed, then a crash
    os._exit(0)


def recovery_cases(tmp: Path, megabytes: int) -> None:
    print(f"\n== reopening for writing after a crash ({megabytes} MiB file; ms)")
    results = {}
    for how in ["clear flags (h5clear -s --increment=0)", "copy the datasets (fallback)"]:
        path = tmp / f"crashed-{len(results)}"
        pid = os.fork()
        if pid == 0:
            try:
                _crashed_writer(path, megabytes)
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        original = _hdf5_recovery.clear_status_flags
        if how.startswith("copy"):
            def unavailable(_path: Path) -> None:
                raise _hdf5_recovery.NoH5Clear("benchmark")
            _hdf5_recovery.clear_status_flags = unavailable
        try:
            start = time.perf_counter()
            s = SpaceStorage.load_from(path, read_only=False)
            results[how] = time.perf_counter() - start
            s.close()
        finally:
            _hdf5_recovery.clear_status_flags = original
        start = time.perf_counter()
        SpaceStorage.load_from(path, read_only=False).close()
        clean = time.perf_counter() - start
        print(f"  {how:42s} {results[how] * 1e3:9.1f}   (a clean writable open: {clean * 1e3:6.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--recovery-mb", type=int, default=200)
    args = parser.parse_args()
    print(f"h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version}, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        write_cases(Path(tmp), args.repeats)
        read_cases(Path(tmp), args.repeats)
        leak_cases(Path(tmp))
        recovery_cases(Path(tmp), args.recovery_mb)


if __name__ == "__main__":
    main()
