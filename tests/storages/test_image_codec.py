"""The frame codecs: round trips, decoding in place, bad bytes, the pool after a fork."""

from __future__ import annotations

import numpy as np
import pytest

from tests.storages.test_image import smooth_frames
from trajstore.errors import FormatError
from trajstore.storages.frames import _image_codec as codec


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_batch_round_trip_decodes_in_place(fmt: str) -> None:
    frames = smooth_frames(7, seed=3, h=17, w=9)  # odd sizes: no 8x8 or 16x16 alignment
    payloads = codec.encode_batch(frames, fmt)
    assert len(payloads) == 7 and all(isinstance(p, bytes) for p in payloads)
    out = np.full_like(frames, 1)
    codec.decode_batch(payloads, out, fmt)
    if fmt == "PNG":
        np.testing.assert_array_equal(out, frames)
    else:
        assert np.abs(out.astype(int) - frames).mean() <= 2


def test_decode_refuses_bad_bytes_and_sizes() -> None:
    frames = smooth_frames(2, seed=0)
    jpeg, png = codec.encode(frames[0], "JPEG"), codec.encode(frames[0], "PNG")
    small = np.empty((2, 8, 8, 3), np.uint8)
    for data, fmt in ((jpeg, "JPEG"), (png, "PNG"), (b"garbage", "JPEG"), (b"garbage", "PNG")):
        with pytest.raises(FormatError):
            codec.decode_into(data, small[0], fmt)
    with pytest.raises(ValueError, match="one row per payload"):
        codec.decode_batch([jpeg], small, "JPEG")


def test_options() -> None:
    assert [codec.normalize_format(f) for f in ("jpg", "JPEG", "png")] == ["JPEG", "JPEG", "PNG"]
    with pytest.raises(ValueError, match="GIF"):
        codec.normalize_format("GIF")
    assert codec.check_quality(np.int64(1)) == 1
    for bad in (0, 101, True, "95"):
        with pytest.raises(ValueError, match="1..100"):
            codec.check_quality(bad)
    assert [codec.check_subsampling(s) for s in ("444", "422", "420")] == ["444", "422", "420"]
    for bad in ("411", "4:2:0", 420, None):
        with pytest.raises(ValueError, match="subsampling must be one of"):
            codec.check_subsampling(bad)


@pytest.mark.parametrize("subsampling", codec.SUBSAMPLINGS)
def test_jpeg_frames_carry_the_subsampling_asked_for(subsampling: str) -> None:
    import simplejpeg

    frames = smooth_frames(2, seed=1)
    for data in codec.encode_batch(frames, "JPEG", 90, subsampling):
        assert simplejpeg.decode_jpeg_header(data)[3] == subsampling


def test_pool_is_recreated_in_another_process(monkeypatch: pytest.MonkeyPatch) -> None:
    first = codec._executor()
    assert codec._executor() is first
    monkeypatch.setattr(codec, "_pool_pid", -1)  # what a forked child sees
    second = codec._executor()
    assert second is not first and codec._executor() is second
    first.shutdown()
