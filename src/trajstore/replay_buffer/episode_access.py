"""The episode accessors of :class:`~trajstore.replay_buffer.ReplayBuffer`: ``episodes``, ``num_episodes``,
``episode(k)``, ``get_episode(k)`` and ``final_observation(k)``, positions ``k`` counted among the episodes
overlapping the held steps (oldest first, negative from the newest). :class:`EpisodeAccess` is a base of
the buffer; it holds no state and asks the buffer for its current view, its reads and its steps.
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.reads import BufferReads
from trajstore.replay_buffer.view import View


class EpisodeAccess(abc.ABC):
    """``episodes``, ``num_episodes``, ``episode``, ``get_episode``, ``final_observation``."""

    @abc.abstractmethod
    def _now(self) -> View:
        """The view for counts and episodes (raises if the buffer is closed)."""

    @abc.abstractmethod
    def _reads(self) -> BufferReads:
        """The buffer's reads (raises if the buffer is closed)."""

    @abc.abstractmethod
    def get_at(self, index: Any) -> Any:
        """Steps at logical ``index``."""

    @property
    def episodes(self) -> Sequence[Episode]:
        """Episodes overlapping the held steps, oldest first (the one being recorded last): a lazy read-only
        sequence (``len``, ``[k]``, slices, iteration, ``.ids`` as an int64 array, ``==`` a list)."""
        view = self._now()
        return view.episodes.episodes(view.first_step, view.ring.appended)

    @property
    def num_episodes(self) -> int:
        """Number of :attr:`episodes` (O(1))."""
        view = self._now()
        return view.episodes.count(view.ring.appended)

    def episode(self, k: int) -> Episode:
        """``episodes[k]`` in O(1); ``k`` is a position (negative from the newest), not an ``Episode.id``.

        Raises:
            IndexError: ``k`` is out of range (the message says how many episodes there are).
        """
        view = self._now()
        return view.episodes.episode_at(k, view.first_step, view.ring.appended)

    def get_episode(self, k: int) -> Any:
        """All held steps of :meth:`episode` ``(k)`` as a batch (leading axis = its length)."""
        ep = self.episode(k)
        return self.get_at(slice(ep.start, ep.stop))

    def final_observation(self, k: int) -> Any:
        """The final observation of :meth:`episode` ``(k)`` nested and typed like ``rb[i]["observation"]``
        (no batch axis; frames within the steps' codec bounds), or ``None`` if it has none.

        Raises:
            IndexError: ``k`` is out of range; StaleReadError (an ``IndexError``): a reader of a ring raced
                the writer reusing the slot of an episode that left meanwhile, index again.
        """
        ep = self.episode(k)
        n = self._now().episodes.final_number(ep.id)
        return None if n is None else self._reads().final_observation(ep.id, n)
