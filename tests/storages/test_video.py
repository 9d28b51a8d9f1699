"""VideoStorage: the conformance suite (within a stated PSNR bound) and its own rules.

The back door replays ``index.log`` with its own parser and decodes the segment files from
start to end with plain PyAV, bypassing VideoStorage's seeking reader.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

av = pytest.importorskip("av")

from trajstore.errors import UnsupportedSpaceError  # noqa: E402
from trajstore.spaces import BoxSpace, DictSpace  # noqa: E402
from trajstore.storages import SpaceStorage, VideoStorage, dict_storage_kwargs_from_space  # noqa: E402
from trajstore.storages.frames import _video_codec as vcodec  # noqa: E402
from trajstore.storages.frames._slot_index import HEADER_BYTES, LOG_FILE  # noqa: E402
from trajstore.storages.frames.video import SEGMENT_DIR, segment_name  # noqa: E402
from trajstore.testing import moving_scene as _scene, psnr  # noqa: E402
from trajstore.testing.storage import StorageTests  # noqa: E402

H, W = 96, 128
SPACE = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 15})
#: Per-frame bound at the defaults (crf 20, preset faster, 4:2:0). Measured on these scenes:
#: >= 36.8 dB per frame at 97x131 and >= 37.4 dB at 128x128 over 6 seeds.
MIN_PSNR_DB = 35.0


def moving_scene(n: int, h: int = H, w: int = W, seed: int = 0) -> np.ndarray:
    return _scene(n, h, w, seed)


def assert_psnr(actual: Any, expected: Any, bound: float = MIN_PSNR_DB) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape and actual.dtype == np.uint8, (actual.shape, actual.dtype)
    if actual.size:
        batch = (actual, expected) if actual.ndim == 4 else (actual[None], expected[None])
        worst = psnr(*batch).min()
        assert worst >= bound, f"a frame is at {worst:.1f} dB < {bound} dB"


def read_log(folder: Path) -> dict[int, tuple[int, int]]:
    """Back door: replay ``index.log`` with a plain loop: slot -> (segment id, frame number)."""
    raw = (folder / LOG_FILE).read_bytes()[HEADER_BYTES:]
    table: dict[int, tuple[int, int]] = {}
    for slot, fid, frame, _ in np.frombuffer(raw[: len(raw) // 32 * 32], dtype="<i8").reshape(-1, 4).tolist():
        if slot >= 0:
            table[slot] = (fid, frame)
    return table


def decode_file(path: Path, h: int = H, w: int = W) -> np.ndarray:
    """Back door: every frame of a segment, start to end, with plain PyAV."""
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24")[:h, :w] for f in container.decode(video=0)])


def segment_files(folder: Path, pattern: str = "*.mp4") -> list[Path]:
    return sorted((folder / SEGMENT_DIR).glob(pattern))


class VideoTests(StorageTests):
    storage_cls = VideoStorage

    def make_space(self):
        return SPACE

    def sample_batch(self, space, n, seed):
        return moving_scene(n, seed=seed)

    def assert_close(self, actual, expected, space):
        assert_psnr(actual, expected)

    def back_door_read(self, storage, positions):
        table = read_log(storage.cache_path)
        files: dict[int, np.ndarray] = {}
        out = []
        for p in positions.tolist():
            fid, frame = table[p]
            if fid not in files:
                files[fid] = decode_file(storage.cache_path / segment_name(fid))
            out.append(files[fid][frame])
        return np.stack(out)



class TestVideoStorage(VideoTests):
    """Defaults: the suite's 12 frames stay pending until a flush (the raw path, then the file path)."""


class TestVideoStorageSmallSegments(VideoTests):
    """Segments of 5 frames and a keyframe every 2: reads mix closed segments and pending frames."""

    def create_kwargs(self):
        return {"segment_frames": 5, "gop_size": 2}


