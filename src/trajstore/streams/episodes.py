"""Episodes of a stream buffer: :class:`StreamSpan`, :class:`StreamEpisode` and the index of closed
episodes (per-stream sample counts, prefix sums). No I/O."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class StreamSpan:
    """One stream within one episode.

    Attributes:
        start, stop: positions ``[start, stop)`` in the stream's whole sample sequence (the positions
            :meth:`StreamBuffer.read_samples` takes).
        first_ns, last_ns: the first and last timestamp (int64 ns) of those samples; ``None`` when the
            stream has no sample in the episode.
    """

    start: int
    stop: int
    first_ns: int | None
    last_ns: int | None

    @property
    def count(self) -> int:
        """Samples of the stream in the episode."""
        return self.stop - self.start

    def __repr__(self) -> str:
        return (f"StreamSpan(start={self.start}, stop={self.stop}, count={self.count}, first_ns={self.first_ns}, "
                f"last_ns={self.last_ns})")


@dataclass(frozen=True)
class StreamEpisode:
    """One episode of a stream buffer as seen now.

    Attributes:
        id: episode number from 0 since creation (a discarded episode's number goes to the next one).
        data: the JSON data of ``end_episode(**data)`` (this episode object's own copy; ``{}`` when none).
        interrupted: cut short (``end_episode(interrupted=True)``, or a writer that died or closed
            without ``end_episode``, ended when the folder was next opened for writing).
        done: ended by ``end_episode(interrupted=False)`` (False for the open episode).
        streams: every stream's :class:`StreamSpan` in this episode (a stream without samples has
            ``count == 0``), in the buffer's stream order.
    """

    id: int
    data: dict[str, Any]
    interrupted: bool
    done: bool
    streams: dict[str, StreamSpan]

    @property
    def first_ns(self) -> int | None:
        """The earliest first timestamp over the streams with samples (``None`` if none has any)."""
        firsts = [s.first_ns for s in self.streams.values() if s.first_ns is not None]
        return min(firsts) if firsts else None

    @property
    def last_ns(self) -> int | None:
        """The latest last timestamp over the streams with samples (``None`` if none has any)."""
        lasts = [s.last_ns for s in self.streams.values() if s.last_ns is not None]
        return max(lasts) if lasts else None

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={s.count}" for k, s in self.streams.items())
        return (f"StreamEpisode(id={self.id}, done={self.done}, interrupted={self.interrupted}, "
                f"streams=({counts}), data={self.data!r})")


class EpisodeIndex:
    """The closed episodes: their records and, per stream, where each one starts (prefix sums)."""

    def __init__(self, names: list[str]):
        self.names = list(names)
        self.records: list[dict[str, Any]] = []
        self._starts: dict[str, list[int]] = {n: [0] for n in names}  # len(records) + 1 each

    def add(self, record: dict[str, Any]) -> None:
        """Add one closed episode's record (``{"id", "interrupted", "data", "counts"}``)."""
        self.records.append(record)
        for name in self.names:
            starts = self._starts[name]
            starts.append(starts[-1] + int(record["counts"].get(name, 0)))

    def closed(self, name: str) -> int:
        """Samples of ``name`` in closed episodes (the open episode starts there)."""
        return self._starts[name][-1]

    def count(self, open_counts: Mapping[str, int]) -> int:
        """Number of episodes: the closed ones, plus the open one if it has samples."""
        return len(self.records) + (1 if any(open_counts.get(n, 0) for n in self.names) else 0)

    def episode(self, k: int, lengths: Mapping[str, int], next_id: int,
                time_at: Callable[[str, int], int]) -> StreamEpisode:
        """Episode at position ``k`` (negative from the newest); ``lengths``: samples held per stream;
        ``time_at(name, i)``: the timestamp of sample ``i`` of a stream.

        Raises:
            IndexError: ``k`` out of range (says how many episodes there are).
        """
        open_counts = {n: lengths[n] - self.closed(n) for n in self.names}
        total = self.count(open_counts)
        if isinstance(k, bool) or not isinstance(k, int) and not hasattr(k, "__index__"):
            raise TypeError(f"episode position must be an int, got {type(k).__name__}")
        k = int(k)
        if not -total <= k < total:
            raise IndexError(f"episode {k} out of range: the buffer has {total} episodes")
        k %= total
        spans = {}
        for name in self.names:
            starts = self._starts[name]
            start = starts[k]
            stop = starts[k + 1] if k < len(self.records) else lengths[name]
            spans[name] = StreamSpan(start, stop, time_at(name, start) if stop > start else None,
                                     time_at(name, stop - 1) if stop > start else None)
        if k < len(self.records):
            rec = self.records[k]
            return StreamEpisode(rec["id"], copy.deepcopy(rec["data"]), rec["interrupted"], not rec["interrupted"],
                                 spans)
        return StreamEpisode(next_id, {}, False, False, spans)
