"""The replay buffer: ring or unbounded capacity, episodes, sampling, a folder that reopens."""

from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.copying import copy_episodes, merge_buffers
from trajstore.replay_buffer.verify import verify_buffer

__all__ = ["ReplayBuffer", "Episode", "RingState", "LeafStats", "copy_episodes", "merge_buffers", "verify_buffer"]
