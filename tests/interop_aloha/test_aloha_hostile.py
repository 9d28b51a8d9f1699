"""ALOHA import of hostile or broken folders: a clear error naming the file and key, and ``out`` never made."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from tests.interop_aloha import episodes as E
from trajstore.errors import FormatError, InvalidValueError, StorageExistsError
from trajstore.interop.aloha import import_aloha


_refused, _edit = E.refused, E.edit


def test_not_hdf5(raw):
    (raw[0] / "episode_1.hdf5").write_bytes(b"\x89HDF but not really" * 10)
    _refused(*raw, r"episode_1.hdf5: not an HDF5 file")


@pytest.mark.parametrize("key", ["observations/qvel", "action", "observations/qpos"])
def test_missing_key(raw, key):
    with _edit(raw[0]) as f:
        del f[key]
    _refused(*raw, rf"episode_1.hdf5: no dataset /{key}")


def test_length_mismatch(raw):
    with _edit(raw[0]) as f:
        del f["observations/qvel"]
        f["observations/qvel"] = np.zeros((E.T - 1, 14), np.float32)
    _refused(*raw, r"episode_1.hdf5: /observations/qvel has shape \(5, 14\), expected \(6, ...\) like /action")


def test_episodes_differ_in_shape(raw):
    with _edit(raw[0]) as f:
        del f["observations/qpos"]
        f["observations/qpos"] = np.zeros((E.T, 16), np.float32)
    _refused(*raw, r"episode_1.hdf5: /observations/qpos is float32 steps of shape \(16,\), but float32 steps of "
                   r"shape \(14,\) in episode_0.hdf5")


def test_episodes_differ_in_keys(raw):
    with _edit(raw[0]) as f:
        f["observations/effort"] = np.zeros((E.T, 14), np.float32)
    _refused(*raw, r"episode_1.hdf5: its datasets differ from episode_0.hdf5's \(only in one of them: "
                   r"/observations/effort\)")


def test_unselected_odd_episode_is_fine(raw):
    with _edit(raw[0]) as f:
        f["observations/effort"] = np.zeros((E.T, 14), np.float32)
    import_aloha(raw[0], raw[1], episodes=[0], camera="png")
    assert raw[1].is_dir()


def test_external_link(raw, tmp_path):
    with h5py.File(tmp_path / "elsewhere.h5", "w") as g:
        g["effort"] = np.zeros((E.T, 14), np.float32)
    with _edit(raw[0]) as f:
        f["observations/effort"] = h5py.ExternalLink(str(tmp_path / "elsewhere.h5"), "/effort")
    _refused(*raw, r"episode_1.hdf5: /observations/effort is an external link .*not followed")


def test_soft_link(raw):
    with _edit(raw[0]) as f:
        f["observations/alias"] = h5py.SoftLink("/action")
    _refused(*raw, r"episode_1.hdf5: /observations/alias is a soft link \(to /action\)")


def test_virtual_dataset(raw, tmp_path):
    with h5py.File(tmp_path / "part.h5", "w") as g:
        g["x"] = np.zeros((E.T, 14), np.float32)
    layout = h5py.VirtualLayout(shape=(E.T, 14), dtype="f4")
    layout[:] = h5py.VirtualSource(str(tmp_path / "part.h5"), "x", shape=(E.T, 14))
    with _edit(raw[0]) as f:
        f["observations"].create_virtual_dataset("effort", layout)
    _refused(*raw, r"episode_1.hdf5: /observations/effort is a virtual dataset")


def test_external_storage(raw, tmp_path):
    (tmp_path / "raw.bin").write_bytes(bytes(E.T * 14 * 4))
    with _edit(raw[0]) as f:
        f["observations"].create_dataset("effort", (E.T, 14), dtype="f4",
                                          external=[(str(tmp_path / "raw.bin"), 0, E.T * 14 * 4)])
    _refused(*raw, r"episode_1.hdf5: /observations/effort keeps its data in external files")


def test_declared_sizes(raw):
    with _edit(raw[0]) as f:  # 1e5 x 1e5 frames: declared, never allocated by h5py, refused before reading
        f["observations/images"].create_dataset("huge", (E.T, 100_000, 100_000, 3), dtype="u1",
                                                chunks=(1, 64, 64, 3))
    _refused(*raw, r"episode_1.hdf5: /observations/images/huge declares 30000000000 bytes a step")


def test_too_many_steps(raw):
    with _edit(raw[0]) as f:
        del f["action"]
        f.create_dataset("action", (20_000_000, 14), dtype="f4", chunks=(1024, 14))
    _refused(*raw, r"episode_1.hdf5: /action has 20000000 steps, expected 1..10000000")


def test_zero_steps(raw):
    with _edit(raw[0]) as f:
        for key in ("action", "observations/qpos", "observations/qvel"):
            del f[key]
            f[key] = np.zeros((0, 14), np.float32)
    _refused(*raw, r"episode_1.hdf5: /action has 0 steps")


def test_big_chunks(raw, monkeypatch):
    from trajstore.interop.aloha import _source

    monkeypatch.setattr(_source, "MAX_CHUNK_BYTES", 1000)
    _refused(*raw, r"episode_0.hdf5: /observations/images/angle declares chunks \(1, 48, 64, 3\), more than 1000")


@pytest.mark.parametrize("value", [np.array(["x"] * E.T, dtype=h5py.string_dtype()),
                                   np.zeros(E.T, dtype=[("a", "f4"), ("b", "i4")])])
def test_non_numeric_dataset(raw, value):
    with _edit(raw[0]) as f:
        f["observations/notes"] = value
    _refused(*raw, r"episode_1.hdf5: /observations/notes has dtype .*, expected a number or bool dtype")


@pytest.mark.parametrize("shape, dtype", [((E.T, E.H, E.W, 4), np.uint8), ((E.T, E.H, E.W, 3), np.float32),
                                          ((E.T, E.H, E.W), np.int16)])
def test_camera_not_rgb_or_depth(raw, shape, dtype):
    with _edit(raw[0]) as f:
        f["observations/images/odd"] = np.zeros(shape, dtype)
    _refused(*raw, rf"episode_1.hdf5: camera /observations/images/odd has shape \({', '.join(map(str, shape))}\) "
                   rf"and dtype {np.dtype(dtype)}, expected \(6, H, W, 3\) uint8 colour frames, \(6, H, W\) or "
                   r"\(6, H, W, 1\) unsigned or float depth frames")


def test_jpeg_rows_without_compress_attr(jpeg):
    with _edit(jpeg[0]) as f:
        f.attrs["compress"] = False
    _refused(*jpeg, r"episode_1.hdf5: camera /observations/images/angle has shape \(6, \d+\)")


@pytest.mark.parametrize("name, value, message", [
    ("sim", "yes", r"root attribute 'sim' is 'yes', expected a bool"),
    ("file", "x", r"root attribute 'file' would clash"),
    ("interrupted", True, r"root attribute 'interrupted' would clash"),
    ("big", np.zeros(1000), r"root attribute 'big' is an array of 1000 items"),
    ("nan", np.float64("nan"), r"root attribute 'nan' is nan, expected a finite number"),
])
def test_bad_attr(raw, name, value, message):
    with _edit(raw[0]) as f:
        f.attrs[name] = value
    _refused(*raw, rf"episode_1.hdf5: {message}")


def test_compress_len_missing(jpeg):
    with _edit(jpeg[0]) as f:
        del f["compress_len"]
    _refused(*jpeg, r"episode_1.hdf5: JPEG cameras \(observations/images/angle, observations/images/top\) but no "
                    r"/compress_len")


def test_compress_len_shape(jpeg):
    with _edit(jpeg[0]) as f:
        del f["compress_len"]
        f["compress_len"] = np.ones((3, E.T), np.float32)
    _refused(*jpeg, r"episode_1.hdf5: /compress_len has shape \(3, 6\), expected \(2, 6\)")


@pytest.mark.parametrize("bad", [np.nan, 1e9, 0.5, -3])
def test_compress_len_values(jpeg, bad):
    with _edit(jpeg[0]) as f:
        f["compress_len"][1, 4] = bad
    _refused(*jpeg, r"episode_1.hdf5: /compress_len\[1, 4\] is .*, expected a whole number of bytes in 1..\d+")


def test_compress_len_disagrees(jpeg):
    with _edit(jpeg[0]) as f:
        f["compress_len"][:, 3] = f["compress_len"][:, 3] - 1
    _refused(*jpeg, r"episode_1.hdf5: /observations/images/angle\[3\]: a JPEG frame of \d+ bytes, but "
                    r"/compress_len\[:, 3\] says")


def test_frame0_not_jpeg(jpeg):
    with _edit(jpeg[0]) as f:
        row = np.zeros(f["observations/images/top"].shape[1], np.uint8)
        row[:10] = 7
        f["observations/images/top"][0] = row
    _refused(*jpeg, r"episode_1.hdf5: /observations/images/top\[0\]: not a JPEG frame")


def test_empty_frame(jpeg):
    with _edit(jpeg[0]) as f:
        f["observations/images/top"][2] = 0
    _refused(*jpeg, r"episode_1.hdf5: /observations/images/top\[2\]: an empty frame")


def test_corrupt_later_frame(jpeg):
    with _edit(jpeg[0]) as f:
        row = f["observations/images/top"][4]
        end = int(np.flatnonzero(row)[-1]) + 1
        row[200:end - 2] = 0x55  # entropy data garbled, markers kept
        f["observations/images/top"][4] = row
        f["compress_len"][:, 4] = np.maximum(f["compress_len"][:, 4], 1)
    with pytest.raises(FormatError, match=r"episode_1.hdf5: /observations/images/top\[4\]"):
        import_aloha(*jpeg, camera="png")
    assert not jpeg[1].exists()


def test_frame_size_differs(jpeg):
    other = E.cv2_like_jpeg(E.frames(3, 1, h=32, w=32)[0])
    with _edit(jpeg[0]) as f:
        row = np.zeros(f["observations/images/angle"].shape[1], np.uint8)
        row[:len(other)] = np.frombuffer(other, np.uint8)
        f["observations/images/angle"][5] = row
        f["compress_len"][0, 5] = len(other)
    _refused(*jpeg, r"episode_1.hdf5: /observations/images/angle\[5\]: a JPEG frame of 32x32, expected 64x48")


def test_nan_value(raw):
    with _edit(raw[0]) as f:
        f["observations/qpos"][2, 3] = np.nan
    _refused(*raw, r"episode_1.hdf5: steps 0..5:", exc=InvalidValueError)


def test_duplicate_index(raw):
    E.write_raw(raw[0] / "episode_01.hdf5", 1)
    _refused(*raw, r"episode_01.hdf5 and episode_1.hdf5 are both episode 1|episode_1.hdf5 and episode_01.hdf5")


def test_episode_name_is_a_folder(raw):
    (raw[0] / "episode_4.hdf5").mkdir()
    _refused(*raw, r"episode_4.hdf5: not a file")


def test_symlink_out_of_folder(raw, tmp_path):
    E.write_raw(tmp_path / "outside.hdf5", 5)
    (raw[0] / "episode_5.hdf5").symlink_to(tmp_path / "outside.hdf5")
    _refused(*raw, r"leads outside .* through a symlink")


def test_no_episodes(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "data.hdf5").write_bytes(b"")
    _refused(tmp_path / "src", tmp_path / "out", r"no episode_N.hdf5 file")
    _refused(tmp_path / "missing", tmp_path / "out", r"no such folder", exc=FileNotFoundError)
    _refused(tmp_path / "src" / "data.hdf5", tmp_path / "out", r"not a folder", exc=NotADirectoryError)


def test_out_exists(raw):
    raw[1].mkdir()
    (raw[1] / "keep").write_text("x")
    with pytest.raises(StorageExistsError):
        import_aloha(*raw)
    assert (raw[1] / "keep").read_text() == "x"


def test_attr_declared_size(raw):
    with h5py.File(raw[0] / "episode_0.hdf5", "r") as a, \
            h5py.File(raw[0] / "episode_1.hdf5", "w", libver="latest") as f:  # dense attribute storage
        for key in a:
            a.copy(key, f)
        f.attrs["sim"] = True
        f.attrs.create("blob", np.zeros(300_000, np.float64))  # 2.4 MB
    _refused(*raw, r"episode_1.hdf5: root attribute 'blob' declares 2400000 bytes, more than 1048576")


def test_too_many_objects(raw, monkeypatch):
    from trajstore.interop.aloha import _source

    monkeypatch.setattr(_source, "MAX_OBJECTS", 5)
    _refused(*raw, r"episode_0.hdf5: more than 5 groups and datasets")
