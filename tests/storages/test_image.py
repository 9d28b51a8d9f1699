"""ImageStorage: the conformance suite (JPEG within a stated bound, PNG exact) and its own rules.

The back door reads ``index.log`` with its own parser and decodes the chunk bytes with PIL,
bypassing ImageStorage's read path.
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import BoxSpace, TextSpace
from trajstore.storages import ImageStorage, SpaceStorage
from trajstore.storages.frames import _image_codec as codec
from trajstore.storages.frames._slot_index import HEADER_BYTES, LOG_FILE
from trajstore.storages.frames.image import CHUNK_DIR, DEFAULT_CHUNK_BYTES, chunk_name
from trajstore.testing import moving_scene
from trajstore.testing.storage import StorageTests

H, W = 24, 32
SPACE = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})


def smooth_frames(n: int, seed: int, h: int = H, w: int = W) -> np.ndarray:
    """uint8 ``(n, h, w, 3)``: per channel a random gradient plus one sinusoid of < 1 cycle per frame."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    y, x = y / h, x / w
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        for c in range(3):
            fx, fy = rng.uniform(-1, 1, 2)
            gx, gy = rng.uniform(-60, 60, 2)
            img = 128 + gx * (x - 0.5) + gy * (y - 0.5) + 50 * np.sin(2 * np.pi * (fx * x + fy * y)
                                                                       + rng.uniform(0, 2 * np.pi))
            out[i, :, :, c] = np.clip(img, 0, 255).round()
    return out


