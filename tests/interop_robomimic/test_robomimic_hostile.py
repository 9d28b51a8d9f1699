"""Hostile and damaged robomimic files: each is refused with a FormatError naming the file and the object,
before anything is allocated or written (``out`` never appears)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from trajstore.errors import FormatError
from trajstore.interop.robomimic import import_robomimic

from .files import write_small


def refused(src, tmp_path, match):
    with pytest.raises(FormatError, match=match) as info:
        import_robomimic(src, tmp_path / "out", camera="png")
    assert str(src) in str(info.value)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def edit(tmp_path, fn, **kwargs):
    src = write_small(tmp_path / "s.hdf5", **kwargs)
    with h5py.File(src, "a") as f:
        fn(f)
    return src


def test_not_hdf5_and_not_robomimic(tmp_path):
    (tmp_path / "x.hdf5").write_bytes(b"not an hdf5 file at all" * 10)
    refused(tmp_path / "x.hdf5", tmp_path, "is not an HDF5 file")
    with h5py.File(tmp_path / "y.hdf5", "w") as f:
        f["observations"] = np.zeros((3, 2))
    refused(tmp_path / "y.hdf5", tmp_path, "not a robomimic file: it has no 'data' group")
    with h5py.File(tmp_path / "z.hdf5", "w") as f:
        f.create_group("data/episode_0")
    refused(tmp_path / "z.hdf5", tmp_path, "data/episode_0 is not a demo group named demo_N")
    with pytest.raises(FileNotFoundError):
        import_robomimic(tmp_path / "missing.hdf5", tmp_path / "out")


def test_mismatched_lengths(tmp_path):
    def longer(f):
        del f["data/demo_1/states"]
        f["data/demo_1/states"] = np.zeros((5, 3))
    refused(edit(tmp_path, longer), tmp_path, r"data/demo_1/states has shape \[5, 3\]; the demo's num_samples is 2")

    def attr(f):
        f["data/demo_0"].attrs["num_samples"] = 7
    refused(edit(tmp_path, attr), tmp_path, r"data/demo_0/actions has shape \[3, 2\]; the demo's num_samples is 7")


@pytest.mark.parametrize("value", [np.bool_(True), np.float64(3.0), np.array([3]), b"3"])
def test_num_samples_and_total_must_be_integers(tmp_path, value):
    def samples(f):
        f["data/demo_0"].attrs["num_samples"] = value
    refused(edit(tmp_path, samples), tmp_path, "data/demo_0: attribute num_samples is .*, not an integer")

    def total(f):
        f["data"].attrs["total"] = value
    refused(edit(tmp_path, total), tmp_path, "data attribute total is .*, not an integer")


def test_demos_that_differ(tmp_path):
    def drop(f):
        del f["data/demo_1/states"]
    refused(edit(tmp_path, drop), tmp_path, r"data/demo_1 differs from data/demo_0: keys \['states'\]")

    def retype(f):
        del f["data/demo_1/actions"]
        f["data/demo_1/actions"] = np.zeros((2, 3), np.float32)
    refused(edit(tmp_path, retype), tmp_path, r"'actions' is float32 \[2\] per step in one, float32 \[3\]")

    def next_keys(f):
        del f["data/demo_0/next_obs/pos"]
    refused(edit(tmp_path, next_keys), tmp_path, r"next_obs holds \['cam_image'\], obs \['cam_image', 'pos'\]")


def test_huge_declared_shapes(tmp_path):
    def huge_rows(f):  # 2**40 samples declared, chunked: the file holds almost none of them
        f.create_dataset("data/demo_0/obs/huge", shape=(2 ** 40, 2), chunks=(1024, 2), dtype=np.float32)
        f["data/demo_0"].attrs["num_samples"] = 2 ** 40
    refused(edit(tmp_path, huge_rows), tmp_path, r"data/demo_0/actions has shape \[3, 2\]; the demo's num_samples")

    with h5py.File(tmp_path / "h.hdf5", "w") as f:  # consistent lengths of 2**40, but the chunks are not there
        for key in ("actions", "obs/pos"):
            f.create_dataset(f"data/demo_0/{key}", shape=(2 ** 40, 2), chunks=(4096, 2), dtype=np.float32)
        f["data/demo_0"].attrs["num_samples"] = 2 ** 40
    refused(tmp_path / "h.hdf5", tmp_path, r"data/demo_0/actions declares \[1099511627776, 2\] in 268435456 chunks, "
                                           "the file holds 0")

    def huge_step(f):
        f.create_dataset("data/demo_0/obs/big", shape=(3, 100000, 100000), chunks=(1, 100, 100), dtype=np.uint8)
    refused(edit(tmp_path, huge_step), tmp_path, r"data/demo_0/obs/big declares \[100000, 100000\] = 10000000000 values")

    def unwritten(f):
        f.create_dataset("data/demo_0/extra", shape=(3, 4), chunks=(1, 4), dtype=np.float64)
        f["data/demo_0/extra"][0] = 1.0
    refused(edit(tmp_path, unwritten), tmp_path, r"data/demo_0/extra declares \[3, 4\] in 3 chunks, the file holds 1")

    def mask_long(f):
        f["mask/all"] = np.array([b"demo_0"] * 50)
    refused(edit(tmp_path, mask_long), tmp_path, r"mask/all lists 50 demos; the file has 2")


def test_wrong_dtypes_and_values(tmp_path):
    def text(f):
        f["data/demo_0/obs/label"] = np.array([b"a", b"b", b"c"])
    refused(edit(tmp_path, text), tmp_path, r"data/demo_0/obs/label holds \|S1; robomimic datasets hold numbers")

    def compound(f):
        f["data/demo_0/meta"] = np.zeros(3, dtype=[("a", "f4"), ("b", "i4")])
    refused(edit(tmp_path, compound), tmp_path, "data/demo_0/meta holds")

    def rewards_2d(f):
        del f["data/demo_1/rewards"]
        f["data/demo_1/rewards"] = np.zeros((2, 2))
    refused(edit(tmp_path, rewards_2d), tmp_path, r"rewards has shape \[2, 2\]; rewards holds one value per sample")

    def dones(f):
        f["data/demo_1/dones"][0] = 2
    refused(edit(tmp_path, dones), tmp_path, r"data/demo_1: dones holds 2 \(sample 0\); robomimic's dones are 0 or 1")

    def env_args(f):
        f["data"].attrs["env_args"] = "{not json"
    refused(edit(tmp_path, env_args), tmp_path, "data attribute env_args is not valid JSON")

    def env_nan(f):
        f["data"].attrs["env_args"] = '{"env_kwargs": {"x": NaN}}'
    refused(edit(tmp_path, env_nan), tmp_path, "env_args cannot be kept")

    def mask_unknown(f):
        f["mask/train"] = np.array([b"demo_0", b"demo_7"])
    refused(edit(tmp_path, mask_unknown), tmp_path, r"mask/train names \['demo_7'\]")


def test_links_and_external_storage_refused(tmp_path):
    outside = tmp_path / "outside.hdf5"
    with h5py.File(outside, "w") as f:
        f["secret"] = np.arange(6.0).reshape(3, 2)

    def external(f):
        f["data/demo_0/obs/leak"] = h5py.ExternalLink(str(outside), "/secret")
    refused(edit(tmp_path, external), tmp_path, r"data/demo_0/obs/leak is an external link to .*outside.hdf5:/secret")

    def soft(f):
        f["data/demo_1/obs/alias"] = h5py.SoftLink("/data/demo_0/obs/pos")
    refused(edit(tmp_path, soft), tmp_path, r"data/demo_1/obs/alias is a soft link")

    def external_demo(f):
        f["data/demo_2"] = h5py.ExternalLink(str(outside), "/")
    refused(edit(tmp_path, external_demo), tmp_path, "data/demo_2 is an external link")

    raw = tmp_path / "raw.bin"
    raw.write_bytes(np.zeros(6, np.float64).tobytes())

    def external_raw(f):
        f.create_dataset("data/demo_0/raw", shape=(3, 2), dtype=np.float64, external=[(str(raw), 0, 48)])
    refused(edit(tmp_path, external_raw), tmp_path, "data/demo_0/raw keeps its data in external files")

    def virtual(f):
        layout = h5py.VirtualLayout(shape=(3, 2), dtype=np.float64)
        layout[:] = h5py.VirtualSource(str(outside), "secret", shape=(3, 2))
        f["data/demo_0"].create_virtual_dataset("virt", layout)
    refused(edit(tmp_path, virtual), tmp_path, "data/demo_0/virt is a virtual dataset")
