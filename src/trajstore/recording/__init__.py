"""Record gymnasium envs into a :class:`~trajstore.replay_buffer.ReplayBuffer`.

- :mod:`~trajstore.recording.episodes`: :class:`RecordEpisodes`, a wrapper that records every step
  and episode of an env (:mod:`~trajstore.recording.vector`: :class:`RecordVectorEpisodes` for a
  vector env); :func:`recorded_space`, the step space an env records.
- :mod:`~trajstore.recording.step`: :func:`step_space`, the one builder of a recorded step's space,
  and what the wrappers share.
- :mod:`~trajstore.recording.gymnasium`: :func:`record_gymnasium`, ``trajstore record --env gymnasium:ID``.
- :mod:`~trajstore.recording.policy`: what a policy is called with, factories ``make_policy(env)``,
  and :func:`~trajstore.recording.policy.load_policy` (``--policy module:function``).
- :mod:`~trajstore.recording.pusht` (the PushT task and its scripted policy),
  :mod:`~trajstore.recording.pusht_planner` (:class:`PlannedPushPolicy`, the demo's expert) and
  :mod:`~trajstore.recording.pusht_recording` (:func:`record_pusht`, ``trajstore record --env pusht``).
- :mod:`~trajstore.recording.reference`: raw steps saved beside a recording, and
  :func:`compare_to_reference`, the check of a buffer against them.
- :mod:`~trajstore.recording.loop`: the episode loop (progress, Ctrl-C).

gymnasium is imported when a recorder is first used, not by this package.
"""

from typing import Any

from trajstore.recording.gymnasium import EnvSetupError, camera_routing, record_gymnasium
from trajstore.recording.loop import RecordingInterrupted, RecordingSummary, run_episode, run_episodes
from trajstore.recording.pusht_recording import record_pusht
from trajstore.recording.reference import LeafCheck, compare_to_reference
from trajstore.recording.step import info_spaces, step_space

__all__ = ["RecordEpisodes", "RecordVectorEpisodes", "recorded_space", "step_space", "info_spaces",
           "record_gymnasium", "record_pusht", "camera_routing", "EnvSetupError", "compare_to_reference",
           "LeafCheck", "RecordingSummary", "RecordingInterrupted", "run_episodes", "run_episode"]


def __getattr__(name: str) -> Any:
    # The recorders import gymnasium at import time; this package does not.
    if name in ("RecordEpisodes", "RecordVectorEpisodes", "recorded_space"):
        from trajstore.recording import episodes

        return getattr(episodes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
