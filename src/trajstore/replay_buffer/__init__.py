"""The replay buffer: ring or unbounded capacity, episodes, sampling, a folder that reopens."""

from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.ring import RingState

__all__ = ["ReplayBuffer", "Episode", "RingState", "LeafStats"]
