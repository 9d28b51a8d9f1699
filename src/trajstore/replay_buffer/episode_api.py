"""The episode half of :class:`~trajstore.replay_buffer.ReplayBuffer`'s API: ending an episode
(with its JSON data and final observation), discarding the open one, and reading episodes.

:class:`EpisodeMethods` is mixed into ``ReplayBuffer``; it uses the buffer's ring state, episode
table, storage, final observation storage and commit (``flush``, ``_write_meta``), and holds no
state of its own. The bookkeeping itself is in :mod:`~trajstore.replay_buffer.episodes`,
:mod:`~trajstore.replay_buffer.episode_data` and :mod:`~trajstore.replay_buffer.final_observations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajstore.errors import StaleReadError
from trajstore.replay_buffer.episode_data import episode_data
from trajstore.replay_buffer.episodes import Episode

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer


class EpisodeMethods:
    """Episodes of a :class:`~trajstore.replay_buffer.ReplayBuffer` (see the module docstring)."""

    def end_episode(self: "ReplayBuffer", final_observation: Any = None, *, interrupted: bool = False,
                    **data: Any) -> None:
        """Mark the last appended step as the end of the current episode, then :meth:`flush`:
        its steps, data and final observation are committed together (data first, then metadata).

        Steps appended afterwards start a new episode. Calling it twice in a row does nothing more.

        Args:
            final_observation: the observation after the last step (what the environment returned
                to the last action), a value of the step space's ``observation`` subspace; stored in
                ``final_observations/`` with the same routing (camera frames compressed) and read
                back with :meth:`final_observation`. A ring keeps those of its held episodes only.
            interrupted: the episode was cut short before its end (its env was reset or closed, the
                operator stopped it): kept, and flagged ``Episode.interrupted`` (``done`` False), as
                a fragment left by a crashed writer is.
            **data: JSON values kept with the episode in the episode log (``task="push"``,
                ``success=True``, ``seed=3``, lists and dicts of them); read back as
                ``episode(k).data``. NumPy scalars become Python values and tuples lists.

        Raises:
            InvalidValueError: a value of ``data`` is not JSON (an array, NaN, an object, ...; names
                the key), or ``final_observation`` does not fit the observation space (names the leaf).
            ValueError: ``final_observation`` was given but the step space has no ``observation`` key;
                or data or a final observation was given but no step was appended since the last
                episode ended.
            ReadOnlyError: the buffer was opened read-only.
            Nothing is written when one of these is raised.
        """
        self._check_writable()
        checked = episode_data(data)
        final = (None if final_observation is None
                 else self._finals.validated(final_observation, check_bounds=self.check_bounds))
        if (data or final is not None) and not self._episodes.is_open(self._ring.appended):
            given = sorted(data) + (["final_observation"] if final is not None else [])
            raise ValueError(f"end_episode got {given} but there is no episode to end: no step was appended "
                             "since the last end_episode")
        self._write_staged()  # a failed background write surfaces before the episode is closed
        if final is not None:
            self._finals.write(self._episodes.final_count, final, layout_of=self.storage, lock=self._lock)
        self._episodes.end_episode(self._ring.appended, data=checked, with_final=final is not None,
                                   interrupted=bool(interrupted))
        self.flush()

    def discard_episode(self: "ReplayBuffer") -> int:
        """Drop the steps of the episode being recorded; returns how many (0 when none is open).

        The next appends reuse their step numbers and slots: an unbounded buffer's length goes back,
        a ring writes the freed slots next (steps it overwrote to make room for them stay lost). The
        discarded episode's id goes to the next episode. Steps before it are untouched.

        Its steps that were already flushed were visible to readers. The discard is committed at
        once (no data needs flushing: the new view names only steps committed before), so when it
        returns no reader that refreshes sees them, and a crash cannot bring them back as an
        interrupted episode. A reader that still holds a view with them and reads them after the
        writer reused their slots gets :class:`~trajstore.errors.StaleReadError` (index again), as
        for a ring overwrite.

        Raises:
            ReadOnlyError: the buffer was opened read-only.
        """
        self._check_writable()
        self._write_staged()  # staged steps of the episode reach their slots first: nothing is written after the rewind
        n = self._episodes.discard_open(self._ring.appended)
        if n:
            self._ring = self._planned = self._written = self._ring.rewind(n)
            self._stats.on_rewind(self._ring)
            self._write_meta()
        return n

    def _end_interrupted_episode(self: "ReplayBuffer") -> None:
        """Close (and commit) the episode a dead writer left open, as interrupted."""
        if self._episodes.end_episode(self._ring.appended, interrupted=True):
            self._episodes.drop_before(self._ring.first_step)
            self._write_meta()

    # -- reading ---------------------------------------------------------------------------
    @property
    def episodes(self: "ReplayBuffer") -> list[Episode]:
        """Episodes overlapping the held steps, oldest first (the one being recorded last)."""
        self._check_open()
        return self._episodes.episodes(self._ring.first_step, self._ring.appended)

    @property
    def num_episodes(self: "ReplayBuffer") -> int:
        """Number of :attr:`episodes` (O(1))."""
        self._check_open()
        return self._episodes.count(self._ring.appended)

    def episode(self: "ReplayBuffer", k: int) -> Episode:
        """``episodes[k]`` in O(1); ``k`` is a position (negative from the newest), not an ``Episode.id``.

        Raises:
            IndexError: ``k`` is out of range (the message says how many episodes there are).
        """
        self._check_open()
        return self._episodes.episode_at(k, self._ring.first_step, self._ring.appended)

    def get_episode(self: "ReplayBuffer", k: int) -> Any:
        """All held steps of :meth:`episode` ``(k)`` as a batch (leading axis = its length)."""
        ep = self.episode(k)
        return self.get_at(slice(ep.start, ep.stop))

    @property
    def final_observation_storage(self: "ReplayBuffer") -> Any:
        """The :class:`~trajstore.storages.SpaceStorage` holding the episodes' final observations (laid
        out like the steps' observation leaves), or ``None`` before the first one is kept. For
        describing a folder (types, options, bytes); read final observations with :meth:`final_observation`."""
        return self._finals.storage

    def final_observation(self: "ReplayBuffer", k: int) -> Any:
        """The final observation of :meth:`episode` ``(k)``, or ``None`` if it has none.

        Nested and typed like ``rb[i]["observation"]`` (no batch axis; e.g. a ``(H, W, 3)`` uint8
        frame, read back within the same codec bounds as the steps' frames).

        Raises:
            IndexError: ``k`` is out of range.
            StaleReadError: (an ``IndexError``) a reader of a ring raced the writer reusing the slot
                of an episode that left the buffer meanwhile; index again.
        """
        ep = self.episode(k)
        n = self._episodes.final_number(ep.id)
        if n is None:
            return None
        value = self._finals.read(n)
        if self._reads_race_a_writer() and self.refresh() and self._episodes.final_number(ep.id) != n:
            raise StaleReadError(f"episode {ep.id} left {self.cache_path} while its final observation was read: "
                                 "the view is refreshed, index again")
        return value
