"""BufferTests over every layout trajstore ships: JPEG, PNG and video cameras (with the other leaves
in HDF5), every leaf in a memmap, every leaf in HDF5 with lzf compression; each as a ring of 16
steps (the suite's 27-step episodes wrap it) and unbounded.

Video encodes and decodes whole segments, so its classes run fewer random sequences. The folders
live on a RAM file system where there is one (``/dev/shm``): the suite checks what the buffer
holds, not durability (tests/storages/test_hdf5_crash.py and tests/fuzz do), and every commit's
fsyncs would otherwise take most of its time.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import h5py
import pytest

from trajstore.storages import (DictStorage, HDF5Storage, ImageStorage, MemmapStorage, VideoStorage,
                                dict_storage_kwargs_from_space)
from trajstore.storages.hdf5 import DATA_FILE
from trajstore.testing.buffer import BufferTests
from trajstore.testing.values import leaves_of

RING = 16
RAM = Path("/dev/shm")


@pytest.fixture
def tmp_path(tmp_path):
    """A folder in RAM when the machine has one, else pytest's own."""
    if not (RAM.is_dir() and shutil.disk_usage(RAM).free > 1 << 30):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="trajstore-suite-", dir=RAM))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Layout(BufferTests):
    """The camera is stored where the class name says (a wrong routing option would test another layout)."""

    camera_storage: type
    camera_lossless: bool

    def test_the_camera_goes_where_the_layout_says(self, tmp_path):
        rb = self.create(tmp_path)
        parts = rb.storage.parts()
        holder = parts["observation/pixels"] if "observation/pixels" in parts else parts["*"]
        assert type(holder) is self.camera_storage and holder.lossless is self.camera_lossless, holder
        rb.close()


class JPEG(Layout):
    routing: dict = {}  # the default routing: JPEG frames, every other leaf in HDF5
    min_psnr_db = 35.0  # measured >= 41 dB on the suite's 24x32 frames at quality 90
    camera_storage, camera_lossless = ImageStorage, False


class PNG(Layout):
    routing = {"kind_kwargs": {"image": {"format": "PNG"}}}
    camera_storage, camera_lossless = ImageStorage, True


class Memmap(Layout):
    camera_storage, camera_lossless = MemmapStorage, True

    def layout(self, space):
        every_leaf = {name: MemmapStorage for name, _ in leaves_of(space)}
        return DictStorage, dict_storage_kwargs_from_space(space, key_storage_cls=every_leaf)


class HDF5Lzf(Layout):
    routing = {"kind_storage_cls": {}, "default_kwargs": {"compression": "lzf"}}
    camera_storage, camera_lossless = HDF5Storage, True

    def test_every_leaf_is_one_lzf_dataset(self, tmp_path):
        rb, _ = self.recorded(tmp_path)
        (key, part), = rb.storage.parts().items()
        assert key == "*" and isinstance(part, HDF5Storage)
        rb.close()
        with h5py.File(part.cache_path / DATA_FILE, "r", locking=False) as f:
            names = []
            f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            assert sorted(names) == sorted(name for name, _ in leaves_of(rb.space))
            assert {f[n].compression for n in names} == {"lzf"}


class TestJPEGRing(JPEG):
    capacity = RING


class TestJPEGUnbounded(JPEG):
    capacity = None


class TestPNGRing(PNG):
    capacity = RING


class TestPNGUnbounded(PNG):
    capacity = None


class TestMemmapRing(Memmap):
    capacity = RING


class TestMemmapUnbounded(Memmap):
    capacity = None


class TestHDF5LzfRing(HDF5Lzf):
    capacity = RING


class TestHDF5LzfUnbounded(HDF5Lzf):
    capacity = None


try:
    import av  # noqa: F401
except ImportError:  # pragma: no cover - the video extra
    av = None


@pytest.mark.skipif(av is None, reason="video needs PyAV (pip install trajstore[video])")
class Video(Layout):
    camera_storage, camera_lossless = VideoStorage, False
    min_psnr_db = 28.0  # measured >= 30.9 dB on the suite's 24x32 frames (crf 20, yuv420p); final observations are JPEG
    random_examples = 3
    random_operations = 8
    routing = {"kind_storage_cls": {"image": VideoStorage}}


class TestVideoRing(Video):
    capacity = RING


class TestVideoUnbounded(Video):
    capacity = None
