"""PushT (gym-pusht): the step space with routing metadata, and a scripted pushing policy.

The env (``gym_pusht/PushT-v0``, ``obs_type="pixels_agent_pos"``) gives a 96x96 RGB
frame and the agent's (x, y) position in pixels of its 512x512 workspace; the action is
the (x, y) target of the agent. Its control rate is 10 Hz (the env's ``render_fps``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trajstore.spaces import BoxSpace, DictSpace

ENV_ID = "gym_pusht/PushT-v0"
FPS = 10  # gym-pusht's metadata["render_fps"]
WORKSPACE = 512.0  # side of the workspace, pixels


def make_env(max_episode_steps: int | None = None) -> Any:
    """A headless PushT env with pixel and agent-position observations."""
    import gymnasium as gym
    import gym_pusht  # noqa: F401  (registers the env)

    kwargs = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
    return gym.make(ENV_ID, obs_type="pixels_agent_pos", render_mode="rgb_array", **kwargs)


def make_recording_env(max_episode_steps: int | None = None) -> Any:
    """:func:`make_env` whose observations are :func:`to_observation` (``agent_pos`` as float32), so
    that what it records fits :func:`observation_space` exactly."""
    import gymnasium as gym

    env = make_env(max_episode_steps)
    space = gym.spaces.Dict({
        "pixels": env.observation_space["pixels"],
        "agent_pos": gym.spaces.Box(0.0, WORKSPACE, (2,), np.float32),
    })
    return gym.wrappers.TransformObservation(env, to_observation, space)


def observation_space(image_size: int = 96) -> DictSpace:
    """``{"pixels": (H, W, 3) uint8 camera (kind=image, HWC, 10 fps), "agent_pos": (2,) float32 pixels}``."""
    return DictSpace({
        "pixels": BoxSpace(0, 255, (image_size, image_size, 3), np.uint8,
                           metadata={"kind": "image", "layout": "HWC", "fps": FPS}),
        "agent_pos": BoxSpace(0, WORKSPACE, (2,), np.float32, metadata={"units": "px"}),
    })


def action_space() -> BoxSpace:
    """Target (x, y) of the agent, float32 pixels in [0, 512]."""
    return BoxSpace(0, WORKSPACE, (2,), np.float32, metadata={"units": "px"})


def to_observation(obs: dict) -> dict:
    return {"pixels": obs["pixels"], "agent_pos": np.asarray(obs["agent_pos"], np.float32)}


class ScriptedPushPolicy:
    """Walk behind the T block (on the far side from the goal), then push it toward the goal.

    Not an expert: it ignores the block's angle, and rarely succeeds (the demo records
    :class:`~trajstore.recording.pusht_planner.PlannedPushPolicy`, which does). It produces purposeful, smooth motion with
    contacts, which is what a storage benchmark and a read-back check need. Gaussian noise of
    ``noise_px`` pixels is added to each target.
    """

    def __init__(self, standoff_px: float = 45.0, max_step_px: float = 40.0, noise_px: float = 3.0):
        self.standoff = standoff_px
        self.max_step = max_step_px
        self.noise = noise_px

    def __call__(self, obs: dict, info: dict, rng: np.random.Generator) -> np.ndarray:
        agent = np.asarray(info["pos_agent"], np.float64)
        block = np.asarray(info["block_pose"][:2], np.float64)
        goal = np.asarray(info["goal_pose"][:2], np.float64)
        to_goal = goal - block
        dist = np.linalg.norm(to_goal)
        u = to_goal / dist if dist > 1e-6 else np.array([1.0, 0.0])
        behind = block - u * self.standoff
        if np.linalg.norm(agent - behind) > 0.4 * self.standoff and np.dot(agent - block, u) > -0.5 * self.standoff:
            # On the wrong side: go around the block, sideways first, so the walk does not push it back.
            side = np.array([-u[1], u[0]])
            side = side if np.dot(agent - block, side) >= 0 else -side
            target = block + side * self.standoff * 1.5 - u * self.standoff * 0.5
        elif np.linalg.norm(agent - behind) > 0.4 * self.standoff:
            target = behind
        else:
            target = block + u * self.standoff  # push through the block toward the goal
        step = target - agent
        norm = np.linalg.norm(step)
        if norm > self.max_step:
            step *= self.max_step / norm
        action = agent + step + rng.normal(0.0, self.noise, 2)
        return np.clip(action, 0.0, WORKSPACE).astype(np.float32)
