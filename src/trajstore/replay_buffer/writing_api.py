"""The writing half of the buffer's public API: ``append``, ``extend``, ``set_at``, ``end_episode`` (with
exactly-once ``episode_key``), ``has_episode_key``, ``share_episode_keys`` and ``discard_episode``.
:class:`WritingAPI` is a base of :class:`~trajstore.replay_buffer.ReplayBuffer`: it validates each call
once (the edge) and hands it to the buffer's writer (:meth:`WritingAPI._writable`). It holds no state of
its own; the buffer's final observations and episode keys are the buffer's parts.
"""

from __future__ import annotations

import abc
from typing import Any

from trajstore.replay_buffer.episode_data import episode_data, flag
from trajstore.replay_buffer.episode_keys import EpisodeEnd, EpisodeKeys, KeyGuard, checked_key, end_episode_once
from trajstore.spaces import Space
from trajstore.storages._selection import select
from trajstore.storages.base import validated_batch, validated_for, validated_step


class WritingAPI(abc.ABC):
    """``append``, ``extend``, ``set_at``, ``end_episode``, ``has_episode_key``, ``share_episode_keys``,
    ``discard_episode``."""

    space: Space
    check_bounds: bool
    _finals: Any  # the buffer's FinalObservations (validates a final observation)
    _keys: EpisodeKeys  # the keys of the buffer's episodes
    read_only: bool
    episodes: Any  # the held episodes (EpisodeAccess)

    @abc.abstractmethod
    def _writable(self) -> Any:
        """The buffer's writer (raises ReadOnlyError for a reader, or if closed)."""

    def append(self, step: Any) -> None:
        """Append one step (a value of ``space``): validated, copied into a staging block and written
        behind by a background thread; :meth:`flush` or :meth:`end_episode` make it durable. Waits while
        staging is full (``write_stats.blocked_seconds``).

        Raises:
            InvalidValueError: names the leaf and what was expected (outside its bounds or NaN: the first
                offending index and value, unless ``check_bounds=False``); nothing is staged.
            ReadOnlyError: the buffer was opened read-only.
            OSError, ...: an earlier background write failed and writing its held steps again still
                fails (see :meth:`flush`); this step is not appended.
        """
        writer = self._writable()
        writer.extend(validated_step(self.space, step, check_bounds=self.check_bounds), 1)

    def extend(self, batch: Any) -> None:
        """Append ``N`` steps: every leaf has a leading axis ``N``.

        The whole batch is validated first; on a bad leaf nothing is written. A large batch may wait for the
        background writer (at most ``MAX_PENDING_BYTES`` of steps wait to be written, plus this batch); an
        interrupt (Ctrl-C) during that wait comes after the whole batch is appended.

        Raises:
            InvalidValueError: names the leaf and what was expected.
            ReadOnlyError: the buffer was opened read-only.
            OSError, ...: as :meth:`append`; nothing of the batch is appended.
        """
        writer = self._writable()
        writer.extend(*validated_batch(self.space, batch, check_bounds=self.check_bounds))

    def set_at(self, index: Any, value: Any) -> None:
        """Overwrite held steps at logical ``index`` (same index kinds as reading); the statistics are then
        recomputed from the data. Not crash-atomic: a crash before the next flush can leave some leaves of
        these (committed) steps new and others old. Prefer appending corrected steps.

        Raises:
            InvalidValueError: ``value`` does not fit the space or the index size; nothing is written.
        """
        writer = self._writable()
        sel = select(index, len(self))
        writer.set_at(sel, validated_for(self.space, value, sel, check_bounds=self.check_bounds))

    def end_episode(self, final_observation: Any = None, *, interrupted: bool = False, flush: bool = True,
                    episode_key: str | None = None, **data: Any) -> EpisodeEnd:
        """End the current episode at the last appended step and :meth:`flush`: its steps, data and final
        observation are committed together (data first, then metadata). Steps appended afterwards start
        a new episode; calling it twice in a row does nothing more.

        Args:
            final_observation: the observation after the last step (a value of the ``observation``
                subspace), stored in ``final_observations/`` with the same routing; read back with
                :meth:`final_observation`. A ring keeps those of its held episodes only.
            interrupted: the episode was cut short (env reset or closed, operator stop): kept and flagged
                ``Episode.interrupted`` (``done`` False), as a fragment left by a crashed writer is.
            flush: ``False`` closes the episode without committing it: the next :meth:`flush` (or a later
                ``end_episode``, or :meth:`close`) commits it with its steps (a bulk import of many episodes).
            episode_key: a string naming this episode across crashes and retries (``"robot3/2026-12-01/7"``):
                kept as ``data["episode_key"]``; a key already committed in this buffer (or in its sharded
                dataset) discards the appended steps instead and returns ``duplicate=True``
                (:mod:`~trajstore.replay_buffer.episode_keys`). See :meth:`has_episode_key`. Unbounded
                buffers only. In a shard of a dataset a keyed episode is committed at once (``flush`` is
                taken as ``True``): the key is checked and committed under the dataset's lock.
            **data: JSON values kept in the episode log (``task="push"``, ``success=True``, ``seed=3``),
                read back as ``episode(k).data``; NumPy scalars become Python values, tuples lists.

        Returns:
            an :class:`~trajstore.replay_buffer.episode_keys.EpisodeEnd`: the episode's id (``None`` when
            nothing was committed), its key, whether it was a duplicate, its steps.

        Raises:
            InvalidValueError: a value of ``data`` is not JSON (names the key), ``final_observation``
                does not fit the observation space (names the leaf), or ``interrupted`` or ``flush`` is not a
                ``bool`` (or NumPy bool; names the argument).
            ValueError: ``final_observation`` but no ``observation`` key in the space; data or a final
                observation but no step appended since the last episode ended; ``episode_key`` in a ring.
            ReadOnlyError: the buffer was opened read-only. Nothing is written when one of these is raised.
            OSError, ...: a write or the commit failed (a full disk): the episode stays open, its steps held
                (see :meth:`flush`); calling ``end_episode`` again commits it once the cause is gone.
        """
        writer = self._writable()
        interrupted, flush = flag("end_episode: interrupted", interrupted), flag("end_episode: flush", flush)
        checked = episode_data(data)
        key = checked_key(episode_key)
        final = (None if final_observation is None
                 else self._finals.validated(final_observation, check_bounds=self.check_bounds))
        return end_episode_once(writer, self._keys, self.episodes, key, final, checked, interrupted, flush)

    def has_episode_key(self, key: str) -> bool:
        """Whether an episode ended with ``episode_key=key`` is held (committed, or ended with ``flush=False``),
        or, for a shard writer of a dataset, committed in another shard as seen now (a retry's
        ``end_episode`` checks again under the dataset's lock)."""
        key = checked_key(key)
        if self.read_only:  # a reader's episodes change with refresh: scanned each time, O(episodes)
            return key in EpisodeKeys().known(self.episodes)
        return self._keys.has(key, self.episodes)

    def share_episode_keys(self, guard: KeyGuard | None) -> None:
        """Check ``end_episode(episode_key=)`` against ``guard`` too, and commit under its lock (a sharded
        dataset's writers share one: :mod:`trajstore.shards`)."""
        self._writable()
        self._keys.share(guard)

    def discard_episode(self) -> int:
        """Drop the steps of the episode being recorded; returns how many (0 when none is open).

        The next appends reuse their step numbers and slots (an unbounded buffer's length goes back; a
        ring's steps overwritten to make room stay lost); the episode's id goes to the next episode.
        Committed at once: no reader that refreshes sees its flushed steps again, a crash cannot bring
        them back, and a reader that reads them after their slots were reused gets
        :class:`~trajstore.errors.StaleReadError` (index again).

        Raises:
            ReadOnlyError: the buffer was opened read-only.
        """
        return self._writable().discard_episode()
