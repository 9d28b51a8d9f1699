"""A plain Python model of a replay buffer's ring and episodes: the oracle of the ring tests.

:class:`RingModel` keeps what a :class:`~trajstore.replay_buffer.ReplayBuffer` should hold after
any sequence of operations, as Python lists: the *serial* of every held step, oldest first (a
serial numbers a written value and is never given out twice, so reading a discarded step's old
value where a new one was written is caught), the step numbers (``total_steps``, which
``discard_episode`` rewinds) and the episodes. :class:`Op` is one operation of a sequence;
:func:`apply_operation` runs it on a buffer and on the model, :func:`check_against_model` compares
them through the buffer's public API only. :func:`random_operations` draws a seeded sequence
without hypothesis (:mod:`trajstore.testing.strategies` has the hypothesis strategies).

Rules the model states (from the buffer's documentation):

- a ring keeps the newest ``capacity`` steps; an episode is listed while one of its steps is
  held, ``overwritten`` once its first step is gone;
- ``end_episode`` closes the episode being recorded (nothing when no step was appended since the
  last one); ``discard_episode`` drops its steps (steps a ring overwrote for them stay lost), gives
  its step numbers and its id to what comes next, and returns how many steps it dropped;
- closing a writer without ``end_episode`` and reopening the folder for writing ends the open
  episode as *interrupted* (``done`` False, no data).

NumPy and the standard library only: no pytest, no hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: The kinds of :class:`Op`.
OPERATIONS = ("append", "extend", "end_episode", "discard", "flush", "reopen")


@dataclass(frozen=True)
class Op:
    """One operation of a sequence.

    Attributes:
        kind: one of :data:`OPERATIONS`.
        n: steps of an ``extend`` (0 allowed).
        final: an ``end_episode`` that stores a final observation.
    """

    kind: str
    n: int = 0
    final: bool = False

    def __post_init__(self) -> None:
        if self.kind not in OPERATIONS:
            raise ValueError(f"unknown operation {self.kind!r}; known: {OPERATIONS}")

    def __repr__(self) -> str:
        extra = f"({self.n})" if self.kind == "extend" else "(final)" if self.final else ""
        return f"{self.kind}{extra}"


@dataclass(frozen=True)
class HeldEpisode:
    """An episode as ``ReplayBuffer.episodes`` should list it (``start``/``stop`` logical)."""

    id: int
    start: int
    stop: int
    overwritten: bool
    done: bool
    interrupted: bool
    has_final_observation: bool
    data: dict[str, Any]
    final_serial: int | None = None


@dataclass
class _Closed:
    id: int
    start: int  # step numbers
    stop: int
    interrupted: bool
    data: dict[str, Any] = field(default_factory=dict)
    final_serial: int | None = None


class RingModel:
    """The held steps and episodes of a buffer of ``capacity`` slots (``None``: unbounded).

    Attributes:
        held: serials of the held steps, oldest first (``held[i]`` is logical index ``i``).
        total: step numbers appended (the buffer's ``total_steps``).
        open_start: step number where the episode being recorded began, or ``None``.
    """

    def __init__(self, capacity: int | None):
        self.capacity = capacity
        self.held: list[int] = []
        self.total = 0
        self.open_start: int | None = None
        self._closed: list[_Closed] = []
        self._next_serial = 0
        self._next_id = 0

    @property
    def oldest(self) -> int:
        """Step number of logical index 0."""
        return self.total - len(self.held)

    def new_serials(self, n: int) -> list[int]:
        """``n`` serials never given out before (for steps or final observations)."""
        out = list(range(self._next_serial, self._next_serial + n))
        self._next_serial += n
        return out

    def add(self, n: int) -> list[int]:
        """Append ``n`` steps; returns their serials (write the values of these)."""
        serials = self.new_serials(n)
        if n and self.open_start is None:
            self.open_start = self.total
        self.held.extend(serials)
        self.total += n
        if self.capacity is not None:
            del self.held[:max(0, len(self.held) - self.capacity)]
        return serials

    def is_open(self) -> bool:
        """A step was appended since the last episode ended."""
        return self.open_start is not None

    def end_episode(self, data: dict[str, Any] | None = None, final_serial: int | None = None,
                    interrupted: bool = False) -> bool:
        """Close the episode being recorded; False (and nothing changes) when none is open."""
        if self.open_start is None:
            return False
        self._closed.append(_Closed(self._next_id, self.open_start, self.total, interrupted, dict(data or {}),
                                    final_serial))
        self._next_id += 1
        self.open_start = None
        return True

    def discard(self) -> int:
        """Drop the episode being recorded; returns its number of steps (0 when none is open)."""
        if self.open_start is None:
            return 0
        n = self.total - self.open_start
        del self.held[max(0, len(self.held) - n):]
        self.total = self.open_start
        self.open_start = None
        return n

    def reopen_for_writing(self) -> None:
        """A writer closed without ``end_episode`` and the folder reopened for writing."""
        self.end_episode(interrupted=True)

    def episodes(self) -> list[HeldEpisode]:
        """What ``ReplayBuffer.episodes`` should be, oldest first."""
        oldest = self.oldest
        out = [HeldEpisode(e.id, max(e.start, oldest) - oldest, e.stop - oldest, e.start < oldest,
                           not e.interrupted, e.interrupted, e.final_serial is not None, e.data, e.final_serial)
               for e in self._closed if e.stop > oldest]
        if self.open_start is not None:
            out.append(HeldEpisode(self._next_id, max(self.open_start, oldest) - oldest, self.total - oldest,
                                   self.open_start < oldest, False, False, False, {}))
        return out


def episode_fields(episode: Any) -> tuple:
    """The fields of a ``ReplayBuffer`` episode (or a :class:`HeldEpisode`) that the model states."""
    return (episode.id, episode.start, episode.stop, episode.overwritten, episode.done, episode.interrupted,
            episode.has_final_observation, episode.data)


def apply_operation(rb: Any, model: RingModel, op: Op, *, steps: Callable[[list[int]], Any],
                    observation: Callable[[int], Any] | None = None,
                    reopen: Callable[[Any], Any] | None = None) -> Any:
    """Run ``op`` on the buffer ``rb`` and on ``model``; returns the buffer to use next.

    Args:
        steps: serials -> a batch of step values (leading axis ``len(serials)``) that encode them.
        observation: serial -> one final observation; ``None``: ``Op.final`` is ignored.
        reopen: closes ``rb`` and returns it reopened for writing; ``None``: ``"reopen"`` does nothing
            (a buffer in memory).

    An ``end_episode`` stores the data ``{"ends_at": <step number of its end>}``.
    """
    if op.kind in ("append", "extend"):
        n = 1 if op.kind == "append" else op.n
        serials = model.add(n)
        batch = steps(serials)
        if op.kind == "append":
            rb.append(_first(batch))
        else:
            rb.extend(batch)
    elif op.kind == "end_episode":
        if not model.is_open():
            rb.end_episode()  # nothing to end: a no-op that flushes
            return rb
        final = model.new_serials(1)[0] if op.final and observation is not None else None
        data = {"ends_at": model.total}
        rb.end_episode(None if final is None else observation(final), **data)
        model.end_episode(data, final)
    elif op.kind == "discard":
        expected = model.discard()
        got = rb.discard_episode()
        assert got == expected, f"discard_episode() returned {got}, the model dropped {expected} steps"
    elif op.kind == "flush":
        rb.flush()
    elif op.kind == "reopen" and reopen is not None:
        rb = reopen(rb)
        model.reopen_for_writing()
    return rb


def _first(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {k: _first(v) for k, v in batch.items()}
    return batch[0]


def check_against_model(rb: Any, model: RingModel, serials_of: Callable[[Any], np.ndarray]) -> None:
    """``len``, ``total_steps``, the episodes and the serial of every held step, against ``model``.

    Args:
        serials_of: a batch read from ``rb`` -> its serials, int64 ``(N,)``.

    Raises:
        AssertionError: naming what differs.
    """
    assert len(rb) == len(model.held), f"len {len(rb)}, the model holds {len(model.held)} steps"
    assert rb.total_steps == model.total, f"total_steps {rb.total_steps}, the model appended {model.total}"
    got = [episode_fields(e) for e in rb.episodes]
    want = [episode_fields(e) for e in model.episodes()]
    assert got == want, f"episodes\n  buffer {got}\n  model  {want}"
    if model.held:
        read = serials_of(rb[0:len(model.held)]).tolist()
        assert read == model.held, f"held steps\n  buffer {read}\n  model  {model.held}"


def random_operations(rng: np.random.Generator, count: int, *, max_extend: int = 15, reopen: bool = True,
                      final: bool = True) -> list[Op]:
    """``count`` operations drawn by ``rng`` (seeded sequences where hypothesis is not wanted).

    Weights: extend 4, append 2, end_episode 2, discard 1, flush 1, reopen 1 (when ``reopen``).
    """
    kinds = ["extend"] * 4 + ["append"] * 2 + ["end_episode"] * 2 + ["discard", "flush"] + (["reopen"] if reopen
                                                                                              else [])
    ops = []
    for _ in range(count):
        kind = kinds[int(rng.integers(len(kinds)))]
        ops.append(Op(kind, n=int(rng.integers(0, max_extend + 1)) if kind == "extend" else 0,
                      final=bool(final and kind == "end_episode" and rng.integers(2))))
    return ops
