"""Sensors at their own rates: timestamped streams recorded natively (:class:`StreamBuffer`), read at
their native rate or aligned to anchor times (``StreamBuffer.aligned``)."""

from trajstore.streams.aligned_storage import ViewDiscardedError
from trajstore.streams.buffer import StreamBuffer
from trajstore.streams.reading import BufferSnapshot
from trajstore.streams.episodes import StreamEpisode, StreamSpan

__all__ = ["BufferSnapshot", "StreamBuffer", "StreamEpisode", "StreamSpan", "ViewDiscardedError"]
