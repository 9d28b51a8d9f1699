"""Batch reads of ImageStorage (``frames/_image_reads.py``, ``PayloadFiles.read_into``): any index order
with repeats, frames across chunk files and out of offset order (a ring), gaps of dead bytes between
the frames read, whole and abbreviated JPEG frames mixed, the fallback without ``os.preadv``.

Decoded values are checked against the codec's own decode of the same frames: bit-exact input for
PNG, ``simplejpeg.decode_jpeg(simplejpeg.encode_jpeg(frame))`` at the storage's settings for JPEG.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import simplejpeg

from trajstore.errors import FormatError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space
from trajstore.storages.frames import _image_codec as codec
from trajstore.storages.frames import _payload_files
from trajstore.storages.frames._image_reads import read_payloads
from trajstore.storages.frames._payload_files import FileNaming, PayloadFiles

H, W = 24, 32
SPACE = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})


def frames_of(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    base = np.stack([x * 7, y * 9, (x + y) * 3], -1).astype(np.int64)
    out = base[None] + rng.integers(0, 40, (n, 1, 1, 3)) + rng.integers(0, 6, (n, H, W, 3))
    return np.clip(out, 0, 255).astype(np.uint8)


def jpeg_reference(frames: np.ndarray, quality: int, subsampling: str) -> np.ndarray:
    """simplejpeg's own decode of each frame encoded at the storage's settings."""
    return np.stack([simplejpeg.decode_jpeg(simplejpeg.encode_jpeg(f, quality=quality, colorspace="RGB",
                                                                   colorsubsampling=subsampling), colorspace="RGB")
                     for f in frames])


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_any_order_with_repeats_across_chunks(tmp_path: Path, fmt: str) -> None:
    opts = {"format": "PNG"} if fmt == "PNG" else {"quality": 75, "subsampling": "420"}
    s = ImageStorage.create(SPACE, capacity=None, cache_path=tmp_path / "s", chunk_bytes=6_000, **opts)
    frames = frames_of(120, 0)
    for a in range(0, 120, 17):  # several writes, several chunks
        s.extend(frames[a:a + 17])
    s.flush()
    assert len(list((tmp_path / "s" / "chunks").iterdir())) >= 3
    want = frames if fmt == "PNG" else jpeg_reference(frames, 75, "420")
    rng = np.random.default_rng(1)
    for idx in [rng.integers(0, 120, 300), np.arange(119, -1, -1), np.array([5, 5, 5, 0, 119, 5]), np.array([7])]:
        np.testing.assert_array_equal(s.get(idx), want[idx])
    s.close()
    r = ImageStorage.load_from(tmp_path / "s")
    idx = rng.integers(0, 120, 257)
    np.testing.assert_array_equal(r.get(idx), want[idx])
    r.close()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_ring_out_of_offset_order(tmp_path: Path, fmt: str) -> None:
    """Slots rewritten in a scrambled order: slot order is not offset order within a chunk, and the
    overwritten frames' dead bytes lie between the live ones."""
    opts = {"format": "PNG"} if fmt == "PNG" else {"quality": 90}
    s = ImageStorage.create(SPACE, capacity=40, cache_path=tmp_path / "s", chunk_bytes=1 << 20, **opts)
    frames = frames_of(100, 2)
    current = np.zeros((40, H, W, 3), np.uint8)
    written = np.zeros(40, bool)
    rng = np.random.default_rng(3)
    for k in range(0, 100, 10):
        slots = rng.permutation(40)[:10]
        s.set(slots, frames[k:k + 10])
        current[slots], written[slots] = frames[k:k + 10], True
    ref = current if fmt == "PNG" else jpeg_reference(current, 90, "444")
    want = np.where(written[:, None, None, None], ref, 0)  # never written: zeros
    assert not written.all()
    idx = rng.integers(0, 40, 200)
    np.testing.assert_array_equal(s.get(idx), want[idx])
    np.testing.assert_array_equal(s.get(np.arange(40)), want)
    s.close()


def test_replay_buffer_ring_batches_and_windows(tmp_path: Path) -> None:
    space = DictSpace({"cam": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacity=50,
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {
                                 "quality": 75, "subsampling": "420", "chunk_bytes": 4_000}}))
    frames = frames_of(130, 4)
    for e in range(13):
        rb.extend({"cam": frames[e * 10:(e + 1) * 10]})
        rb.end_episode()
    want = jpeg_reference(frames[-50:], 75, "420")  # the ring holds the newest 50 steps
    idx = np.random.default_rng(5).integers(0, 50, 256)
    np.testing.assert_array_equal(rb[idx]["cam"], want[idx])
    data, pad = rb.sample_windows(16, delta_indices={"cam": [-1, 0]}, pad=True, rng=np.random.default_rng(6))
    for w in range(16):  # each window: two neighbouring steps of one episode (the first padded by itself)
        a = [int(np.flatnonzero((want == data["cam"][w, t]).all(axis=(1, 2, 3)))[0]) for t in (0, 1)]
        assert a[1] - a[0] == (0 if pad["cam"][w, 0] else 1)
    rb.close()


