"""trajstore record --env gymnasium:ID: CartPole (renders with pygame) and one MuJoCo env; resume,
bad input, and Ctrl-C keeping the finished episodes."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
pytest.importorskip("pygame", reason="CartPole renders rgb_array with pygame (gym-pusht, in the sim extra, brings it)")

from typer.testing import CliRunner  # noqa: E402

import trajstore  # noqa: E402
from trajstore.cli.main import app  # noqa: E402
from trajstore.recording import gymnasium as rg  # noqa: E402
from trajstore.recording.loop import RecordingInterrupted  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.ops.info import describe  # noqa: E402

CARTPOLE = "gymnasium:CartPole-v1"


def cli(*args):
    return CliRunner().invoke(app, ["record", *map(str, args), "--no-progress"])


def test_cartpole_steps_replay_exactly(tmp_path):
    """Every recorded frame is the frame of the observation in the same step: replaying the
    recorded actions from the recorded seed renders the same frames (PNG: exact)."""
    result = cli("--env", CARTPOLE, "--episodes", 2, "--max-steps", 6, "--camera", "png", "--seed", 3,
                 "--out", tmp_path / "rb")
    assert result.exit_code == 0, result.output
    assert "recorded 2 episodes" in result.output
    info = describe(tmp_path / "rb")
    leaves = {leaf.key: (leaf.storage, leaf.shape) for leaf in info.leaves}
    assert leaves["observation/pixels"] == ("ImageStorage", (400, 600, 3))
    assert leaves["observation/state"] == ("HDF5Storage", (4,)) and leaves["action"] == ("HDF5Storage", ())
    assert info.episodes == info.complete_episodes == info.final_observations == 2
    env = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [e.data for e in rb.episodes] == [{"seed": 3}, {"seed": 4}]
        for k, ep in enumerate(rb.episodes):
            steps = rb.get_episode(k)
            assert steps["terminated"][-1] or steps["truncated"][-1]
            obs, _ = env.reset(seed=ep.data["seed"])
            for t in range(len(ep)):
                assert np.array_equal(steps["observation"]["state"][t], obs)
                assert np.array_equal(steps["observation"]["pixels"][t], env.render())
                obs, *_ = env.step(int(steps["action"][t]))
            final = rb.final_observation(k)
            assert np.array_equal(final["state"], obs) and np.array_equal(final["pixels"], env.render())
    env.close()


def test_reference_verify_and_video(tmp_path):
    out, ref = tmp_path / "rb", tmp_path / "ref.npz"
    result = cli("--env", CARTPOLE, "--episodes", 2, "--max-steps", 5, "--out", out, "--reference", ref)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["verify", str(out), "--reference", str(ref)])
    assert result.exit_code == 0, result.output
    pytest.importorskip("av")
    summary = rg.record_gymnasium("CartPole-v1", tmp_path / "video", 1, camera="video", max_steps=4, progress=False)
    assert (summary.episodes, summary.interrupted) == (1, False) and summary.steps <= 4
    storages = {leaf.key: leaf.storage for leaf in describe(tmp_path / "video").leaves}
    assert storages["observation/pixels"] == "VideoStorage"


def test_resume_appends_and_continues_the_seeds(tmp_path):
    out = tmp_path / "rb"
    assert cli("--env", CARTPOLE, "--episodes", 2, "--max-steps", 4, "--out", out).exit_code == 0
    result = cli("--env", CARTPOLE, "--episodes", 1, "--max-steps", 4, "--out", out, "--resume")
    assert result.exit_code == 0, result.output
    assert "recorded 1 episode " in result.output and "the buffer holds 3 episodes" in result.output
    with ReplayBuffer.load_from(out) as rb:
        assert [e.data["seed"] for e in rb.episodes] == [0, 1, 2]
        assert all(e.done and not e.interrupted for e in rb.episodes)
        steps = rb.total_steps

    refused = [
        (("--env", "gymnasium:MountainCar-v0", "--resume"), "observation/state: box (4,) float32"),
        (("--env", CARTPOLE, "--resume", "--capacity", 100), "capacity"),
        (("--env", CARTPOLE, "--resume", "--camera", "png"), "stores observation/pixels as jpeg"),
        (("--env", CARTPOLE, "--resume", "--reference", tmp_path / "ref.npz"), "reference"),
        (("--env", CARTPOLE), "already exists"),
    ]
    for args, message in refused:
        result = cli(*args, "--episodes", 1, "--out", out)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    with ReplayBuffer.load_from(out) as rb:
        assert rb.total_steps == steps and rb.num_episodes == 3  # nothing was written
    result = cli("--env", CARTPOLE, "--resume", "--episodes", 1, "--out", tmp_path / "missing")
    assert result.exit_code == 2 and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("env, message", [
    ("gymnasium:Nope-v0", "doesn't exist"),
    ("gymnasium:", "--env must be"),
    ("cartpole", "--env must be"),
    ("gymnasium:Blackjack-v1", "cannot convert gymnasium space Tuple"),
])
def test_bad_env_is_refused_before_anything_is_written(tmp_path, env, message):
    result = cli("--env", env, "--episodes", 1, "--out", tmp_path / "rb")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "rb").exists()


def interrupting_policy(env, after):
    calls = [0]

    def policy(obs, info):
        calls[0] += 1
        if calls[0] > after:
            raise KeyboardInterrupt
        return env.action_space.sample()

    return policy


def test_keyboard_interrupt_keeps_the_finished_episodes(tmp_path):
    out = tmp_path / "rb"
    with pytest.raises(RecordingInterrupted) as caught:
        rg.record_gymnasium("CartPole-v1", out, 10, max_steps=4, progress=False,
                            policy=interrupting_policy(gymnasium.make("CartPole-v1").unwrapped, 10))
    summary = caught.value.summary
    assert isinstance(caught.value, KeyboardInterrupt) and summary.interrupted
    assert summary.episodes == 2 and summary.steps == 8 and summary.discarded_steps == 2  # 4 + 4 + (2 dropped)
    assert summary.path == str(out) and (summary.held_episodes, summary.held_steps) == (2, 8)
    assert f"interrupted: kept 2 episodes (8 steps) in {out}; discarded the open episode (2 steps)" == summary.line()
    with ReplayBuffer.load_from(out, read_only=False) as rb:  # the lock was released; no fragment is left
        assert [len(e) for e in rb.episodes] == [4, 4] and all(e.done and not e.interrupted for e in rb.episodes)


def test_ctrl_c_stops_after_the_step_under_way(tmp_path):
    """SIGINT during a step is noted; the step is recorded, then the loop stops and discards the episode."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("another SIGINT handler is installed")
    calls = [0]

    def policy(obs, info):
        calls[0] += 1
        if calls[0] == 6:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of step 6
        return 0

    with pytest.raises(RecordingInterrupted) as caught:
        rg.record_gymnasium("CartPole-v1", tmp_path / "rb", 5, max_steps=4, policy=policy, progress=False)
    assert calls[0] == 6  # no step after the one under way
    s = caught.value.summary
    assert (s.episodes, s.steps, s.discarded_steps) == (1, 4, 2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    assert describe(tmp_path / "rb").steps == 4


def test_cli_exits_130_on_keyboard_interrupt(tmp_path, monkeypatch):
    monkeypatch.setattr(rg, "random_policy", lambda env: interrupting_policy(env, 5))
    result = cli("--env", CARTPOLE, "--episodes", 3, "--max-steps", 3, "--out", tmp_path / "rb")
    assert result.exit_code == 130, result.output
    assert "interrupted: kept 1 episode (3 steps)" in result.output
    assert describe(tmp_path / "rb").episodes == 1


def test_mujoco_pusher(tmp_path):
    """A MuJoCo env through the command, in a fresh process with MUJOCO_GL=egl (headless)."""
    pytest.importorskip("mujoco", reason="MuJoCo is in the sim extra")
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(Path(trajstore.__file__).parents[1])}
    out = tmp_path / "pusher"
    run = subprocess.run([sys.executable, "-m", "trajstore.cli.main", "record", "--env", "gymnasium:Pusher-v5",
                          "--episodes", "2", "--max-steps", "5", "--out", str(out), "--no-progress"],
                         env=env, capture_output=True, text=True, timeout=600)
    if run.returncode == 2 and "MuJoCo renders with MUJOCO_GL=egl" in run.stderr:  # EnvSetupError: nothing written
        pytest.skip(f"MuJoCo cannot render here with MUJOCO_GL=egl: {run.stderr.strip()}")
    assert run.returncode == 0, run.stdout + run.stderr
    info = describe(out)
    leaves = {leaf.key: (leaf.storage, leaf.shape) for leaf in info.leaves}
    assert leaves["observation/pixels"] == ("ImageStorage", (480, 480, 3))
    assert leaves["observation/state"][1] == (23,) and leaves["action"][1] == (7,)
    assert info.steps == 10 and info.complete_episodes == 2 and info.final_observations == 2
    with ReplayBuffer.load_from(out) as rb:
        frames = rb[:]["observation"]["pixels"]
        assert frames.std() > 1 and not np.array_equal(frames[0], frames[4])  # a scene that moves
