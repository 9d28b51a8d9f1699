"""RecordVectorEpisodes on a SyncVectorEnv whose sub-envs end at different steps, in each of
gymnasium's autoreset modes: every episode is contiguous and every step aligned with its o_t."""

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from trajstore.recording.episodes import RecordVectorEpisodes  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402

from tests.integrations.test_record_episodes import PNG, CountEnv  # noqa: E402

Mode = gymnasium.vector.AutoresetMode
LENGTHS = (2, 3, 5)  # sub-env i ends after LENGTHS[i] steps; sub-env 1 by truncation


def make_vector(mode, copy=True, reuse=True):
    fns = [lambda n=n, i=i: CountEnv(n, truncate=i == 1, reuse=reuse) for i, n in enumerate(LENGTHS)]
    return gymnasium.vector.SyncVectorEnv(fns, autoreset_mode=mode, copy=copy)


def record(path, mode, steps=13, render_key="pixels", copy=True, reuse=True):
    env = RecordVectorEpisodes(make_vector(mode, copy, reuse), path, render_key=render_key, info_keys=("t",),
                               routing=PNG)
    env.reset(seed=10)
    actions = np.arange(len(LENGTHS))  # sub-env i always takes action i, so a step names its sub-env
    for _ in range(steps):
        env.step(actions)
    env.close()
    return ReplayBuffer.load_from(path)


def check_episodes(rb, with_frames):
    """Every episode is one sub-env's steps 0..n-1 in order, whole or cut by close()."""
    ends = {}
    for k, ep in enumerate(rb.episodes):
        i = ep.data["env_index"]
        n = LENGTHS[i]
        steps = rb.get_episode(k)
        t = np.arange(len(ep))
        assert np.array_equal(steps["action"], np.full(len(ep), i)), (k, ep)
        assert np.array_equal(steps["observation"]["state"][:, 0], t)
        if with_frames:
            assert np.array_equal(steps["observation"]["pixels"][:, 0, 0, 0], t)
            assert (steps["observation"]["pixels"] == t[:, None, None, None]).all()
        assert np.array_equal(steps["reward"], t + 1.0) and np.array_equal(steps["info"]["t"], t + 1)
        if ep.data.get("interrupted_by") == "close":
            assert len(ep) < n and not (steps["terminated"].any() or steps["truncated"].any())
            continue
        assert len(ep) == n
        assert (steps["terminated"] if i != 1 else steps["truncated"]).tolist() == [False] * (n - 1) + [True]
        assert ep.data["seed"] == (10 + i if i not in ends else None)  # autoreset episodes have no seed
        ends[i] = ends.get(i, 0) + 1
    return ends


@pytest.mark.parametrize("copy", [True, False])
def test_next_step_autoreset(tmp_path, copy):
    with record(tmp_path / "rb", Mode.NEXT_STEP, copy=copy) as rb:
        ends = check_episodes(rb, with_frames=True)
        # 13 vector steps; an episode of n steps takes n + 1 of them (the next one only resets)
        assert ends == {0: 4, 1: 3, 2: 2}
        assert sorted(e.data["env_index"] for e in rb.episodes if "interrupted_by" in e.data) == [0, 1, 2]
        for k, ep in enumerate(rb.episodes):
            final = rb.final_observation(k)
            assert final["state"][0] == len(ep) and (final["pixels"] == len(ep)).all()


@pytest.mark.parametrize("copy", [True, False])
def test_same_step_autoreset(tmp_path, copy):
    with record(tmp_path / "rb", Mode.SAME_STEP, copy=copy) as rb:
        ends = check_episodes(rb, with_frames=True)  # info of the last steps came from info["final_info"]
        assert ends == {0: 6, 1: 4, 2: 2}
        # render() already shows the next episode when SAME_STEP reports an end: no final frame, no final observation
        assert all(rb.final_observation(k) is None for k, e in enumerate(rb.episodes) if e.done
                   and "interrupted_by" not in e.data)
    # (info["final_obs"] is the sub-env's own array: an env that reuses it would overwrite it on reset)
    with record(tmp_path / "state", Mode.SAME_STEP, render_key=None, reuse=False) as rb:
        for k, ep in enumerate(rb.episodes):
            steps = rb.get_episode(k)
            assert np.array_equal(steps["observation"][:, 0], np.arange(len(ep)))
            assert rb.final_observation(k).tolist() == [len(ep)]  # from info["final_obs"]


def test_disabled_autoreset_and_reset_mid_episode(tmp_path):
    env = RecordVectorEpisodes(make_vector(Mode.DISABLED), tmp_path / "rb", render_key="pixels", routing=PNG)
    env.reset(seed=0)
    actions = np.arange(3)
    env.step(actions)
    env.step(actions)  # sub-env 0 ends
    with pytest.raises(RuntimeError, match="reset"):
        env.step(actions)
    env.reset(seed=[5, None, None], options={"reset_mask": np.array([True, False, False])})
    env.step(actions)  # sub-envs 1 and 2 continue their episodes
    env.reset(seed=20)  # ends every running episode
    env.step(actions)
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        got = [(e.data["env_index"], len(e), e.data["seed"], e.data.get("interrupted_by")) for e in rb.episodes]
        assert got == [(0, 2, 0, None), (1, 3, 1, None), (0, 1, 5, "reset"), (2, 3, 2, "reset"),
                       (0, 1, 20, "close"), (1, 1, 21, "close"), (2, 1, 22, "close")]
        for k, e in enumerate(rb.episodes):
            assert np.array_equal(rb.get_episode(k)["observation"]["state"][:, 0], np.arange(len(e)))
            assert rb.final_observation(k)["state"][0] == len(e)
