"""The committed fixture's value rules (tests/fixtures/robomimic_hdf5/README.md), a writer of small
robomimic-layout files for the hostile and ordering tests, and a small recorded buffer for the exports."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

FIXTURE = Path(__file__).parent.parent / "fixtures" / "robomimic_hdf5" / "robomimic_sim.hdf5"
LENGTHS = (10, 16, 13)
MASKS = {"train": ["demo_0", "demo_1"], "valid": ["demo_2"]}
IMAGE_KEYS = ("agentview_image", "robot0_eye_in_hand_image")
LOW_DIM_KEYS = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos", "object")
CAM = {"kind": "image", "layout": "HWC", "fps": 10}


def obs_rule(e: int, t: int) -> dict[str, np.ndarray]:
    """The README's observation of demo ``e`` at sample ``t`` (``t = N`` is next_obs of the last sample)."""
    rows = np.arange(84)
    agent = np.zeros((84, 84, 3), np.uint8)
    agent[..., 0] = (e * 40 + t) % 256
    agent[..., 1] = (t * 5) % 256
    agent[..., 2] = 3 * rows[:, None]
    hand = np.zeros((84, 84, 3), np.uint8)
    hand[..., 0] = 255 - (e * 40 + t) % 256
    hand[..., 1] = 3 * rows[None, :]
    hand[..., 2] = 50 * e
    return {"agentview_image": agent, "robot0_eye_in_hand_image": hand,
            "robot0_eef_pos": np.array([e, t, 1000 * e + t], float), "robot0_eef_quat": np.array([0, 0, 0, 1.0]),
            "robot0_gripper_qpos": np.array([t / 64, -t / 64]),
            "object": np.array([e, t, 1000 * e + t, 0.5, 0.25, 0.125, 0, 0, 0, 1], float)}


def action_rule(e: int, t: int) -> np.ndarray:
    n = LENGTHS[e]
    return np.array([t / 64, -t / 64, e / 8, 0.5, -0.5, 0.25, 1.0 if t < n // 2 else -1.0])


def state_rule(e: int, t: int) -> np.ndarray:
    return np.array([e, t, 1000 * e + t, t / 4, 0, 0, 0, 0, 0, 0], float)


def write_small(path: Path, lengths=(3, 2), *, names=None, next_obs=True, masks=None, env_args=None,
                extra=None) -> Path:
    """A small valid file: demos ``names`` (default demo_0, demo_1, ...) of ``lengths`` samples with
    ``obs/pos`` float64 (N, 2) = [d, t], ``obs/cam_image`` uint8 (N, 4, 4, 3) = 10 d + t, actions
    float32 (N, 2) = [t, -d], rewards (N,) = t, dones int64, states (N, 3); ``extra(group, d, n)`` may add more."""
    names = names or [f"demo_{i}" for i in range(len(lengths))]
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for name, n in zip(names, lengths):
            d = int(name[5:])
            g = data.create_group(name)
            t = np.arange(n)
            for prefix, shift in (("obs", 0), ("next_obs", 1)):
                if prefix == "next_obs" and not next_obs:
                    continue
                g[f"{prefix}/pos"] = np.stack([np.full(n, d), t + shift], 1).astype(np.float64)
                g[f"{prefix}/cam_image"] = np.broadcast_to((10 * d + t + shift).astype(np.uint8)[:, None, None, None],
                                                           (n, 4, 4, 3)).copy()
            g["actions"] = np.stack([t, np.full(n, -d)], 1).astype(np.float32)
            g["rewards"] = t.astype(np.float64)
            g["dones"] = (t == n - 1).astype(np.int64)
            g["states"] = np.stack([np.full(n, d), t, t * 2], 1).astype(np.float64)
            g.attrs["num_samples"] = n
            if extra is not None:
                extra(g, d, n)
        data.attrs["total"] = sum(lengths)
        data.attrs["env_args"] = json.dumps(env_args or {"env_name": "Lift", "type": 1,
                                                         "env_kwargs": {"control_freq": 20}}, indent=4)
        for name, held in (masks or {}).items():
            f[f"mask/{name}"] = np.array(held, dtype="S")
    return path


def recorded(path, lengths=(4, 3, 5), finals=None, text=False, capacity=None, **data):
    """A small buffer as a recorder makes it: observation {pixels (8, 8, 3) uint8 = 10 e + i, agent_pos
    [e, i]}, action [i / 8, -e / 8], reward i, terminated at the last step; episode e ends with a final
    observation (step n) where ``finals[e]`` (default: all but episode 1), data ``success = e != 1`` and
    ``data``. ``capacity``: a ring of that many steps."""
    finals = finals if finals is not None else [e != 1 for e in range(len(lengths))]
    leaves = {"observation": DictSpace({"pixels": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata=CAM),
                                        "agent_pos": BoxSpace(-1e3, 1e3, (2,), np.float32)}),
              "action": BoxSpace(-1, 1, (2,), np.float32), "reward": BoxSpace(-10, 10, (), np.float32),
              "terminated": BinarySpace()}
    if text:
        leaves["note"] = TextSpace(max_length=8)
    space = DictSpace(leaves)
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=capacity,
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))

    def obs(e, i):
        return {"pixels": np.full((8, 8, 3), 10 * e + i, np.uint8), "agent_pos": np.array([e, i], np.float32)}
    for e, (n, final) in enumerate(zip(lengths, finals)):
        for i in range(n):
            step = {"observation": obs(e, i), "action": np.array([i / 8, -e / 8], np.float32),
                    "reward": np.float32(i), "terminated": i == n - 1}
            if text:
                step["note"] = "x"
            rb.append(step)
        rb.end_episode(obs(e, n) if final else None, success=e != 1, **data)
    return rb
