"""``AlignedView``: a stream buffer read as steps at anchor times, with the replay buffer's read API.

``buf.aligned(anchor="wrist")`` (the anchor stream's samples are the steps) or ``buf.aligned(rate_hz=30)``
(steps every 1/30 s over the time every included stream covers) gives a read-only view whose step
``i`` is ``{stream: value at the anchor time, ..., "timestamp": anchor time (int64 ns), "is_pad":
{stream: flagged}}``. Each stream's value comes by its method (:mod:`trajstore.streams.align`):
``"previous"`` (default; causal), ``"nearest"``, ``"linear"`` (float leaves). The view is a
:class:`~trajstore.replay_buffer.training_api.TrainingAPI` over an
:class:`~trajstore.streams.aligned_storage.AlignedStorage` and a fixed view of its episodes, so
``len``, ``[i]``, ``episodes``, ``sample``, ``sample_windows``, ``windows_at``, ``select_episodes``,
``split_episodes`` and the torch dataset are the replay buffer's own code. Only the stream samples a
read needs are read and decoded.
"""

from __future__ import annotations

from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.damage import Damage
from trajstore.errors import AlignmentWarning
from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.training_api import TrainingAPI
from trajstore.replay_buffer.view import FixedView, View
from trajstore.replay_buffer.window_plan import SEPARATOR, WindowRequest
from trajstore.spaces import tree
from trajstore.streams.aligned_args import UNHASHABLE, checked_arguments, frozen
from trajstore.streams.aligned_reads import AlignedReads, TimeWindowRequest, time_offsets
from trajstore.streams.aligned_steps import anchor_steps, episode_table, stream_plan
from trajstore.streams.aligned_storage import AlignedStorage, check_holds
from trajstore.streams.folder import read_meta


