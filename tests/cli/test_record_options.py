"""trajstore record --env-kwargs and --policy: parsing, the frame a policy gets, errors before any folder."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer

from trajstore.cli._record_options import parse_env_kwargs, split_items

gymnasium = pytest.importorskip("gymnasium")

from typer.testing import CliRunner  # noqa: E402

import trajstore  # noqa: E402
from trajstore.cli.main import app  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402


def cli(*args):
    return CliRunner().invoke(app, ["record", *map(str, args), "--no-progress"])


def test_env_kwargs_are_json_literals_or_text():
    assert parse_env_kwargs('width=96,height=96,on=true,off=null,scale=1.5,goal=[1,2],opts={"a": [1, 2]},'
                            'name="a,b",camera=top view') == {
        "width": 96, "height": 96, "on": True, "off": None, "scale": 1.5, "goal": [1, 2], "opts": {"a": [1, 2]},
        "name": "a,b", "camera": "top view"}
    assert parse_env_kwargs(None) == {} and parse_env_kwargs(" ") == {}
    assert split_items('a="x\\",y",b=2') == ['a="x\\",y"', "b=2"]
    for text, item in [("width=96,oops", "'oops'"), ("=3", "'=3'"), ("9x=1", "'9x=1'"), ("a=1,a=2", "'a=2'")]:
        with pytest.raises(typer.BadParameter, match=item):
            parse_env_kwargs(text)


def test_help_names_the_pusht_expert_and_the_new_options():
    result = CliRunner().invoke(app, ["record", "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.output.split())
    assert "'pusht' (a planning expert; most episodes succeed)" in text
    assert "--env-kwargs" in text and "--policy" in text and "make_policy(env)" in text


@pytest.fixture
def cartpole():
    pytest.importorskip("pygame", reason="CartPole renders rgb_array with pygame (the sim extra)")


def test_a_policy_module_gets_the_frame_and_its_actions_are_recorded(tmp_path, monkeypatch, cartpole):
    (tmp_path / "cli_fixed_policy.py").write_text(
        "def act(obs, info):\n"
        "    assert obs['pixels'].shape == (400, 600, 3) and obs['state'].shape == (4,)\n"
        "    return 1\n"
        "def make_policy(env):\n"
        "    return lambda obs, info: 0 if 'pixels' in obs else 1\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    for spec, action in [("cli_fixed_policy:act", 1), (f"{tmp_path / 'cli_fixed_policy.py'}:make_policy", 0)]:
        out = tmp_path / f"rb{action}"
        result = cli("--env", "gymnasium:CartPole-v1", "--episodes", 2, "--max-steps", 3, "--policy", spec,
                     "--out", out)
        assert result.exit_code == 0, result.output
        with ReplayBuffer.load_from(out) as rb:
            assert rb[np.arange(len(rb))]["action"].tolist() == [action] * 6


@pytest.mark.parametrize("args, message", [
    (["--policy", "no_such_cli_policy:act"], "Invalid value for '--policy': policy module 'no_such_cli_policy' not found"),
    (["--policy", "os:no_such_function"], "os has no attribute 'no_such_function'"),
    (["--policy", "os:sep"], "sep is a str, not a callable"),
    (["--policy", "nocolon"], "must be 'module:function'"),
    (["--env-kwargs", "width=64,height"], "Invalid value for '--env-kwargs': item 'height' is not key=value"),
])
def test_bad_options_fail_before_any_folder(tmp_path, args, message):
    result = cli("--env", "gymnasium:CartPole-v1", "--episodes", 1, "--out", tmp_path / "rb", *args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "rb").exists()


def test_pusht_refuses_env_kwargs_and_a_factory_policy(tmp_path):
    result = cli("--env", "pusht", "--episodes", 1, "--out", tmp_path / "rb", "--env-kwargs", "width=64")
    assert result.exit_code == 2
    assert "--env-kwargs works with gymnasium:ID envs" in " ".join(result.output.replace("│", " ").split())
    (tmp_path / "factory_policy.py").write_text("def make_policy(env):\n    return lambda obs, info: (0, 0)\n")
    result = cli("--env", "pusht", "--episodes", 1, "--out", tmp_path / "rb", "--policy",
                 f"{tmp_path / 'factory_policy.py'}:make_policy")
    assert result.exit_code == 2
    assert "a factory make_policy(env) works with gymnasium:ID envs" in " ".join(
        result.output.replace("│", " ").split())
    assert not (tmp_path / "rb").exists()


def test_pusht_records_the_given_policy(tmp_path):
    """The policy gets PushT's observation (its 96x96 pixels are the camera) and its actions are stored."""
    pytest.importorskip("gym_pusht")
    (tmp_path / "corner_policy.py").write_text(
        "import numpy as np\n"
        "def act(observation, info):\n"
        "    assert observation['pixels'].shape == (96, 96, 3), observation['pixels'].shape\n"
        "    return np.array([100.0, 400.0], np.float32)\n")
    result = cli("--env", "pusht", "--episodes", 1, "--max-steps", 12, "--out", tmp_path / "rb",
                 "--policy", f"{tmp_path / 'corner_policy.py'}:act")
    assert result.exit_code == 0, result.output
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    assert len(rb) == 12
    np.testing.assert_array_equal(rb[np.arange(12)]["action"], np.tile([100.0, 400.0], (12, 1)).astype(np.float32))
    assert rb.episode(0).data["success"] is False


def test_pusher_frames_of_the_size_asked_for_and_a_fixed_action(tmp_path):
    """A MuJoCo env in a fresh process without a display nor MUJOCO_GL: the command picks EGL itself."""
    pytest.importorskip("mujoco", reason="MuJoCo is in the sim extra")
    (tmp_path / "pusher_policy.py").write_text(
        "import numpy as np\n"
        "def act(obs, info):\n"
        "    assert obs['pixels'].shape == (64, 64, 3), obs['pixels'].shape\n"
        "    return np.full(7, 0.25, np.float32)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY")}
    env["PYTHONPATH"] = str(Path(trajstore.__file__).parents[1])
    run = subprocess.run([sys.executable, "-m", "trajstore.cli.main", "record", "--env", "gymnasium:Pusher-v5",
                          "--env-kwargs", "width=64,height=64", "--policy", f"{tmp_path / 'pusher_policy.py'}:act",
                          "--episodes", "2", "--max-steps", "4", "--camera", "png", "--out", str(tmp_path / "rb"),
                          "--no-progress"], env=env, capture_output=True, text=True, timeout=300)
    if run.returncode == 2 and "MuJoCo renders with MUJOCO_GL=egl" in run.stderr:
        pytest.skip(f"MuJoCo cannot render here with EGL: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        steps = rb[np.arange(len(rb))]
        assert len(rb) == 8 and steps["observation"]["pixels"].shape == (8, 64, 64, 3)
        assert rb.final_observation(0)["pixels"].shape == (64, 64, 3)
        np.testing.assert_array_equal(steps["action"], np.full((8, 7), 0.25, np.float32))
