"""ALOHA import of files that declare more than they store, damaged chunks, oversized JPEG frames, long episode
numbers, an output inside the source, depth cameras, and bounded memory over a long episode (each block is
written and committed before the next is read)."""

from __future__ import annotations

import warnings

import h5py
import numpy as np
import pytest

from tests.interop_aloha import episodes as E
from trajstore.errors import InvalidValueError
from trajstore.interop.aloha import AlohaWarning, import_aloha
from trajstore.replay_buffer import ReplayBuffer


_refused, _edit = E.refused, E.edit


# -- storage that is declared but never written ---------------------------------------------------------------

def test_unwritten_chunked_camera(raw):
    with _edit(raw[0]) as f:  # declared, never written: every frame would read as zeros
        f["observations/images"].create_dataset("side", (E.T, E.H, E.W, 3), dtype="u1", chunks=(1, E.H, E.W, 3))
    _refused(*raw, r"episode_1.hdf5: /observations/images/side declares 6 steps but stores only 0 of its 6 chunks")


def test_partly_written_chunked(raw):
    with _edit(raw[0]) as f:
        d = f["observations"].create_dataset("effort", (E.T, 14), dtype="f4", chunks=(2, 14))
        d[0:4] = 1.0  # chunks 0 and 1 written, chunk 2 not
    _refused(*raw, r"episode_1.hdf5: /observations/effort declares 6 steps but stores only 2 of its 3 chunks")


def test_partly_written_compressed(raw):
    with _edit(raw[0]) as f:
        d = f["observations"].create_dataset("effort", (E.T, 14), dtype="f4", chunks=(1, 14), compression="gzip")
        d[0:5] = 1.0
    _refused(*raw, r"episode_1.hdf5: /observations/effort declares 6 steps but stores only 5 of its 6 chunks")


def test_unwritten_contiguous(raw):
    with _edit(raw[0]) as f:
        f["observations"].create_dataset("effort", (E.T, 14), dtype="f4")  # contiguous, late allocation
    _refused(*raw, r"episode_1.hdf5: /observations/effort declares 6 steps \(336 bytes\) but stores only 0 bytes")


