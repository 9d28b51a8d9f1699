"""Exactly-once episodes: ``end_episode(episode_key=...)`` commits an episode under a key at most once.

A key is any string the caller chooses (``"robot3/2026-12-01T10:00:00/7"``, a job id); it is kept in
the episode's data as ``"episode_key"``, so it is committed atomically with the episode's steps (the
episode log line is the commit) and a reader sees it as ``episode(k).data["episode_key"]``. A retried
recording whose key is already committed is dropped: its steps are discarded (committed at once) and
``end_episode`` returns an :class:`EpisodeEnd` with ``duplicate=True``. A writer killed before its
``end_episode`` returned has committed the episode wholly (the retry is then a duplicate) or not at all.

The keys of one buffer are scanned from its held episodes once (one pass over the log's lines, no
per-episode parse) and kept in a set, updated as episodes end. A sharded dataset shares a
:class:`KeyGuard` among its shards' writers: the check and the commit run under a dataset-wide lock,
so two writers cannot commit one key (:mod:`trajstore.shards.keys`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Protocol, Sequence

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer.data_columns import MISSING

#: The data key an episode's key is kept under.
KEY_FIELD = "episode_key"
#: Longest key accepted, in characters.
MAX_KEY_LENGTH = 1024


@dataclass(frozen=True)
class EpisodeEnd:
    """What ``end_episode`` did.

    Attributes:
        id: the ``Episode.id`` of the episode ended, or ``None`` when nothing was committed (a duplicate key,
            or no open episode).
        key: the ``episode_key`` given, or ``None``.
        duplicate: ``True`` when ``key`` was already committed in this buffer (or in another shard of its
            dataset): the steps appended for it were discarded and nothing else was written.
        steps: steps of the episode ended (or discarded, for a duplicate).
    """

    id: int | None
    key: str | None
    duplicate: bool
    steps: int


class KeyGuard(Protocol):
    """Keys committed elsewhere (other shards of a dataset), checked and committed under one lock."""

    def claim(self, key: str) -> Any:
        """A context manager: held while this buffer commits ``key``; yields whether ``key`` is already
        committed elsewhere."""

    def committed_elsewhere(self, key: str) -> bool:
        """Whether ``key`` is committed elsewhere, as seen now (without the lock)."""

    def close(self) -> None:
        """Let go of what it holds open (called when the buffer closes)."""


def checked_key(key: Any) -> str | None:
    """``key`` if it is ``None`` or a non-empty str of at most :data:`MAX_KEY_LENGTH` characters.

    Raises:
        InvalidValueError: not a str, empty or only white space, too long, holding a NUL or a line break, or
            not encodable as UTF-8 (a lone surrogate).
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidValueError(f"end_episode: episode_key must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidValueError(f"end_episode: episode_key must have 1..{MAX_KEY_LENGTH} characters, got {len(key)}")
    if any(c in key for c in "\x00\n\r"):
        raise InvalidValueError(f"end_episode: episode_key {key[:80]!r} holds a NUL or a line break")
    if not key.strip():
        raise InvalidValueError(f"end_episode: episode_key {key[:80]!r} is only white space")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidValueError(f"end_episode: episode_key {key[:80]!r} is not valid Unicode (a lone surrogate)") from None
    return key


class EpisodeKeys:
    """The keys of a buffer's episodes: those held (scanned once, on first use) and those ended since."""

    def __init__(self) -> None:
        self._keys: set[str] | None = None
        self._guard: KeyGuard | None = None

    @property
    def shared(self) -> bool:
        """Whether the keys are checked against a guard (a dataset's other shards)."""
        return self._guard is not None

    def share(self, guard: KeyGuard | None) -> None:
        """Check keys against ``guard`` too (a dataset's other shards), and commit under its lock."""
        self._guard = guard

    def known(self, episodes: Sequence[Any]) -> set[str]:
        """The key set, scanned from ``episodes`` (a buffer's ``rb.episodes``) the first time."""
        if self._keys is None:
            values = episodes.data_values(KEY_FIELD)  # type: ignore[attr-defined]
            self._keys = {v for v in values if v is not MISSING and isinstance(v, str)}
        return self._keys

    def has(self, key: str, episodes: Sequence[Any]) -> bool:
        """Whether ``key`` is committed here, or elsewhere as the guard sees it now."""
        return key in self.known(episodes) or (self._guard is not None and self._guard.committed_elsewhere(key))

    def add(self, key: str) -> None:
        if self._keys is not None:
            self._keys.add(key)

    def close(self) -> None:
        if self._guard is not None:
            self._guard.close()
            self._guard = None

    @contextmanager
    def claim(self, key: str, episodes: Sequence[Any]) -> Iterator[bool]:
        """Held while ``key`` is committed; yields whether it is committed already (here or elsewhere)."""
        if self._guard is None:
            yield key in self.known(episodes)
            return
        with self._guard.claim(key) as elsewhere:
            yield bool(elsewhere) or key in self.known(episodes)


def end_episode_once(writer: Any, keys: EpisodeKeys, episodes: Sequence[Any], key: str | None, final: Any,
                     data: dict[str, Any], interrupted: bool, flush: bool) -> EpisodeEnd:
    """End the writer's open episode (:meth:`BufferWriter.end_episode`), under ``key`` when one is given:
    a key already committed discards the open episode's steps instead (see the module docstring)."""
    view = writer.view()
    if key is not None and view.ring.capacity is not None:
        raise ValueError(f"end_episode: episode_key needs an unbounded buffer; this is a ring "
                         f"(capacity={view.ring.capacity}), whose appends overwrite committed episodes before "
                         "a retry could be found a duplicate")
    table, appended = view.episodes, view.ring.appended
    is_open = table.is_open(appended)
    episode_id, steps = (table.next_id, appended - table.open_start) if is_open else (None, 0)
    if key is None:
        writer.end_episode(final, data, interrupted, flush=flush)
        return EpisodeEnd(episode_id, None, False, steps)
    with keys.claim(key, episodes) as committed:
        if committed:
            return EpisodeEnd(None, key, True, writer.discard_episode())
        # Shared keys are committed under the guard's lock: flush=False would let another shard commit the key first.
        writer.end_episode(final, {**data, KEY_FIELD: key}, interrupted, flush=flush or keys.shared)
    keys.add(key)
    return EpisodeEnd(episode_id, key, False, steps)