def read_log(folder: Path) -> dict[int, tuple[int, int, int]]:
    """Back door: replay ``index.log`` with a plain loop (last record of a slot wins)."""
    raw = (folder / LOG_FILE).read_bytes()[HEADER_BYTES:]
    rec = np.frombuffer(raw[: len(raw) // 32 * 32], dtype="<i8").reshape(-1, 4)
    table: dict[int, tuple[int, int, int]] = {}
    for slot, fid, off, n in rec.tolist():
        if slot >= 0:
            table[slot] = (fid, off, n)
    return table


def encoded_frames(folder: Path, positions) -> list:
    """Back door: each slot's encoded bytes, found through ``read_log``, opened with Pillow (a JPEG frame
    stored without its header gets the one ``storage.json`` keeps, hex, as ``config["jpeg_header"]``)."""
    table = read_log(folder)
    return [Image.open(io.BytesIO(stored_frame(folder, *table[p]))) for p in positions.tolist()]


def stored_frame(folder: Path, fid: int, off: int, n: int) -> bytes:
    """Back door: the whole encoded frame at ``off`` of chunk ``fid``; a JPEG frame stored without its
    header (format version 2) gets the one ``storage.json`` keeps, hex, as ``config["jpeg_header"]``."""
    with open(folder / chunk_name(fid), "rb") as f:
        f.seek(off)
        data = f.read(n)
    if data.startswith(b"\xff\xd8") or data.startswith(b"\x89PNG"):
        return data
    return bytes.fromhex(json.loads((folder / "storage.json").read_text())["config"]["jpeg_header"]) + data


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


class ImageTests(StorageTests):
    storage_cls = ImageStorage

    def make_space(self):
        return SPACE

    def sample_batch(self, space, n, seed):
        return smooth_frames(n, seed)

    def back_door_read(self, storage, positions):
        frames = []
        for img in encoded_frames(storage.cache_path, positions):
            assert img.format == self.create_kwargs()["format"].upper() and img.mode == "RGB"
            frames.append(np.asarray(img))
        return np.stack(frames)



class TestImageStorageJPEG(ImageTests):
    """JPEG at the defaults (quality 90, 4:4:4) on smooth frames: mean |error| <= 2 and max |error| <= 16 levels.

    Measured over 100 seeds of 8 of these 24x32 frames: mean error <= 1.16, max error <= 10 levels
    (at quality 95, the default before: <= 0.99 and <= 8); the bound leaves a factor 1.6 for other
    libjpeg-turbo builds.
    """

    def create_kwargs(self):
        return {"format": "JPEG"}

    def assert_close(self, actual: Any, expected: Any, space: Any) -> None:
        actual, expected = np.asarray(actual), np.asarray(expected)
        assert actual.shape == expected.shape and actual.dtype == np.uint8
        if actual.size:
            err = np.abs(actual.astype(np.int16) - expected.astype(np.int16))
            assert err.mean() <= 2 and err.max() <= 16, (err.mean(), err.max())


class TestImageStoragePNG(ImageTests):
    """PNG is lossless: the suite's exact equality holds."""

    def create_kwargs(self):
        return {"format": "png"}


class TestImageStorageDepthPNG(StorageTests):
    """A depth camera, ``(H, W)`` uint16 (millimetres), as 16-bit grayscale PNG: exact, full range.

    The back door decodes the chunk bytes with Pillow and checks the PNG is 16-bit grayscale.
    """

    storage_cls = ImageStorage

    def make_space(self):
        return BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth"})

    def create_kwargs(self):
        return {"format": "PNG"}

    def sample_batch(self, space, n, seed):
        frames = np.random.default_rng(seed).integers(0, 65536, (n, H, W), dtype=np.uint16)
        frames[:, 0, :2] = [0, 65535]  # both ends of the range in every frame
        return frames

    def back_door_read(self, storage, positions):
        frames = []
        for img in encoded_frames(storage.cache_path, positions):
            assert img.format == "PNG" and img.mode in ("I;16", "I")  # older Pillow opens 16-bit as "I"
            frames.append(np.asarray(img).astype(np.uint16))
        return np.stack(frames)


# -- what ImageStorage takes ---------------------------------------------------------------------
EXPECTED = "expected a BoxSpace of dtype uint8 and shape (H, W, 3)"


@pytest.mark.parametrize("space, given", [
    (BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"layout": "CHW"}), "layout 'CHW'"),
    (BoxSpace(0, 255, (4, H, W), np.uint8, metadata={"layout": "CHW"}), f"layout 'CHW' with shape (4, {H}, {W})"),
    (BoxSpace(0, 1, (H, W, 3), np.float32), "dtype float32"),
    (BoxSpace(0, 255, (H, W, 4), np.uint8), f"shape ({H}, {W}, 4)"),
    (BoxSpace(0, 255, (H, W, 2), np.uint16), "dtype uint16"),
    (BoxSpace(0, 255, (0, W, 3), np.uint8), f"shape (0, {W}, 3)"),
    (BoxSpace(0, 255, (H, W), np.uint8, metadata={"layout": "WH"}), f"shape ({H}, {W})"),
    (TextSpace(8), "a TextSpace"),
], ids=["CHW-layout", "CHW-shape", "float32", "4-channels", "2-channels-uint16", "empty", "HW-layout-WH", "text"])
@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_check_space_refuses(tmp_path: Path, space: Any, given: str, fmt: str) -> None:
    assert not ImageStorage.accepts(space, {"format": fmt})
    with pytest.raises(UnsupportedSpaceError) as info:
        ImageStorage.create(space, capacity=4, cache_path=tmp_path / "s", format=fmt)
    assert EXPECTED in str(info.value) and f"got {given}" in str(info.value)
    assert not (tmp_path / "s").exists()


SINGLE_CHANNEL = [BoxSpace(0, 255, (H, W), np.uint8), BoxSpace(0, 255, (H, W, 1), np.uint8),
                  BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth", "layout": "HW"}),
                  BoxSpace(0, 65535, (H, W, 1), np.uint16, metadata={"layout": "hwc"})]


@pytest.mark.parametrize("space", SINGLE_CHANNEL, ids=["HW-u8", "HW1-u8", "HW-u16", "HW1-u16"])
def test_single_channel_frames_png_only(tmp_path: Path, space: Any) -> None:
    """Depth and grayscale cameras: PNG takes them; JPEG refuses them at create, before any folder."""
    assert ImageStorage.accepts(space, {"format": "png"})
    assert not ImageStorage.accepts(space) and not ImageStorage.accepts(space, {"format": "JPEG", "quality": 80})
    with pytest.raises(UnsupportedSpaceError, match="JPEG frames as RGB.*format='PNG'"):
        ImageStorage.create(space, capacity=4, cache_path=tmp_path / "s")
    assert not (tmp_path / "s").exists()
    storage = ImageStorage.create(space, capacity=None, cache_path=tmp_path / "p", format="PNG")
    frames = space.sample(np.random.default_rng(0), batch_size=3)
    storage.extend(frames)
    storage.close()
    again = ImageStorage.load_from(tmp_path / "p")
    got = again.get(np.array([2, 0]))
    assert got.dtype == space.dtype and got.shape == (2, *space.shape)
    np.testing.assert_array_equal(got, frames[[2, 0]])
    again.close()


