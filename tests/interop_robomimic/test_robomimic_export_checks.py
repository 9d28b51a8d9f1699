"""export_robomimic's choices and refusals: ring-cut episodes, masks, val_fraction, env_args, episode data
attributes, and the source keys an import kept (``robomimic_key``) written back."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.interop.robomimic import export_robomimic, import_robomimic
from trajstore.interop.robomimic._export_plan import plan_leaves
from trajstore.interop.robomimic._source import MAX_ATTR_VALUES, MAX_MODEL_FILE
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import DictSpace

from .files import recorded, write_small


def _files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != "rb")


# -- a ring cuts its oldest episode ------------------------------------------------------------------------


@pytest.fixture
def ring(tmp_path):
    """Episodes of 5, 5, 5, 5, 3 steps in a ring of 12: episode 2 lost its first step, 3 and 4 are whole."""
    with recorded(tmp_path / "rb", lengths=(5, 5, 5, 5, 3), capacity=12) as rb:
        assert [(e.id, len(e), e.overwritten) for e in rb.episodes] == [(2, 4, True), (3, 5, False), (4, 3, False)]
        yield rb


def test_a_ring_cut_episode_is_left_out_by_default(tmp_path, ring):
    result = export_robomimic(ring, tmp_path / "o.hdf5", val_fraction=0.5)
    assert result.episodes == [3, 4] and result.samples == 8
    with h5py.File(tmp_path / "o.hdf5", "r") as f:
        assert sorted(f["data"]) == ["demo_0", "demo_1"] and f["data"].attrs["total"] == 8
        for d, (e, n) in enumerate(((3, 5), (4, 3))):
            np.testing.assert_array_equal(f[f"data/demo_{d}/obs/agent_pos"][:],
                                          np.stack([np.full(n, e), np.arange(n)], 1))
        assert sorted(f["mask/train"][:].tolist() + f["mask/valid"][:].tolist()) == [b"demo_0", b"demo_1"]
    assert export_robomimic(ring, tmp_path / "q.hdf5", episodes="id >= 0").episodes == [3, 4]  # an expression
    with pytest.raises(InvalidValueError, match="'id == 2' selects no whole ended episode of the 3 held"):
        export_robomimic(ring, tmp_path / "r.hdf5", episodes="id == 2")
    assert _files(tmp_path) == ["o.hdf5", "q.hdf5"]


@pytest.mark.parametrize("episodes", [[2, 3], "2-4", [2]])
def test_a_ring_cut_episode_named_is_refused(tmp_path, ring, episodes):
    with pytest.raises(ValueError, match="episode id 2 lost its first steps to the ring; it cannot be exported whole"):
        export_robomimic(ring, tmp_path / "o.hdf5", episodes=episodes)
    assert _files(tmp_path) == []


# -- masks, val_fraction, env_args -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "0.5", [0.5]])
def test_val_fraction_must_be_a_number(tmp_path, value):
    with recorded(tmp_path / "rb") as rb:
        with pytest.raises(ValueError, match="val_fraction must be a number in \\[0, 1\\]"):
            export_robomimic(rb, tmp_path / "o.hdf5", val_fraction=value)
        assert export_robomimic(rb, tmp_path / "one.hdf5", val_fraction=1).masks == {"train": 0, "valid": 3}
    assert _files(tmp_path) == ["one.hdf5"]


@pytest.mark.parametrize("masks, match", [
    ({"ok": [99]}, r"mask 'ok': episodes \[99\] are not exported \(exported ids: 0, 1, 2\)"),
    ({"ok": [0, 7]}, r"mask 'ok': episodes \[7\] are not exported"),
    ({"ok": [True]}, "an episode id must be an int"),
    ({"ok": []}, "mask 'ok': \\[\\] holds none of the 3 exported episodes; nothing was written"),
    ({"none": "id > 100"}, "mask 'none': 'id > 100' holds none of the 3 exported episodes"),
    ({"ok": "0,9"}, r"episodes \[9\] are not held"),
])
def test_masks_name_exported_episodes_and_hold_some(tmp_path, masks, match):
    with recorded(tmp_path / "rb") as rb:
        with pytest.raises(InvalidValueError, match=match):
            export_robomimic(rb, tmp_path / "o.hdf5", masks=masks)
        with pytest.raises(InvalidValueError, match=r"mask 'ok': episodes \[0\] are not exported"):
            export_robomimic(rb, tmp_path / "o.hdf5", episodes=[1, 2], masks={"ok": "0-1"})
    assert _files(tmp_path) == []


@pytest.mark.parametrize("env_args", [[1, 2], "x", 3, {"a": float("nan")}, {"a": object()}, {"a": {1, 2}}])
def test_env_args_must_be_a_json_object(tmp_path, env_args):
    with recorded(tmp_path / "rb") as rb:
        with pytest.raises(ValueError, match="env_args must be a JSON object") as info:
            export_robomimic(rb, tmp_path / "o.hdf5", env_args=env_args)
    assert type(info.value) is ValueError  # not a raw TypeError of json or dict()
    assert _files(tmp_path) == []


# -- episode data attributes: what an import reads back ----------------------------------------------------


def test_model_file_an_import_would_refuse_is_refused(tmp_path):
    with recorded(tmp_path / "rb", lengths=(2,), model_file="x" * (MAX_MODEL_FILE + 1)) as rb:
        with pytest.raises(InvalidValueError, match=f"episode id 0: data 'model_file' has {MAX_MODEL_FILE + 1} "
                                                    f"characters; an import reads at most {MAX_MODEL_FILE}"):
            export_robomimic(rb, tmp_path / "o.hdf5")
    with recorded(tmp_path / "rb2", lengths=(2,), model_file=5) as rb:
        with pytest.raises(InvalidValueError, match="data 'model_file' is int, expected the MJCF XML text"):
            export_robomimic(rb, tmp_path / "o.hdf5")
    assert _files(tmp_path) == ["rb2"]


def test_model_file_and_attrs_come_back_through_an_import(tmp_path):
    xml = "<mujoco>" + "x" * (300 << 10) + "</mujoco>"  # bigger than an HDF5 compact attribute (64 kB)
    attrs = {"seed": 7, "name": "a", "pose": [0.5, 1.0], "many": list(range(MAX_ATTR_VALUES + 1)),
             "nested": {"n": 1}, "ragged": [1, [2]], "huge_int": 2 ** 70, "": 1, "num_samples": 99}
    with recorded(tmp_path / "rb", lengths=(2, 3), model_file=xml, attrs=attrs) as rb:
        export_robomimic(rb, tmp_path / "o.hdf5")
    with h5py.File(tmp_path / "o.hdf5", "r") as f:
        g = f["data/demo_1"]
        assert sorted(g.attrs) == ["model_file", "name", "num_samples", "pose", "seed"]
        assert g.attrs["num_samples"] == 3 and g.attrs["model_file"] == xml
    import_robomimic(tmp_path / "o.hdf5", tmp_path / "b", camera="png", model_file=True)
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert rb.episode(1).data == {"demo": "demo_1", "masks": [], "model_file": xml,
                                      "attrs": {"seed": 7, "name": "a", "pose": [0.5, 1.0]}}


# -- the source key an import kept ---------------------------------------------------------------------------


RENAMES = {"obs/cam_image": "observation/images/front", "obs/pos": "observation/pose", "actions": "act/joint"}


def test_a_renamed_leaf_keeps_its_source_key_and_an_export_writes_it_back(tmp_path):
    src = write_small(tmp_path / "s.hdf5", lengths=(3, 2))
    import_robomimic(src, tmp_path / "b", camera="png", key_map=RENAMES)
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert dict(rb.space["observation"]["images"]["front"].metadata) == {
            "kind": "image", "layout": "HWC", "fps": 20, "robomimic_key": "obs/cam_image"}
        assert dict(rb.space["observation"]["pose"].metadata) == {"robomimic_key": "obs/pos"}
        assert dict(rb.space["act"]["joint"].metadata) == {"robomimic_key": "actions"}
        assert dict(rb.space["reward"].metadata) == {} and dict(rb.space["state"].metadata) == {}
        assert [e.data for e in rb.episodes] == [{"demo": "demo_0", "masks": []}, {"demo": "demo_1", "masks": []}]
    result = export_robomimic(tmp_path / "b", tmp_path / "o.hdf5")
    assert result.keys == {"observation/images/front": "obs/cam_image", "observation/pose": "obs/pos",
                           "act/joint": "actions", "reward": "rewards", "done": "dones", "state": "states"}
    with h5py.File(tmp_path / "o.hdf5", "r") as out, h5py.File(src, "r") as f:
        for d in range(2):
            a, b = out[f"data/demo_{d}"], f[f"data/demo_{d}"]
            assert sorted(a) == sorted(b) == ["actions", "dones", "next_obs", "obs", "rewards", "states"]
            assert sorted(a["obs"]) == sorted(a["next_obs"]) == ["cam_image", "pos"]
            for key in ("obs/cam_image", "obs/pos", "next_obs/cam_image", "next_obs/pos", "actions", "rewards",
                        "dones", "states"):
                assert a[key].dtype == b[key].dtype, key
                np.testing.assert_array_equal(a[key][:], b[key][:], err_msg=key)
    # key_map still wins over the kept key; a collision with a kept key is refused
    assert export_robomimic(tmp_path / "b", tmp_path / "p.hdf5", key_map={"observation/pose": "obs/xy"}
                            ).keys["observation/pose"] == "obs/xy"
    with pytest.raises(InvalidValueError, match="map to 'obs/cam_image' and 'obs/cam_image'"):
        export_robomimic(tmp_path / "b", tmp_path / "q.hdf5", key_map={"observation/pose": "obs/cam_image"})
    assert not (tmp_path / "q.hdf5").exists()


def test_a_kept_key_that_no_longer_fits_is_refused_naming_the_metadata(tmp_path):
    with recorded(tmp_path / "rb") as rb:
        space = rb.space
    moved = DictSpace({**space.spaces, "action": space["action"].with_metadata({"robomimic_key": "obs/a"})})
    with pytest.raises(InvalidValueError, match="leaf 'action': its key \\(metadata 'robomimic_key', from an "
                                                "import\\) 'obs/a': leaves under 'observation' go to obs/"):
        plan_leaves(moved, {})
    assert [p.key for p in plan_leaves(moved, {"action": "actions"}) if p.path == ("action",)] == ["actions"]