# -- what VideoStorage takes ---------------------------------------------------------------------
@pytest.mark.parametrize("space, given", [
    (BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"layout": "CHW"}), "layout 'CHW'"),
    (BoxSpace(0, 255, (3, H, W), np.uint8), f"shape (3, {H}, {W})"),
    (BoxSpace(0, 1, (H, W, 3), np.float32), "dtype float32"),
    (BoxSpace(0, 255, (H, W, 4), np.uint8), f"shape ({H}, {W}, 4)"),
    (DictSpace({"a": SPACE}), "a DictSpace"),
])
def test_unsupported_space(tmp_path, space, given):
    with pytest.raises(UnsupportedSpaceError, match="expected a BoxSpace of dtype uint8") as info:
        VideoStorage.create(space, cache_path=tmp_path / "v")
    assert given in str(info.value)
    assert not VideoStorage.accepts(space) and not (tmp_path / "v").exists()


@pytest.mark.parametrize("kwargs, error", [
    ({"fps": 0}, ValueError), ({"fps": -5}, ValueError), ({"fps": float("nan")}, ValueError),
    ({"fps": True}, ValueError), ({"fps": "30"}, ValueError), ({"crf": 60}, ValueError),
    ({"gop_size": 0}, ValueError), ({"preset": "warp"}, ValueError), ({"pix_fmt": "rgb24"}, ValueError),
    ({"segment_frames": 0}, ValueError), ({"codec": "libaom-av1"}, ValueError), ({"quality": 3}, TypeError),
    # Not offered: run as root it switches the process to SCHED_FIFO 99 (see _video_codec.CODECS).
    ({"codec": "libsvtav1"}, ValueError),
])
def test_bad_options(tmp_path, kwargs, error):
    with pytest.raises(error):
        VideoStorage.create(SPACE, cache_path=tmp_path / "v", **kwargs)
    assert not (tmp_path / "v").exists()


def test_router_passes_fps_from_metadata(tmp_path):
    space = DictSpace({"cam": SPACE, "x": BoxSpace(0, 1, (2,), np.float32)})
    kw = dict_storage_kwargs_from_space(space, kind_storage_cls={"image": VideoStorage})
    assert kw["storage_cls_map"]["cam"] is VideoStorage and kw["key_kwargs"]["cam"]["fps"] == 15
    v = VideoStorage.create(SPACE, cache_path=tmp_path / "v", fps=29.97)
    assert v.get_config()["fps"] == 29.97
    v.extend(moving_scene(20))
    v.close()
    with av.open(str(segment_files(tmp_path / "v")[0])) as c:
        assert c.streams.video[0].average_rate == vcodec.fps_fraction(29.97)
    assert_psnr(SpaceStorage.load_from(tmp_path / "v")[:], moving_scene(20))


def test_av_is_imported_lazily():
    code = ("import sys, trajstore.storages as s; assert 'av' not in sys.modules, 'av imported early'; "
            "assert s.VideoStorage.type_name == 'video'")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- frames, files and reads -----------------------------------------------------------------------
def test_odd_size_round_trip(tmp_path):
    h, w = 97, 131
    space = BoxSpace(0, 255, (h, w, 3), np.uint8)
    frames = moving_scene(30, h, w, seed=4)
    v = VideoStorage.create(space, capacity=None, cache_path=tmp_path / "v", segment_frames=16)
    v.extend(frames)
    np.testing.assert_array_equal(v[20:], frames[20:])  # still pending: exact
    v.close()
    with av.open(str(segment_files(tmp_path / "v")[0])) as c:  # padded to even, 4:2:0
        s = c.streams.video[0]
        assert (s.codec_context.height, s.codec_context.width, s.codec_context.pix_fmt) == (98, 132, "yuv420p")
    again = VideoStorage.load_from(tmp_path / "v")
    got = again[:]
    assert got.shape == (30, h, w, 3)
    assert_psnr(got, frames)
    again.close()


def test_yuv444_keeps_odd_size(tmp_path):
    space = BoxSpace(0, 255, (33, 47, 3), np.uint8)
    frames = moving_scene(10, 33, 47, seed=5)
    v = VideoStorage.create(space, capacity=None, cache_path=tmp_path / "v", pix_fmt="yuv444p", crf=0)
    v.extend(frames)
    v.close()
    assert decode_file(segment_files(tmp_path / "v")[0], 33, 47).shape == (10, 33, 47, 3)
    # crf 0 is lossless in YUV: what is left is the 8-bit RGB <-> YUV rounding (measured 52.0 dB).
    assert_psnr(VideoStorage.load_from(tmp_path / "v")[:], frames, 50.0)


