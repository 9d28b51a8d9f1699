"""``StreamBuffer``: sensors recorded at their own rates, each a timestamped stream; a facade.

Each stream is a :class:`~trajstore.replay_buffer.ReplayBuffer` folder of ``{"timestamp": int64 ns,
"value": <the stream's space>}`` steps under ``streams/<name>/`` (routed by metadata as steps are:
a camera to JPEG/PNG/video, the rest to HDF5), written behind by its own background thread; the
buffer's ``streams.json`` and episode log (:mod:`~trajstore.streams.folder`) commit the episodes,
which span every stream. See :class:`StreamBuffer`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping

from trajstore._folder import FolderOwner, fresh_folder, lock_for
from trajstore._suggest import check_keywords, keywords_of, suggests_keywords
from trajstore._urls import local_path, refuse_remote_write
from trajstore.errors import UnknownLeafError
from trajstore.replay_buffer.episode_data import episode_data, flag
from trajstore.replay_buffer.leaf_stats import check_leaves
from trajstore.replay_buffer.staging import WriteStats
from trajstore.spaces import Space
from trajstore.storages import dict_storage_kwargs_from_space
from trajstore.streams.episodes import StreamEpisode
from trajstore.streams.folder import STREAMS_DIR, EpisodeLogFile, check_name, new_meta, read_meta, write_meta
from trajstore.streams.opening import FolderState, drop_unclosed, open_state
from trajstore.streams.reading import StreamReads
from trajstore.streams.writing import Stream, step_space


class StreamBuffer(StreamReads, FolderOwner):
    """Timestamped streams (one per sensor, each at its own rate) in episodes that span every stream.

    ``append(name, value, t)`` / ``extend(name, values, t)`` record samples; ``end_episode(**data)``
    closes the episode in every stream and commits; ``read(name, episode=k)`` gives a stream's
    ``(t_ns, values)`` at its native rate; :meth:`aligned` reads the streams aligned to anchor times.
    Timestamps: float seconds or int nanoseconds in, int64 nanoseconds out.

    Threads: appends to different streams may come from different threads at once (one lock per
    stream); each stream's sub-buffer writes behind, so an append costs the caller about a
    ``ReplayBuffer.append``. ``end_episode``, ``flush`` and ``discard_episode`` take each stream's lock
    in turn: a stream's samples appended before its turn belong to the episode ended. Reads (``read``,
    ``timestamps``, ``read_samples``, ``stream_length``, ``episodes``, aligned views of the buffer) may
    come from any thread while others record: each holds the stream's lock (an append to that stream
    waits for it) and sees one consistent state.

    Crash safety: a killed writer leaves, per stream, a prefix of its samples that holds at least what
    ``flush``/``end_episode`` committed (a stream flushed by a call the kill cut short keeps those samples
    too); the next writable open ends the episode left open (samples past the last closed episode, in
    any stream) as interrupted and commits that at once. Readers (``load_from(path)``, other processes,
    DataLoader workers: the buffer pickles by path and reopens read-only) see what the writer last
    committed, and more after :meth:`refresh`.
    """

    def __init__(self, state: FolderState, *, cache_path: Path, read_only: bool, multiprocessing: bool, lock: Any):
        self._state = state
        self._top = threading.RLock()  # end_episode, flush, discard, refresh, close; episode reads
        self._discards = 0  # discard_episode calls that dropped samples (this process)
        self._init_owner(cache_path, read_only=read_only, multiprocessing=multiprocessing, lock=lock, owns_lock=True)

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, cache_path: str | os.PathLike, streams: Mapping[str, Space], *, check_bounds: bool = True,
               multiprocessing: bool = False, **routing: Any) -> "StreamBuffer":
        """A new, empty stream buffer in the new (or empty) folder ``cache_path``; everything is checked
        before the folder is made.

        Args:
            streams: ``{name: space}`` of one sample of each stream, in the order kept; a camera is a
                ``BoxSpace`` with ``metadata={"kind": "image", ...}`` (routed to JPEG/PNG/video as steps are).
            check_bounds: as ``ReplayBuffer.create``: values outside a leaf's bounds, or NaN, are refused.
            multiprocessing: other processes read the folder while this one writes it.
            **routing: keyword arguments of :func:`~trajstore.storages.dict_storage_kwargs_from_space`
                (``kind_storage_cls``, ``kind_kwargs``, ``key_kwargs``, ...), applied to every stream's
                step space ``{"timestamp", "value"}`` (leaf keys ``"value"`` or ``"value/<key>"``).

        Raises:
            InvalidValueError: a bad stream name (non-empty letters, digits, ``_ - .``, at most 100
                characters; not ``timestamp`` or ``is_pad``), a bad ``"stats"`` mark in a leaf's metadata.
            TypeError: ``streams`` is not a non-empty mapping of Spaces, ``check_bounds`` not a bool, an
                unknown keyword (the message names the closest known one).
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
        """
        refuse_remote_write(cache_path, "StreamBuffer.create")
        check_keywords(routing, ("cache_path", "streams", "check_bounds", "multiprocessing",
                                 *keywords_of(dict_storage_kwargs_from_space)[1:]), passed_to="StreamBuffer.create")
        if cache_path is None:
            raise TypeError("StreamBuffer.create needs a cache_path (a stream buffer lives in a folder)")
        if not isinstance(check_bounds, bool):
            raise TypeError(f"check_bounds must be a bool, got {check_bounds!r}")
        if not isinstance(streams, Mapping) or not streams:
            raise TypeError(f"streams must be a non-empty mapping {{name: Space}}, got {streams!r:.80}")
        for name, space in streams.items():
            check_name(name)
            if not isinstance(space, Space):
                raise TypeError(f"stream {name!r}: its space must be a trajstore Space, got {type(space).__name__}")
            check_leaves(space)
            dict_storage_kwargs_from_space(step_space(space), **routing)  # a bad routing keyword: TypeError
        names = list(streams)
        with fresh_folder(cache_path) as (path, lock):
            assert path is not None
            (path / STREAMS_DIR).mkdir()
            log = EpisodeLogFile(path, read_only=False, create=True, names=names)
            made: dict[str, Stream] = {}
            try:
                for name in names:
                    made[name] = Stream.create(name, streams[name], path / STREAMS_DIR / name,
                                               multiprocessing=multiprocessing, check_bounds=check_bounds,
                                               routing=routing)
                meta = new_meta(names, check_bounds)
                write_meta(path, meta)
            except BaseException:
                for part in [*made.values(), log]:
                    part.close()
                raise
            state = FolderState(path, meta, made, log)
            return cls(state, cache_path=path, read_only=False, multiprocessing=multiprocessing, lock=lock)

    @classmethod
    @suggests_keywords
    def load_from(cls, cache_path: str | os.PathLike, *, read_only: bool = True,
                  multiprocessing: bool = False) -> "StreamBuffer":
        """Reopen a stream buffer folder. A writer (``read_only=False``) ends an episode the last writer
        left open (a crash, a close without ``end_episode``) as interrupted and commits that at once; a
        reader sees it as the open episode.

        Raises:
            FormatError: not a stream buffer folder (a ReplayBuffer folder is named as such), a newer
                version, a missing or damaged file (names it, the episode record and the stream): e.g.
                episode counts that are not whole numbers >= 0, name unknown streams, or add up to more
                samples than ``streams.json`` commits or the stream's folder holds. Raised before anything
                is written.
            LockedError: ``read_only=False`` while another process is writing.
        """
        path = Path(local_path(cache_path))
        read_meta(path)  # not a stream buffer folder: a FormatError before any lock is taken
        lock = lock_for(path, read_only)
        try:
            state = open_state(path, read_only=read_only, multiprocessing=multiprocessing)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(state, cache_path=path, read_only=read_only, multiprocessing=multiprocessing, lock=lock)

    def flush(self) -> None:
        """Make every sample so far durable and visible to readers: each stream's sub-buffer flushed (in
        turn, under its lock), then ``streams.json`` replaced atomically.

        Raises:
            ReadOnlyError: opened read-only. OSError, ...: a write failed (see ``ReplayBuffer.flush``).
        """
        self._check_writable()
        with self._top:
            self._state.commit([], self._flush_streams())

    def close(self) -> None:
        """Flush (if writable), close every stream and release the writer lock. Idempotent. An episode
        left open stays open (the next writable open ends it as interrupted)."""
        if self.closed:
            return
        with self._top:
            if not self.read_only and os.getpid() == self._pid:
                self.flush()
            try:
                self._state.close()
            finally:
                self._release_lock()
                self.closed = True

    def __del__(self) -> None:
        # Dropped without close(): one warning for the buffer (not one per stream's sub-buffer). Flushing
        # here is unsafe at interpreter exit, as for a ReplayBuffer.
        if getattr(self, "closed", True) or getattr(self, "read_only", True) or os.getpid() != self._pid:
            return
        drop_unclosed(self._state, self.cache_path)

    def refresh(self) -> bool:
        """Re-read what the writer has committed (for readers); True if anything changed."""
        self._check_open()
        if not self.read_only:
            return False
        with self._top:
            return self._state.refresh()

    def _reopen_args(self) -> tuple[Any, ...]:
        return (reopen_stream_buffer, (str(self.cache_path), self.multiprocessing))

    def _after_fork(self) -> None:
        # A forked child reads what was committed; the parent's threads and locks are not the child's.
        self._top = threading.RLock()
        state = self._state
        for stream in state.streams.values():
            stream.lock = threading.Lock()
            stream.times.truncate(state.meta["lengths"][stream.name])
        state.sync(state.meta)

    # -- writing ---------------------------------------------------------------------------
    def append(self, name: str, value: Any, t: Any) -> None:
        """Append one sample ``value`` (a value of the stream's space) at time ``t`` (float seconds, or int
        nanoseconds); written behind, durable at the next :meth:`flush` / :meth:`end_episode`.

        Raises:
            UnknownLeafError: no stream ``name`` (an ``InvalidValueError`` and ``KeyError``).
            InvalidValueError: ``t`` not finite, not a number, or before the stream's last timestamp in
                this episode; ``value`` does not fit the space (names the stream and the leaf). Nothing is
                written.
            ReadOnlyError: opened read-only.
        """
        stream = self._writable_stream(name)
        with stream.lock:
            stream.append(value, t)

    def extend(self, name: str, values: Any, t: Any) -> None:
        """Append ``N`` samples: ``values`` a batch (leading axis ``N``), ``t`` ``(N,)`` float seconds or
        integer nanoseconds, non-decreasing and not before the stream's last timestamp in this episode.

        Raises:
            UnknownLeafError, InvalidValueError (names the stream and the first bad index), ReadOnlyError:
            as :meth:`append`; nothing of the batch is written.
        """
        stream = self._writable_stream(name)
        with stream.lock:
            stream.extend(values, t)

    def end_episode(self, *, interrupted: bool = False, **data: Any) -> None:
        """End the episode in every stream and commit: each stream with samples in it ends its
        sub-episode and is flushed, then the episode's record (``data``, per-stream counts) is appended
        to the log and ``streams.json`` replaced. Nothing happens when no stream has a sample since the
        last episode ended.

        Args:
            interrupted: the episode was cut short (``done`` False, ``interrupted`` True).
            **data: JSON values kept with the episode (``task="push"``), read back as ``episode(k).data``.

        Raises:
            InvalidValueError: a value of ``data`` is not JSON (names the key); ``interrupted`` not a bool.
            ValueError: ``data`` given but no sample appended since the last episode ended.
            ReadOnlyError: opened read-only. Nothing is written when one of these is raised.
        """
        self._check_writable()
        interrupted = flag("end_episode: interrupted", interrupted)
        checked = episode_data(data)
        with self._top:
            state = self._state
            # Samples ended in a stream but not yet committed (an earlier call that failed) count too.
            if not any(len(s.times) > state.index.closed(n) for n, s in state.streams.items()):
                if checked:
                    raise ValueError("end_episode with data but no sample appended since the last episode ended")
                return
            counts, lengths = {}, {}
            for name, stream in state.streams.items():
                with stream.lock:
                    stream.end(interrupted)
                    n = stream.open_start - state.index.closed(name)
                    if n:
                        stream.sub.flush()
                        counts[name] = n
                    lengths[name] = len(stream.times)  # all durable: the closed episodes were flushed
            record = {"id": state.meta["next_id"], "interrupted": interrupted, "data": checked, "counts": counts}
            state.commit([record], lengths)

    def discard_episode(self) -> int:
        """Drop the open episode's samples in every stream (each sub-buffer commits that at once, then
        ``streams.json``); returns how many samples were dropped over all streams (0 when none).

        Raises:
            ReadOnlyError: opened read-only.
        """
        self._check_writable()
        with self._top:
            total, dropped, lengths = 0, [], {}
            for name, stream in self._state.streams.items():
                with stream.lock:
                    n = stream.discard()
                    lengths[name] = len(stream.times)
                if n:
                    total += n
                    dropped.append(name)
            if dropped:
                self._discards += 1  # first: a view holding the open episode must not read reused positions
                self._state.commit([], {**self._state.meta["lengths"], **{n: lengths[n] for n in dropped}},
                                   tuple(dropped))
            return total

    def _flush_streams(self) -> dict[str, int]:
        lengths = {}
        for name, stream in self._state.streams.items():
            with stream.lock:
                stream.sub.flush()
                lengths[name] = len(stream.times)
        return lengths

    @property
    def discards(self) -> int:
        """How many :meth:`discard_episode` calls of this buffer object dropped samples (0 for a reader:
        another process's discards are not counted). A view holding the open episode compares it."""
        return self._discards

    def committed_discards(self) -> dict[str, int]:
        """``{stream: discard_episode calls that dropped its samples}`` as the folder commits them now
        (read from ``streams.json`` in a reader or a forked copy, so another process's discards count)."""
        self._check_open()
        if self.read_only or os.getpid() != self._pid:
            return {n: int(k) for n, k in read_meta(self.cache_path)["discards"].items()}
        return dict(self._state.meta["discards"])

    # -- reading ---------------------------------------------------------------------------
    @property
    def streams(self) -> dict[str, Space]:
        """``{name: the stream's value space}`` in the buffer's order (a new dict)."""
        return {n: s.space for n, s in self._state.streams.items()}

    def stream_length(self, name: str) -> int:
        """Samples of stream ``name`` held (a reader: as of its last refresh). Raises UnknownLeafError."""
        stream = self._stream(name)
        with stream.lock:
            return self._held(stream)

    def _held(self, stream: Stream) -> int:
        return len(stream.times) if not self.read_only else self._state.lengths[stream.name]

    def write_stats(self, name: str) -> WriteStats:
        """What stream ``name``'s write-behind has done since the buffer was opened (``ReplayBuffer.write_stats``
        of its sub-buffer: blocks written, seconds the caller waited on a full staging area; zeros for a
        reader). Raises UnknownLeafError."""
        return self._stream(name).sub.write_stats

    @property
    def num_episodes(self) -> int:
        """Closed episodes, plus the open one if it has samples."""
        with self._top:
            self._check_open()
            index = self._state.index
            return index.count({n: self.stream_length(n) - index.closed(n) for n in self._state.streams})

    @property
    def episodes(self) -> list[StreamEpisode]:
        """Every episode, oldest first; the open one (if it has samples) last."""
        with self._top:
            return [self.episode(k) for k in range(self.num_episodes)]

    def episode(self, k: int) -> StreamEpisode:
        """``episodes[k]`` (``k`` a position, negative from the newest).

        Raises:
            IndexError: ``k`` out of range (says how many episodes there are).
        """
        with self._top:
            self._check_open()
            lengths = {n: self.stream_length(n) for n in self._state.streams}
            return self._state.index.episode(k, lengths, self._state.meta["next_id"], self._time_at)

    def _time_at(self, name: str, i: int) -> int:
        stream = self._state.streams[name]
        with stream.lock:
            return stream.times.at(i)

    def aligned(self, *args: Any, **kwargs: Any) -> Any:
        """An aligned, read-only view of the streams: :class:`trajstore.streams.aligned.AlignedView`
        (``anchor=`` a stream or ``rate_hz=``, ``how=``, ``tolerance=``, ``streams=``)."""
        from trajstore.streams.aligned import AlignedView

        self._check_open()
        return AlignedView(self, *args, **kwargs)

    # -- helpers ---------------------------------------------------------------------------
    def _stream(self, name: str) -> Stream:
        self._check_open()
        stream = self._state.streams.get(name) if isinstance(name, str) else None
        if stream is None:
            raise UnknownLeafError(f"no stream named {name!r}; this buffer's streams are {list(self._state.streams)}")
        return stream

    def _writable_stream(self, name: str) -> Stream:
        self._check_writable()
        return self._stream(name)

    def __repr__(self) -> str:
        if self.closed:
            return f"StreamBuffer({self.cache_path}, closed)"
        counts = ", ".join(f"{n}={self.stream_length(n)}" for n in self._state.streams)
        return f"StreamBuffer({self.cache_path}, episodes={self.num_episodes}, samples=({counts}))"


def reopen_stream_buffer(path: str, multiprocessing: bool) -> StreamBuffer:
    """The unpickling side of a stream buffer: the folder opened read-only in this process."""
    return StreamBuffer.load_from(path, read_only=True, multiprocessing=multiprocessing)