def test_unwritten_required(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with h5py.File(src / "episode_0.hdf5", "w") as f:  # the a_gen unalloc_steps case, small
        f.attrs["sim"] = True
        for k in ("observations/qpos", "observations/qvel", "action"):
            f.create_dataset(k, shape=(4096, 14), dtype="f4", chunks=(1024, 14))
    _refused(src, tmp_path / "out", r"episode_0.hdf5: /action declares 4096 steps but stores only 0 of its 4 chunks")


def test_fully_written_chunked_and_empty_extra(raw):
    with _edit(raw[0]) as f:
        d = f["observations"].create_dataset("effort", (E.T, 14), dtype="f4", chunks=(4, 14), compression="gzip")
        d[...] = np.arange(E.T * 14, dtype="f4").reshape(E.T, 14)
        f.create_dataset("none", (E.T, 0), dtype="f4")  # nothing to store: fine
    with _edit(raw[0], 0) as f:
        f["observations/effort"] = np.zeros((E.T, 14), "f4")
        f.create_dataset("none", (E.T, 0), dtype="f4")
    import_aloha(*raw, camera="png")
    got = ReplayBuffer.load_from(raw[1])
    np.testing.assert_array_equal(got[E.T:2 * E.T]["observation"]["effort"],
                                  np.arange(E.T * 14, dtype="f4").reshape(E.T, 14))
    assert got[0:E.T]["none"].shape == (E.T, 0)


# -- damaged chunks read by the check pass ------------------------------------------------------------------

def _corrupt_chunk(path, key, chunk=0, n=40):
    with h5py.File(path, "r") as f:
        info = f[key].id.get_chunk_info(chunk)
    data = bytearray(path.read_bytes())
    data[info.byte_offset:info.byte_offset + n] = b"\xab" * n
    path.write_bytes(bytes(data))


def _gzip_copy(path, key):
    with h5py.File(path, "a") as f:
        value = f[key][...]
        del f[key]
        f.create_dataset(key, data=value, chunks=(1, *value.shape[1:]), compression="gzip")


def test_damaged_jpeg_frame0_chunk(jpeg):
    path = jpeg[0] / "episode_1.hdf5"
    _gzip_copy(path, "observations/images/top")
    _corrupt_chunk(path, "observations/images/top")
    _refused(*jpeg, r"episode_1.hdf5: /observations/images/top\[0\] cannot be read")


def test_damaged_compress_len_chunk(jpeg):
    path = jpeg[0] / "episode_1.hdf5"
    _gzip_copy(path, "compress_len")
    _corrupt_chunk(path, "compress_len", n=10)
    _refused(*jpeg, r"episode_1.hdf5: /compress_len cannot be read")


# -- JPEG frames under the per-step bound -------------------------------------------------------------------

def test_jpeg_frame_beyond_step_bytes(jpeg, monkeypatch):
    from trajstore.interop.aloha import _frames

    monkeypatch.setattr(_frames, "MAX_STEP_BYTES", E.H * E.W * 3 - 1)  # MAX_FRAME_PIXELS still allows it
    _refused(*jpeg, rf"episode_0.hdf5: /observations/images/angle\[0\]: a JPEG frame of 64x48 pixels "
                    rf"\({E.H * E.W * 3} bytes decoded\)")


# -- episode numbers of 10 or more digits --------------------------------------------------------------------

def test_long_episode_numbers_are_named(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    E.write_raw(src / "episode_0.hdf5", 0)
    E.write_raw(src / "episode_1234567890.hdf5", 1)
    with pytest.warns(AlohaWarning, match=r"1 file\(s\) left out, an N of more than 9 digits: "
                                          r"episode_1234567890.hdf5"):
        summary = import_aloha(src, tmp_path / "out", camera="png")
    assert summary.episodes == 1
    assert [e.data["file"] for e in ReplayBuffer.load_from(tmp_path / "out").episodes] == ["episode_0.hdf5"]


def test_only_long_episode_numbers(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    E.write_raw(src / "episode_99999999999999999999.hdf5", 0)
    _refused(src, tmp_path / "out", r"no episode_N.hdf5 file with N of 1..9 digits .*; skipped "
                                    r"episode_99999999999999999999.hdf5: an N of more than 9 digits")


def test_no_warning_for_ordinary_folder(raw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AlohaWarning)
        import_aloha(*raw, camera="png")


# -- the output folder inside the source --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["episode_7.hdf5", "sub/out"])
def test_out_inside_source(raw, name):
    out = raw[0] / name
    _refused(raw[0], out, r"lies inside the source", exc=InvalidValueError)
    assert sorted(p.name for p in raw[0].iterdir()) == ["episode_0.hdf5", "episode_1.hdf5"]


# -- depth cameras --------------------------------------------------------------------------------------------

def test_depth_cameras_are_exact_plain_leaves(tmp_path):
    src = E.raw_folder(tmp_path / "src", (0, 1))
    rng = np.random.default_rng(5)
    depth = {n: (rng.integers(0, 65535, (E.T, E.H, E.W), dtype=np.uint16),
                 rng.random((E.T, E.H, E.W, 1), dtype=np.float32)) for n in (0, 1)}
    for n, (mm, m) in depth.items():
        with _edit(tmp_path / "src", n) as f:
            f["observations/images/cam_high_depth"] = mm
            f["observations/images"].create_dataset("cam_low_depth", data=m, chunks=(1, E.H, E.W, 1))
    summary = import_aloha(tmp_path / "src", tmp_path / "out", camera="jpeg")
    assert summary.leaves["observations/images/cam_high_depth"] == "observation/images/cam_high_depth"
    rb = ReplayBuffer.load_from(tmp_path / "out")
    images = rb.space["observation"]["images"]
    assert images["cam_high_depth"].shape == (E.H, E.W) and images["cam_high_depth"].dtype == np.uint16
    assert images["cam_low_depth"].shape == (E.H, E.W, 1) and images["cam_low_depth"].dtype == np.float32
    assert "kind" not in dict(images["cam_high_depth"].metadata or {})
    assert dict(rb.space.metadata)["aloha"]["cameras"] == {"angle": "raw", "top": "raw"}
    for k, n in enumerate((0, 1)):
        got = rb[E.T * k:E.T * (k + 1)]["observation"]["images"]
        np.testing.assert_array_equal(got["cam_high_depth"], depth[n][0])
        np.testing.assert_array_equal(got["cam_low_depth"], depth[n][1])
        assert np.abs(got["top"].astype(int) - src[n]["images"]["top"].astype(int)).mean() < 2


# -- memory bounded per block -----------------------------------------------------------------------------------

def test_each_block_is_committed_before_the_next_is_handed_over(tmp_path, monkeypatch):
    from trajstore.interop.aloha import import_ as mod

    src = E.raw_folder(tmp_path / "src", (0,), steps=7)
    step = len(E.CAMS) * E.H * E.W * 3 + 3 * 14 * 4  # two raw cameras, qpos, qvel, action
    monkeypatch.setattr(mod, "BLOCK_BYTES", 2 * step)  # 2 steps a block: 4 blocks
    calls: list[tuple[str, int, int]] = []
    extend, flush = ReplayBuffer.extend, ReplayBuffer.flush

    def spy_extend(self, batch):
        # everything extended before is written to the storage (not waiting in RAM)
        calls.append(("extend", self.write_stats.steps_written, len(self)))
        return extend(self, batch)

    def spy_flush(self):
        flush(self)
        calls.append(("flush", self.write_stats.steps_written, len(self)))

    monkeypatch.setattr(ReplayBuffer, "extend", spy_extend)
    monkeypatch.setattr(ReplayBuffer, "flush", spy_flush)
    import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    # the last block is committed by end_episode
    assert calls == [("extend", 0, 0), ("flush", 2, 2), ("extend", 2, 2), ("flush", 4, 4),
                     ("extend", 4, 4), ("flush", 6, 6), ("extend", 6, 6)]
    got = ReplayBuffer.load_from(tmp_path / "out")
    assert len(got.episodes) == 1 and (got.episodes[0].start, got.episodes[0].stop) == (0, 7)
    np.testing.assert_array_equal(got[0:7]["observation"]["images"]["top"], src[0]["images"]["top"])