def test_shuffled_reads_equal_a_sequential_decode(tmp_path):
    frames = moving_scene(90, seed=6)
    v = VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v", segment_frames=32, gop_size=4)
    v.extend(frames)
    v.flush()
    sequential = np.concatenate([decode_file(p) for p in segment_files(tmp_path / "v")])
    assert len(sequential) == 90
    rng = np.random.default_rng(0)
    for _ in range(5):
        idx = rng.permutation(90)[:40]
        np.testing.assert_array_equal(v[idx], sequential[idx])  # decoding is deterministic
    np.testing.assert_array_equal(v[np.array([89, 0, 45, 45, 3])], sequential[[89, 0, 45, 45, 3]])
    assert_psnr(sequential, frames)
    v.close()


def test_pending_frames_readable_before_flush(tmp_path):
    frames = moving_scene(10, seed=7)
    v = VideoStorage.create(SPACE, capacity=20, cache_path=tmp_path / "v")
    v[5:15] = frames
    assert segment_files(tmp_path / "v") == []  # nothing closed yet, only the temp file
    assert len(segment_files(tmp_path / "v", "*.tmp")) == 1
    np.testing.assert_array_equal(v[5:15], frames)  # the raw frames, exactly as written
    assert not v[:5].any() and not v[15:].any()  # never written: zeros
    v[7] = frames[0]  # written again while pending: the last write wins
    np.testing.assert_array_equal(v[7], frames[0])
    v.flush()
    assert segment_files(tmp_path / "v", "*.tmp") == []
    expected = frames.copy()
    expected[2] = frames[0]
    assert_psnr(v[5:15], expected)
    assert not v[:5].any()
    v.close()


def _spawned_read(path: str, out: Any) -> None:
    storage = SpaceStorage.load_from(path)
    out.put(storage[:])
    storage.close()


def test_flushed_frames_equal_in_a_new_process(tmp_path):
    v = VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v", segment_frames=8)
    v.extend(moving_scene(20, seed=8))
    v.flush()
    mine = v[:]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_spawned_read, args=(str(tmp_path / "v"), out))
    p.start()
    theirs = out.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0
    np.testing.assert_array_equal(theirs, mine)
    v.close()


def test_reader_refresh_sees_flushed_segments_only(tmp_path):
    frames = moving_scene(24, seed=9)
    v = VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v", segment_frames=100)
    v.extend(frames[:8])
    v.flush()
    r = SpaceStorage.load_from(tmp_path / "v", read_only=True)
    assert len(r) == 8
    v.extend(frames[8:])  # pending in the writer: invisible to other readers
    r.refresh()
    assert len(r) == 8
    v.flush()
    r.refresh()
    assert len(r) == 24
    np.testing.assert_array_equal(r[:], v[:])
    r.close()
    v.close()


# -- disk ------------------------------------------------------------------------------------------
def test_ring_keeps_disk_bounded(tmp_path):
    cap, seg = 40, 8
    v = VideoStorage.create(SPACE, capacity=cap, cache_path=tmp_path / "v", segment_frames=seg)
    frames = moving_scene(400, seed=10)
    counts = []
    for start in range(0, 400, 10):  # ring order, as a replay buffer writes
        v[np.arange(start, start + 10) % cap] = frames[start:start + 10]
        if start % 50 == 0:
            v.flush()
        counts.append(len(segment_files(tmp_path / "v")))
    v.flush()
    assert max(counts) <= cap // seg + 3, counts  # one segment per flush may be short
    live = {fid for fid, _ in read_log(tmp_path / "v").values()}
    assert {int(p.stem) for p in segment_files(tmp_path / "v")} == live
    assert_psnr(v[np.arange(360, 400) % cap], frames[360:])
    v.close()


def test_one_slot_rewritten_keeps_one_segment(tmp_path):
    v = VideoStorage.create(SPACE, capacity=4, cache_path=tmp_path / "v", segment_frames=5)
    frames = moving_scene(60, seed=11)
    for i in range(60):
        v[2] = frames[i]
    v.flush()
    assert len(segment_files(tmp_path / "v")) == 1
    assert_psnr(v[2], frames[59])
    v.close()


def _killed_writer(path: str, ready: Any) -> None:
    v = VideoStorage.create(SPACE, capacity=None, cache_path=path, segment_frames=16)
    v.extend(moving_scene(20, seed=12))  # one closed segment, 4 frames pending
    v.flush()
    v.extend(moving_scene(10, seed=13))  # pending again: a temp file is being written
    ready.set()
    time.sleep(600)  # killed long before


