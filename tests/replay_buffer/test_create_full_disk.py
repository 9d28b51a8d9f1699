"""A create that hits a full disk (a small tmpfs filled to various points) leaves nothing behind, and
the same create succeeds once space is freed: the buffer's and every storage's.

Needs ``mount -t tmpfs`` (root); skipped where mounting is not permitted.
"""

from __future__ import annotations

import errno
import shutil

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, VideoStorage, dict_storage_kwargs_from_space

from tests.replay_buffer.test_full_disk import _fill, small_disk  # noqa: F401 (a fixture)

IMAGE = BoxSpace(0, 255, (16, 16, 3), np.uint8, metadata={"kind": "image", "fps": 10})
SPACE = DictSpace({"cam": IMAGE, "k": BoxSpace(0, 1e9, (), np.int64)})

#: Bytes left free before the create: from none to enough for the whole create.
LEAVE = [0, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20, 4 << 20]


def _buffer(path):
    return ReplayBuffer.create(DictStorage, SPACE, cache_path=path,
                               **dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"chunk_bytes": 2000}}))


def _video_buffer(path):
    pytest.importorskip("av")
    return ReplayBuffer.create(DictStorage, SPACE, cache_path=path,
                               **dict_storage_kwargs_from_space(SPACE, kind_storage_cls={"image": VideoStorage}))


def _video(path):
    pytest.importorskip("av")
    return VideoStorage.create(IMAGE, cache_path=path)


CREATES = {
    "buffer": _buffer,
    "video buffer": _video_buffer,
    "dict": lambda path: DictStorage.create(SPACE, cache_path=path,
                                            **dict_storage_kwargs_from_space(SPACE, kind_storage_cls={"image": ImageStorage})),
    "image": lambda path: ImageStorage.create(IMAGE, cache_path=path),
    "video": _video,
    "hdf5": lambda path: HDF5Storage.create(SPACE, cache_path=path),
}


@pytest.mark.parametrize("what", list(CREATES))
def test_a_create_on_a_full_disk_leaves_nothing_and_succeeds_once_space_is_freed(small_disk, what):
    create = CREATES[what]
    path = small_disk / "made" / "rb"  # a parent made too: removed as well
    failed = 0
    for leave in LEAVE:
        filler = _fill(small_disk, leave)
        try:
            made = create(path)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            failed += 1
            assert sorted(p.name for p in small_disk.iterdir()) == ["filler"], (leave, list(path.rglob("*"))
                                                                                if path.exists() else None)
            filler.unlink()
            made = create(path)  # the same create once space is freed
        else:
            filler.unlink()
        made.close()
        reopened = ReplayBuffer.load_from(path) if "buffer" in what else None
        if reopened is not None:
            assert len(reopened) == 0
            reopened.close()
        shutil.rmtree(small_disk / "made")
    assert failed >= 2  # the lock file, and later files, hit the full disk
