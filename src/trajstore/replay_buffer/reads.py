"""The buffer's reads: steps, windows and final observations, each under one view and checked after.

:class:`BufferReads` turns checked requests into storage reads. Each read takes the current view
once, draws (samplers) and reads under it, records what it used (:class:`~trajstore.replay_buffer.view.Touched`),
and is checked by the one staleness rule of :mod:`~trajstore.replay_buffer.view`: a read that
returns is whole. Sampling reads go through the one retry policy (:func:`~trajstore.replay_buffer.view.retrying`).

Each group of leaves sharing one offset sequence is read with one selection of its own slots, from
the storages holding those leaves only (``SpaceStorage.read_leaves_in_order(sel, which)``), so a camera
leaf asked for at offset 0 decodes ``B`` frames (fewer with repeats), never ``B * T``, each straight into
its requested row (no copy of the whole batch into request order).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.final_observations import FinalObservations
from trajstore.replay_buffer.view import Touched, View, Views, read_once, retrying
from trajstore.replay_buffer.window_plan import WindowPlan, WindowRequest
from trajstore.spaces import Space, tree
from trajstore.storages._selection import Selection, from_slots, select
from trajstore.storages.base import SpaceStorage

Drawn = tuple[np.ndarray, np.ndarray, np.ndarray]  # anchors, episode starts, episode stops (logical)


class BufferReads:
    """Reads of one buffer under the views ``views`` gives (a reader's folder view, or the writer's own)."""

    def __init__(self, storage: SpaceStorage, space: Space, finals: FinalObservations, views: Views):
        self.storage, self.space, self.finals, self.views = storage, space, finals, views

    # -- steps -----------------------------------------------------------------------------
    def steps(self, index: Any) -> Any:
        """The steps at a logical index (any index kind); raises StaleReadError after a race."""
        def read(view: View, touched: Touched) -> Any:
            sel = select(index, view.count)
            if len(sel.slots):
                touched.steps(int(sel.slots[0]), int(sel.slots[-1]))
            return self.storage.read(view.slots_of(sel))

        return read_once(self.views, read)

    def leaves_at(self, view: View, logical: np.ndarray, which: list[int] | None, touched: Touched
                  ) -> list[np.ndarray]:
        """Leaves ``which`` (positions; ``None``: every leaf) at logical indices ``logical`` (int64, any shape),
        in that order, shaped ``(*logical.shape, ...)``."""
        sel = from_slots(logical.reshape(-1))
        if len(sel.slots):
            touched.steps(int(sel.slots[0]), int(sel.slots[-1]))
        slots = view.slots_of(sel)
        return [value.reshape(*logical.shape, *value.shape[1:])
                for value in self.storage.read_leaves_in_order(Selection(slots.slots, slots.order), which)]

    def sample(self, batch_size: int, rng: np.random.Generator, selected: np.ndarray | None,
               draw: Callable[[View, np.ndarray | None], np.ndarray] | None = None) -> tuple[Any, np.ndarray]:
        """``(batch, logical indices)`` of ``batch_size`` steps drawn uniformly (among ``selected`` episodes), or
        by ``draw(view, selected)`` (a prioritized draw's ``steps``)."""
        def read(view: View, touched: Touched) -> tuple[Any, np.ndarray]:
            if draw is not None:
                idx = draw(view, selected)
            elif selected is None:
                idx = samplers.uniform_steps(view.count, batch_size, rng)
            else:
                idx = samplers.draw_in(view.ring, view.episodes, 0, 0, batch_size, rng, selected)[0]
            sel = select(idx, view.count)
            touched.steps(int(sel.slots[0]), int(sel.slots[-1]))
            return self.storage.read(view.slots_of(sel)), idx

        return retrying(self.views, read, "sample")

    # -- windows ---------------------------------------------------------------------------
    def held(self, request: WindowRequest, view: View | None = None) -> samplers.HeldAnchors:
        """The anchors ``request`` numbers in ``view`` (default: the current one)."""
        view = view or self.views.current()
        selected = None if request.episodes is None else np.asarray(request.episodes, np.int64)
        return samplers.held_in(view.ring, view.episodes, *request.margin, selected)

    def windows_at(self, request: WindowRequest, numbers: Any) -> tuple[Any, dict[str, np.ndarray]]:
        """The windows of the anchors numbered ``numbers`` (raises StaleReadError after a race)."""
        return read_once(self.views, lambda view, touched: self.read_windows(
            view, request.plan, samplers.anchors_at(self.held(request, view), numbers), touched))

    def sample_windows(self, request: WindowRequest, batch_size: int, rng: np.random.Generator,
                       draw: Callable[..., Drawn] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
        """``batch_size`` windows of ``request`` drawn uniformly among its anchors, or by
        ``draw(view, before, after, selected)`` (a prioritized draw's ``anchors``)."""
        selected = None if request.episodes is None else np.asarray(request.episodes, np.int64)
        drawer = draw or (lambda view, before, after, chosen: samplers.draw_in(
            view.ring, view.episodes, before, after, batch_size, rng, chosen))
        return retrying(self.views, lambda view, touched: self.read_windows(
            view, request.plan, drawer(view, *request.margin, selected), touched), "sample_windows")

    def read_windows(self, view: View, plan: WindowPlan, drawn: Drawn, touched: Touched
                     ) -> tuple[Any, dict[str, np.ndarray]]:
        """Each offset group of ``plan`` read at the windows of ``drawn`` under ``view``; leaves the plan does
        not read come back as ``None``."""
        leaves: list[Any] = [None] * len(tree.leaves(self.space))
        masks = []
        for group in plan.groups:
            indices, is_pad = samplers.window_indices(*drawn, group.offsets)
            masks.append(is_pad)
            values = self.leaves_at(view, indices, list(group.leaves), touched)
            for position, windowed, value in zip(group.leaves, group.windowed, values):
                leaves[position] = value if windowed else value[:, 0]
        return tree.unflatten(self.space, leaves), {name: masks[g] for name, g in plan.names.items()}

    # -- final observations ----------------------------------------------------------------
    def final_observation(self, episode_id: int, number: int) -> Any:
        """Final observation ``number`` of episode ``episode_id`` (StaleReadError if it left meanwhile)."""
        def read(view: View, touched: Touched) -> Any:
            touched.finals.append((episode_id, number))
            return self.finals.read(number)

        return read_once(self.views, read)

    def finals_into(self, view: View, stops: np.ndarray, out: list[np.ndarray], rows: np.ndarray,
                    obs_space: Space, touched: Touched) -> None:
        """Fill ``out[leaf][rows]`` (``rows``: bool ``(B,)``) with the final observations of the episodes
        ending at logical ``stops`` (one per true row), reading each episode's once."""
        if not len(stops):
            return
        table = view.episodes
        # Each stop is that of a closed episode with a final observation (only those keep their last anchors).
        cols = np.searchsorted(table.stops, stops + view.first_step)
        targets = np.flatnonzero(rows)
        for col in np.unique(cols):
            number = int(table.finals[col])
            touched.finals.append((int(table.ids[col]), number))
            value = tree.flatten(obs_space, self.finals.read(number))
            at = targets[cols == col]
            for leaf, v in zip(out, value):
                leaf[at] = v

    # -- whole views -----------------------------------------------------------------------
    def each_chunk(self, chunk: int, add: Callable[[list[np.ndarray], int], None], start: Callable[[View], None],
                   what: str) -> None:
        """Every held step, ``chunk`` steps at a time, as leaf lists passed to ``add(leaves, n)`` after
        ``start(view)``; all under one view, done again from ``start`` if the writer reused any of them."""
        def read(view: View, touched: Touched) -> None:
            start(view)
            if view.count:
                touched.steps(0, view.count - 1)
            for first in range(0, view.count, chunk):
                stop = min(view.count, first + chunk)
                add(self.leaves_at(view, np.arange(first, stop, dtype=np.int64), None, touched), stop - first)

        retrying(self.views, read, what)
