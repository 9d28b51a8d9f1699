"""The reads of an aligned view: the buffer's reads (:class:`~trajstore.replay_buffer.reads.BufferReads`)
over its :class:`~trajstore.streams.aligned_storage.AlignedStorage`, with two additions.

* Windows by ``delta_indices``: ``is_pad[name]`` of a name inside a stream is also True where that
  stream's value at the window step is flagged (``is_pad/<stream>`` of that step, by the rule of
  :mod:`~trajstore.streams.align`), not only where the step lies outside the episode.
* Windows by ``delta_timestamps`` (:class:`TimeWindowRequest`): each named stream is looked up at
  anchor time + offset by its method, the needed samples read once per stream per call;
  ``is_pad[stream]`` is True where the value at that time is flagged, by the same rule as a step's
  (:mod:`~trajstore.streams.align`), so offset 0 agrees with the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.reads import BufferReads, Drawn
from trajstore.replay_buffer.view import Touched, View
from trajstore.replay_buffer.window_plan import SEPARATOR, WindowPlan, WindowRequest
from trajstore.spaces import tree
from trajstore.streams.align import add_ns, seconds_to_ns
from trajstore.streams.aligned_storage import IS_PAD, TIMESTAMP


@dataclass(frozen=True)
class TimeWindowRequest:
    """A checked window request of an aligned view with time offsets (``view.window_request(...,
    delta_timestamps=...)``); plain data, reusable for every batch.

    Attributes:
        base: the request of the other leaves (their ``delta_indices``, ``pad``, ``episodes``), which
            does not read the streams named in ``offsets``.
        offsets: ``{stream: int64 (T,) ns offsets from the anchor time}``, in the order given.
        delta_timestamps: the offsets as given (seconds).
    """

    base: WindowRequest
    offsets: dict[str, np.ndarray]
    delta_timestamps: dict[str, Any]

    @property
    def episodes(self) -> tuple[int, ...] | None:
        return self.base.episodes


def time_offsets(streams: Mapping[str, Any], delta_timestamps: Any) -> dict[str, np.ndarray]:
    """``delta_timestamps`` (``{stream: seconds}``) checked: int64 ns offsets per stream, rounded.

    Raises:
        TypeError: not a mapping of str.
        ValueError: empty; a name that is not an included stream (lists them); offsets that are not a
            non-empty 1-D sequence of finite numbers, or beyond int64 nanoseconds (|s| >= 9.22e9).
    """
    if not isinstance(delta_timestamps, Mapping):
        raise TypeError(f"delta_timestamps must be a mapping of stream names to offsets in seconds, "
                        f"got {type(delta_timestamps).__name__}")
    if not delta_timestamps:
        raise ValueError("delta_timestamps is empty: name at least one stream")
    out = {}
    for name, value in delta_timestamps.items():
        if name not in streams:
            raise ValueError(f"delta_timestamps: {name!r} is not a stream of this view (streams: {list(streams)}); "
                             "offsets in time go to whole streams")
        arr = np.asarray(list(value) if isinstance(value, range) else value)
        if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
            raise ValueError(f"delta_timestamps[{name!r}] must be a non-empty 1-D sequence of finite seconds, "
                             f"got {value!r:.100}")
        out[name] = seconds_to_ns(arr, f"delta_timestamps[{name!r}]")
    return out


class AlignedReads(BufferReads):
    """:class:`BufferReads` of an aligned view (its storage is an ``AlignedStorage``, its views fixed)."""

    def read_windows(self, view: View, plan: WindowPlan, drawn: Drawn, touched: Touched
                     ) -> tuple[Any, dict[str, np.ndarray]]:
        """As :meth:`BufferReads.read_windows`, with each stream name's mask OR its flags at the window steps."""
        data, masks = super().read_windows(view, plan, drawn, touched)
        storage = self.storage
        out = {}
        for name, mask in masks.items():
            stream = name.split(SEPARATOR, 1)[0]
            if stream in data and stream not in (IS_PAD, TIMESTAMP):
                indices = samplers.window_indices(*drawn, plan.groups[plan.names[name]].offsets)[0]
                mask = mask | storage.flagged(stream, indices)  # type: ignore[attr-defined]
            out[name] = mask
        return data, out

    def time_windows(self, request: TimeWindowRequest, drawn: Drawn) -> tuple[Any, dict[str, np.ndarray]]:
        """The windows of ``request`` anchored at ``drawn`` (the view never races a writer)."""
        view = self.views.current()
        data, masks = self.read_windows(view, request.base.plan, drawn, Touched())
        storage = self.storage
        anchors = drawn[0]
        for name, offsets in request.offsets.items():
            # Saturated, never wrapped round: a time past int64 ns lies past every sample (and is flagged).
            t, past = add_ns(storage.times[anchors][:, None], offsets[None, :])  # type: ignore[attr-defined]
            episode = np.repeat(storage.episode[anchors], len(offsets))  # type: ignore[attr-defined]
            leaves, a = storage.at_times(name, episode, t.reshape(-1))  # type: ignore[attr-defined]
            shape = (len(anchors), len(offsets))
            data[name] = tree.unflatten(storage.plan(name).space,  # type: ignore[attr-defined]
                                        [v.reshape(*shape, *v.shape[1:]) for v in leaves])
            masks[name] = a.flagged.reshape(shape) | past
        return data, masks

    def sample_time_windows(self, request: TimeWindowRequest, batch_size: int, rng: np.random.Generator
                            ) -> tuple[Any, dict[str, np.ndarray]]:
        """``batch_size`` windows of ``request`` drawn uniformly among its anchors."""
        view = self.views.current()
        selected = None if request.episodes is None else np.asarray(request.episodes, np.int64)
        drawn = samplers.draw_in(view.ring, view.episodes, *request.base.margin, batch_size, rng, selected)
        return self.time_windows(request, drawn)

    def time_windows_at(self, request: TimeWindowRequest, numbers: Any) -> tuple[Any, dict[str, np.ndarray]]:
        """The windows of the anchors numbered ``numbers`` (as ``count_anchors`` numbers them)."""
        return self.time_windows(request, samplers.anchors_at(self.held(request.base), numbers))
