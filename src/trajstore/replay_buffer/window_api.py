"""Windows for training: :meth:`WindowMethods.sample_windows`, mixed into
:class:`~trajstore.replay_buffer.ReplayBuffer`.

The samplers (:mod:`~trajstore.replay_buffer.samplers`) pick anchors and logical indices; the
request is checked once (:mod:`~trajstore.replay_buffer.window_plan`); this module reads. Each
group of leaves sharing one offset sequence is read with one selection of its own slots, from
the storages that hold those leaves only (``SpaceStorage.read_leaves(sel, which)``), so a
camera leaf asked for at offset 0 decodes ``B`` frames (fewer with repeats), never ``B * T``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.window_plan import WindowPlan, WindowRequest, restricted, steps_plan, window_plan
from trajstore.spaces import map_leaves, tree
from trajstore.storages._selection import Selection, from_slots

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

Drawn = tuple[np.ndarray, np.ndarray, np.ndarray]


class WindowMethods:
    """``sample_windows``, ``count_anchors`` and ``windows_at`` of a
    :class:`~trajstore.replay_buffer.ReplayBuffer` (no state of their own)."""

    def sample_windows(self: "ReplayBuffer", batch_size: int, window: int | None = None, *,
                       delta_indices: Mapping[str, Any] | None = None, pad: bool | None = None,
                       rng: np.random.Generator | None = None, episodes: Iterable[int] | None = None) -> Any:
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

        All draws use ``rng`` (default: a fresh ``np.random.default_rng()``). A call costs
        O(B log episodes) plus the reads: the valid anchors per episode are prefix sums cached until
        an episode is closed or dropped.

        Raises:
            TypeError: neither or both of ``window`` and ``delta_indices``; ``pad`` with ``window``;
                ``delta_indices`` not a mapping of str.
            ValueError: ``window`` < 1 or ``batch_size`` < 1; a name not in the space, a leaf named
                twice, offsets not a non-empty 1-D int sequence; no held step is a valid anchor
                (the message gives the longest episode); ``episodes`` names an id that is not held.
            StaleReadError: never from here: a reader of a live ring redraws by itself.
        """
        rng = rng or np.random.default_rng()
        selected = self._selected_ids(episodes)
        if delta_indices is None:
            if window is None:
                raise TypeError("sample_windows needs a window length or delta_indices")
            if pad is not None:
                raise TypeError("pad goes with delta_indices; sample_windows(B, window) never pads")
            if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
                raise ValueError(f"window must be an int >= 1, got {window!r}")
            steps = np.arange(int(window), dtype=np.int64)
            flat = self._draw_and_read(lambda: (
                self._draw_anchors(0, int(window) - 1, batch_size, rng, selected)[0][:, None] + steps).reshape(-1))
            return map_leaves(self.space, flat, lambda v: v.reshape(batch_size, int(window), *v.shape[1:]))
        if window is not None:
            raise TypeError("give sample_windows a window length or delta_indices, not both")
        plan = window_plan(self.space, delta_indices)
        margin = (0, 0) if pad is None or pad else (plan.before, plan.after)
        return self._draw_and_read(lambda: self._draw_anchors(*margin, batch_size, rng, selected),
                                   lambda drawn: self._read_windows(plan, drawn))

    def window_request(self: "ReplayBuffer", delta_indices: Mapping[str, Any] | None = None, *, pad: bool = True,
                       episodes: Iterable[int] | None = None, leaves: Iterable[str] | None = None) -> WindowRequest:
        """``delta_indices``, ``pad``, ``episodes`` and ``leaves`` checked once, as a reusable
        :class:`~trajstore.replay_buffer.window_plan.WindowRequest` for :meth:`count_anchors`,
        :meth:`anchors_at` and :meth:`windows_at` (pass it in place of ``delta_indices``).

        ``delta_indices=None`` numbers held steps (each one is an anchor, read at offset 0).
        ``leaves``: leaf or subtree names to read (default every leaf); the others come back as ``None``.

        Raises:
            UnknownLeafError: a name in ``delta_indices`` or ``leaves`` that is not in the space.
            ValueError, TypeError: as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        if isinstance(delta_indices, WindowRequest):
            return delta_indices
        plan = steps_plan(self.space) if delta_indices is None else window_plan(self.space, delta_indices)
        positions = tuple(range(len(tree.leaf_paths(self.space)))) if leaves is None else _leaf_positions(
            self.space, leaves)
        if leaves is not None:
            plan = restricted(plan, set(positions))
        return WindowRequest(plan, None if delta_indices is None else dict(delta_indices), bool(pad),
                             self.checked_episode_ids(episodes), positions)

    def count_anchors(self: "ReplayBuffer", delta_indices: Mapping[str, Any] | None = None, *, pad: bool = True,
                      episodes: Iterable[int] | None = None) -> int:
        """How many valid anchors the held steps have for ``delta_indices`` (:meth:`sample_windows`);
        without ``delta_indices``, how many held steps (of ``episodes``, if given) there are. ``O(log E)``.

        Anchors are numbered ``0 .. count - 1`` in step order; :meth:`windows_at` reads them by number.

        Raises:
            as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        request = self.window_request(delta_indices, pad=pad, episodes=episodes)
        return self._held_for(request).total

    def anchors_at(self: "ReplayBuffer", numbers: Any, delta_indices: Mapping[str, Any] | None = None, *,
                   pad: bool = True, episodes: Iterable[int] | None = None) -> np.ndarray:
        """Logical indices, int64 ``(N,)``, of the anchors numbered ``numbers`` (int or int ``(N,)``), as
        :meth:`count_anchors` numbers them. ``O(N log E)``.

        Raises:
            IndexError: a number outside ``[0, count_anchors(...))``.
        """
        request = self.window_request(delta_indices, pad=pad, episodes=episodes)
        return samplers.anchors_at(self._held_for(request), numbers)[0]

    def windows_at(self: "ReplayBuffer", numbers: Any, delta_indices: Mapping[str, Any], *, pad: bool = True,
                   episodes: Iterable[int] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
        """The windows anchored at the anchors numbered ``numbers`` (int64 ``(B,)``, see :meth:`count_anchors`),
        as :meth:`sample_windows` returns them: ``(data, is_pad)`` with a leading axis ``B``, in the
        order given. Every anchor can be read this way once per epoch (the torch dataset of windows).

        Raises:
            IndexError: a number outside ``[0, count_anchors(...))``.
            StaleReadError: a reader raced the writer reusing the slots read; the view is refreshed
                (and the numbering may have moved).
            as :meth:`sample_windows` for ``delta_indices`` and ``episodes``.
        """
        if delta_indices is None:
            raise TypeError("windows_at needs delta_indices or a window_request(...)")
        request = self.window_request(delta_indices, pad=pad, episodes=episodes)
        return self._read_windows(request.plan, samplers.anchors_at(self._held_for(request), numbers))

    def _held_for(self: "ReplayBuffer", request: WindowRequest) -> samplers.HeldAnchors:
        selected = None if request.episodes is None else np.asarray(request.episodes, np.int64)
        return self._held_anchors(*request.margin, selected)

    def _read_windows(self: "ReplayBuffer", plan: WindowPlan, drawn: Drawn) -> tuple[Any, dict[str, np.ndarray]]:
        """Read each offset group of ``plan`` at the windows of ``drawn`` under the current view."""
        if not self.read_only:
            self._write_staged()  # the writer reads its own staged steps
        view, view_episodes = self._ring, self._episodes
        batch = len(drawn[0])
        leaves: list[Any] = [None] * len(tree.leaves(self.space))
        masks, first, last = [], view.count, -1
        for group in plan.groups:
            indices, is_pad = samplers.window_indices(*drawn, group.offsets)
            masks.append(is_pad)
            logical = from_slots(indices.reshape(-1))
            if len(logical.slots):
                first, last = min(first, int(logical.slots[0])), max(last, int(logical.slots[-1]))
            sel = view.slots_of(logical)
            values = self.storage.read_leaves(Selection(sel.slots), group.leaves)
            for position, windowed, value in zip(group.leaves, group.windowed, values):
                if sel.order is not None:
                    value = value[sel.order]
                shape = (batch, len(group.offsets)) if windowed else (batch,)
                leaves[position] = value.reshape(*shape, *value.shape[1:])
        if last >= 0:
            self._check_not_stale(view, view_episodes, first, last)
        return tree.unflatten(self.space, leaves), {name: masks[g] for name, g in plan.names.items()}


def _leaf_positions(space: Any, names: Iterable[str]) -> tuple[int, ...]:
    """Positions (in leaf order) of the leaves ``names`` name; a subtree name stands for its leaves.

    Raises:
        TypeError: ``names`` is a str or not an iterable of str.
        UnknownLeafError: a name that is not in the space; ValueError: an empty name or list.
    """
    from trajstore.errors import UnknownLeafError

    paths = tree.leaf_paths(space)
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"leaves must be a list of leaf names like 'observation/pixels', got {names!r:.80}")
    wanted: set[int] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"leaf names are str, got {name!r:.80}")
        path = tree.parse_name(name)
        if not path or "" in path:  # "" parses to the root, which would silently stand for every leaf
            raise ValueError(f"{name!r} names no leaf; give leaf or subtree names like 'observation/pixels'")
        try:
            tree.subspace(space, path)
        except KeyError as exc:
            raise UnknownLeafError(exc.args[0] if exc.args else name) from None
        wanted.update(i for i, p in enumerate(paths) if tree.under(p, path))
    if not wanted:
        raise ValueError("no leaf named: name at least one leaf")
    return tuple(sorted(wanted))
