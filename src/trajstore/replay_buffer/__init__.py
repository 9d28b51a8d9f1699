"""The replay buffer: ring or unbounded capacity, episodes, sampling, a folder that reopens."""

from typing import Any

from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.ring import RingState

__all__ = ["ReplayBuffer", "Episode", "RingState", "LeafStats"]

#: Names that moved to :mod:`trajstore.ops`, still importable from here for one release.
_MOVED = {"copy_episodes": "trajstore.ops.copy", "merge_buffers": "trajstore.ops.copy",
          "verify_buffer": "trajstore.ops.verify"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        from trajstore._deprecated import warn_moved

        warn_moved(f"{__name__}.{name}", f"{_MOVED[name]}.{name}")
        value = globals()[name] = getattr(importlib.import_module(_MOVED[name]), name)  # warned once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
