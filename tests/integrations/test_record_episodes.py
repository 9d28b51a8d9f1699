"""RecordEpisodes: every step's frame and observation are those of o_t, episodes end with their
final observation, seed and data; interrupted and discarded episodes; a given buffer is checked."""

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from trajstore.errors import InvalidValueError, StorageExistsError  # noqa: E402
from trajstore.recording.episodes import RecordEpisodes, recorded_space  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402

PNG = {"kind_kwargs": {"image": {"format": "PNG"}}}  # exact frames


class CountEnv(gymnasium.Env):
    """o_t = [t]; its frame is an 8x8x3 image filled with t; reward t + 1; ends after ``length`` steps.

    info: ``t`` (int), ``even`` (bool) and ``pos`` ((2,) float32 [t, -t]). With ``reuse`` every
    observation is the same array, changed in place (as some simulators do).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, length: int = 4, truncate: bool = False, render_mode: str | None = "rgb_array",
                 reuse: bool = False):
        self.length, self.truncate, self.render_mode, self.reuse = length, truncate, render_mode, reuse
        self.obs = np.zeros(1, np.int64)
        self.observation_space = gymnasium.spaces.Box(0, 255, (1,), np.int64)
        self.action_space = gymnasium.spaces.Discrete(3)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), self._info()

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        return self._obs(), float(self.t), done and not self.truncate, done and self.truncate, self._info()

    def _obs(self):
        self.obs[0] = self.t
        return self.obs if self.reuse else self.obs.copy()

    def _info(self):
        return {"t": self.t, "even": self.t % 2 == 0, "pos": np.array([self.t, -self.t], np.float32)}

    def render(self):
        return np.full((8, 8, 3), self.t, np.uint8) if self.render_mode == "rgb_array" else None


def run(env, steps, seed=None, action=1):
    env.reset(seed=seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break


@pytest.mark.parametrize("reuse", [False, True])
def test_frames_and_observations_are_those_of_o_t(tmp_path, reuse):
    env = RecordEpisodes(CountEnv(5, reuse=reuse), tmp_path / "rb", render_key="pixels", routing=PNG)
    run(env, 10, seed=7)
    run(env, 10, seed=8)
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert set(rb.space["observation"].spaces) == {"state", "pixels"}
        assert rb.space["observation"]["pixels"].metadata.to_json() == {"kind": "image", "layout": "HWC", "fps": 10}
        assert [len(e) for e in rb.episodes] == [5, 5]
        for k in range(2):
            steps = rb.get_episode(k)
            t = np.arange(5)
            assert np.array_equal(steps["observation"]["state"][:, 0], t)
            assert np.array_equal(steps["observation"]["pixels"], np.broadcast_to(t[:, None, None, None], (5, 8, 8, 3)))
            assert np.array_equal(steps["reward"], t + 1.0) and np.array_equal(steps["action"], np.ones(5))
            assert steps["terminated"].tolist() == [False] * 4 + [True] and not steps["truncated"].any()
            final = rb.final_observation(k)
            assert final["state"].tolist() == [5] and (final["pixels"] == 5).all()
        assert [e.data for e in rb.episodes] == [{"seed": 7}, {"seed": 8}]
        assert all(e.done and not e.interrupted for e in rb.episodes)


def test_episode_data_info_keys_and_a_dict_observation(tmp_path):
    env = RecordEpisodes(gymnasium.wrappers.TimeLimit(CountEnv(10), 3), tmp_path / "rb", info_keys=("t", "even", "pos"))
    env.set_episode_data(task="count")  # before reset: goes to the first episode
    env.reset(seed=1)
    env.set_episode_data(success=np.bool_(True), scores=(1, 2.5))
    with pytest.raises(InvalidValueError, match="bad"):
        env.set_episode_data(bad=np.zeros(2))  # refused at once, not at the end of the episode
    for _ in range(3):
        env.step(0)
    run(env, 3)  # no seed, no data
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [e.data for e in rb.episodes] == [{"seed": 1, "task": "count", "success": True, "scores": [1, 2.5]},
                                                 {"seed": None}]
        info = rb[:]["info"]
        assert info["t"].tolist() == [1, 2, 3] * 2 and info["t"].dtype == np.int64
        assert info["even"].tolist() == [False, True, False] * 2 and info["even"].dtype == bool
        assert info["pos"].shape == (6, 2) and info["pos"].dtype == np.float32 and info["pos"][2].tolist() == [3, -3]
        assert rb[2]["truncated"] and not rb[2]["terminated"]
        assert rb.final_observation(0).tolist() == [3]  # no render_key: the observation as the env gives it


def test_info_key_missing_raises_before_anything_is_written(tmp_path):
    env = RecordEpisodes(CountEnv(), tmp_path / "rb", info_keys=("nope",))
    env.reset()
    with pytest.raises(KeyError, match="nope"):
        env.step(0)
    assert not (tmp_path / "rb").exists()


def test_an_episode_cut_by_reset_or_close_is_ended_and_marked(tmp_path):
    env = RecordEpisodes(CountEnv(10), tmp_path / "rb", render_key="pixels", routing=PNG)
    run(env, 3, seed=1)
    run(env, 2, seed=2)  # this reset ends the first episode
    env.close()  # and this close the second
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [len(e) for e in rb.episodes] == [3, 2]
        assert [e.data for e in rb.episodes] == [{"seed": 1, "interrupted_by": "reset"},
                                                 {"seed": 2, "interrupted_by": "close"}]
        assert all(e.interrupted and not e.done for e in rb.episodes)  # cut short: `not e.interrupted` skips them
        assert rb.final_observation(0)["state"].tolist() == [3] and (rb.final_observation(1)["pixels"] == 2).all()


def test_discard_episode_and_step_after_the_end(tmp_path):
    env = RecordEpisodes(CountEnv(3), tmp_path / "rb")
    run(env, 5, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)  # the episode ended: a step now would start an episode from its final observation
    env.reset(seed=1)
    env.set_episode_data(note="dropped")
    env.step(0)
    env.step(0)
    assert env.discard_episode() == 2 and env.discard_episode() == 0
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    run(env, 5, seed=2)
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert len(rb) == 6 and [e.data for e in rb.episodes] == [{"seed": 0}, {"seed": 2}]


def test_a_given_buffer_is_checked_against_the_env(tmp_path):
    space = recorded_space(CountEnv(), render_key="pixels")
    assert space["observation"]["pixels"].shape == (8, 8, 3)
    other = recorded_space(gymnasium.wrappers.TransformObservation(
        CountEnv(), lambda o: o.astype(np.float32), gymnasium.spaces.Box(0, 255, (1,), np.float32)),
        render_key="pixels")
    rb = ReplayBuffer.create(DictStorage, other, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(other))
    env = RecordEpisodes(CountEnv(), rb, render_key="pixels")
    env.reset()
    with pytest.raises(ValueError, match=r"observation/state: box \(1,\) float32 .* in the buffer, box \(1,\) int64"):
        env.step(0)
    assert rb.total_steps == 0
    env.close()
    assert not rb.closed  # the caller's buffer stays open
    rb.close()

    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "ok", **dict_storage_kwargs_from_space(space))
    env = RecordEpisodes(CountEnv(2), rb, render_key="pixels")
    run(env, 5)
    env.close()
    assert rb.total_steps == 2 and rb.num_episodes == 1
    rb.close()
    with pytest.raises(ValueError, match="capacity"):
        RecordEpisodes(CountEnv(), ReplayBuffer.load_from(tmp_path / "ok"), capacity=3)


def test_bad_arguments_raise_before_anything_is_written(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(StorageExistsError):
        RecordEpisodes(CountEnv(), tmp_path / "full")
    with pytest.raises(ValueError, match="capacity"):
        RecordEpisodes(CountEnv(), tmp_path / "rb", capacity=0)
    env = RecordEpisodes(CountEnv(render_mode=None), tmp_path / "rb", render_key="pixels")
    with pytest.raises(ValueError, match="rgb_array"):
        env.reset()
    assert not (tmp_path / "rb").exists()


def test_outcome_known_at_the_end_and_cut_short_episodes_are_flagged(tmp_path):
    """Data computed from the last step's info goes to the episode that ended; an episode cut
    short by close() is interrupted, so `not e.interrupted` keeps only whole episodes."""
    import gymnasium

    from trajstore.recording.episodes import RecordEpisodes

    class Counter(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0, 100, (1,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.t += 1
            done = self.t == 3
            return np.full(1, self.t, np.float32), 1.0, done, False, {"is_success": done and action == 1}

    env = RecordEpisodes(Counter(), tmp_path / "rb")
    for action in (1, 0):
        env.reset(seed=action)
        for _ in range(3):
            env.step(action)
    env.reset(seed=7)
    env.step(1)
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        eps = rb.episodes
        assert [e.data.get("success") for e in eps[:2]] == [True, False]
        assert [(e.done, e.interrupted) for e in eps] == [(True, False), (True, False), (False, True)]
        assert eps[2].data["interrupted_by"] == "close" and len(eps[2]) == 1
    env2 = RecordEpisodes(Counter(), tmp_path / "rb2", episode_data=lambda info: {"won": bool(info["is_success"])})
    env2.reset(seed=0)
    for _ in range(3):
        env2.step(1)
    env2.close()
    with ReplayBuffer.load_from(tmp_path / "rb2") as rb:
        assert rb.episode(0).data == {"seed": 0, "won": True}
