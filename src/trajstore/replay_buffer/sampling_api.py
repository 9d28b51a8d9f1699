"""Uniform step sampling and episode selection: :class:`SamplingMethods`, mixed into
:class:`~trajstore.replay_buffer.ReplayBuffer`.

``episodes=`` (accepted by ``sample``, ``sample_windows``, ``sample_transitions`` and the torch
dataset) is a collection of episode ids (``Episode.id``, as :meth:`SamplingMethods.select_episodes`
and :meth:`SamplingMethods.split_episodes` return). It is checked once here and becomes the
sorted id array the episode table builds its anchor index from (cached per selection), so a
draw still costs ``O(B log E)``; building the index for a new selection costs ``O(E)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.episodes import Episode

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer


class SamplingMethods:
    """``sample``, ``select_episodes``, ``split_episodes`` (no state of their own)."""

    def sample(self: "ReplayBuffer", batch_size: int, *, rng: np.random.Generator | None = None,
               return_indices: bool = False, episodes: Iterable[int] | None = None) -> Any:
        """``batch_size`` steps drawn uniformly with replacement, as a batch (leading axis ``B``).

        Args:
            batch_size: ``B`` >= 1.
            rng: the generator of the draw (default: a fresh ``np.random.default_rng()``).
            return_indices: also return the logical indices drawn, int64 ``(B,)`` (0 = oldest held step,
                valid for the view the batch was read from).
            episodes: episode ids (``Episode.id``): draw only among their held steps.

        Returns:
            the batch, or ``(batch, indices)`` with ``return_indices=True``.

        A draw that raced the writer reusing slots (:class:`StaleReadError`) is drawn again; any other
        read error is raised as it is.

        Raises:
            ValueError: the buffer (or the selected episodes) holds no step, ``batch_size`` < 1, or
                ``episodes`` names an id that is not held.
            FormatError: a payload file is damaged (e.g. a video segment holds fewer frames than its
                index says); names the file and the frame.
        """
        rng = rng or np.random.default_rng()
        selected = self._selected_ids(episodes)
        if selected is None:
            draw = lambda: samplers.uniform_steps(len(self), batch_size, rng)  # noqa: E731
        else:
            draw = lambda: self._draw_anchors(0, 0, batch_size, rng, selected)[0]  # noqa: E731
        if not return_indices:
            return self._draw_and_read(draw)
        return self._draw_and_read(draw, lambda idx: (self.get_at(idx), idx))

    def select_episodes(self: "ReplayBuffer", predicate: Callable[[Episode], bool]) -> list[int]:
        """Ids of the held episodes (the open one included) for which ``predicate(episode)`` is true,
        oldest first; e.g. ``rb.select_episodes(lambda e: e.data.get("success") and not e.interrupted)``.

        ``predicate`` gets each :class:`~trajstore.replay_buffer.episodes.Episode` (``.data``,
        ``.interrupted``, ``.overwritten``, ``len(e)``); costs one call per episode.
        """
        return [e.id for e in self.episodes if predicate(e)]

    def split_episodes(self: "ReplayBuffer", val_fraction: float, seed: int = 0,
                       episodes: Iterable[int] | None = None) -> tuple[list[int], list[int]]:
        """Split episode ids into ``(train_ids, val_ids)``, by episode (no episode is in both), each sorted.

        ``round(val_fraction * n)`` of the ``n`` ids (default: every held episode, the open one
        included; or the ids of ``episodes``) go to validation, chosen by a permutation from
        ``np.random.default_rng(seed)``: the same seed and ids give the same split.

        Raises:
            ValueError: ``val_fraction`` not in ``[0, 1]``.
        """
        if not 0.0 <= float(val_fraction) <= 1.0:
            raise ValueError(f"val_fraction must lie in [0, 1], got {val_fraction!r}")
        ids = np.asarray(sorted({int(i) for i in episodes}) if episodes is not None
                         else [e.id for e in self.episodes], np.int64)
        n_val = int(round(float(val_fraction) * len(ids)))
        order = np.random.default_rng(seed).permutation(len(ids))
        val = np.sort(ids[order[:n_val]])
        train = np.sort(ids[order[n_val:]])
        return train.tolist(), val.tolist()

    def checked_episode_ids(self: "ReplayBuffer", episodes: Iterable[int] | None) -> tuple[int, ...] | None:
        """``episodes`` (ids, ``Episode.id``) checked against the held episodes once: sorted unique ids,
        or ``None`` for ``None`` (every episode). What ``episodes=`` of the samplers accepts.

        Raises:
            TypeError: not a collection of ints.
            ValueError: an id that is not a held episode (the message lists a few).
        """
        selected = self._selected_ids(episodes)
        return None if selected is None else tuple(int(i) for i in selected)

    # -- shared by the samplers ------------------------------------------------------------
    def _selected_ids(self: "ReplayBuffer", episodes: Iterable[int] | None) -> np.ndarray | None:
        """``episodes`` checked once: sorted unique int64 ids, or ``None`` for every episode.

        Raises:
            TypeError: not a collection of ints.
            ValueError: an id that is not a held episode (the message lists a few).
        """
        if episodes is None:
            return None
        if isinstance(episodes, (str, bytes)) or not isinstance(episodes, Iterable):
            raise TypeError(f"episodes must be a collection of episode ids, got {type(episodes).__name__}")
        ids = list(episodes)
        if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in ids):
            raise TypeError("episodes must hold episode ids (ints, Episode.id)")
        selected = np.unique(np.asarray(ids, np.int64))
        self._check_open()
        table = self._episodes
        known = np.zeros(len(selected), bool)
        known[np.isin(selected, table.ids)] = True
        if table.is_open(self._ring.appended):
            known |= selected == table.next_id
        if not known.all():
            raise ValueError(f"episodes: ids {selected[~known][:5].tolist()} are not held episodes "
                             f"(held: {self.num_episodes}, see rb.episodes)")
        return selected

    def _held_anchors(self: "ReplayBuffer", before: int, after: int, selected: np.ndarray | None = None,
                      keep_final_steps: bool = False) -> samplers.HeldAnchors:
        """The valid anchors of the current view (see :func:`~trajstore.replay_buffer.samplers.held_anchors`)."""
        self._check_open()
        table, ring = self._episodes, self._ring
        open_start = table.open_start
        if selected is not None and not np.any(selected == table.next_id):
            open_start = None
        index = table.anchor_index(before, after, selected=selected, keep_final_steps=keep_final_steps)
        return samplers.held_anchors(index, oldest=ring.first_step, appended=ring.appended, open_start=open_start)

    def _draw_anchors(self: "ReplayBuffer", before: int, after: int, batch_size: int, rng: np.random.Generator,
                      selected: np.ndarray | None = None,
                      keep_final_steps: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``batch_size`` anchors drawn uniformly among those of :meth:`_held_anchors`.

        Raises:
            ValueError: ``batch_size`` < 1, or there is no valid anchor.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        held = self._held_anchors(before, after, selected, keep_final_steps)
        if held.total == 0:
            raise ValueError(samplers.no_anchor_message(held))
        return samplers.anchors_at(held, rng.integers(0, held.total, size=batch_size))
