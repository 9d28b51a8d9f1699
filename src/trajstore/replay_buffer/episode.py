"""``Episode``: one episode as a buffer shows it (``rb.episodes``, ``rb.episode(k)``). No I/O."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Episode:
    """One episode as seen in the buffer now.

    Attributes:
        id: episode number, counting from 0 since the buffer was created (stable across overwrites;
            the number of a discarded episode goes to the next one).
        start, stop: logical step range ``[start, stop)`` in the buffer.
        overwritten: its first steps have been overwritten by the ring (not gymnasium's
            ``truncated`` flag: that one is a leaf of the step, if you record it).
        done: ``end_episode`` was called for it (False for the episode being recorded and for an
            interrupted one).
        interrupted: the writer stopped (a crash, or ``close()`` without ``end_episode``) while it
            was being recorded; it was closed when the folder was next opened for writing.
        has_final_observation: ``end_episode(final_observation=...)`` stored the observation after
            its last step (read it with ``ReplayBuffer.final_observation``).
        data: the JSON data given to ``end_episode(**data)``, as a new dict (``{}`` when none).
    """

    id: int
    start: int
    stop: int
    overwritten: bool
    done: bool
    interrupted: bool = False
    has_final_observation: bool = False
    _data: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self._data)) if self._data else {}

    def __len__(self) -> int:
        return self.stop - self.start

    def __repr__(self) -> str:
        return (f"Episode(id={self.id}, start={self.start}, stop={self.stop}, overwritten={self.overwritten}, "
                f"done={self.done}, interrupted={self.interrupted}, "
                f"has_final_observation={self.has_final_observation}, data={self.data!r})")
