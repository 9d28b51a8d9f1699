"""What is damaged in a buffer folder: payload files that are missing or truncated, and the steps and
episodes they held.

A frames storage (:class:`~trajstore.storages.ImageStorage`, :class:`~trajstore.storages.VideoStorage`)
keeps its frames in numbered payload files (image chunks, video segments). When one is gone, or
shorter than the index needs (an image chunk ending before its last indexed frame, an empty video
segment: one ``stat`` per file at open), only the
steps whose frames it held are lost: a read-only open records it (:meth:`SpaceStorage.damaged_files
<trajstore.storages.base.SpaceStorage.damaged_files>`), the buffer maps those slots to its held steps
and episodes (:attr:`ReplayBuffer.damaged <trajstore.replay_buffer.ReplayBuffer.damaged>`, a
:class:`Damage`) and warns once with a :class:`DamagedBufferWarning`. Reading a damaged step raises
:class:`~trajstore.errors.FormatError` naming the file; the samplers and the torch dataset skip the
damaged episodes or raise, as ``on_damaged=`` says; a writer refuses the folder with the same report.

A file that is long enough but holds damaged bytes (overwritten, or a video segment cut short) is
found when it is read: that
read raises ``FormatError`` naming the file (``trajstore verify`` reads every frame and lists the
episodes such files hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trajstore.errors import FormatError

__all__ = ["Damage", "DamagedBufferWarning", "DamagedDataError", "DamagedFile", "DamagedPart", "ON_DAMAGED",
           "check_on_damaged"]

#: The choices of ``on_damaged=``: ``"raise"`` (a read that would draw from a damaged episode raises
#: ``FormatError``, before reading anything) or ``"skip"`` (the damaged episodes are left out).
ON_DAMAGED = ("raise", "skip")


def check_on_damaged(value: object) -> str:
    """``value`` if it is one of :data:`ON_DAMAGED`.

    Raises:
        ValueError: anything else (names the choices).
    """
    if not isinstance(value, str) or value not in ON_DAMAGED:
        raise ValueError(f"on_damaged must be 'raise' or 'skip', got {value!r}")
    return value


class DamagedDataError(FormatError):
    """Data that cannot be read because a payload file holding it is missing (a :class:`FormatError`):
    a read of a damaged step, a draw that would include a damaged episode (``on_damaged="raise"``), a
    writer's open or a copy of a damaged folder. The message names the file(s)."""


class DamagedBufferWarning(UserWarning):
    """A buffer folder was opened read-only with payload files missing (see :class:`Damage`)."""


@dataclass(frozen=True)
class DamagedFile:
    """One payload file of a storage that cannot be read.

    Attributes:
        path: the file (local path, or where the storage's payload source would have it).
        problem: what is wrong (``"missing"``, ``"truncated: N bytes, index needs M"``).
        slots: the storage slots whose values it held, sorted int64 ``(N,)``.
    """

    path: str
    problem: str
    slots: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class DamagedPart:
    """A damaged file of one part of a buffer and what it cost.

    Attributes:
        part: the storage part (``"observation/pixels"``, a key of ``storage.parts()``; ``""`` for a
            storage of one part; ``"final_observations/..."`` for the final observation storage).
        path, problem: as :class:`DamagedFile`.
        episodes: ids (``Episode.id``) of the held episodes with a step (or final observation) in it.
        steps: held steps whose values it held (final observations: 0).
    """

    part: str
    path: str
    problem: str
    episodes: tuple[int, ...]
    steps: int

    def line(self) -> str:
        where = f" ({self.part})" if self.part else ""
        return (f"{self.path}{where} is {self.problem}: {self.steps} step(s) of episode(s) "
                f"{_ids(self.episodes)}")


@dataclass(frozen=True)
class Damage:
    """The damage of a buffer: empty (false) when every payload file its held steps need is there.

    Attributes:
        parts: one entry per damaged file.
        episodes: ids of the damaged held episodes (any of its steps or its final observation), sorted.
        steps: damaged held steps (counted once however many leaves lost them).
    """

    parts: tuple[DamagedPart, ...] = ()
    episodes: tuple[int, ...] = ()
    steps: int = 0

    def __bool__(self) -> bool:
        return bool(self.parts)

    @property
    def files(self) -> list[str]:
        """The damaged files, in the order of :attr:`parts`."""
        return [p.path for p in self.parts]

    def summary(self) -> str:
        """One line: how many files, steps and episodes, the first files named."""
        if not self:
            return "no damage"
        named = "; ".join(p.line() for p in self.parts[:3]) + ("; ..." if len(self.parts) > 3 else "")
        return (f"{len(self.parts)} payload file(s) missing or truncated: {self.steps} step(s) of "
                f"{len(self.episodes)} episode(s) {_ids(self.episodes)} cannot be read ({named})")

    def __str__(self) -> str:
        return self.summary()


def _ids(ids: tuple[int, ...]) -> str:
    shown = ", ".join(str(i) for i in ids[:10])
    return f"[{shown}{', ...' if len(ids) > 10 else ''}]"