def test_lower_case_layout_is_hwc() -> None:
    assert ImageStorage.accepts(BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"layout": "hwc"}))
    assert ImageStorage.accepts(BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"layout": "Hwc"}))


def test_check_space_accepts_undeclared_layout() -> None:
    assert ImageStorage.accepts(BoxSpace(0, 255, (1, 1, 3), np.uint8))
    assert ImageStorage.accepts(SPACE)


@pytest.mark.parametrize("kwargs, match", [
    ({"format": "GIF"}, "format must be one of"),
    ({"format": 3}, "format must be one of"),
    ({"quality": 0}, "quality must be an int in 1..100"),
    ({"quality": 101}, "quality must be an int in 1..100"),
    ({"quality": 90.5}, "quality must be an int in 1..100"),
    ({"format": "PNG", "quality": 90}, "JPEG only"),
    ({"subsampling": "411"}, "subsampling must be one of"),
    ({"subsampling": "4:2:0"}, "subsampling must be one of"),
    ({"subsampling": 420}, "subsampling must be one of"),
    ({"format": "PNG", "subsampling": "420"}, "subsampling applies to JPEG only"),
    ({"format": "PNG", "subsampling": "444"}, "subsampling applies to JPEG only"),
    ({"chunk_bytes": 0}, "chunk_bytes"),
])
def test_bad_options(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ImageStorage.create(SPACE, capacity=4, cache_path=tmp_path / "s", **kwargs)
    assert not (tmp_path / "s").exists()


def test_unknown_option(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="compression"):
        ImageStorage.create(SPACE, capacity=4, cache_path=tmp_path / "s", compression=3)


JPEG_DEFAULTS = {"format": "JPEG", "quality": codec.JPEG_QUALITY, "subsampling": codec.JPEG_SUBSAMPLING}


@pytest.mark.parametrize("fmt, config", [("jpg", JPEG_DEFAULTS), ("Jpeg", JPEG_DEFAULTS), ("png", {"format": "PNG"})])
def test_format_is_case_insensitive_and_stored(tmp_path: Path, fmt: str, config: dict) -> None:
    s = ImageStorage.create(SPACE, capacity=2, cache_path=tmp_path / "s", format=fmt, chunk_bytes=1000)
    assert s.get_config() == {**config, "chunk_bytes": 1000}
    s.close()
    assert ImageStorage.load_from(tmp_path / "s").get_config() == s.get_config()


def frame_subsamplings(folder: Path) -> list[str]:
    """Back door: the chroma subsampling each indexed frame's JPEG header declares, slot by slot."""
    import simplejpeg

    found = []
    for slot, (fid, off, n) in sorted(read_log(folder).items()):
        found.append(simplejpeg.decode_jpeg_header(stored_frame(folder, fid, off, n))[3])
    return found


@pytest.mark.parametrize("subsampling", codec.SUBSAMPLINGS)
def test_subsampling_is_stored_and_kept_on_reopen(tmp_path: Path, subsampling: str) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", quality=90, subsampling=subsampling)
    frames = smooth_frames(6, seed=0)
    s.extend(frames[:3])
    s.close()
    assert ImageStorage.load_from(tmp_path / "s").get_config() == {
        "format": "JPEG", "quality": 90, "subsampling": subsampling, "chunk_bytes": DEFAULT_CHUNK_BYTES}
    w = ImageStorage.load_from(tmp_path / "s", read_only=False)  # a writer that reopens goes on the same way
    w.extend(frames[3:])
    w.close()
    assert frame_subsamplings(tmp_path / "s") == [subsampling] * 6
    r = ImageStorage.load_from(tmp_path / "s")
    assert np.abs(r.get(slice(None)).astype(int) - frames).mean() <= 2
    r.close()


def test_a_folder_without_subsampling_reopens_as_444(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder written before the option existed holds 4:4:4 frames: it goes on 4:4:4, whatever today's default."""
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", subsampling="444")
    s.extend(smooth_frames(2, seed=0))
    s.close()
    desc_file = tmp_path / "s" / "storage.json"
    desc = json.loads(desc_file.read_text())
    del desc["config"]["subsampling"]
    desc_file.write_text(json.dumps(desc))
    monkeypatch.setattr(codec, "JPEG_SUBSAMPLING", "420")  # a default other than the old folders' 4:4:4
    new = ImageStorage.create(SPACE, cache_path=tmp_path / "new")
    assert new.get_config()["subsampling"] == "420"
    new.close()
    w = ImageStorage.load_from(tmp_path / "s", read_only=False)
    assert w.get_config()["subsampling"] == "444"
    w.extend(smooth_frames(2, seed=1))
    w.close()
    assert frame_subsamplings(tmp_path / "s") == ["444"] * 4


def test_420_frames_are_smaller_than_444(tmp_path: Path) -> None:
    """On colourful frames at equal quality, less chroma means fewer bytes on disk.

    ``moving_scene`` (colour gradients, a soft texture, a red blob; 96x128) at quality 90:
    4:2:0 measured 0.83x and 4:2:2 0.90x the bytes of 4:4:4; asserted: 4:2:0 <= 0.9x, and 4:2:2 in between.
    """
    frames = moving_scene(20)
    space = BoxSpace(0, 255, frames.shape[1:], np.uint8)
    chunk_bytes = {}
    for subsampling in ("444", "422", "420"):
        s = ImageStorage.create(space, cache_path=tmp_path / subsampling, quality=90, subsampling=subsampling)
        s.extend(frames)
        s.close()
        chunk_bytes[subsampling] = folder_bytes(tmp_path / subsampling / CHUNK_DIR)
    assert chunk_bytes["420"] <= 0.9 * chunk_bytes["444"], chunk_bytes
    assert chunk_bytes["420"] < chunk_bytes["422"] < chunk_bytes["444"], chunk_bytes


# -- files on disk -------------------------------------------------------------------------------
def test_no_file_per_frame(tmp_path: Path) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s")
    for seed in range(5):
        s.extend(smooth_frames(100, seed))
    s.close()
    files = [p for p in (tmp_path / "s").rglob("*") if p.is_file()]
    assert len(s) == 500
    assert sorted(p.name for p in files) == ["000000.bin", LOG_FILE, "storage.json", "writer.lock"]


def test_ring_folder_stays_bounded(tmp_path: Path) -> None:
    """10 x capacity frames through a ring of set() calls: dead chunks are deleted as they empty."""
    capacity, batch, chunk_bytes = 16, 4, 4096
    s = ImageStorage.create(SPACE, capacity=capacity, cache_path=tmp_path / "s", chunk_bytes=chunk_bytes)
    max_frame = 0
    for step in range(10 * capacity // batch):
        frames = smooth_frames(batch, seed=step)
        max_frame = max(max_frame, max(len(p) for p in codec.encode_batch(frames)))
        start = step * batch % capacity
        s.set(slice(start, start + batch), frames)
        chunks = folder_bytes(tmp_path / "s" / CHUNK_DIR)
        # Live frames, plus the partly dead oldest chunk and the active chunk.
        assert chunks <= capacity * max_frame + 2 * (chunk_bytes + max_frame), (step, chunks)
    log = (tmp_path / "s" / LOG_FILE).stat().st_size
    assert log <= HEADER_BYTES + 32 * (4 * capacity + 1024 + 2 * batch)  # compaction bounds the index too
    np.testing.assert_allclose(s.get(slice(12, 16)).astype(float), frames.astype(float), atol=16)
    s.close()


def test_torn_index_record_ignored_on_reopen(tmp_path: Path) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", format="PNG")
    frames = smooth_frames(6, seed=0)
    s.extend(frames)
    s.close()
    with open(tmp_path / "s" / LOG_FILE, "ab") as f:
        f.write(b"\x07" * 13)  # a crash in the middle of appending a record
    ro = ImageStorage.load_from(tmp_path / "s")
    assert len(ro) == 6
    np.testing.assert_array_equal(ro.get(slice(None)), frames)
    ro.close()
    rw = ImageStorage.load_from(tmp_path / "s", read_only=False)
    more = smooth_frames(2, seed=1)
    rw.extend(more)
    rw.close()
    again = ImageStorage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(again.get(slice(None)), np.concatenate([frames, more]))
    again.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fsynced descriptors")
def test_compaction_keeps_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One chunk for everything: no rotation or deletion fsyncs it, only the compaction hook does.
    s = ImageStorage.create(SPACE, capacity=4, cache_path=tmp_path / "s", format="PNG", chunk_bytes=2**24)
    ino = (tmp_path / "s" / LOG_FILE).stat().st_ino
    events: list[str] = []  # the snapshot is durable at once: the active chunk must be fsynced before it
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(f"replace {Path(b).name}"), real_replace(a, b)))
    frames = smooth_frames(8, seed=0)
    expected = np.zeros((4, H, W, 3), np.uint8)
    for i in range(1100):  # > 4 * capacity + 1024 records
        s.set(i % 4, frames[i % 8])
        expected[i % 4] = frames[i % 8]
    assert (tmp_path / "s" / LOG_FILE).stat().st_ino != ino
    first = events.index(f"replace {LOG_FILE}")
    assert any(e.endswith(".bin") for e in events[:first]), events[:first]
    monkeypatch.undo()
    np.testing.assert_array_equal(s.get(slice(None)), expected)
    s.close()
    again = ImageStorage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(again.get(slice(None)), expected)
    assert len(list((tmp_path / "s" / CHUNK_DIR).iterdir())) == 1
    again.close()


def test_unwritten_slots_read_as_zeros(tmp_path: Path) -> None:
    s = ImageStorage.create(SPACE, capacity=5, cache_path=tmp_path / "s", format="PNG")
    frame = smooth_frames(1, seed=0)[0]
    s.set(3, frame)
    got = s.get(slice(None))
    assert not got[[0, 1, 2, 4]].any()
    np.testing.assert_array_equal(got[3], frame)
    s.close()


def test_failed_extend_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", format="PNG")
    s.extend(smooth_frames(3, seed=0))

    def disk_full(fd: int, data: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("trajstore.storages.frames.image.write_all", disk_full)
    with pytest.raises(OSError):
        s.extend(smooth_frames(2, seed=1))
    monkeypatch.undo()
    assert len(s) == 3
    s.close()
    assert len(ImageStorage.load_from(tmp_path / "s")) == 3


def test_truncated_chunk_is_a_format_error(tmp_path: Path) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s")
    s.extend(smooth_frames(4, seed=0))
    s.close()
    chunk = tmp_path / "s" / chunk_name(0)
    chunk.write_bytes(chunk.read_bytes()[:-10])
    ro = ImageStorage.load_from(tmp_path / "s")
    # Found at open (one stat): only the frame past the end is damaged, the others read.
    (damaged,) = ro.damaged_files()
    assert (damaged.path, damaged.slots.tolist()) == (str(chunk), [3])
    assert damaged.problem.startswith(f"truncated: {chunk.stat().st_size} bytes, index needs ")
    assert ro.get(0).shape == (H, W, 3)
    np.testing.assert_array_equal(ro[0:3].shape, (3, H, W, 3))
    with pytest.raises(FormatError, match="truncated"):
        ro.get(3)
    ro.close()
    with pytest.raises(FormatError, match="missing or truncated"):
        ImageStorage.load_from(tmp_path / "s", read_only=False)


# -- read path: counted calls, never timed ----------------------------------------------------------
def test_reads_use_pread_not_open_per_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", chunk_bytes=20_000)
    frames = smooth_frames(200, seed=0)
    s.extend(frames)
    s.flush()
    n_chunks = len(list((tmp_path / "s" / CHUNK_DIR).iterdir()))
    assert 2 <= n_chunks <= 10
    calls = {"open": 0, "pread": 0}
    real_open, real_pread, real_preadv = os.open, os.pread, os.preadv

    def counting_open(*args: Any, **kwargs: Any) -> int:
        calls["open"] += 1
        return real_open(*args, **kwargs)

    def counting_pread(*args: Any) -> bytes:
        calls["pread"] += 1
        return real_pread(*args)

    def counting_preadv(*args: Any) -> int:
        calls["pread"] += 1
        return real_preadv(*args)

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "pread", counting_pread)
    monkeypatch.setattr(os, "preadv", counting_preadv)
    got = s.get(slice(None))  # back-to-back frames: one read (pread or preadv) per chunk
    assert calls == {"open": n_chunks, "pread": n_chunks}
    rng = np.random.default_rng(0)
    for _ in range(5):
        idx = rng.integers(0, 200, size=64)
        np.testing.assert_array_equal(s.get(idx), got[idx])
    assert calls["open"] == n_chunks  # later reads reuse the cached descriptors
    monkeypatch.undo()
    assert np.abs(got.astype(int) - frames).mean() <= 2
    s.close()


# -- other processes ---------------------------------------------------------------------------
def test_reader_sees_flushed_appends_after_refresh(tmp_path: Path) -> None:
    w = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", format="PNG", multiprocessing=True)
    a, b = smooth_frames(5, seed=0), smooth_frames(3, seed=1)
    w.extend(a)
    w.flush()
    r = ImageStorage.load_from(tmp_path / "s", read_only=True, multiprocessing=True)
    assert len(r) == 5
    w.extend(b)
    w.flush()
    assert len(r) == 5
    r.refresh()
    assert len(r) == 8
    np.testing.assert_array_equal(r.get(slice(None)), np.concatenate([a, b]))
    w.set(0, b[0])
    w.flush()
    r.refresh()
    np.testing.assert_array_equal(r.get(0), b[0])
    r.close()
    w.close()


def test_reader_retries_when_a_chunk_was_deleted(tmp_path: Path) -> None:
    w = ImageStorage.create(SPACE, capacity=4, cache_path=tmp_path / "s", format="PNG", chunk_bytes=3000)
    w.set(slice(None), smooth_frames(4, seed=0))
    w.flush()
    r = ImageStorage.load_from(tmp_path / "s", multiprocessing=True)  # no chunk opened yet
    newest = None
    for seed in range(1, 6):  # overwrite every slot: the chunks r's index points into are deleted
        newest = smooth_frames(4, seed=seed)
        w.set(slice(None), newest)
    w.flush()
    assert not (tmp_path / "s" / chunk_name(0)).exists()
    np.testing.assert_array_equal(r.get(slice(None)), newest)  # FileNotFoundError -> refresh -> retry
    r.close()
    w.close()


def _read_in_child(storage: SpaceStorage, index: list[int]) -> np.ndarray:
    return storage.get(np.array(index))


def test_pickled_storage_reads_in_another_process(tmp_path: Path) -> None:
    w = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", format="PNG", multiprocessing=True)
    frames = smooth_frames(6, seed=0)
    w.extend(frames)
    w.flush()
    with mp.get_context("spawn").Pool(1) as pool:
        got = pool.apply(_read_in_child, (w, [5, 0, 5]))
    np.testing.assert_array_equal(got, frames[[5, 0, 5]])
    w.close()


def test_after_fork_drops_handles_and_reads(tmp_path: Path) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", format="PNG")
    frames = smooth_frames(4, seed=0)
    s.extend(frames)
    s.get(0)  # caches a read descriptor
    s._pid = -1  # what a forked child sees: another pid than the one that opened the storage
    np.testing.assert_array_equal(s.get(slice(None)), frames)
    assert s.read_only
    with pytest.raises(PermissionError):
        s.set(0, frames[1])
    s.close()


def test_jpeg_refuses_frames_over_its_size_limit(tmp_path):
    from trajstore.spaces import BoxSpace

    huge = BoxSpace(0, 255, (65501, 2, 3), np.uint8)
    with pytest.raises(ValueError, match="at most 65500 pixels"):
        ImageStorage.create(huge, capacity=2, cache_path=tmp_path / "s")
    assert not (tmp_path / "s").exists()


# -- the shared JPEG header (format version 2) ----------------------------------------------------------
FIXTURE_CAMERA = Path(__file__).parents[1] / "format_fixtures" / "v3" / "jpeg_hdf5" / "storage" / "observation.camera"


def test_jpeg_frames_are_stored_without_their_shared_header_and_decode_the_same(tmp_path: Path) -> None:
    import simplejpeg

    frames = smooth_frames(12, seed=4)
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", quality=75, subsampling="420")
    s.extend(frames)
    s.flush()
    desc = json.loads((tmp_path / "s" / "storage.json").read_text())
    header = bytes.fromhex(desc["config"]["jpeg_header"])
    assert desc["format_version"] == 2 and header.startswith(b"\xff\xd8") and header == codec.jpeg_header(header)
    whole = [codec.encode(f, "JPEG", 75, "420") for f in frames]
    assert all(w.startswith(header) for w in whole)
    table = read_log(tmp_path / "s")
    chunk = (tmp_path / "s" / chunk_name(0)).read_bytes()
    for slot, w in enumerate(whole):  # each frame's own bytes, exactly, after the header
        _, off, n = table[slot]
        assert chunk[off:off + n] == w[len(header):]
    assert len(chunk) == sum(len(w) for w in whole) - len(frames) * len(header)
    decoded = np.stack([simplejpeg.decode_jpeg(w, colorspace="RGB") for w in whole])
    np.testing.assert_array_equal(s.get(slice(None)), decoded)  # the same frames as whole JPEGs give
    s.close()
    np.testing.assert_array_equal(ImageStorage.load_from(tmp_path / "s").get(np.array([11, 0, 5])),
                                  decoded[[11, 0, 5]])


def test_a_frame_with_another_header_is_stored_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = smooth_frames(4, seed=5)
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s")
    real = codec.encode_batch

    def with_a_comment(batch, *args):  # a COM segment after SOI: another header (as another encoder might write)
        out = real(batch, *args)
        out[1] = out[1][:2] + b"\xff\xfe\x00\x05abc" + out[1][2:]
        return out

    monkeypatch.setattr(codec, "encode_batch", with_a_comment)
    s.extend(frames)
    s.flush()
    _, off, n = read_log(tmp_path / "s")[1]
    assert (tmp_path / "s" / chunk_name(0)).read_bytes()[off:off + 7] == b"\xff\xd8\xff\xfe\x00\x05a"
    got = s.get(slice(None))
    assert np.abs(got.astype(int) - frames).mean() <= 2
    np.testing.assert_array_equal(got[1], ImageStorage.load_from(tmp_path / "s").get(1))
    s.close()


def test_a_folder_of_whole_frames_stays_so_for_a_writer(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(FIXTURE_CAMERA, tmp_path / "cam")  # format version 1, written before the shared header
    before = json.loads((tmp_path / "cam" / "storage.json").read_text())
    assert before["format_version"] == 1 and "jpeg_header" not in before["config"]
    s = ImageStorage.load_from(tmp_path / "cam", read_only=False)
    n = len(s)
    frames = smooth_frames(3, seed=6, h=s.space.shape[0], w=s.space.shape[1])
    s.extend(frames)
    s.close()
    after = json.loads((tmp_path / "cam" / "storage.json").read_text())
    assert after["format_version"] == 1 and "jpeg_header" not in after["config"]
    table = read_log(tmp_path / "cam")
    for slot in range(n + 3):
        fid, off, length = table[slot]
        assert (tmp_path / "cam" / chunk_name(fid)).read_bytes()[off:off + 2] == b"\xff\xd8"
    got = ImageStorage.load_from(tmp_path / "cam").get(slice(n, n + 3))
    assert np.abs(got.astype(int) - frames).mean() <= 2


@pytest.mark.parametrize("bad", ["zz", "ffd8", "00" * 8, 12])
def test_a_damaged_jpeg_header_in_storage_json_is_a_format_error(tmp_path: Path, bad: Any) -> None:
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s")
    s.extend(smooth_frames(2, seed=7))
    s.close()
    desc = json.loads((tmp_path / "s" / "storage.json").read_text())
    desc["config"]["jpeg_header"] = bad
    (tmp_path / "s" / "storage.json").write_text(json.dumps(desc))
    with pytest.raises(FormatError, match="jpeg_header"):
        ImageStorage.load_from(tmp_path / "s")