def test_kill_leaves_no_unreadable_segment(tmp_path):
    path = tmp_path / "v"
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_killed_writer, args=(str(path), ready))
    p.start()
    assert ready.wait(120), "writer did not start"
    os.kill(p.pid, signal.SIGKILL)
    p.join(60)
    assert len(segment_files(path, "*.tmp")) == 1
    for f in segment_files(path):  # every segment in place is complete
        assert f.stat().st_size > 0 and len(decode_file(f)) > 0
    r = SpaceStorage.load_from(path)  # a reader ignores the temp file and leaves it
    assert len(r) == 20
    assert_psnr(r[:], moving_scene(20, seed=12))
    r.close()
    assert len(segment_files(path, "*.tmp")) == 1
    w = SpaceStorage.load_from(path, read_only=False)  # a writer removes it
    assert segment_files(path, "*.tmp") == []
    w.extend(moving_scene(5, seed=14))
    w.close()
    assert segment_files(path, "*.tmp") == []
    for f in segment_files(path):
        assert len(decode_file(f)) > 0
    assert_psnr(SpaceStorage.load_from(path)[20:], moving_scene(5, seed=14))


def test_failed_encode_keeps_pending_frames(tmp_path, monkeypatch):
    frames = moving_scene(12, seed=15)
    v = VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v")
    v.extend(frames[:6])
    real = vcodec.SegmentEncoder.encode

    def broken(self, batch):
        real(self, batch[:1])  # half a batch reaches the encoder, then it fails
        raise OSError("disk full")

    monkeypatch.setattr(vcodec.SegmentEncoder, "encode", broken)
    with pytest.raises(OSError, match="disk full"):
        v.extend(frames[6:])
    monkeypatch.setattr(vcodec.SegmentEncoder, "encode", real)
    assert len(v) == 6
    v.extend(frames[6:])
    v.close()
    assert [len(decode_file(f)) for f in segment_files(tmp_path / "v")] == [12]
    assert_psnr(SpaceStorage.load_from(tmp_path / "v")[:], frames)


# -- processes -------------------------------------------------------------------------------------
def _run_forked(child) -> None:
    """Run ``child()`` in a forked child that exits with 0 if it returns True; fail if it does not."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if child() else 2
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assert
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the forked child hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_forked_children_never_touch_the_pending_segment(tmp_path):
    frames = moving_scene(60, seed=16)
    holder = {"v": VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v", segment_frames=64)}
    v = holder["v"]
    v.extend(frames[:8])
    v.flush()
    v.extend(frames[8:48])  # pending: an open encoder writing a temp file
    tmp = segment_files(tmp_path / "v", "*.tmp")[0]
    size = tmp.stat().st_size
    assert size > 0  # the encoder has started the file: a child finishing it would change it
    expected = v[:48]

    def reader() -> bool:  # reads (the parent's view at the fork), refreshes, closes, frees
        child = holder.pop("v")
        ok = np.array_equal(child[:48], expected) and child.read_only
        child.refresh()  # from now on: what is on disk (the pending frames read as zeros)
        ok = ok and np.array_equal(child[:8], expected[:8]) and not child[8:48].any()
        child.close()
        del child
        gc.collect()
        return ok

    def bystander() -> bool:  # never uses the storage, only drops it: freeing must not finalise
        holder.clear()
        gc.collect()
        return True

    del v
    _run_forked(reader)
    _run_forked(bystander)
    assert tmp.stat().st_size == size  # no trailer or frame written by a child
    v = holder["v"]
    v.extend(frames[48:])
    v.close()
    assert [len(decode_file(f)) for f in segment_files(tmp_path / "v")] == [8, 52]
    assert_psnr(SpaceStorage.load_from(tmp_path / "v")[:], frames)


def _policy() -> tuple[int, int]:
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


def test_scheduling_policy_unchanged(tmp_path):
    before = _policy()
    v = VideoStorage.create(SPACE, capacity=None, cache_path=tmp_path / "v")
    v.extend(moving_scene(10, seed=17))
    v.flush()
    v[:]
    v.close()
    assert _policy() == before
