"""Windows for training: :meth:`WindowMethods.sample_windows`, mixed into
:class:`~trajstore.replay_buffer.ReplayBuffer`.

The samplers (:mod:`~trajstore.replay_buffer.samplers`) pick anchors and logical indices; the
request is checked once (:mod:`~trajstore.replay_buffer.window_plan`); this module reads. Each
group of leaves sharing one offset sequence is read with one selection of its own slots, from
the storages that hold those leaves only (``SpaceStorage.read_leaves(sel, which)``), so a
camera leaf asked for at offset 0 decodes ``B`` frames (fewer with repeats), never ``B * T``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.window_plan import WindowPlan, window_plan
from trajstore.spaces import map_leaves, tree
from trajstore.storages._selection import Selection, from_slots

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

Drawn = tuple[np.ndarray, np.ndarray, np.ndarray]


class WindowMethods:
    """``sample_windows`` of a :class:`~trajstore.replay_buffer.ReplayBuffer` (no state of its own)."""

    def sample_windows(self: "ReplayBuffer", batch_size: int, window: int | None = None, *,
                       delta_indices: Mapping[str, Any] | None = None, pad: bool | None = None,
                       rng: np.random.Generator | None = None) -> Any:
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

        All draws use ``rng`` (default: a fresh ``np.random.default_rng()``). A call costs
        O(B log episodes) plus the reads: the valid anchors per episode are prefix sums cached until
        an episode is closed or dropped.

        Raises:
            TypeError: neither or both of ``window`` and ``delta_indices``; ``pad`` with ``window``;
                ``delta_indices`` not a mapping of str.
            ValueError: ``window`` < 1 or ``batch_size`` < 1; a name not in the space, a leaf named
                twice, offsets not a non-empty 1-D int sequence; no held step is a valid anchor
                (the message gives the longest episode).
            StaleReadError: never from here: a reader of a live ring redraws by itself.
        """
        rng = rng or np.random.default_rng()
        if delta_indices is None:
            if window is None:
                raise TypeError("sample_windows needs a window length or delta_indices")
            if pad is not None:
                raise TypeError("pad goes with delta_indices; sample_windows(B, window) never pads")
            if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
                raise ValueError(f"window must be an int >= 1, got {window!r}")
            steps = np.arange(int(window), dtype=np.int64)
            flat = self._draw_and_read(
                lambda: (self._draw_windows(0, int(window) - 1, batch_size, rng)[0][:, None] + steps).reshape(-1))
            return map_leaves(self.space, flat, lambda v: v.reshape(batch_size, int(window), *v.shape[1:]))
        if window is not None:
            raise TypeError("give sample_windows a window length or delta_indices, not both")
        plan = window_plan(self.space, delta_indices)
        margin = (0, 0) if pad is None or pad else (plan.before, plan.after)
        return self._draw_and_read(lambda: self._draw_windows(*margin, batch_size, rng),
                                   lambda drawn: self._read_windows(plan, drawn))

    def _draw_windows(self: "ReplayBuffer", before: int, after: int, batch_size: int,
                      rng: np.random.Generator) -> Drawn:
        """Anchors with ``before`` steps before them and ``after`` after them in their episode."""
        self._check_open()
        episodes, ring = self._episodes, self._ring
        return samplers.draw_anchors(episodes.anchor_index(before, after), oldest=ring.first_step,
                                     appended=ring.appended, open_start=episodes.open_start,
                                     batch_size=batch_size, rng=rng)

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
            first, last = min(first, int(logical.slots[0])), max(last, int(logical.slots[-1]))
            sel = view.slots_of(logical)
            values = self.storage.read_leaves(Selection(sel.slots), group.leaves)
            for position, windowed, value in zip(group.leaves, group.windowed, values):
                if sel.order is not None:
                    value = value[sel.order]
                shape = (batch, len(group.offsets)) if windowed else (batch,)
                leaves[position] = value.reshape(*shape, *value.shape[1:])
        self._check_not_stale(view, view_episodes, first, last)
        return tree.unflatten(self.space, leaves), {name: masks[g] for name, g in plan.names.items()}
