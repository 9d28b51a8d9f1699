"""The README's Python examples run as written (in a fresh folder)."""

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("ray")  # the Ray Data example (CI installs the `ray` extra)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    rb = namespace["rb"]
    assert (namespace["fleet_len"], namespace["fleet_episodes"]) == (120, 6)  # Fleets: the retry of job 4 dropped
    assert namespace["job4_where"] == ("robot1", 1) and [e.duplicate for e in namespace["retried"]] == [True, False]
    assert namespace["fleet_windows"]["action"].shape == (32, 8, 6)
    assert np.isclose(namespace["fleet_stats"].mean[0], np.mean([j / 10 for j in range(6)]), atol=1e-6)
    assert namespace["server"].url.startswith("http://127.0.0.1:")  # trajstore view's Python call
    assert len(rb) == 32 and rb.episodes[0].stop == 32
    assert namespace["ep"].data == {"task": "push the T", "success": True} and namespace["ep"].has_final_observation
    assert namespace["final"]["pixels"].shape == (96, 96, 3) and namespace["final"]["pixels"].dtype == "uint8"
    assert namespace["windows"]["action"].shape == (64, 16, 2)
    assert namespace["result"].frames == 32 and (tmp_path / "lerobot/rb/meta/info.json").exists()
    # the LeRobot round trip keeps episode data and scalar shapes
    assert namespace["back_data"] == {"task": "push the T", "success": True} and namespace["back_reward"] == ()
    assert namespace["demo"].episodes == 1 and namespace["demo"].steps == 32  # robomimic round trip, mask train
    chunks, is_pad = namespace["chunks"], namespace["is_pad"]
    assert chunks["action"].shape == (64, 16, 2) and chunks["observation"]["pixels"].shape == (64, 2, 96, 96, 3)
    assert chunks["reward"].shape == (64,) and is_pad["action"].shape == (64, 16) and is_pad["action"].dtype == bool
    robot = namespace["ReplayBuffer"].load_from(tmp_path / "cache" / "robot")
    assert len(robot) == 30 and robot.episode(0).data == {"task": "pick up the cube", "success": True,
                                                          "operator": "ana"}
    assert robot.final_observation(0)["joints"].shape == (6,)
    assert namespace["first"].data == {"seed": 0, "task": "balance"} and namespace["last_state"].shape == (4,)
    span, frames, step = namespace["span"], namespace["frames"], namespace["step"]  # Sensors at their own rates
    assert span.count == len(frames) >= 5 and frames.shape[1:] == (120, 160, 3) and frames.dtype == np.uint8
    assert span.last_ns - span.first_ns >= 0.3e9 and np.allclose(step["joints"], 0.1)
    assert step["wrist"].shape == (120, 160, 3) and step["timestamp"].dtype == np.int64
    assert namespace["obs_windows"]["joints"].shape == (8, 10, 7) and namespace["obs_pad"]["joints"].shape == (8, 10)
    assert namespace["obs_windows"]["wrist"].shape == (8, 2, 120, 160, 3) and len(namespace["grid"]) >= 40
    remote = namespace["remote_rb"]  # pushed to fsspec's memory:// file system and read back from there
    assert len(namespace["remote_batch"]["action"]) == 256 and namespace["remote_chunks"]["action"].shape[:2] == (64, 16)
    assert remote.episodes[0].data == {"task": "push the T", "success": True}
    batch = next(iter(namespace["loader"]))
    assert tuple(batch["observation"]["pixels"].shape) == (32, 96, 96, 3)
    assert namespace["head"]["observation/pixels"].shape == (4, 96, 96, 3)
    assert namespace["step_rows"].count() == 32 and namespace["window_rows"].count() == 32
    rows = namespace["rows"]
    assert rows["observation/pixels"].shape == (16, 2, 96, 96, 3) and rows["action"].shape == (16, 16, 2)
    assert rows["is_pad/observation"].shape == (16, 2) and rows["is_pad/action"].dtype == bool
