"""The main job on PushT: record expert demonstrations into a routed buffer, and check them read back.

:func:`record_pusht` records PushT episodes under the planning expert
(:class:`~trajstore.recording.pusht_planner.PlannedPushPolicy`, or a policy of the caller's) through
:class:`~trajstore.recording.episodes.RecordEpisodes` into a buffer laid out by
:func:`~trajstore.storages.dict_storage_kwargs_from_space` from :func:`pusht.observation_space`;
with ``reference`` it also saves every recorded step, uncompressed by any lossy codec, to a
``.npz`` file that :func:`compare_to_reference` compares against the buffer (in another process, from
the folder alone). Any other gymnasium env: :func:`~trajstore.recording.gymnasium.record_gymnasium`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from trajstore.recording.loop import RecordingInterrupted, RecordingSummary, SeededPolicy
from trajstore.recording.pusht_planner import PlannedPushPolicy
from trajstore.recording.reference import MAX_MEAN_ABS_ERROR, MIN_PSNR_DB, LeafCheck, compare_to_reference

__all__ = ["record_pusht", "compare_to_reference", "LeafCheck", "MIN_PSNR_DB", "MAX_MEAN_ABS_ERROR",
           "RecordingInterrupted", "RecordingSummary"]


def record_pusht(out: str | os.PathLike, episodes: int, *, camera: str | None = None, capacity: int | None = None,
                 seed: int = 0, max_steps: int | None = None, reference: str | os.PathLike | None = None,
                 resume: bool = False, progress: bool = True, policy: SeededPolicy | None = None) -> RecordingSummary:
    """Record ``episodes`` PushT episodes into the folder ``out`` (new, or existing with ``resume``).

    Each step is ``{"observation": {"pixels": (96, 96, 3) uint8, "agent_pos": (2,) float32 px},
    "action": (2,) float32 px, "reward": float32, "terminated", "truncated"}``; each episode ends
    with its final observation, ``data["seed"]`` and ``data["success"]`` (the env's ``is_success``:
    the block covers more than 95 % of the goal). The summary counts the successes.

    Args:
        camera: ``"jpeg"`` (default for a new folder), ``"png"`` or ``"video"`` (``VideoStorage`` at
            the env's 10 fps); see :func:`~trajstore.recording.gymnasium.camera_routing`.
        capacity: ring capacity in steps, or ``None`` (unbounded).
        seed: episode ``k`` of the folder (counting earlier runs, with ``resume``) resets the env with
            ``seed + k`` (kept as its ``data["seed"]``); the policy's ``rng`` is seeded with the first one.
        max_steps: cap on steps per episode (default: the env's 300).
        reference: also save the raw steps to this ``.npz`` for :func:`compare_to_reference` (not with ``resume``).
        resume: add to the PushT folder ``out``; ``camera``/``capacity`` must then be None or the
            folder's (see :func:`~trajstore.recording.gymnasium.open_buffer`).
        policy: ``policy(observation, info, rng) -> (2,) action`` (px), called with the env's
            observation (``{"pixels", "agent_pos"}``), its info (``pos_agent``, ``block_pose``,
            ``goal_pose``, ...) and a ``numpy.random.Generator``; None: a
            :class:`~trajstore.recording.pusht_planner.PlannedPushPolicy` (which succeeds in nearly
            every episode within the env's 300 steps).

    Returns:
        What was recorded; the buffer is closed.

    Raises:
        RecordingInterrupted: Ctrl-C; the open episode was discarded, the buffer closed (see
            :mod:`~trajstore.recording.loop`).
        StorageExistsError: ``out`` exists and is not empty (without ``resume``).
        ValueError: ``episodes`` < 1, an unknown ``camera``, ``reference`` with ``resume``, a
            folder that does not match (with ``resume``).
        ImportError: gymnasium / gym-pusht (or av, for video) are not installed: ``pip install trajstore[sim]``.
    """
    from trajstore.recording import pusht
    from trajstore.recording.gymnasium import check_run, record_run
    from trajstore.recording.step import step_space

    check_run(episodes, camera, reference, resume)
    space = step_space(pusht.observation_space(), pusht.action_space())
    chosen = PlannedPushPolicy() if policy is None else policy

    def make_policy(wrapper: Any, first: int) -> Any:
        rng = np.random.default_rng(seed + first)
        return lambda obs, info: chosen(obs, info, rng)

    # The observation's own 96x96 pixels are the camera: no rendered frame is added.
    return record_run(pusht.make_recording_env(max_steps), space, out, episodes=episodes, seed=seed,
                      capacity=capacity, camera=camera, render_key=None, resume=resume, reference=reference,
                      progress=progress, desc="recording PushT", make_policy=make_policy)
