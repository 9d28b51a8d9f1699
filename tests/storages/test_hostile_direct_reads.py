"""Hostile or damaged files under the fast read paths: the raw-bytes HDF5 reads and the batched JPEG/PNG
reads must refuse (or read right) what HDF5 itself would, with bounded memory, never kill the process."""

import os
import subprocess
import sys
import textwrap
import tracemalloc

import h5py
import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def _buffer(path, space, batches):
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                             **dict_storage_kwargs_from_space(space))
    for b in batches:
        rb.extend(b)
        rb.end_episode()
    rb.close()


def test_a_filter_h5py_does_not_name_is_read_through_hdf5(tmp_path):
    # scaleoffset is neither `compression` nor `shuffle`: its chunk bytes are not the rows
    space = DictSpace({"a": BoxSpace(0, 10**6, (3,), np.int32)})
    values = np.arange(300, dtype=np.int32).reshape(100, 3)
    _buffer(tmp_path / "rb", space, [{"a": values}])
    h5 = tmp_path / "rb" / "storage" / "@rest" / "data.h5"
    new = h5.with_suffix(".new")
    with h5py.File(h5, "r") as src, h5py.File(new, "w", libver=("v110", "v110")) as dst:
        for name in src:
            ds = src[name]
            dst.create_dataset(name, data=ds[...], maxshape=ds.maxshape, chunks=ds.chunks, scaleoffset=0)
    os.replace(new, h5)
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    np.testing.assert_array_equal(rb[np.array([5, 7, 99])]["a"], values[[5, 7, 99]])


def test_data_h5_truncated_under_a_reader_is_a_format_error_not_sigbus(tmp_path):
    # in a child: a regression would kill the process with SIGBUS, which must not take pytest with it
    child = textwrap.dedent(f"""
        import os, numpy as np
        from trajstore.errors import FormatError
        from trajstore.replay_buffer import ReplayBuffer
        rb = ReplayBuffer.load_from({str(tmp_path / "rb")!r})
        assert rb[np.array([0, 1999])]["a"].sum() == 512.0
        h5 = {str(tmp_path / "rb" / "storage" / "@rest" / "data.h5")!r}
        os.truncate(h5, os.path.getsize(h5) // 2)
        try:
            rb[np.array([0, 1999])]
        except FormatError as exc:
            assert "data.h5" in str(exc), exc
            print("refused")
    """)
    space = DictSpace({"a": BoxSpace(-1e9, 1e9, (256,), np.float32)})
    _buffer(tmp_path / "rb", space, [{"a": np.ones((2000, 256), np.float32)}])
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and "refused" in run.stdout, (run.returncode, run.stdout, run.stderr[-2000:])


def test_one_hostile_frame_length_costs_only_its_own_bytes(tmp_path):
    # an index record giving slot 5 the whole chunk file (in range, so nothing flags it at open): a batch of
    # 4000 frames once allocated 4000 x that length (30 GB); now the sum of the frames' own lengths
    space = DictSpace({"cam": BoxSpace(0, 255, (32, 32, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})})
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (4, 1000, 32, 32, 3), dtype=np.uint8)
    _buffer(tmp_path / "rb", space, [{"cam": f} for f in frames])
    cam = tmp_path / "rb" / "storage" / "cam"
    size = (cam / "chunks" / "000000.bin").stat().st_size
    with open(cam / "index.log", "ab") as f:
        f.write(np.array([[5, 0, 0, size]], "<i8").tobytes())
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    tracemalloc.start()
    try:
        try:
            got = rb[np.arange(4000)]["cam"]
        except Exception as exc:  # refusing the damaged frame is fine too; running out of memory is not
            chain = [exc, exc.__cause__, exc.__context__]
            assert not any(isinstance(e, MemoryError) for e in chain) and "MemoryError" not in str(exc), exc
            got = None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * size + 200 * 2**20, peak  # far below 4000 x the chunk
    if got is not None:
        assert got.shape == (4000, 32, 32, 3) and got.dtype == np.uint8
