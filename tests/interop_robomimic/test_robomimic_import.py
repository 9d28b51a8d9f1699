"""import_robomimic on the committed fixture, value by value, and on small files for ordering and options."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.interop.robomimic import import_robomimic
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace

from .files import FIXTURE, IMAGE_KEYS, LENGTHS, LOW_DIM_KEYS, action_rule, obs_rule, state_rule, write_small


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("rm") / "buf"
    summary = import_robomimic(FIXTURE, out, camera="png")
    with ReplayBuffer.load_from(out) as rb:
        yield summary, rb


def test_summary_and_space(imported):
    summary, rb = imported
    assert (summary.episodes, summary.steps) == (3, 39)
    assert summary.leaves["obs/agentview_image"] == "observation/agentview_image"
    assert summary.leaves["actions"] == "action" and summary.leaves["dones"] == "done"
    assert list(rb.space.spaces) == ["observation", "action", "reward", "done", "state"]
    obs = rb.space["observation"]
    assert sorted(obs.spaces) == sorted(IMAGE_KEYS + LOW_DIM_KEYS)
    for k in IMAGE_KEYS:
        assert obs[k].shape == (84, 84, 3) and obs[k].dtype == np.uint8
        assert dict(obs[k].metadata) == {"kind": "image", "layout": "HWC", "fps": 20}
    assert obs["object"].shape == (10,) and obs["object"].dtype == np.float64
    assert rb.space["reward"].shape == () and rb.space["reward"].dtype == np.float64
    assert isinstance(rb.space["done"], BinarySpace) and rb.space["done"].shape == ()
    assert rb.space["action"].shape == (7,) and rb.space["state"].shape == (10,)


def test_every_value(imported):
    _, rb = imported
    for e, n in enumerate(LENGTHS):
        ep = rb.episode(e)
        assert len(ep) == n
        steps = rb.get_episode(e)
        for t in range(n):
            want = obs_rule(e, t)
            for k in IMAGE_KEYS + LOW_DIM_KEYS:
                np.testing.assert_array_equal(steps["observation"][k][t], want[k])
            np.testing.assert_array_equal(steps["action"][t], action_rule(e, t))
            np.testing.assert_array_equal(steps["state"][t], state_rule(e, t))
            assert steps["reward"][t] == t / 10
            assert bool(steps["done"][t]) == (t == n - 1)


def test_final_observations_are_next_obs_of_the_last_sample(imported):
    _, rb = imported
    for e, n in enumerate(LENGTHS):
        final = rb.final_observation(e)
        want = obs_rule(e, n)  # the rule at t = N: in no obs row
        for k in IMAGE_KEYS + LOW_DIM_KEYS:
            np.testing.assert_array_equal(final[k], want[k])
    np.testing.assert_array_equal(rb.final_observation(0)["robot0_eef_pos"], [0, 10, 10])


def test_episode_data_and_env_args(imported):
    _, rb = imported
    assert [e.data for e in rb.episodes] == [{"demo": "demo_0", "masks": ["train"]},
                                             {"demo": "demo_1", "masks": ["train"]},
                                             {"demo": "demo_2", "masks": ["valid"]}]
    kept = rb.space.metadata["robomimic"].to_json()
    assert kept["total"] == 39
    env = kept["env_args"]
    assert env["env_name"] == "Lift" and env["type"] == 1 and env["env_version"] == "1.4.1"
    assert env["env_kwargs"]["control_freq"] == 20 and env["env_kwargs"]["robots"] == ["Panda"]
    assert env["env_kwargs"]["controller_configs"]["output_max"] == [0.05, 0.05, 0.05, 0.5, 0.5, 0.5]


def test_model_file_only_when_asked(tmp_path):
    import_robomimic(FIXTURE, tmp_path / "b", camera="png", model_file=True, episodes=[1])
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert rb.episode(0).data == {"demo": "demo_1", "masks": ["train"],
                                      "model_file": '<mujoco model="synthetic_demo_1"></mujoco>'}


def test_mask_and_selections(tmp_path):
    s = import_robomimic(FIXTURE, tmp_path / "train", mask="train", camera="png")
    assert (s.episodes, s.steps) == (2, 26)
    s = import_robomimic(FIXTURE, tmp_path / "valid", mask="valid", camera="png")
    with ReplayBuffer.load_from(tmp_path / "valid") as rb:
        assert [e.data["demo"] for e in rb.episodes] == ["demo_2"] and len(rb) == 13
        np.testing.assert_array_equal(rb[0]["observation"]["robot0_eef_pos"], [2, 0, 2000])
    import_robomimic(FIXTURE, tmp_path / "list", episodes=[2, 0], camera="png")
    with ReplayBuffer.load_from(tmp_path / "list") as rb:  # a list keeps its order
        assert [e.data["demo"] for e in rb.episodes] == ["demo_2", "demo_0"]
    import_robomimic(FIXTURE, tmp_path / "expr", episodes='demo == "demo_1" or steps > 12', camera="png")
    with ReplayBuffer.load_from(tmp_path / "expr") as rb:
        assert [e.data["demo"] for e in rb.episodes] == ["demo_1", "demo_2"]
    import_robomimic(FIXTURE, tmp_path / "ids", mask="train", episodes="1", camera="png")
    with ReplayBuffer.load_from(tmp_path / "ids") as rb:
        assert [e.data["demo"] for e in rb.episodes] == ["demo_1"]
    with pytest.raises(InvalidValueError, match=r"no filter key mask/test .*\['train', 'valid'\]"):
        import_robomimic(FIXTURE, tmp_path / "x", mask="test")
    with pytest.raises(InvalidValueError, match=r"episodes \[2\] are not in the source"):
        import_robomimic(FIXTURE, tmp_path / "x", mask="train", episodes=[2])
    assert not (tmp_path / "x").exists()


def test_demos_sorted_by_number_and_index_is_n(tmp_path):
    src = write_small(tmp_path / "s.hdf5", (2, 3, 4), names=["demo_10", "demo_9", "demo_2"])
    import_robomimic(src, tmp_path / "b", camera="png")
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert [e.data["demo"] for e in rb.episodes] == ["demo_2", "demo_9", "demo_10"]
        assert [len(e) for e in rb.episodes] == [4, 3, 2]
    import_robomimic(src, tmp_path / "c", episodes="9-10", camera="png")
    with ReplayBuffer.load_from(tmp_path / "c") as rb:
        assert [e.data["demo"] for e in rb.episodes] == ["demo_9", "demo_10"]


def test_key_map_fps_and_other_datasets(tmp_path):
    def extra(g, d, n):
        g["robot_states"] = np.full((n, 5), d, np.float32)
        g["datagen_info/eef_pose"] = np.zeros((n, 4, 4))
        g.attrs["seed"] = 7 + d
    src = write_small(tmp_path / "s.hdf5", extra=extra)
    s = import_robomimic(src, tmp_path / "b", key_map={"obs/cam_image": "observation/images/front", "actions":
                                                       "act"}, fps=15, camera="png")
    assert s.leaves["datagen_info/eef_pose"] == "datagen_info/eef_pose"
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert rb.space["observation"]["images"]["front"].metadata["fps"] == 15
        assert rb.space["robot_states"].dtype == np.float32 and rb.space["datagen_info"]["eef_pose"].shape == (4, 4)
        np.testing.assert_array_equal(rb[4]["act"], [1, -1])
        np.testing.assert_array_equal(rb[4]["observation"]["images"]["front"], np.full((4, 4, 3), 11))
        assert rb.episode(1).data == {"demo": "demo_1", "masks": [], "attrs": {"seed": 8}}
    with pytest.raises(InvalidValueError, match=r"key_map names \['obs/nope'\].*obs/cam_image"):
        import_robomimic(src, tmp_path / "x", key_map={"obs/nope": "a"})
    with pytest.raises(InvalidValueError, match="obs/ keys must become leaves under 'observation/'"):
        import_robomimic(src, tmp_path / "x", key_map={"obs/pos": "pos"})
    with pytest.raises(InvalidValueError, match="both become the leaf 'state'"):
        import_robomimic(src, tmp_path / "x", key_map={"actions": "state"})
    assert not (tmp_path / "x").exists()


def test_fps_default_without_env_args_and_no_next_obs(tmp_path):
    src = write_small(tmp_path / "s.hdf5", next_obs=False)
    with h5py.File(src, "a") as f:
        del f["data"].attrs["env_args"]
    import_robomimic(src, tmp_path / "b", camera="png")
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert rb.space["observation"]["cam_image"].metadata["fps"] == 20
        assert rb.final_observation(0) is None and rb.final_observation(1) is None
        assert rb.space.metadata["robomimic"].to_json() == {"total": 5}


def test_jpeg_camera_is_near(tmp_path):
    import_robomimic(FIXTURE, tmp_path / "j", episodes=[0])
    with ReplayBuffer.load_from(tmp_path / "j") as rb:
        got = rb[3]["observation"]["agentview_image"].astype(int)
        assert np.abs(got - obs_rule(0, 3)["agentview_image"]).mean() < 2


@pytest.mark.parametrize("fps", [0, -5, float("nan"), True])
def test_bad_fps_and_camera_refused_before_writing(tmp_path, fps):
    with pytest.raises(ValueError, match="fps must be a positive number"):
        import_robomimic(FIXTURE, tmp_path / "x", fps=fps)
    with pytest.raises(ValueError, match="camera must be one of"):
        import_robomimic(FIXTURE, tmp_path / "x", camera="gif")
    assert not (tmp_path / "x").exists()


def test_out_must_be_new(tmp_path):
    from trajstore.errors import StorageExistsError

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(StorageExistsError):
        import_robomimic(FIXTURE, tmp_path / "full")
