"""The ``policy`` key preset: cameras, the one observation vector and action get LeRobot's policy names."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")  # trajstore.interop.lerobot writes parquet

from trajstore.interop.lerobot._export_keys import policy_key_map
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace

CAM = {"kind": "image", "layout": "HWC", "fps": 10}


def cam() -> BoxSpace:
    return BoxSpace(0, 255, (8, 10, 3), np.uint8, metadata=CAM)


def vec(n: int = 3) -> BoxSpace:
    return BoxSpace(-1, 1, (n,), np.float32)


def test_pusht_like_space_gets_policy_names():
    space = DictSpace({
        "observation": DictSpace({"pixels": cam(), "agent_pos": vec(2), "gripper": BoxSpace(0, 1, (), np.float32),
                                  "wrist": DictSpace({"rgb": cam()})}),
        "action": vec(2),
        "reward": BoxSpace(-10, 10, (), np.float32),
        "terminated": BinarySpace(),
        "task": TextSpace(max_length=20),
    })
    assert policy_key_map(space) == {
        "observation/pixels": "observation.images.pixels",
        "observation/agent_pos": "observation.state",
        "observation/gripper": "observation.gripper",
        "observation/wrist/rgb": "observation.images.rgb",
        "action": "action",
        "reward": "next.reward",  # LeRobot's datasets' name
        "terminated": "terminated",
        "task": "task",
    }


def test_observation_itself_as_the_vector_and_no_state():
    assert policy_key_map(DictSpace({"observation": vec(4), "action": vec(1)})) == {
        "observation": "observation.state", "action": "action"}
    assert policy_key_map(DictSpace({"image": cam(), "act": vec()})) == {
        "image": "observation.images.image", "act": "act"}


def test_two_vectors_are_ambiguous_and_the_message_says_how_to_choose():
    space = DictSpace({"observation": DictSpace({"joint_pos": vec(7), "ee_pos": vec(3)}), "action": vec(7)})
    with pytest.raises(ValueError) as info:
        policy_key_map(space)
    text = str(info.value)
    assert "'observation/joint_pos', 'observation/ee_pos'" in text
    assert "--key LEAF=observation.state" in text and "--exclude" in text
    assert policy_key_map(space, explicit={"observation/ee_pos": "observation.state"}) == {
        "observation/joint_pos": "observation.joint_pos", "observation/ee_pos": "observation.state",
        "action": "action"}
    assert policy_key_map(space, exclude=["observation/ee_pos"]) == {
        "observation/joint_pos": "observation.state", "action": "action"}
    # An explicit name for one vector leaves the other as the one candidate.
    assert policy_key_map(space, explicit={"observation/ee_pos": "observation.ee"}) == {
        "observation/joint_pos": "observation.state", "observation/ee_pos": "observation.ee", "action": "action"}


def test_cameras_with_one_last_name_clash():
    space = DictSpace({"left": DictSpace({"rgb": cam()}), "right": DictSpace({"rgb": cam()})})
    with pytest.raises(ValueError, match="leaves 'left/rgb' and 'right/rgb' both become LeRobot feature "
                                         "'observation.images.rgb'"):
        policy_key_map(space)
    assert policy_key_map(space, explicit={"right/rgb": "observation.images.right"}) == {
        "left/rgb": "observation.images.rgb", "right/rgb": "observation.images.right"}


def test_a_default_name_that_clashes_with_a_preset_name():
    space = DictSpace({"observation": DictSpace({"pos": vec()}), "observation.state": BoxSpace(0, 1, (), np.float32)})
    with pytest.raises(ValueError, match="both become LeRobot feature 'observation.state'"):
        policy_key_map(space)
