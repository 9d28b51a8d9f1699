"""Deprecated: :func:`run_episode` moved to :mod:`trajstore.recording.loop`, ``transition_space`` is
:func:`trajstore.recording.step.step_space`, the recorders are in :mod:`trajstore.recording.episodes`
(this alias goes away in a later release)."""

from typing import Any

from trajstore._deprecated import warn_moved
from trajstore.recording.loop import SeededPolicy as Policy
from trajstore.recording.loop import run_episode
from trajstore.recording.step import step_space as transition_space

__all__ = ["Policy", "run_episode", "transition_space", "RecordEpisodes", "RecordVectorEpisodes"]

warn_moved(__name__, "trajstore.recording")


def __getattr__(name: str) -> Any:
    # The recorders import gymnasium at import time; this module does not.
    if name in ("RecordEpisodes", "RecordVectorEpisodes"):
        from trajstore.recording import episodes

        return getattr(episodes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
