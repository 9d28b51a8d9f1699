"""Record gymnasium episodes into a :class:`~trajstore.replay_buffer.ReplayBuffer`.

A recorded step is ``{"observation": o_t, "action": a_t, "reward": r_{t+1},
"terminated": ..., "truncated": ...}``: the observation the policy saw, the action it took,
and what the environment answered to that action.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space

#: ``policy(observation, info, rng) -> action``
Policy = Callable[[Any, dict, np.random.Generator], Any]


def transition_space(observation_space: Space, action_space: Space) -> DictSpace:
    """The space of one recorded step: observation, action, reward (float32), terminated, truncated."""
    return DictSpace({
        "observation": observation_space,
        "action": action_space,
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
        "terminated": BinarySpace(),
        "truncated": BinarySpace(),
    })


def run_episode(env: Any, policy: Policy, *, seed: int, rng: np.random.Generator,
                observation: Callable[[Any], Any] = lambda o: o, max_steps: int | None = None) -> Iterator[dict]:
    """Yield the recorded steps of one episode of ``env`` (reset with ``seed``) under ``policy``.

    ``observation`` maps the env's observation to the recorded one (e.g. dtype casts).
    The episode ends when the env terminates or truncates, or after ``max_steps`` steps
    (the last step is then marked truncated).
    """
    obs, info = env.reset(seed=seed)
    t = 0
    while True:
        action = policy(obs, info, rng)
        next_obs, reward, terminated, truncated, info = env.step(action)
        t += 1
        truncated = bool(truncated) or (max_steps is not None and t >= max_steps and not terminated)
        yield {"observation": observation(obs), "action": action, "reward": np.float32(reward),
               "terminated": bool(terminated), "truncated": truncated}
        if terminated or truncated:
            return
        obs = next_obs


def __getattr__(name: str) -> Any:
    # The recorders import gymnasium at import time; this module does not.
    if name in ("RecordEpisodes", "RecordVectorEpisodes"):
        from trajstore.integrations import record_episodes

        return getattr(record_episodes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
