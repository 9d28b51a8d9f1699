"""Making and opening a stream buffer folder: its streams, the episode log and index, the reader's
sync with what the writer committed, and the recovery of an episode a dead writer left open."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

from trajstore.errors import FormatError
from trajstore.streams.episodes import EpisodeIndex
from trajstore.streams.folder import LOG_FILE, META_FILE, STREAMS_DIR, EpisodeLogFile, read_meta, write_meta
from trajstore.streams.writing import Stream


class FolderState:
    """What one open stream buffer knows of its folder: the last committed ``streams.json``, the episode
    index of the committed log, the streams, and (a reader) the sample count shown per stream."""

    def __init__(self, path: Path, meta: dict[str, Any], streams: dict[str, Stream], log: EpisodeLogFile):
        self.path, self.meta, self.streams, self.log = path, meta, streams, log
        self.index = EpisodeIndex(list(streams))
        self.lengths = {n: 0 for n in streams}  # what a reader shows (a writer uses its timestamps)

    # -- committing (a writer) ---------------------------------------------------------------
    def commit(self, records: list[dict[str, Any]], lengths: dict[str, int], discarded: tuple[str, ...] = ()
               ) -> None:
        """Append ``records`` to the log (fsync), then replace ``streams.json`` naming them and the durable
        sample ``lengths`` of every stream; the streams' data must be flushed before this is called."""
        meta = copy.deepcopy(self.meta)
        log = meta["log"]
        if records:
            log["bytes"] = self.log.append(log["bytes"], records)
            log["records"] += len(records)
            meta["next_id"] = records[-1]["id"] + 1
        meta["lengths"] = dict(lengths)
        for name in discarded:
            meta["discards"][name] += 1
        meta["commit"] += 1
        write_meta(self.path, meta)
        self.meta = meta
        for rec in records:
            self.index.add(rec)

    # -- following the writer (a reader) ----------------------------------------------------------
    def sync(self, meta: dict[str, Any]) -> None:
        """Take in the committed ``meta`` (newer than or equal to :attr:`meta`): new log records, the
        streams' new samples and timestamps."""
        old = self.meta
        old_closed = {n: self.index.closed(n) for n in self.streams}
        start, done = (old["log"]["bytes"], len(self.index.records)) if old is not None else (0, 0)
        records = self.log.read(start, meta["log"]["bytes"], meta["log"]["records"] - done, done)
        closed = {n: self.index.closed(n) + sum(r["counts"].get(n, 0) for r in records) for n in self.streams}
        check_closed(self.path, closed, meta["lengths"], "streams.json commits")  # before anything changes
        for name, stream in self.streams.items():
            with stream.lock:  # reads of the stream from other threads wait
                stream.sub.refresh()
                check_closed(self.path, {name: closed[name]}, {name: stream.held()}, "its folder holds")
        for rec in records:
            self.index.add(rec)
        for name, stream in self.streams.items():
            with stream.lock:
                shown = min(meta["lengths"][name], stream.held())
                if old is not None and old["discards"][name] != meta["discards"][name]:
                    stream.times.truncate(old_closed[name])  # the open episode's samples were replaced
                stream.times.truncate(shown)
                stream.load_times(shown)
                stream.open_start = self.index.closed(name)
                self.lengths[name] = shown
        self.meta = meta

    def refresh(self) -> bool:
        meta = read_meta(self.path)
        if meta["commit"] == self.meta["commit"]:
            return False
        self.sync(meta)
        return True

    def close(self) -> None:
        failures = []
        for part in [*self.streams.values(), self.log]:
            try:
                part.close()
            except BaseException as exc:  # noqa: BLE001 - the others are closed all the same
                failures.append(exc)
        if failures:
            raise failures[0]


def open_state(path: Path, *, read_only: bool, multiprocessing: bool) -> FolderState:
    """Open the streams and the log of ``path``; a writer also ends an episode left open (committed at once).

    Raises:
        FormatError: not a stream buffer folder, or files that disagree (names the stream and file).
    """
    meta = read_meta(path)
    streams: dict[str, Stream] = {}
    log = None
    try:
        for name in meta["streams"]:
            folder = path / STREAMS_DIR / name
            try:
                streams[name] = Stream.open(name, folder, read_only=read_only, multiprocessing=multiprocessing)
            except FormatError as exc:
                raise FormatError(f"{path}: stream {name!r} ({folder}): {exc}") from exc
        log = EpisodeLogFile(path, read_only=read_only, names=list(meta["streams"]))
        state = FolderState(path, meta, streams, log)
        if read_only:
            state.meta = None  # type: ignore[assignment]
            state.sync(meta)
            return state
        recover(state)
        return state
    except BaseException:
        for part in [*streams.values(), log]:
            if part is not None:
                part.close()
        raise


def check_closed(path: Path, closed: dict[str, int], have: dict[str, int], what: str) -> None:
    """Refuse an episode log whose closed episodes count more samples of a stream than ``have`` (what
    ``streams.json`` commits, or what the stream's folder holds).

    Raises:
        FormatError: names the log file, the stream and both numbers.
    """
    for name, n in closed.items():
        if n > have[name]:
            raise FormatError(f"{path / LOG_FILE}: the closed episodes count {n} samples of stream {name!r} but "
                              f"{what} only {have[name]} ({path / META_FILE}, {path / STREAMS_DIR / name})")


def recover(state: FolderState) -> None:
    """A writer's open: read the committed log and each stream's samples (every durable one), and end
    the samples past the last closed episode, in any stream, as one interrupted episode, committed."""
    meta = state.meta
    records = state.log.read(0, meta["log"]["bytes"], meta["log"]["records"])
    closed = {n: sum(r["counts"].get(n, 0) for r in records) for n in state.streams}
    check_closed(state.path, closed, meta["lengths"], "streams.json commits")  # before anything is written
    check_closed(state.path, closed, {n: s.held() for n, s in state.streams.items()}, "its folder holds")
    for rec in records:
        state.index.add(rec)
    counts = {}
    for name, stream in state.streams.items():
        held, closed = stream.held(), state.index.closed(name)
        stream.load_times(held)
        stream.open_start = closed
        if held > closed:
            counts[name] = held - closed
    lengths = {n: s.held() for n, s in state.streams.items()}
    if counts:
        for name, stream in state.streams.items():
            stream.open_start = len(stream.times)
        state.commit([{"id": meta["next_id"], "interrupted": True, "data": {}, "counts": counts}], lengths)
    elif lengths != meta["lengths"]:
        state.commit([], lengths)



def drop_unclosed(state: FolderState, path: Any) -> None:
    """A writer dropped without ``close()``: one warning naming the samples lost per stream (not one per
    stream's sub-buffer), then the streams let go. Never raises: at interpreter exit the modules may be
    torn down (flushing here is unsafe then, as for a ReplayBuffer)."""
    try:
        lost = {n: len(s.times) - state.meta["lengths"][n] for n, s in state.streams.items()}
        lost = {n: k for n, k in lost.items() if k > 0}
        if lost:
            warnings.warn(f"StreamBuffer at {path} was not closed: {sum(lost.values())} samples appended since "
                          f"the last flush() or end_episode() are lost "
                          f"({', '.join(f'{n}: {k}' for n, k in lost.items())}); use `with StreamBuffer...` "
                          "or call close()", stacklevel=3)
    except Exception:
        pass
    streams, state.streams = state.streams, {}
    try:
        with warnings.catch_warnings():  # the streams' sub-buffers, dropped now, were named above
            warnings.simplefilter("ignore")
            streams.clear()
    except Exception:
        streams.clear()
