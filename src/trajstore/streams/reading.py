"""The native-rate reads of a stream buffer: timestamps, one episode's samples, samples by position,
statistics. A base class of :class:`~trajstore.streams.StreamBuffer`, over its public episode API and
each stream's sub-buffer.

Every read of a stream holds its lock (appends to it from other threads wait meanwhile), and a read
of an episode also the buffer's lock (taken first, as ``end_episode`` does), so a read sees one
consistent state and never touches a sub-buffer while another thread writes to it."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from trajstore.replay_buffer.leaf_stats import LeafStats
from trajstore.streams.episodes import StreamEpisode
from trajstore.streams.writing import Stream


class BufferSnapshot(NamedTuple):
    """What :meth:`StreamBuffer.snapshot` returns: one consistent state of the buffer."""

    episodes: list[StreamEpisode]
    timestamps: dict[str, Any]
    discards: int


class StreamReads:
    """Reads at the streams' native rates (see :class:`~trajstore.streams.StreamBuffer`)."""

    def _stream(self, name: str) -> Stream:
        raise NotImplementedError

    _top: Any  # the buffer's lock: episodes do not end, are discarded or refreshed while it is held

    def _held(self, stream: Stream) -> int:
        """Samples of ``stream`` shown (the caller holds its lock)."""
        raise NotImplementedError

    def episode(self, k: int) -> StreamEpisode:
        raise NotImplementedError

    @property
    def streams(self) -> dict[str, Any]:
        raise NotImplementedError

    def snapshot(self, names: Any) -> "BufferSnapshot":
        """The episodes, the timestamps of streams ``names`` and :attr:`discards` as one consistent state:
        read under the buffer's lock (no episode ends or is discarded meanwhile), each stream's timestamps
        under its lock after the episodes (appends since only add samples past every episode's span).

        Returns:
            ``BufferSnapshot(episodes, timestamps={name: int64 (N,) ns}, discards)``.

        Raises:
            UnknownLeafError: an unknown stream name.
        """
        with self._top:
            self._check_open()
            episodes = self.episodes
            times = {n: self.timestamps(n) for n in names}
            return BufferSnapshot(episodes, times, self._discards)

    def timestamps(self, name: str, episode: int | None = None) -> np.ndarray:
        """Timestamps (int64 ns, ``(N,)``) of every held sample of stream ``name`` (``episode=None``) or
        of episode position ``episode``'s samples. Raises UnknownLeafError, IndexError."""
        stream = self._stream(name)
        if episode is None:
            with stream.lock:  # a consistent copy while another thread appends
                return stream.times.view(0, self._held(stream))
        with self._top:
            span = self.episode(episode).streams[name]
            with stream.lock:
                return stream.times.view(span.start, span.stop)

    def read(self, name: str, episode: int) -> tuple[np.ndarray, Any]:
        """``(t_ns, values)`` of stream ``name`` in episode position ``episode``: timestamps int64 ``(N,)``
        and the values as a batch (leading axis ``N``) in the space's dtypes.

        Raises:
            UnknownLeafError: no stream ``name``. IndexError: no such episode.
        """
        stream = self._stream(name)
        with self._top:  # no episode ends or is discarded meanwhile; appends wait for the read
            span = self.episode(episode).streams[name]
            with stream.lock:
                values = stream.sub.get_at(slice(span.start, span.stop))["value"]
                return stream.times.view(span.start, span.stop), values

    def read_samples(self, name: str, positions: Any) -> Any:
        """Values of stream ``name`` at sample ``positions`` (ints, 1-D, any order, repeats allowed;
        negative from the end; a position is an index in the stream's whole sample sequence, as
        :class:`~trajstore.streams.episodes.StreamSpan` gives): a batch with a leading axis
        ``len(positions)``. Only those samples are read (a camera decodes only those frames).

        Raises:
            UnknownLeafError: no stream ``name``. IndexError: a position outside the held samples.
            TypeError: positions not integers.
        """
        stream = self._stream(name)
        pos = np.asarray(positions)
        if pos.ndim != 1 or (pos.dtype.kind not in "iu" and pos.size):
            raise TypeError(f"stream {name!r}: positions must be a 1-D integer array, got {pos.dtype} {pos.shape}")
        pos = pos.astype(np.int64)
        with stream.lock:  # the sub-buffer is not read while another thread appends to it
            return self._read_positions(stream, pos)

    def _read_positions(self, stream: Stream, pos: np.ndarray) -> Any:
        name, n = stream.name, self._held(stream)
        if pos.size and (pos.min() < -n or pos.max() >= n):
            bad = int(np.argmax((pos < -n) | (pos >= n)))
            raise IndexError(f"stream {name!r}: position {int(pos[bad])} (index {bad}) is outside the stream's "
                             f"{n} samples")
        pos = np.where(pos < 0, pos + n, pos)
        return stream.sub.get_at(pos)["value"]

    def stats(self) -> dict[str, dict[str, LeafStats]]:
        """Per stream, the statistics of its numeric value leaves (``ReplayBuffer.stats``), keyed by the
        leaf's key within the stream (the stream's name for a stream whose space is not a dict)."""
        out: dict[str, dict[str, LeafStats]] = {}
        for name in self.streams:
            stream = self._stream(name)
            try:
                with stream.lock:
                    raw = stream.sub.stats("value")
            except ValueError:  # no numeric leaf (text only)
                raw = {}
            out[name] = {(name if key == "value" else key[len("value/"):]): v for key, v in raw.items()}
        return out
