"""The recorders as users call them: RecordEpisodes/RecordVectorEpisodes signatures and docstrings,
the recorded observation a policy gets, policies named by text or made by a factory, episode data of
a vector env, and record_gymnasium choosing MuJoCo's headless back-end."""

import inspect
import os
import sys

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from trajstore.recording import gymnasium as rg  # noqa: E402
from trajstore.recording.episodes import RecordEpisodes, RecordVectorEpisodes  # noqa: E402
from trajstore.recording.policy import PolicyLoadError, is_factory, load_policy, policy_for  # noqa: E402
from trajstore.recording.vector import sub_env_info  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402

from tests.integrations.test_record_episodes import PNG, CountEnv  # noqa: E402


def test_the_vector_wrapper_takes_every_argument_of_the_single_one_and_both_document_them():
    single = inspect.signature(RecordEpisodes.__init__).parameters
    vector = inspect.signature(RecordVectorEpisodes.__init__).parameters
    assert list(single) == ["self", "env", "buffer", "render_key", "info_keys", "image_keys", "capacity", "routing",
                            "episode_data"]
    for name, param in single.items():
        assert name in vector, name
        assert (vector[name].kind, vector[name].default) == (param.kind, param.default), name
    for cls in (RecordEpisodes, RecordVectorEpisodes):
        doc = cls.__init__.__doc__
        assert doc is not None and doc != gymnasium.Wrapper.__init__.__doc__
        assert "Args:" in doc and "Raises:" in doc and "StorageExistsError" in doc
        for name in list(single)[1:]:
            assert f"    {name} (" in doc, (cls.__name__, name)  # "name (type): ..."
        assert inspect.getdoc(cls.__init__) == inspect.cleandoc(doc)  # what help() shows


