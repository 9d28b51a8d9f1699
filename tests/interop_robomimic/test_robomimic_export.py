"""export_robomimic: the layout read back through h5py (the back door), masks, env_args, refusals, and the
round trip import -> export -> import."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest

from trajstore.errors import InvalidValueError, StorageExistsError, UnknownLeafError, UnsupportedSpaceError
from trajstore.interop.robomimic import export_robomimic, import_robomimic
from trajstore.interop.robomimic.export import MINIMAL_ENV_ARGS
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import tree

from .files import FIXTURE, IMAGE_KEYS, LENGTHS, LOW_DIM_KEYS, obs_rule, recorded

def test_layout_values_next_obs_and_gzip(tmp_path):
    with recorded(tmp_path / "rb") as rb:
        result = export_robomimic(rb, tmp_path / "out.hdf5")
    assert result.episodes == [0, 1, 2] and result.samples == 12
    assert result.keys == {"observation/pixels": "obs/pixels", "observation/agent_pos": "obs/agent_pos",
                           "action": "actions", "reward": "rewards", "terminated": "terminated"}
    assert sorted(os.listdir(tmp_path)) == ["out.hdf5", "rb"]  # no temp file left
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert sorted(f["data"]) == ["demo_0", "demo_1", "demo_2"] and "mask" not in f
        assert f["data"].attrs["total"] == 12
        assert json.loads(f["data"].attrs["env_args"]) == MINIMAL_ENV_ARGS
        for e, n in enumerate((4, 3, 5)):
            g = f[f"data/demo_{e}"]
            assert g.attrs["num_samples"] == n
            assert sorted(g) == ["actions", "dones", "next_obs", "obs", "rewards", "terminated"]
            assert g["obs/pixels"].dtype == np.uint8 and g["obs/pixels"].compression == "gzip"
            assert g["obs/agent_pos"].compression is None and g["obs/agent_pos"].dtype == np.float32
            np.testing.assert_array_equal(g["obs/pixels"][:, 0, 0, 0], 10 * e + np.arange(n))
            np.testing.assert_array_equal(g["obs/agent_pos"][:], np.stack([np.full(n, e), np.arange(n)], 1))
            last = n if e != 1 else n - 1  # episode 1 has no final observation: its last obs repeated
            np.testing.assert_array_equal(g["next_obs/pixels"][:, 0, 0, 0], 10 * e + np.r_[1:n, last])
            np.testing.assert_array_equal(g["next_obs/agent_pos"][:, 1], np.r_[1:n, last])
            np.testing.assert_array_equal(g["actions"][:], np.stack([np.arange(n) / 8, np.full(n, -e / 8)], 1))
            assert g["rewards"].shape == (n,) and g["rewards"].dtype == np.float32
            # no done leaf: dones is 1 at the last sample, int64 as robomimic writes it
            assert g["dones"].dtype == np.int64 and g["dones"][:].tolist() == [0] * (n - 1) + [1]
            assert g["terminated"].dtype == bool and g["terminated"][:].tolist() == [False] * (n - 1) + [True]


def test_masks_from_split_and_selections(tmp_path):
    with recorded(tmp_path / "rb", lengths=(2, 2, 2, 2, 2), finals=(False,) * 5) as rb:
        train, valid = rb.split_episodes(0.4, seed=3)
        result = export_robomimic(rb, tmp_path / "a.hdf5", val_fraction=0.4, seed=3,
                                  masks={"good": "success == true", "first": [0, 1]})
        assert result.masks == {"train": 3, "valid": 2, "good": 4, "first": 2}
        export_robomimic(rb, tmp_path / "b.hdf5", episodes="2-4", masks={"odd": [3], "late": "id >= 3"})
    with h5py.File(tmp_path / "a.hdf5", "r") as f:
        assert f["mask/train"][:].tolist() == [f"demo_{i}".encode() for i in train]
        assert f["mask/valid"][:].tolist() == [f"demo_{i}".encode() for i in valid]
        assert f["mask/good"][:].tolist() == [b"demo_0", b"demo_2", b"demo_3", b"demo_4"]
        assert f["mask/first"].dtype.kind == "S"
    with h5py.File(tmp_path / "b.hdf5", "r") as f:  # episodes 2, 3, 4 are demo_0, demo_1, demo_2
        assert sorted(f["data"]) == ["demo_0", "demo_1", "demo_2"] and f["mask/odd"][:].tolist() == [b"demo_1"]
        assert f["mask/late"][:].tolist() == [b"demo_1", b"demo_2"]


def test_refusals_write_nothing(tmp_path):
    with recorded(tmp_path / "rb", text=True) as rb:
        with pytest.raises(UnsupportedSpaceError, match=r"\['note'\].*robomimic.*--exclude note"):
            export_robomimic(rb, tmp_path / "x.hdf5")
        keep = {"exclude": ["note"]}
        with pytest.raises(InvalidValueError, match="leaves under 'observation' go to obs/"):
            export_robomimic(rb, tmp_path / "x.hdf5", key_map={"observation/pixels": "pixels"}, **keep)
        with pytest.raises(UnknownLeafError):
            export_robomimic(rb, tmp_path / "x.hdf5", key_map={"nope": "a"}, **keep)
        with pytest.raises(InvalidValueError, match="episodes \\[7\\] are not ended"):
            export_robomimic(rb, tmp_path / "x.hdf5", episodes=[7], **keep)
        with pytest.raises(InvalidValueError, match="given twice"):
            export_robomimic(rb, tmp_path / "x.hdf5", val_fraction=0.5, masks={"train": [0]}, **keep)
        with pytest.raises(InvalidValueError, match="map to 'actions' and 'actions'"):
            export_robomimic(rb, tmp_path / "x.hdf5", key_map={"reward": "actions"}, **keep)
        assert sorted(os.listdir(tmp_path)) == ["rb"]
        assert export_robomimic(rb, tmp_path / "ok.hdf5", **keep).keys.get("note") is None
        os.unlink(tmp_path / "ok.hdf5")
    assert sorted(os.listdir(tmp_path)) == ["rb"]
    (tmp_path / "there.hdf5").write_bytes(b"keep")
    with pytest.raises(StorageExistsError):
        export_robomimic(tmp_path / "rb", tmp_path / "there.hdf5")
    assert (tmp_path / "there.hdf5").read_bytes() == b"keep"


def test_round_trip_fixture(tmp_path):
    import_robomimic(FIXTURE, tmp_path / "a", camera="png", model_file=True)
    result = export_robomimic(tmp_path / "a", tmp_path / "x.hdf5")
    assert result.masks == {"train": 2, "valid": 1}  # the masks the import kept
    with h5py.File(tmp_path / "x.hdf5", "r") as f, h5py.File(FIXTURE, "r") as src:
        assert json.loads(f["data"].attrs["env_args"]) == json.loads(src["data"].attrs["env_args"])
        assert f["mask/train"][:].tolist() == [b"demo_0", b"demo_1"] and f["mask/valid"][:].tolist() == [b"demo_2"]
        for e in range(3):
            a, b = f[f"data/demo_{e}"], src[f"data/demo_{e}"]
            assert a.attrs["model_file"] == b.attrs["model_file"]
            for key in ["actions", "rewards", "dones", "states"] + [f"{p}/{k}" for p in ("obs", "next_obs")
                                                                  for k in IMAGE_KEYS + LOW_DIM_KEYS]:
                assert a[key].dtype == b[key].dtype, key
                np.testing.assert_array_equal(a[key][:], b[key][:], err_msg=key)
    import_robomimic(tmp_path / "x.hdf5", tmp_path / "b", camera="png", model_file=True)
    with ReplayBuffer.load_from(tmp_path / "a") as ra, ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert ra.space == rb.space and ra.space.metadata == rb.space.metadata
        assert [e.data for e in ra.episodes] == [e.data for e in rb.episodes]
        for k in range(3):
            for x, y in zip(tree.flatten(ra.space, ra.get_episode(k)), tree.flatten(rb.space, rb.get_episode(k))):
                np.testing.assert_array_equal(x, y)
            for key, v in ra.final_observation(k).items():
                np.testing.assert_array_equal(v, rb.final_observation(k)[key])
        np.testing.assert_array_equal(rb.final_observation(2)["agentview_image"], obs_rule(2, LENGTHS[2])["agentview_image"])
