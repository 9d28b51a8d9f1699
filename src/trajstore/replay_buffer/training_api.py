"""The training half of the buffer's public API: steps, windows and transitions drawn for training,
episode selection and statistics. :class:`TrainingAPI` is a base of
:class:`~trajstore.replay_buffer.ReplayBuffer`; it checks each request once (the edge) and hands it to
the buffer's :class:`~trajstore.replay_buffer.reads.BufferReads`, the one object it asks for
(:meth:`TrainingAPI._reads`). It holds no state.

``episodes=`` (accepted by ``sample``, ``sample_windows``, ``sample_transitions``, ``window_request``
and the torch dataset) is a collection of episode ids (``Episode.id``, as :meth:`TrainingAPI.select_episodes`
and :meth:`TrainingAPI.split_episodes` return). It is checked once and becomes the sorted id array
the episode table builds its anchor index from (cached per selection), so a draw still costs
``O(B log E)``; building the index for a new selection costs ``O(E)``.

``on_damaged=`` (the same methods) says what a draw does in a buffer opened with payload files missing
(:attr:`TrainingAPI.damaged`): ``"raise"`` (the default: nothing is left out of training unasked)
raises ``FormatError`` naming the damage before reading, when an episode it may draw from is damaged;
``"skip"`` leaves the damaged episodes out, whole, so no damaged step is ever drawn (windows and
transitions stay inside healthy episodes).
"""

from __future__ import annotations

import abc
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from trajstore.damage import Damage
from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.draw_domain import draw_domain
from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.replay_buffer.output import output
from trajstore.replay_buffer.reads import BufferReads
from trajstore.replay_buffer.transitions_api import TransitionsAPI
from trajstore.replay_buffer.window_plan import (WindowRequest, consecutive_plan, leaf_positions, restricted,
                                                 space_key, steps_plan, window_plan)
from trajstore.spaces import Space, tree