def chunk_with(tmp_path: Path, parts: list[bytes]) -> tuple[PayloadFiles, np.ndarray, np.ndarray]:
    """A one-chunk folder holding ``parts`` back to back: its files and each part's offset and length."""
    naming = FileNaming("chunks", 6, ".bin")
    (tmp_path / "chunks").mkdir()
    (tmp_path / naming.name(0)).write_bytes(b"".join(parts))
    lengths = np.array([len(p) for p in parts], np.int64)
    return PayloadFiles(tmp_path, naming), np.r_[0, np.cumsum(lengths)[:-1]], lengths


@pytest.mark.parametrize("no_preadv", [False, True])
def test_payloads_whole_and_abbreviated_with_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  no_preadv: bool) -> None:
    """Frames stored whole and without the shared header, mixed, with dead bytes (small gaps, coalesced,
    and one larger than COALESCE_GAP) between those read, in scrambled order with repeats; more frames
    in one run than one preadv takes."""
    frames = frames_of(12, 7)
    whole = [codec.encode(f, "JPEG", 80, "444") for f in frames]
    header = codec.jpeg_header(whole[0])
    assert all(w.startswith(header) for w in whole)
    stored = [w if i % 3 == 0 else w[len(header):] for i, w in enumerate(whole)]  # every third one whole
    dead = [b"\x00" * 50, b"\xff" * (_payload_files.COALESCE_GAP + 10)]
    parts = [stored[0], dead[0], *stored[1:5], dead[1], *stored[5:]]
    files, off, length = chunk_with(tmp_path, parts)
    keep = np.array([i for i in range(len(parts)) if i not in (1, 6)])
    off, length = off[keep], length[keep]
    if no_preadv:
        monkeypatch.delattr(os, "preadv")
    monkeypatch.setattr(_payload_files, "IOV_MAX", 4)  # runs of more than 2 frames split
    pick = np.array([11, 0, 3, 3, 7, 1, 10, 2, 5, 4, 6, 8, 9, 0])
    fid = np.zeros(len(pick), np.int64)
    payloads = read_payloads(files, fid, off[pick], length[pick], header, lambda i: f"frame {i}")
    assert [bytes(p) for p in payloads] == [whole[i] for i in pick]
    out = np.empty((len(pick), H, W, 3), np.uint8)
    codec.decode_batch(payloads, out)
    want = np.stack([simplejpeg.decode_jpeg(whole[i], colorspace="RGB") for i in pick])
    np.testing.assert_array_equal(out, want)
    assert [bytes(p) for p in read_payloads(files, fid, off[pick], length[pick], None, str)] == \
        [stored[i] for i in pick]  # no header (format version 1): the stored bytes
    files.close()


def test_payloads_past_the_end_of_the_file(tmp_path: Path) -> None:
    files, off, length = chunk_with(tmp_path, [b"a" * 100, b"b" * 100])
    with pytest.raises(FormatError, match="frame 1: index.log points 150 bytes past offset 100"):
        read_payloads(files, np.zeros(2, np.int64), off, np.array([100, 150]), None, lambda i: f"frame {i}")
    files.close()


def test_pool_only_when_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "CPUS", 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert not codec.pool_pays(codec.POOL_MIN_BYTES - 1)
    assert codec.pool_pays(codec.POOL_MIN_BYTES)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 0.5, 0.5))  # no CPU to spare
    assert not codec.pool_pays(codec.POOL_MIN_BYTES)
    monkeypatch.setattr(codec, "CPUS", 1)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not codec.pool_pays(10 * codec.POOL_MIN_BYTES)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_read_in_order_equals_read_then_reorder(tmp_path: Path, fmt: str) -> None:
    from trajstore.storages._selection import select

    opts = {"format": "PNG"} if fmt == "PNG" else {"quality": 75, "subsampling": "420"}
    s = ImageStorage.create(SPACE, capacity=30, cache_path=tmp_path / "s", chunk_bytes=3_000, **opts)
    frames = frames_of(25, 8)
    s.set(np.arange(25), frames)  # slots 25..29 never written: zeros
    rng = np.random.default_rng(9)
    for idx in [rng.integers(0, 30, 100), np.array([29, 3, 3, 0, 29]), np.arange(30), np.array([4])]:
        sel = select(idx, 30)
        [got] = s.read_in_order(sel)
        want = s.read_leaves(sel)[0]
        want = want if sel.order is None else want[sel.order]
        np.testing.assert_array_equal(got, want)
        assert got.shape == (len(idx), H, W, 3)
        np.testing.assert_array_equal(got, s.get(idx))
    assert not s.read_in_order(select(np.array([27, 28, 27]), 30))[0].any()
    s.close()