class AlignedView(TrainingAPI):
    """A stream buffer's streams aligned at anchor times, read like a ``ReplayBuffer`` (read-only).

    Args:
        buffer: the ``StreamBuffer``.
        anchor: the stream whose samples are the steps (its samples in episode ``k`` are that
            episode's steps).
        rate_hz: instead of ``anchor``: steps at ``t0 + round(i * 1e9 / rate_hz)`` ns from ``t0`` =
            the latest first-sample time to the earliest last-sample time of the included streams in
            each episode (every anchor inside that range; a period longer than it: ``t0`` only).
        how: ``{stream: "previous" | "nearest" | "linear"}``; default ``"previous"``.
        tolerance: ``{stream: seconds or None}``: ``is_pad[stream]`` is True where the sample used lies
            strictly farther than this from the step's time (``float("inf")``: never, for a stream
            published on change); default ``None``: True where the step's time lies outside the
            stream's samples in the episode. ``previous`` before the first sample is always True (its
            value would come from the future).
        streams: the streams to include (default every stream, in the buffer's order).

    Episodes in which the anchor or an included stream has no sample, or with no anchor time, are
    left out. Building a view reads every timestamp of the included streams (not their values) and keeps
    about 16 bytes per sample and 40 bytes per step and stream; it is a snapshot (make a new one to see
    samples added since; once the writer discards the open episode a view holds, every read of the
    view raises :class:`~trajstore.streams.ViewDiscardedError`, not retried: make a new view); its copies (pickle, DataLoader workers) have the same steps: ``flush()`` a
    writer before sending its view to other processes. ``view.space`` is ``DictSpace({stream: its
    space, ..., "timestamp": int64 (), "is_pad": {stream: bool ()}})``.

    Raises:
        TypeError: neither or both of ``anchor`` and ``rate_hz``; ``how``/``tolerance`` not mappings.
        ValueError: an unknown stream (in ``anchor``, ``streams``, ``how`` or ``tolerance``; the message
            lists the streams); a bad method; ``"linear"`` for a stream with a non-float leaf (names
            the leaf); a negative or NaN tolerance; ``rate_hz`` not a positive finite number, or one
            that gives more than ``2**31`` anchor steps (counted from the episodes' time ranges before
            any is made; the message gives the count).
    """

    #: The space's ``"is_pad"`` holds the streams' flags; window masks extend it (the torch dataset merges them).
    own_is_pad = True

    def __init__(self, buffer: Any, anchor: str | None = None, rate_hz: float | None = None, *,
                 how: Mapping[str, str] | None = None, tolerance: Mapping[str, float | None] | None = None,
                 streams: Iterable[str] | None = None, _owns_buffer: bool = False, _episodes: Any = None):
        spaces = buffer.streams
        names, methods, tolerances, rate = checked_arguments(spaces, anchor, rate_hz, how, tolerance, streams)
        self.buffer, self.anchor, self.rate_hz = buffer, anchor, rate
        self.how = {n: methods[n] for n in names}
        self.tolerance = {n: (tolerance or {}).get(n) for n in names}
        self.closed = False
        self._owns_buffer = _owns_buffer
        self._requests: dict[Any, TimeWindowRequest] = {}  # checked time-window requests, by their arguments
        # Episodes and timestamps as one state (no discard or episode end between them; appends only add
        # samples past every span). A copy (pickle, DataLoader workers) is given the episodes its original
        # saw: the same steps.
        needed = [*names, *([anchor] if anchor and anchor not in names else [])]
        if _episodes is None:
            episodes, raw, discards = buffer.snapshot(needed)
        else:
            episodes, discards = list(_episodes), buffer.discards
            raw = {n: buffer.timestamps(n) for n in needed}
        times = {n: np.asarray(raw[n], np.int64) for n in needed}
        self._episodes_seen = tuple(episodes)
        self._needs = {n: max((ep.streams[n].stop for ep in episodes), default=0) for n in times}
        for n, t in times.items():
            check_holds(self.cache_path, n, len(t), self._needs[n])
        self._steps = anchor_steps(episodes, names, times, anchor=anchor, rate_hz=rate)
        plans = [stream_plan(n, spaces[n], methods[n], tolerances[n], times[n], self._steps) for n in names]
        last = episodes[-1] if episodes else None
        open_id = last.id if last is not None and not last.done and not last.interrupted else None
        self._storage = AlignedStorage(buffer, plans, self._steps.times, self._steps.episode, self.cache_path,
                                       open_id=open_id, discards=discards)
        self.space = self._storage.space
        count = len(self._steps)
        self._view = View(RingState(None, count, 0, count), episode_table(self._steps, open_id))
        self._reader = AlignedReads(self._storage, self.space, None, FixedView(self._view, str(self.cache_path)))

    # -- what it is --------------------------------------------------------------------------
    @property
    def streams(self) -> tuple[str, ...]:
        """The included streams, in the view's order."""
        return tuple(self.how)

    @property
    def cache_path(self) -> Path | None:
        """The stream buffer's folder."""
        return self.buffer.cache_path

    @property
    def read_only(self) -> bool:
        return True

    @property
    def damaged(self) -> Damage:
        return Damage()

    @property
    def storage(self) -> AlignedStorage:
        """The view's read-only storage (slots = anchor steps)."""
        return self._storage

    def __len__(self) -> int:
        return self._view.count

    @property
    def episodes(self) -> list[Episode]:
        """The view's episodes (each the anchor steps of one stream episode: its id, data, interrupted)."""
        return self._view.episodes.episodes(0, self._view.ring.appended)

    @property
    def num_episodes(self) -> int:
        return self._view.episodes.count(self._view.ring.appended)

    def episode(self, k: int) -> Episode:
        """``episodes[k]`` (``k`` a position, negative from the newest). Raises IndexError out of range."""
        return self._view.episodes.episode_at(k, 0, self._view.ring.appended)

    @property
    def anchor_times(self) -> np.ndarray:
        """int64 ``(len(view),)`` the time (ns) of every step (a copy)."""
        return self._steps.times.copy()

    # -- steps -------------------------------------------------------------------------------
    def get_at(self, index: Any) -> Any:
        """Steps at ``index`` (an int, a slice, a 1-D int array with any order and repeats, a bool mask),
        as ``ReplayBuffer.get_at``: an int gives one step, else a batch with a leading axis ``N``.

        Raises:
            IndexError, TypeError, ValueError: a bad index.
        """
        return self._reads().steps(index)

    def __getitem__(self, index: Any) -> Any:
        return self.get_at(index)

    def get_episode(self, k: int) -> Any:
        """Every step of :meth:`episode` ``(k)`` as a batch."""
        ep = self.episode(k)
        return self.get_at(slice(ep.start, ep.stop))

    # -- windows -----------------------------------------------------------------------------
    def sample_windows(self, batch_size: int, window: int | None = None, *,
                       delta_indices: Mapping[str, Any] | WindowRequest | None = None,
                       delta_timestamps: Mapping[str, Any] | None = None, pad: bool | None = None,
                       rng: np.random.Generator | None = None, episodes: Iterable[int] | None = None,
                       on_damaged: str = "raise") -> Any:
        """``ReplayBuffer.sample_windows`` (``window`` or ``delta_indices`` in steps), plus ``delta_timestamps``.

        ``delta_timestamps={stream: seconds}`` (LeRobot's convention): offsets from each anchor's time;
        ``data[stream]`` has shape ``(B, T, ...)``, the stream's values at those times by its method,
        and ``is_pad[stream]`` (bool ``(B, T)``) is True where the value at that time is flagged by the
        same rule as a step's ``is_pad`` (see ``tolerance`` of :meth:`StreamBuffer.aligned`), so offset 0
        agrees with the step. May be given with ``delta_indices`` for other names (``pad`` goes to those);
        every step is an anchor for the time offsets. Each stream sample a batch needs is read once.

        With ``delta_indices``, ``is_pad[name]`` of a name inside a stream is also True where the
        stream's value at that window step is flagged.

        Raises:
            TypeError, ValueError: as ``ReplayBuffer.sample_windows``; ``delta_timestamps`` with ``window``;
                a ``delta_timestamps`` name that is not a stream of the view, or also in ``delta_indices``;
                an offset that is not finite or lies beyond int64 nanoseconds (``|s| >= 9.22e9``; names the
                stream). An anchor time plus an offset past the int64 range lies past every sample (flagged).
        """
        if delta_timestamps is None:
            return super().sample_windows(batch_size, window, delta_indices=delta_indices, pad=pad, rng=rng,
                                          episodes=episodes, on_damaged=on_damaged)
        if window is not None:
            raise TypeError("delta_timestamps goes with delta_indices or alone, not with window")
        request = self.window_request(delta_indices, delta_timestamps=delta_timestamps,
                                      pad=True if pad is None else pad, episodes=episodes, on_damaged=on_damaged)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        return self._reads().sample_time_windows(request, int(batch_size), rng or np.random.default_rng())

    def window_request(self, delta_indices: Mapping[str, Any] | WindowRequest | TimeWindowRequest | None = None,
                       *, delta_timestamps: Mapping[str, Any] | None = None, pad: bool = True,
                       episodes: Iterable[int] | None = None, leaves: Iterable[str] | None = None,
                       on_damaged: str = "raise") -> Any:
        """``ReplayBuffer.window_request``; with ``delta_timestamps``, a :class:`TimeWindowRequest` that
        :meth:`count_anchors`, :meth:`anchors_at` and :meth:`windows_at` take too.

        Raises:
            ValueError, TypeError: as :meth:`sample_windows`; ``leaves`` with ``delta_timestamps``.
        """
        if isinstance(delta_indices, TimeWindowRequest):
            return delta_indices
        if delta_timestamps is None:
            return super().window_request(delta_indices, pad=pad, episodes=episodes, leaves=leaves,
                                          on_damaged=on_damaged)
        if leaves is not None:
            raise TypeError("leaves= goes without delta_timestamps")
        key = tuple(frozen(v) for v in (delta_indices, delta_timestamps, bool(pad),
                                         None if episodes is None else list(episodes), on_damaged))
        key = None if UNHASHABLE in key else key
        cached = self._requests.get(key) if key is not None else None
        if cached is not None:
            return cached
        offsets = time_offsets(self.how, delta_timestamps)
        named = {n.split(SEPARATOR, 1)[0] for n in (delta_indices or {})}
        both = sorted(named & set(offsets))
        if both:
            raise ValueError(f"stream(s) {both} are named in both delta_indices and delta_timestamps")
        others = [n for n in self.space.spaces if n not in offsets]  # type: ignore[attr-defined]
        base = super().window_request(delta_indices, pad=pad, episodes=episodes, leaves=others,
                                      on_damaged=on_damaged)
        request = TimeWindowRequest(base, offsets, dict(delta_timestamps))
        if key is not None:
            if len(self._requests) >= 8:  # a few requests are in use at a time
                self._requests.clear()
            self._requests[key] = request
        return request

    def count_anchors(self, delta_indices: Any = None, *, pad: bool = True, episodes: Iterable[int] | None = None,
                      on_damaged: str = "raise") -> int:
        """As ``ReplayBuffer.count_anchors``; also takes a :class:`TimeWindowRequest`."""
        if isinstance(delta_indices, TimeWindowRequest):
            return self._reads().held(delta_indices.base).total
        return super().count_anchors(delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)

    def anchors_at(self, numbers: Any, delta_indices: Any = None, *, pad: bool = True,
                   episodes: Iterable[int] | None = None, on_damaged: str = "raise") -> np.ndarray:
        """As ``ReplayBuffer.anchors_at``; also takes a :class:`TimeWindowRequest`."""
        if isinstance(delta_indices, TimeWindowRequest):
            delta_indices = delta_indices.base
        return super().anchors_at(numbers, delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)

    def windows_at(self, numbers: Any, delta_indices: Any, *, pad: bool = True,
                   episodes: Iterable[int] | None = None, on_damaged: str = "raise"
                   ) -> tuple[Any, dict[str, np.ndarray]]:
        """As ``ReplayBuffer.windows_at``; a :class:`TimeWindowRequest` reads its time windows (see
        :meth:`sample_windows`)."""
        if isinstance(delta_indices, TimeWindowRequest):
            return self._reads().time_windows_at(delta_indices, numbers)
        return super().windows_at(numbers, delta_indices, pad=pad, episodes=episodes, on_damaged=on_damaged)

    # -- statistics --------------------------------------------------------------------------
    def stats(self, keys: str | Iterable[str] | None = None) -> dict[str, LeafStats]:
        """The included streams' statistics at their native rates (``StreamBuffer.stats()``: every held
        sample, not the aligned steps), under the view's leaf names (``"joints"``, ``"wrist/rgb"``).

        Args:
            keys: leaf or stream names (a stream takes its numeric leaves); None: every numeric leaf.

        Raises:
            KeyError: a name that is not a stream leaf of the view (``"timestamp"`` and ``"is_pad"`` have none).
        """
        native = self.buffer.stats()
        out: dict[str, LeafStats] = {}
        for name in self.streams:
            whole = tree.leaf_paths(self.space[name]) == ((),)  # a stream that is one leaf
            for key, value in native.get(name, {}).items():
                full = name if whole or not key else f"{name}{SEPARATOR}{key}"
                out[full] = replace(value, name=full) if is_dataclass(value) else value
        if keys is None:
            return out
        names = [keys] if isinstance(keys, str) else list(keys)
        picked: dict[str, LeafStats] = {}
        for key in names:
            hits = {n: s for n, s in out.items() if n == key or n.startswith(key + SEPARATOR)}
            if not hits:
                raise KeyError(f"{key!r} has no statistics in this view (leaves with statistics: {sorted(out)})")
            picked.update(hits)
        return picked

    def _statistics(self) -> Any:
        raise NotImplementedError("an aligned view's statistics are its streams' (see AlignedView.stats)")

    # -- the parts ---------------------------------------------------------------------------
    def _reads(self) -> AlignedReads:
        if self.closed:
            raise ValueError(f"the aligned view of {self.cache_path} is closed")
        return self._reader

    def refresh(self) -> bool:
        """A view is a fixed snapshot: ``False`` (make a new view to see what the writer added since)."""
        return False

    def flush(self) -> None:
        """Nothing to write (a view is read-only)."""

    def close(self) -> None:
        """Close the view (and the stream buffer, if the view opened it itself: an unpickled copy)."""
        if not self.closed and self._owns_buffer:
            self.buffer.close()
        self.closed = True

    def __enter__(self) -> "AlignedView":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        """Pickle as the buffer folder, the arguments and the episodes the view was made from; the copy
        reopens the folder read-only and has the same steps (samples committed since are not in them).

        Raises:
            ValueError: a view of a writer's buffer made with samples not yet flushed (``flush()`` the
                writer first); unpickling raises it too when the folder holds fewer samples than the view
                was made with.
        """
        if self.cache_path is None:
            raise TypeError("an aligned view of an in-memory stream buffer cannot be pickled")
        if not self.buffer.read_only:  # a writer's buffer: the copy will see what is committed, so refuse here
            held = read_meta(self.cache_path).get("lengths", {})
            for name, needed in self._needs.items():
                check_holds(self.cache_path, name, int(held.get(name, 0)), needed)
        return (_reopen, (str(self.cache_path), self.anchor, self.rate_hz, dict(self.how), dict(self.tolerance),
                          list(self.streams), self._episodes_seen))

    def __repr__(self) -> str:
        how = f"anchor={self.anchor!r}" if self.anchor is not None else f"rate_hz={self.rate_hz}"
        return (f"AlignedView({self.cache_path or 'memory'}, {how}, steps={len(self)}, episodes={self.num_episodes}, "
                f"streams={list(self.streams)})")


def _reopen(path: str, anchor: str | None, rate_hz: float | None, how: dict, tolerance: dict, streams: list,
            episodes: Any = None) -> AlignedView:
    import warnings

    from trajstore.streams import StreamBuffer

    buffer = StreamBuffer.load_from(path, read_only=True)
    try:
        with warnings.catch_warnings():  # the episodes left out were named when the original was made
            warnings.simplefilter("ignore", AlignmentWarning)
            return AlignedView(buffer, anchor, rate_hz, how=how, tolerance=tolerance, streams=streams,
                               _owns_buffer=True, _episodes=episodes)
    except BaseException:
        buffer.close()
        raise