class TrainingAPI(TransitionsAPI):
    """``sample``, ``sample_windows``, ``window_request``, ``count_anchors``, ``anchors_at``, ``windows_at``,
    ``sample_transitions`` (:class:`~trajstore.replay_buffer.transitions_api.TransitionsAPI`), ``select_episodes``, ``split_episodes``, ``checked_episode_ids``, ``stats``."""

    space: Space

    @abc.abstractmethod
    def _reads(self) -> BufferReads:
        """The buffer's reads (raises if the buffer is closed)."""

    @abc.abstractmethod
    def _statistics(self) -> Any:
        """Statistics of the held steps as a :class:`~trajstore.replay_buffer.stats_keeper.RangeStats`."""

    # -- steps and episodes ----------------------------------------------------------------
    def sample(self, batch_size: int, *, rng: np.random.Generator | None = None, return_indices: bool = False,
               episodes: Iterable[int] | None = None, on_damaged: str = "raise", as_torch: bool = False,
               device: Any = None, pin_memory: bool = False, image_layout: str | None = None,
               image_dtype: str = "uint8", priority: str | None = None, alpha: float = 0.6, beta: float = 0.4) -> Any:
        """``batch_size`` steps drawn uniformly with replacement, as a batch (leading axis ``B``).

        Args:
            batch_size: ``B`` >= 1.
            rng: the generator of the draw (default: a fresh ``np.random.default_rng()``).
            return_indices: also return the logical indices drawn, int64 ``(B,)`` (0 = oldest held step,
                valid for the view the batch was read from).
            episodes: episode ids (``Episode.id``): draw only among their held steps.
            on_damaged: ``"raise"`` (default): when an episode it may draw from is damaged (a payload
                file holding some of its steps is missing, see :attr:`damaged`), raise ``FormatError``
                before reading; ``"skip"``: leave the damaged episodes out (a damaged step is never drawn).
            as_torch, device, pin_memory: torch tensors instead of NumPy (:mod:`~trajstore.replay_buffer.output`);
                text leaves become lists of ``str`` (``[B]``; nested ``[B][T]`` for windows). ``device`` and
                ``pin_memory`` are checked before the read (a device this machine lacks: ``ValueError``).
            image_layout: camera leaves (``kind`` ``"image"``/``"camera"``/``"rgb"``, uint8, HWC, CHW or
                grayscale ``(H, W)``: :func:`~trajstore.training.images.camera_leaves`) as ``"CHW"``
                ``(B, C, H, W)`` or ``"HWC"`` ``(B, H, W, C)``; ``None`` (default): as stored (as ``rb[i]``).
            image_dtype: camera leaves as ``"uint8"`` (default) or ``"float32"`` (``value / 255``, in ``[0, 1]``).
                ``image_layout="CHW", image_dtype="float32"`` gives what a torch vision model takes.
            priority, alpha, beta: draw by the priority set ``priority`` instead, ``P(i) = p_i ** alpha / sum_j
                p_j ** alpha``, and return importance weights with ``beta`` (:mod:`~trajstore.replay_buffer.prioritized`;
                :meth:`update_priorities`). Not with ``return_indices`` (the info holds them).

        Returns:
            the batch, or ``(batch, indices)`` with ``return_indices=True``; with ``priority``: ``(batch, info)``,
            ``info`` a :class:`~trajstore.replay_buffer.prioritized.PriorityInfo` (``index``, ``step``, ``weight``).

        A draw that raced the writer reusing slots (:class:`StaleReadError`) is drawn again; any other
        read error is raised as it is.

        Raises:
            ValueError: the buffer (or the selected episodes) holds no step, ``batch_size`` < 1,
                ``episodes`` names an id that is not held, or a bad ``image_layout`` / ``image_dtype``.
            FormatError: a payload file is damaged (e.g. a video segment holds fewer frames than its
                index says); names the file and the frame. With ``on_damaged="raise"``: a selected
                episode is damaged (:attr:`damaged`); with ``"skip"``: every selected episode is (named).
        """
        out, reads, rng = output(as_torch, device, pin_memory), self._reads(), rng or np.random.default_rng()
        convert = _frames(self.space, image_layout, image_dtype)
        selected = self._selected(reads, episodes, on_damaged)
        draw = self._priority_draw(priority, alpha, beta, batch_size, rng, return_indices)
        batch, idx = reads.sample(batch_size, rng, selected, None if draw is None else draw.steps)
        batch = convert(batch)
        if draw is not None:
            return out(batch), draw.info
        return out((batch, idx) if return_indices else batch)

    def select_episodes(self, predicate: Callable[[Episode], bool]) -> list[int]:
        """Ids of the held episodes (the open one included) for which ``predicate(episode)`` is true,
        oldest first; e.g. ``rb.select_episodes(lambda e: e.data.get("success") and not e.interrupted)``.

        ``predicate`` gets each :class:`~trajstore.replay_buffer.episodes.Episode` (``.data``,
        ``.interrupted``, ``.overwritten``, ``len(e)``); costs one call per episode.
        """
        return [e.id for e in self.episodes if predicate(e)]

    def split_episodes(self, val_fraction: float, seed: int = 0,
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
        if episodes is not None:
            ids = np.asarray(sorted({int(i) for i in episodes}), np.int64)
        else:  # a buffer's lazy episode list has its ids as an array (no episode data parsed)
            held = self.episodes
            ids = np.asarray(held.ids if hasattr(held, "ids") else [e.id for e in held], np.int64)
        n_val = int(round(float(val_fraction) * len(ids)))
        order = np.random.default_rng(seed).permutation(len(ids))
        return np.sort(ids[order[n_val:]]).tolist(), np.sort(ids[order[:n_val]]).tolist()

    def checked_episode_ids(self, episodes: Iterable[int] | None, on_damaged: str = "raise"
                            ) -> tuple[int, ...] | None:
        """``episodes`` (ids, ``Episode.id``) checked against the held episodes once: sorted unique ids,
        or ``None`` for ``None`` (every episode). What ``episodes=`` of the samplers accepts.
        ``on_damaged``: as :meth:`sample` (``"skip"``: the ids without the damaged episodes).

        Raises:
            TypeError: not a collection of ints.
            ValueError: an id that is not a held episode (the message lists a few); a bad ``on_damaged``.
            FormatError: ``on_damaged="raise"`` and a damaged episode among them.
        """
        selected = self._selected(self._reads(), episodes, on_damaged)
        return None if selected is None else tuple(int(i) for i in selected)

    @property
    @abc.abstractmethod
    def episodes(self) -> Sequence[Episode]:
        """Episodes overlapping the held steps, oldest first (the one being recorded last)."""

    @property
    @abc.abstractmethod
    def damaged(self) -> Damage:
        """The buffer's :class:`~trajstore.damage.Damage` (false when nothing is damaged)."""

    def _priority_draw(self, priority: str | None, alpha: Any, beta: Any, batch_size: int, rng: np.random.Generator,
                       return_indices: bool = False) -> Any:
        """A :class:`~trajstore.replay_buffer.prioritized.PrioritizedDraw`, or ``None`` for ``priority=None``
        (the replay buffer's :class:`~trajstore.replay_buffer.rl_api.ReinforcementAPI` draws by priority)."""
        if priority is not None:
            raise ValueError(f"{type(self).__name__} has no priority sets (priority={priority!r})")
        return None

    def _selected(self, reads: BufferReads, episodes: Iterable[int] | None, on_damaged: str = "raise"
                  ) -> np.ndarray | None:
        """The episode ids a draw may use (``None``: every held one), the damaged ones left out or refused."""
        return draw_domain(reads.views.current(), self.damaged, episodes, on_damaged)

    # -- windows ---------------------------------------------------------------------------
    def sample_windows(self, batch_size: int, window: int | None = None, *,
                       delta_indices: Mapping[str, Any] | WindowRequest | None = None, pad: bool | None = None,
                       rng: np.random.Generator | None = None, episodes: Iterable[int] | None = None,
                       on_damaged: str = "raise", as_torch: bool = False, device: Any = None,
                       pin_memory: bool = False, image_layout: str | None = None, image_dtype: str = "uint8",
                       priority: str | None = None, alpha: float = 0.6, beta: float = 0.4) -> Any:
        """``batch_size`` windows of steps around anchor steps, drawn uniformly with replacement.

        **Plain form** ``sample_windows(B, window)``: ``window`` consecutive steps of one episode;
        every leaf comes back with shape ``(B, window, ...)``. Windows are drawn uniformly among
        all that fit inside an episode (the one being recorded included); none crosses a boundary.

        **Offsets form** ``sample_windows(B, delta_indices={...}, pad=True)``: returns a pair
        ``(data, is_pad)``.

        - ``delta_indices`` maps names to integer offsets from the anchor step: a leaf or a subtree,
          keys joined by ``"/"`` (``{"observation": [-1, 0], "action": range(16)}``). A subtree's
          leaves all get its offsets; a leaf is named at most once.
        - ``data`` is nested like the space. A named leaf has shape ``(B, T, ...)`` with ``T`` its
          number of offsets, in the order given; a leaf no name covers is read at the anchor only,
          shape ``(B, ...)``. Dtypes are the space's.
        - ``is_pad`` is ``{name: bool (B, T)}`` for each name given: True where ``anchor + offset``
          lies outside the anchor's episode, so the value is a copy of the boundary step.
        - ``pad=True``: every held step is an anchor with the same chance; an offset before the
          episode's first held step reads that step, one after its last step reads the last step
          (and both are flagged in ``is_pad``). ``pad=False``: only anchors whose every offset lies
          inside the episode are drawn (``is_pad`` is all False).
        - Only the requested (leaf, offset) steps are read and decoded: one read per group of
          leaves sharing an offset sequence, of the distinct steps that group needs.

        Common settings:

        - Diffusion Policy (``horizon`` H, ``n_obs_steps`` To): ``delta_indices={"observation":
          range(1 - To, 1), "action": range(1 - To, 1 - To + H)}`` with ``pad=True`` draws the
          sequences of its ``SequenceSampler`` with ``pad_before = To - 1`` and
          ``pad_after = H - To`` (the anchor is the last observed step; the padded steps repeat the
          boundary step as there). ``pad=False`` is ``pad_before = pad_after = 0``.
        - LeRobot ``delta_timestamps`` (seconds) at ``fps`` Hz: ``delta_indices = {key:
          [round(t * fps) for t in seconds]}`` with ``pad=True``; LeRobot's ``{key}_is_pad`` is
          ``is_pad[key]``.

        ``episodes``: episode ids (``Episode.id``): only anchors inside those episodes are drawn.
        ``priority``, ``alpha``, ``beta``: draw the anchors by a priority set (only valid anchors, with
        ``P(i)`` renormalised over them: :mod:`~trajstore.replay_buffer.prioritized`) and return
        ``(what it returns without, info)``, as :meth:`sample`.
        ``on_damaged``, ``as_torch``, ``device``, ``pin_memory``, ``image_layout``, ``image_dtype``: as
        :meth:`sample` (camera leaves of a window ``(B, T, C, H, W)`` with ``image_layout="CHW"``).

        All draws use ``rng`` (default: a fresh ``np.random.default_rng()``). A call costs
        O(B log episodes) plus the reads: the valid anchors per episode are prefix sums cached until
        an episode is closed or dropped.

        Raises:
            TypeError: neither or both of ``window`` and ``delta_indices``; ``pad`` with ``window``;
                ``delta_indices`` not a mapping of str.
            ValueError: ``window`` < 1 or ``batch_size`` < 1; a name not in the space, a leaf named
                twice, offsets not a non-empty 1-D int sequence; no held step is a valid anchor
                (the message gives the longest episode); ``episodes`` names an id that is not held.
            RetriesExhaustedError: a reader of a live ring raced the writer on every one of its draws
                (:data:`~trajstore.replay_buffer.view.MAX_READ_ATTEMPTS`); a race is otherwise drawn again.
        """
        rng, out = rng or np.random.default_rng(), output(as_torch, device, pin_memory)
        convert = _frames(self.space, image_layout, image_dtype)
        if delta_indices is None:
            if window is None:
                raise TypeError("sample_windows needs a window length or delta_indices")
            if pad is not None:
                raise TypeError("pad goes with delta_indices; sample_windows(B, window) never pads")
            if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
                raise ValueError(f"window must be an int >= 1, got {window!r}")
            request = self.window_request(episodes=episodes, on_damaged=on_damaged)
            plain = replace(request, plan=consecutive_plan(self.space, int(window)), pad=False)
            draw = self._priority_draw(priority, alpha, beta, batch_size, rng)
            data = out(convert(self._reads().sample_windows(plain, batch_size, rng, draw and draw.anchors)[0]))
            return data if draw is None else (data, draw.info)
        if window is not None:
            raise TypeError("give sample_windows a window length or delta_indices, not both")
        request = self.window_request(delta_indices, pad=True if pad is None else pad, episodes=episodes,
                                      on_damaged=on_damaged)
        draw = self._priority_draw(priority, alpha, beta, batch_size, rng)
        data, is_pad = self._reads().sample_windows(request, batch_size, rng, draw and draw.anchors)
        return out((convert(data), is_pad)) if draw is None else (out((convert(data), is_pad)), draw.info)

    def window_request(self, delta_indices: Mapping[str, Any] | WindowRequest | None = None, *, pad: bool = True,
                       episodes: Iterable[int] | None = None, leaves: Iterable[str] | None = None,
                       on_damaged: str = "raise") -> WindowRequest:
        """``delta_indices``, ``pad``, ``episodes`` and ``leaves`` checked once, as a reusable
        :class:`~trajstore.replay_buffer.window_plan.WindowRequest` for :meth:`count_anchors`,
        :meth:`anchors_at` and :meth:`windows_at` (pass it in place of ``delta_indices``).

        ``delta_indices=None`` numbers held steps (each one is an anchor, read at offset 0).
        ``leaves``: leaf or subtree names to read (default every leaf); the others come back as ``None``.
        ``on_damaged``: as :meth:`sample`; with ``"skip"`` the request's episodes leave the damaged ones out.

        Raises:
            UnknownLeafError: a name in ``delta_indices`` or ``leaves`` that is not in the space.
            ValueError, TypeError: as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        if isinstance(delta_indices, WindowRequest):
            if delta_indices.space != space_key(self.space):
                raise ValueError("this window request was made by window_request(...) of a buffer with another "
                                 "space: make one with this buffer's window_request(...)")
            return delta_indices
        if not isinstance(pad, (bool, np.bool_)):
            raise TypeError(f"pad must be True or False, got {pad!r}")
        plan = steps_plan(self.space) if delta_indices is None else window_plan(self.space, delta_indices)
        positions = tuple(range(len(tree.leaf_paths(self.space)))) if leaves is None else leaf_positions(
            self.space, leaves)
        if leaves is not None:
            plan = restricted(plan, set(positions))
        return WindowRequest(plan, None if delta_indices is None else dict(delta_indices), bool(pad),
                             self.checked_episode_ids(episodes, on_damaged), positions, space_key(self.space))

    def count_anchors(self, delta_indices: Mapping[str, Any] | WindowRequest | None = None, *, pad: bool = True,
                      episodes: Iterable[int] | None = None, on_damaged: str = "raise") -> int:
        """How many valid anchors the held steps have for ``delta_indices`` (:meth:`sample_windows`);
        without ``delta_indices``, how many held steps (of ``episodes``, if given) there are. ``O(log E)``.

        Anchors are numbered ``0 .. count - 1`` in step order; :meth:`windows_at` reads them by number.

        Raises:
            as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        request = self.window_request(delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)
        return self._reads().held(request).total

    def anchors_at(self, numbers: Any, delta_indices: Mapping[str, Any] | WindowRequest | None = None, *,
                   pad: bool = True, episodes: Iterable[int] | None = None, on_damaged: str = "raise") -> np.ndarray:
        """Logical indices, int64 ``(N,)``, of the anchors numbered ``numbers`` (int or int ``(N,)``), as
        :meth:`count_anchors` numbers them. ``O(N log E)``.

        Raises:
            IndexError: a number outside ``[0, count_anchors(...))``.
        """
        request = self.window_request(delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)
        return samplers.anchors_at(self._reads().held(request), numbers)[0]

    def windows_at(self, numbers: Any, delta_indices: Mapping[str, Any] | WindowRequest, *, pad: bool = True,
                   episodes: Iterable[int] | None = None, on_damaged: str = "raise", as_torch: bool = False,
                   device: Any = None, pin_memory: bool = False) -> tuple[Any, dict[str, np.ndarray]]:
        """The windows anchored at the anchors numbered ``numbers`` (int64 ``(B,)``, see :meth:`count_anchors`),
        as :meth:`sample_windows` returns them: ``(data, is_pad)`` with a leading axis ``B``, in the
        order given. Every anchor can be read this way once per epoch (the torch dataset of windows).
        ``as_torch``, ``device``, ``pin_memory``: as :meth:`sample`.

        Raises:
            IndexError: a number outside ``[0, count_anchors(...))``.
            StaleReadError: a reader raced the writer reusing the slots read; the view is refreshed
                (and the numbering may have moved).
            as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        if delta_indices is None:
            raise TypeError("windows_at needs delta_indices or a window_request(...)")
        out = output(as_torch, device, pin_memory)
        request = self.window_request(delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)
        return out(self._reads().windows_at(request, numbers))

    # -- statistics ------------------------------------------------------------------------
    def stats(self, keys: str | Iterable[str] | None = None) -> dict[str, LeafStats]:
        """Per-leaf statistics over the steps held: name (``"observation/pixels"``) -> :class:`LeafStats`
        (``count, min, max, mean, std, q01, q10, q50, q90, q99``, float64; per channel, shape ``(C,)``,
        for image-like leaves (``kind`` image or depth; one channel: shape ``()``), per element for
        leaves of at most 256 elements, else of the whole leaf, shape ``()``; a leaf's
        ``metadata["stats"]`` may choose; see :mod:`~trajstore.replay_buffer.leaf_stats`; quantiles
        within ``quantile_error`` of ``np.quantile``, at most ``2 (max - min) / (bins - 2)``).

        Text and bool leaves have none and are skipped. A writer first flushes (so the statistics it
        returns are committed too); a reader gets those the writer committed for its view. When none
        cover the held steps (a ring dropped steps since they were accumulated, a folder written by
        an older trajstore), they are computed from the data: every held step is read (frames decoded),
        once per change of the view; a writer then commits them for its readers.

        Args:
            keys: leaf or sub-dict names (``"observation"`` takes its numeric leaves); None: every numeric leaf.

        Raises:
            KeyError: a name that is not in the space.
            ValueError: a named leaf has no statistics (text, bool).
            StaleReadError: a reader whose writer kept overwriting the steps being read.
        """
        from trajstore.replay_buffer.statistics import stat_names

        names = stat_names(self.space, keys)
        ranged = self._statistics()
        return {name: ranged.leaves[name].result(name) for name in names}


def _frames(space: Space, image_layout: Any, image_dtype: Any) -> Callable[[Any], Any]:
    """The camera-frame conversion of ``image_layout`` / ``image_dtype`` (identity when nothing changes).

    Raises:
        ValueError: a bad ``image_layout`` or ``image_dtype``.
    """
    from trajstore.training.images import frame_conversion

    convert = frame_conversion(space, image_layout, image_dtype)
    return convert if convert is not None else (lambda batch: batch)
