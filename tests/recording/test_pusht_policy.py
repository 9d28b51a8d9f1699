"""The PushT demo's expert: the planner solves PushT, the summary counts the successes the buffer holds,
and ``record_pusht(policy=...)`` records the caller's policy."""

import numpy as np
import pytest

from trajstore.recording.loop import RecordingSummary
from trajstore.recording.pusht_planner import INERTIA, PlannedPushPolicy, push_response


def test_push_response_through_the_centre_translates_and_off_centre_rotates():
    u = np.array([1.0, 0.0])
    through = push_response(np.array([-40.0, 0.0]), u)  # contact point behind the centre of gravity
    np.testing.assert_allclose(through, [1.0, 0.0, 0.0], atol=1e-12)  # the point moves with the disc
    off = push_response(np.array([0.0, -30.0]), u)  # below the centre, pushed along +x: turns counter-clockwise
    assert off[2] > 0 and 0 < off[0] < 1 and off[1] == pytest.approx(0.0)
    # the contact point moves along u by 1 px per px pushed: v + w x r = u (sticking contact)
    r = np.array([0.0, -30.0])
    np.testing.assert_allclose(off[:2] + off[2] * np.array([-r[1], r[0]]), u, atol=1e-12)
    assert off[2] == pytest.approx(30.0 * off[0] / INERTIA)  # w = (r x impulse) / I, impulse = v (mass 1)


def test_recording_summary_line_counts_successes():
    line = RecordingSummary(path="x", episodes=2, steps=8, held_episodes=2, held_steps=8, successes=1).line()
    assert line == "recorded 2 episodes (8 steps) in x; 1/2 succeeded"
    assert RecordingSummary(path="x", episodes=2, steps=8, held_episodes=2, held_steps=8).line() == \
        "recorded 2 episodes (8 steps) in x"  # the env reports no success: nothing said


def test_planner_succeeds_on_most_seeds():
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("gym_pusht")
    from trajstore.recording.loop import run_episode

    env = gym.make("gym_pusht/PushT-v0", obs_type="state")  # the same physics, no rendering
    results = []
    for seed in range(10):
        steps = list(run_episode(env, PlannedPushPolicy(), seed=seed, rng=np.random.default_rng(seed)))
        results.append((len(steps), steps[-1]["terminated"]))  # PushT terminates exactly on success
    env.close()
    assert sum(done for _, done in results) >= 7, results
    assert all(n < 300 for n, done in results if done), results


def test_record_pusht_says_how_many_succeeded(tmp_path):
    pytest.importorskip("gym_pusht")
    from trajstore.recording import record_pusht
    from trajstore.replay_buffer import ReplayBuffer

    summary = record_pusht(tmp_path / "rb", 10, progress=False)
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=True) as rb:
        held = [e.data["success"] for e in rb.episodes]
        lengths = [len(e) for e in rb.episodes]
    assert summary.successes == sum(held) >= 7, held
    assert summary.steps == sum(lengths) and all(n < 300 for n, ok in zip(lengths, held) if ok)
    assert summary.line() == f"recorded 10 episodes ({sum(lengths)} steps) in {tmp_path / 'rb'}; {sum(held)}/10 succeeded"


def test_record_pusht_records_the_callers_policy(tmp_path):
    pytest.importorskip("gym_pusht")
    from trajstore.recording import record_pusht
    from trajstore.replay_buffer import ReplayBuffer

    calls = []

    def still(obs, info, rng):
        calls.append((sorted(obs), obs["agent_pos"].dtype, "block_pose" in info, isinstance(rng, np.random.Generator)))
        return np.array([100.0 + len(calls), 200.0], np.float32)

    summary = record_pusht(tmp_path / "rb", 2, max_steps=4, policy=still, progress=False)
    assert calls == [(["agent_pos", "pixels"], np.float32, True, True)] * 8
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=True) as rb:
        np.testing.assert_array_equal(rb[:]["action"], [[101.0 + k, 200.0] for k in range(8)])
    assert summary.successes == 0 and summary.line().endswith("; 0/2 succeeded")
