"""VideoStorage's random-access reads give exactly the frames of a plain sequential decode.

The expected frames come from a back door: ``index.log`` replayed with a plain loop and every
segment decoded from start to end with plain PyAV (``container.decode``), never through the
storage's frame tables, reused decoders or frame cache.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import numpy as np
import pytest

av = pytest.importorskip("av")

from trajstore.spaces import BoxSpace  # noqa: E402
from trajstore.storages import VideoStorage  # noqa: E402
from trajstore.storages.frames import _segment_reader, video as vmod  # noqa: E402
from trajstore.storages.frames._frame_cache import FrameCache  # noqa: E402
from trajstore.storages.frames.video import segment_name  # noqa: E402
from trajstore.testing import moving_scene  # noqa: E402

from tests.storages.test_video import decode_file, read_log  # noqa: E402

H, W = 48, 64
SPACE = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 15})
N = 53  # 4 segments of 16 frames, the last one short


def sequential(folder) -> np.ndarray:
    """Back door: slot -> the frame a start-to-end decode of its segment gives, ``(N, H, W, 3)``."""
    table = read_log(folder)
    files: dict[int, np.ndarray] = {}
    out = np.empty((len(table), H, W, 3), np.uint8)
    for slot, (fid, frame) in table.items():
        if fid not in files:
            files[fid] = decode_file(folder / segment_name(fid), H, W)
        out[slot] = files[fid][frame]
    return out


@pytest.fixture(params=[1, 3, 8], ids=lambda g: f"gop{g}")
def written(request, tmp_path):
    """A closed folder of ``N`` frames at keyframe interval 1, 3 or 8 (main's old default)."""
    path = tmp_path / "v"
    storage = VideoStorage.create(SPACE, cache_path=path, segment_frames=16, gop_size=request.param)
    storage.extend(moving_scene(N, H, W, seed=request.param))
    storage.close()
    return path, sequential(path)


def open_with_cache(path, monkeypatch, cache_bytes: int) -> VideoStorage:
    monkeypatch.setattr(vmod, "FRAME_CACHE_BYTES", cache_bytes)
    return VideoStorage.load_from(path, read_only=True)


def index_sets(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    anchors = rng.integers(1, N, 20)
    return [rng.integers(0, N, 40),  # random, repeats likely
            rng.permutation(N),  # every frame, any order
            np.repeat(rng.integers(0, N, 5), 3),  # each frame three times in a row
            np.stack([anchors - 1, anchors], 1).ravel(),  # windows at [-1, 0], across segment edges too
            np.arange(N)[::-1],  # backwards: every frame behind the last one
            np.array([15, 16, 31, 32, 47, 48, 52, 0])]  # segment edges


@pytest.mark.parametrize("cache_bytes", [0, 32 * 2**20], ids=["no-cache", "cache"])
def test_any_order_with_repeats_equals_sequential_decode(written, monkeypatch, cache_bytes):
    path, expected = written
    with open_with_cache(path, monkeypatch, cache_bytes) as storage:
        for _ in range(2):  # the second pass finds decoders positioned and frames cached
            for idx in index_sets(0):
                np.testing.assert_array_equal(storage.get(idx), expected[idx])
            for k in range(N):  # one frame at a time, forward: decoders continue where they stand
                np.testing.assert_array_equal(storage.get(k), expected[k])


def test_one_thread_and_many_agree(written, monkeypatch):
    path, expected = written
    idx = np.random.default_rng(3).integers(0, N, 64)
    for threads in (1, 3):
        monkeypatch.setattr(vmod, "DECODE_THREADS", threads)
        with open_with_cache(path, monkeypatch, 0) as storage:
            np.testing.assert_array_equal(storage.get(idx), expected[idx])


def test_reopen_reads_the_same(written, monkeypatch):
    path, expected = written
    idx = np.random.default_rng(4).integers(0, N, 30)
    with open_with_cache(path, monkeypatch, 0) as storage:
        first = storage.get(idx)
    with open_with_cache(path, monkeypatch, 0) as storage:
        np.testing.assert_array_equal(storage.get(idx), first)
    np.testing.assert_array_equal(first, expected[idx])


def test_keyframes_come_from_the_file_not_the_config(tmp_path, monkeypatch):
    """A folder whose storage.json names another interval than its files hold reads the same."""
    path = tmp_path / "v"
    storage = VideoStorage.create(SPACE, cache_path=path, segment_frames=16, gop_size=4)
    storage.extend(moving_scene(N, H, W, seed=9))
    storage.close()
    expected = sequential(path)
    meta = json.loads((path / "storage.json").read_text())
    assert meta["config"]["gop_size"] == 4
    meta["config"]["gop_size"] = 7
    (path / "storage.json").write_text(json.dumps(meta))
    with open_with_cache(path, monkeypatch, 0) as storage:
        for idx in index_sets(5):
            np.testing.assert_array_equal(storage.get(idx), expected[idx])


def _child_read(path: str, idx: list[int], queue) -> None:
    storage = _PARENT_STORAGE  # inherited through the fork, already used by the parent
    frames = storage.get(np.array(idx))
    local = _segment_reader._LOCAL
    own = local.pid == os.getpid() and all(d is not p for d in local.by_extradata.values() for p in _PARENT_DECODERS)
    queue.put((frames.tobytes(), own, os.getpid()))


_PARENT_STORAGE: VideoStorage | None = None
_PARENT_DECODERS: list = []


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_forked_child_reads_with_decoders_of_its_own(written, monkeypatch):
    """A DataLoader-like worker forked from a parent that has read (decoders made, frames cached)."""
    global _PARENT_STORAGE, _PARENT_DECODERS
    path, expected = written
    monkeypatch.setattr(vmod, "DECODE_THREADS", 1)  # the parent's decoders live on this thread
    with open_with_cache(path, monkeypatch, 32 * 2**20) as storage:
        storage.get(np.arange(N))
        _PARENT_DECODERS = list(_segment_reader._LOCAL.by_extradata.values())
        assert _PARENT_DECODERS and storage._frame_cache.nbytes > 0
        _PARENT_STORAGE = storage
        idx = np.random.default_rng(6).integers(0, N, 40)
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child_read, args=(str(path), idx.tolist(), queue))
        child.start()
        data, own, pid = queue.get(timeout=60)
        child.join(60)
        assert child.exitcode == 0 and pid != os.getpid()
        assert own, "the child fed a decoder it inherited from its parent"
        np.testing.assert_array_equal(np.frombuffer(data, np.uint8).reshape(-1, H, W, 3), expected[idx])
        np.testing.assert_array_equal(storage.get(idx), expected[idx])  # the parent reads on
    _PARENT_STORAGE, _PARENT_DECODERS = None, []


def test_storage_frame_cache_stays_within_its_bound(written, monkeypatch):
    path, expected = written
    bound = 5 * H * W * 3 + 100  # five frames
    with open_with_cache(path, monkeypatch, bound) as storage:
        for idx in index_sets(7):
            np.testing.assert_array_equal(storage.get(idx), expected[idx])
            cache = storage._frame_cache
            assert cache.max_bytes == bound and 0 < cache.nbytes <= bound and len(cache) <= 5


def test_frame_cache_is_an_lru_bounded_in_bytes():
    frame_bytes = 4 * 4 * 3
    cache = FrameCache(3 * frame_bytes)
    frames = np.arange(6 * frame_bytes, dtype=np.uint8).reshape(6, 4, 4, 3)
    cache.put(7, [0, 1, 2], frames, [0, 1, 2])
    assert len(cache) == 3 and cache.nbytes == 3 * frame_bytes
    out = np.zeros_like(frames)
    assert cache.take(7, [0, 5], out, [4, 5]) == [1]  # frame 5 was never put; 0 is now the newest
    np.testing.assert_array_equal(out[4], frames[0])
    frames[0] = 0  # the cache holds copies
    cache.put(7, [3], frames, [3])  # evicts frame 1, the least recently used
    assert cache.nbytes == 3 * frame_bytes
    assert cache.take(7, [1, 2, 3, 0], out, [0, 1, 2, 3]) == [0]
    np.testing.assert_array_equal(out[3], np.arange(frame_bytes, dtype=np.uint8).reshape(4, 4, 3))
    cache.put(8, [0], frames, [5])
    cache.drop_file(7)
    assert len(cache) == 1 and cache.nbytes == frame_bytes
    assert FrameCache(0).put(1, [0], frames, [0]) is None and len(FrameCache(0)) == 0
    with pytest.raises(ValueError, match="max_bytes >= 0"):
        FrameCache(-1)


@pytest.mark.parametrize("pix_fmt", ["yuv420p", "yuv444p"])
def test_odd_frame_size_equals_sequential_decode(tmp_path, monkeypatch, pix_fmt):
    """47x63: 4:2:0 pads to 48x64 in the file and crops on read; 4:4:4 keeps the size."""
    h, w = 47, 63
    space = BoxSpace(0, 255, (h, w, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 15})
    path = tmp_path / "v"
    storage = VideoStorage.create(space, cache_path=path, segment_frames=8, gop_size=2, pix_fmt=pix_fmt)
    storage.extend(moving_scene(20, h, w, seed=2))
    storage.close()
    table = read_log(path)
    files = {fid: decode_file(path / segment_name(fid), h, w) for fid, _ in table.values()}
    expected = np.stack([files[fid][frame] for _, (fid, frame) in sorted(table.items())])
    idx = np.random.default_rng(8).integers(0, 20, 30)
    with open_with_cache(path, monkeypatch, 0) as storage:
        got = storage.get(idx)
    assert got.shape == (30, h, w, 3)
    np.testing.assert_array_equal(got, expected[idx])
