"""What a stream buffer folder holds (``trajstore info`` / ``trajstore episodes`` on one): its streams with
their spaces, storages, sample counts and measured rates (:mod:`trajstore.streams.rates`), and its
episodes with each stream's span (samples, first and last time, rate within the episode).

A stream buffer folder is recognised by its ``streams.json`` (:func:`is_stream_folder`); each stream is a
replay buffer folder of its own (``streams/<name>/``), described as :func:`trajstore.ops.info.describe`
describes any buffer. Reads timestamps only, no stream values.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajstore.ops.info import LeafInfo, StorageInfo, describe
from trajstore.streams.folder import STREAMS_DIR, read_meta
from trajstore.streams.folder import is_stream_folder as _is_stream_folder
from trajstore.streams.rates import StreamRates, episode_timestamps, measure_rates

if TYPE_CHECKING:
    from trajstore.streams import StreamBuffer

#: Leaf of a stream's sub-buffer holding the sample times (int64 ns); the values are under ``VALUE_LEAF``.
TIMESTAMP_LEAF = "timestamp"
VALUE_LEAF = "value"


def is_stream_folder(path: str | os.PathLike) -> bool:
    """True when ``path`` is a local folder holding ``streams.json`` (a URL is never one)."""
    try:
        return _is_stream_folder(Path(path))
    except (OSError, ValueError):
        return False


def stream_folders(path: str | os.PathLike) -> dict[str, Path]:
    """Stream name -> its sub-buffer folder (a replay buffer folder), in the buffer's order.

    Raises:
        FormatError: ``streams.json`` is missing or damaged (``trajstore.streams.folder.read_meta``).
    """
    return {name: Path(path) / STREAMS_DIR / name for name in read_meta(Path(path))["streams"]}


@dataclass
class StreamInfo:
    """One stream: its value leaves (keys relative to the stream: the stream's name for a non-dict
    stream), its sub-buffer's storages (bytes on disk), its samples and measured rates."""

    name: str
    folder: str
    space: str                      # the value space's type name ("box", "dict", ...)
    samples: int
    episodes_with_samples: int
    rates: StreamRates
    leaves: list[LeafInfo] = field(default_factory=list)
    storages: list[StorageInfo] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.storages)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["rates"] = self.rates.to_json()
        return {**d, "nbytes": self.nbytes}


@dataclass
class StreamBufferInfo:
    """What :func:`describe_streams` found: episodes (closed ones split into complete and interrupted, and
    whether one is open), the recorded time (sum over episodes of last minus first sample, any stream)
    and each stream."""

    path: str
    episodes: int
    complete_episodes: int
    interrupted_episodes: int
    open_episode: bool
    duration_s: float
    streams: list[StreamInfo] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.streams)

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON values: what ``trajstore info --json`` prints for a stream buffer."""
        d = {k: v for k, v in asdict(self).items() if k != "streams"}
        return {"kind": "streams", **d, "streams": [s.to_json() for s in self.streams], "nbytes": self.nbytes}


def _stream_leaves(name: str, leaves: list[LeafInfo]) -> list[LeafInfo]:
    """The sub-buffer's ``value`` leaves with keys relative to the stream (``value`` -> the stream name)."""
    out = []
    for leaf in leaves:
        if leaf.key == VALUE_LEAF:
            out.append(LeafInfo(name, leaf.storage, leaf.dtype, leaf.shape, leaf.metadata, leaf.lossless))
        elif leaf.key.startswith(VALUE_LEAF + "/"):
            out.append(LeafInfo(leaf.key[len(VALUE_LEAF) + 1:], leaf.storage, leaf.dtype, leaf.shape, leaf.metadata,
                                leaf.lossless))
    return out


def describe_streams(path: str | os.PathLike) -> StreamBufferInfo:
    """Open the stream buffer at ``path`` read-only and summarise it (timestamps are read, values are not).

    Raises:
        FormatError: not a stream buffer folder; the errors of ``StreamBuffer.load_from``.
    """
    from trajstore.streams import StreamBuffer

    folders = stream_folders(path)
    with StreamBuffer.load_from(path, read_only=True) as buf:
        eps = buf.episodes
        ids = [e.id for e in eps]
        spans = [(e.first_ns, e.last_ns) for e in eps]
        info = StreamBufferInfo(str(path), len(eps), sum(1 for e in eps if e.done),
                                sum(1 for e in eps if e.interrupted),
                                any(not e.done and not e.interrupted for e in eps),
                                sum((b - a) for a, b in spans if a is not None and b is not None) * 1e-9)
        for name, space in buf.streams.items():
            times = episode_timestamps(buf, name, eps)
            rates = measure_rates(times, ids)
            info.streams.append(StreamInfo(name, str(folders.get(name, "")), space.type_name, rates.samples,
                                           rates.episodes_with_samples, rates))
    for s in info.streams:  # each stream's sub-buffer, as `trajstore info` describes a buffer
        sub = describe(s.folder)
        s.leaves = _stream_leaves(s.name, sub.leaves)
        s.storages = sub.storages
    return info


@dataclass
class SpanRow:
    """One stream within one episode: positions ``[start, stop)`` in the stream, its samples, first and last
    time (ns, ``None`` without samples), its duration and median rate within the episode."""

    start: int
    stop: int
    samples: int
    first_ns: int | None
    last_ns: int | None
    rate_hz: float | None
    gaps: int


@dataclass
class StreamEpisodeRow:
    """One held episode of a stream buffer, as ``trajstore episodes`` shows it."""

    id: int
    task: Any
    success: Any
    interrupted: bool
    open: bool
    duration_s: float | None  # last minus first sample time over all streams
    streams: dict[str, SpanRow]
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class StreamEpisodeSummary:
    path: str
    streams: list[str]
    rows: list[StreamEpisodeRow]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "streams", **asdict(self)}


def summarize_stream_episodes(buf: "StreamBuffer") -> StreamEpisodeSummary:
    """One :class:`StreamEpisodeRow` per held episode (the open one last), each stream's span with its
    rate within the episode (:func:`~trajstore.streams.rates.measure_rates` of that episode alone)."""
    eps = buf.episodes
    times = {name: episode_timestamps(buf, name, eps) for name in buf.streams}
    rows = []
    for k, e in enumerate(eps):
        spans = {}
        for name in buf.streams:
            span = e.streams.get(name)
            r = measure_rates([times[name][k]], [e.id])
            start, stop = (span.start, span.stop) if span is not None else (0, 0)
            spans[name] = SpanRow(start, stop, r.samples, None if span is None else span.first_ns,
                                  None if span is None else span.last_ns, r.rate_hz, r.gaps)
        first, last = e.first_ns, e.last_ns
        rows.append(StreamEpisodeRow(e.id, e.data.get("task"), e.data.get("success"), e.interrupted,
                                     not e.done and not e.interrupted,
                                     None if first is None or last is None else (last - first) * 1e-9, spans,
                                     dict(e.data)))
    return StreamEpisodeSummary(str(buf.cache_path), list(buf.streams), rows)


__all__ = ["is_stream_folder", "stream_folders", "describe_streams", "StreamBufferInfo", "StreamInfo",
           "summarize_stream_episodes", "StreamEpisodeSummary", "StreamEpisodeRow", "SpanRow"]