def test_recorded_observation_is_what_the_next_step_stores(tmp_path):
    env = RecordEpisodes(CountEnv(3), tmp_path / "rb", render_key="pixels", routing=PNG)
    assert env.recorded_observation is None
    env.reset(seed=1)
    seen = []
    for _ in range(3):
        obs = env.recorded_observation
        assert set(obs) == {"state", "pixels"} and obs["pixels"].shape == (8, 8, 3) and obs["pixels"].dtype == np.uint8
        seen.append((int(obs["state"][0]), int(obs["pixels"][0, 0, 0])))
        env.step(1)
    assert seen == [(0, 0), (1, 1), (2, 2)]
    assert env.recorded_observation is None  # the episode ended
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb[np.arange(3)]["observation"]["state"][:, 0].tolist() == [0, 1, 2]
        assert rb[np.arange(3)]["observation"]["pixels"][:, 0, 0, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("mode", [gymnasium.vector.AutoresetMode.NEXT_STEP, gymnasium.vector.AutoresetMode.SAME_STEP])
def test_vector_episode_data_gets_each_sub_envs_last_info(tmp_path, mode):
    lengths = (2, 3)
    vector = gymnasium.vector.SyncVectorEnv([lambda n=n: CountEnv(n) for n in lengths], autoreset_mode=mode)
    env = RecordVectorEpisodes(vector, tmp_path / "rb",
                               episode_data=lambda info: {"last_t": info["t"], "pos": info["pos"].tolist()})
    env.reset(seed=0)
    for _ in range(4):
        env.step(np.array([1, 2]))
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        ended = [(e.data["env_index"], e.data["last_t"], e.data["pos"]) for e in rb.episodes if e.done]
    want = [(0, 2, [2.0, -2.0]), (1, 3, [3.0, -3.0])]
    if mode is gymnasium.vector.AutoresetMode.SAME_STEP:  # sub-env 0 ends again at step 4
        want = [(0, 2, [2.0, -2.0]), (1, 3, [3.0, -3.0]), (0, 2, [2.0, -2.0])]
    assert sorted(ended) == sorted(want)


def test_sub_env_info_applies_masks_and_recurses():
    info = {"t": np.array([4, 5]), "_t": np.array([True, True]), "is_success": np.array([False, True]),
            "_is_success": np.array([False, True]), "episode": {"r": np.array([1.5, 2.5]), "_r": np.array([True, False])},
            "_episode": np.array([True, True])}
    assert sub_env_info(info, 0) == {"t": 4, "episode": {"r": 1.5}}
    assert sub_env_info(info, 1) == {"t": 5, "is_success": True, "episode": {}}


def test_vector_is_success_becomes_success_without_episode_data(tmp_path):
    class Succeeds(CountEnv):
        def _info(self):
            return {**super()._info(), "is_success": self.t >= self.length}

    vector = gymnasium.vector.SyncVectorEnv([lambda: Succeeds(2)])
    env = RecordVectorEpisodes(vector, tmp_path / "rb")
    env.reset(seed=0)
    env.step(np.array([1]))
    env.step(np.array([1]))
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb.episodes[0].data == {"seed": 0, "env_index": 0, "success": True}


def test_policy_texts_and_the_factory_rule(tmp_path, monkeypatch):
    (tmp_path / "policy_rule_file.py").write_text(
        "def act(obs, info):\n    return 7\n"
        "def make_policy(env):\n    return lambda obs, info: env\n"
        "class Agent:\n    def __init__(self, env):\n        self.env = env\n"
        "    def __call__(self, obs, info):\n        return 5\n"
        "NUMBER = 3\n"
        "def bad_factory(env):\n    return 3\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_policy puts the current folder on it
    monkeypatch.chdir(tmp_path)
    act = load_policy(str(tmp_path / "policy_rule_file.py") + ":act")
    assert act(None, {}) == 7 and not is_factory(act) and policy_for(act, "the env") is act
    factory = load_policy("policy_rule_file:make_policy")  # a module in the current folder
    assert is_factory(factory) and policy_for(factory, "the env")(None, {}) == "the env"
    agent = policy_for(load_policy("policy_rule_file:Agent"), "the env")
    assert agent(None, {}) == 5 and agent.env == "the env"
    for spec, message in [("policy_rule_file", "must be 'module:function'"),
                          ("no_such_policy_module:act", "'no_such_policy_module' not found"),
                          ("missing/file.py:act", "policy file 'missing/file.py' not found"),
                          ("policy_rule_file:nothing", "has no attribute 'nothing'"),
                          ("policy_rule_file:NUMBER", "NUMBER is a int, not a callable")]:
        with pytest.raises(PolicyLoadError, match=message):
            load_policy(spec)
    with pytest.raises(PolicyLoadError, match="returned a int"):
        policy_for(load_policy("policy_rule_file:bad_factory"), "the env")


def test_use_headless_gl(monkeypatch):
    for name in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    assert rg.use_headless_gl() == "egl" and os.environ["MUJOCO_GL"] == "egl"
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert rg.use_headless_gl() == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setenv("DISPLAY", ":0")
    assert rg.use_headless_gl() is None and "MUJOCO_GL" not in os.environ


@pytest.fixture
def cartpole():
    pytest.importorskip("pygame", reason="CartPole renders rgb_array with pygame (the sim extra)")


def test_record_gymnasium_gives_the_policy_the_frame_and_sets_headless_gl(tmp_path, monkeypatch, cartpole):
    for name in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    seen = []

    def policy(obs, info):
        seen.append((obs["state"].shape, obs["pixels"].shape, str(obs["pixels"].dtype)))
        return len(seen) % 2

    summary = rg.record_gymnasium("CartPole-v1", tmp_path / "rb", 2, max_steps=4, policy=policy, progress=False)
    assert os.environ["MUJOCO_GL"] == "egl"
    assert summary.steps == len(seen) == 8 and set(seen) == {((4,), (400, 600, 3), "uint8")}
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb[np.arange(8)]["action"].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]


def test_record_gymnasium_takes_a_factory_by_text_and_refuses_bad_policies_before_the_folder(tmp_path, cartpole):
    path = tmp_path / "fixed_factory_policy.py"
    path.write_text("def make_policy(env):\n    assert env.action_space.n == 2\n"
                    "    return lambda obs, info: 1 if obs['pixels'].shape == (400, 600, 3) else 0\n"
                    "def bad(env):\n    return None\n")
    rg.record_gymnasium("CartPole-v1", tmp_path / "rb", 1, max_steps=3, policy=f"{path}:make_policy", progress=False)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb[np.arange(3)]["action"].tolist() == [1, 1, 1]
    with pytest.raises(PolicyLoadError, match="no attribute 'nope'"):
        rg.record_gymnasium("CartPole-v1", tmp_path / "never", 1, policy=f"{path}:nope", progress=False)
    with pytest.raises(PolicyLoadError, match="returned a NoneType"):
        rg.record_gymnasium("CartPole-v1", tmp_path / "never", 1, policy=f"{path}:bad", progress=False)
    with pytest.raises(TypeError, match="policy must be a callable"):
        rg.record_gymnasium("CartPole-v1", tmp_path / "never", 1, policy=3, progress=False)
    assert not (tmp_path / "never").exists()
