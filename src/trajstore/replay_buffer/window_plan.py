"""A window request checked once: ``delta_indices`` resolved to leaves and grouped by offsets. No I/O.

``delta_indices`` maps names to integer offsets from an anchor step. A name is a leaf path or a
subtree path with its keys joined by ``"/"`` (``"observation/pixels"``, ``"observation"``); a
subtree name gives every leaf under it the same offsets. Leaves no name covers are read at
offset 0 only. Leaves that share one offset sequence form a *group*: the buffer reads a group
with one selection and only that group's leaves, so each requested (leaf, offset) pair is read
once and nothing else is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.errors import UnknownLeafError
from trajstore.spaces import Space, tree

SEPARATOR = "/"


@dataclass(frozen=True)
class OffsetGroup:
    """Leaves read at the same offsets.

    Attributes:
        offsets: int64 ``(T,)`` in the order given (repeats allowed).
        leaves: positions in :func:`trajstore.spaces.tree.leaves` order, increasing.
        windowed: per leaf, True if a name covers it (its result has a ``T`` axis), False for a leaf
            read at offset 0 only (its result is ``(B, ...)``).
    """

    offsets: np.ndarray
    leaves: tuple[int, ...]
    windowed: tuple[bool, ...]


@dataclass(frozen=True)
class WindowPlan:
    """A checked ``delta_indices`` for one space.

    Attributes:
        groups: one :class:`OffsetGroup` per distinct offset sequence (a named ``[0]`` joins the
            unnamed leaves' group).
        names: ``{name: index into groups}`` for each name given, in the order given.
        before, after: steps needed before / after the anchor: ``-min(offsets, 0)`` and
            ``max(offsets, 0)`` over every offset (0 included, the anchor itself).
    """

    groups: tuple[OffsetGroup, ...]
    names: dict[str, int]
    before: int
    after: int


def _offsets(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(list(value) if isinstance(value, range) else value)
    if arr.ndim != 1 or arr.size == 0 or (arr.dtype.kind not in "iu") or arr.dtype == bool:
        raise ValueError(f"delta_indices[{name!r}] must be a non-empty 1-D sequence of ints (a list, a range, "
                         f"an integer array), got {value!r:.100}")
    return arr.astype(np.int64)


def window_plan(space: Space, delta_indices: Mapping[str, Any]) -> WindowPlan:
    """Resolve ``delta_indices`` against ``space`` (see the module docstring).

    Raises:
        TypeError: ``delta_indices`` is not a mapping, or a name is not a str.
        UnknownLeafError: a name is not in the space (the message lists the keys where it failed).
        ValueError: it is empty, two names cover the same leaf, or offsets are not a non-empty 1-D
            int sequence.
    """
    if not isinstance(delta_indices, Mapping):
        raise TypeError(f"delta_indices must be a mapping of names to offsets, got {type(delta_indices).__name__}")
    if not delta_indices:
        raise ValueError("delta_indices is empty: name at least one leaf or subtree (or use window=)")
    paths = tree.leaf_paths(space)
    named: dict[int, tuple[str, np.ndarray]] = {}
    for name, value in delta_indices.items():
        if not isinstance(name, str):
            raise TypeError(f"delta_indices names are str (keys joined by {SEPARATOR!r}), got {name!r}")
        prefix = tree.parse_name(name, SEPARATOR)
        try:
            tree.subspace(space, prefix)
        except KeyError as exc:
            raise UnknownLeafError(f"delta_indices: {exc.args[0]}") from None
        offsets = _offsets(name, value)
        if not any(tree.under(path, prefix) for path in paths):
            raise ValueError(f"delta_indices[{name!r}] covers no leaf (an empty subtree)")
        for i, path in enumerate(paths):
            if tree.under(path, prefix):
                if i in named:
                    raise ValueError(f"delta_indices names leaf {tree.path_name(path)!r} twice: under "
                                     f"{named[i][0]!r} and {name!r}")
                named[i] = (name, offsets)
    by_offsets: dict[tuple[int, ...], list[tuple[int, bool]]] = {}
    for i in range(len(paths)):
        key = tuple(named[i][1].tolist()) if i in named else (0,)
        by_offsets.setdefault(key, []).append((i, i in named))
    keys = list(by_offsets)
    groups = tuple(OffsetGroup(np.asarray(k, np.int64), tuple(i for i, _ in members), tuple(w for _, w in members))
                   for k, members in by_offsets.items())
    names = {name: keys.index(tuple(_offsets(name, value).tolist())) for name, value in delta_indices.items()}
    every = np.concatenate([g.offsets for g in groups] + [np.zeros(1, np.int64)])
    return WindowPlan(groups, names, int(-every.min()), int(every.max()))


def restricted(plan: WindowPlan, keep: set[int]) -> WindowPlan:
    """``plan`` reading only the leaves at positions ``keep`` (the others come back as ``None``)."""
    groups, moved = [], {}
    for g, group in enumerate(plan.groups):
        kept = [(i, w) for i, w in zip(group.leaves, group.windowed) if i in keep]
        if kept:
            moved[g] = len(groups)
            groups.append(OffsetGroup(group.offsets, tuple(i for i, _ in kept), tuple(w for _, w in kept)))
    names = {name: moved[g] for name, g in plan.names.items() if g in moved}
    return WindowPlan(tuple(groups), names, plan.before, plan.after)


def consecutive_plan(space: Space, window: int) -> WindowPlan:
    """Every leaf at offsets ``0 .. window - 1``: ``sample_windows(B, window)``, as a plan."""
    count = len(tree.leaf_paths(space))
    group = OffsetGroup(np.arange(window, dtype=np.int64), tuple(range(count)), (True,) * count)
    return WindowPlan((group,), {}, 0, window - 1)


def leaf_positions(space: Space, names: Any) -> tuple[int, ...]:
    """Positions (in leaf order) of the leaves ``names`` name; a subtree name stands for its leaves.

    Raises:
        TypeError: ``names`` is a str or not an iterable of str.
        UnknownLeafError: a name that is not in the space; ValueError: an empty name or list.
    """
    paths = tree.leaf_paths(space)
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"leaves must be a list of leaf names like 'observation/pixels', got {names!r:.80}")
    wanted: set[int] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"leaf names are str, got {name!r:.80}")
        path = tree.parse_name(name)
        if not path or "" in path:  # "" parses to the root, which would silently stand for every leaf
            raise ValueError(f"{name!r} names no leaf; give leaf or subtree names like 'observation/pixels'")
        try:
            tree.subspace(space, path)
        except KeyError as exc:
            raise UnknownLeafError(exc.args[0] if exc.args else name) from None
        wanted.update(i for i, p in enumerate(paths) if tree.under(p, path))
    if not wanted:
        raise ValueError("no leaf named: name at least one leaf")
    return tuple(sorted(wanted))


def steps_plan(space: Space) -> WindowPlan:
    """Every leaf at the anchor only: a plain step read, as a plan."""
    count = len(tree.leaf_paths(space))
    return WindowPlan((OffsetGroup(np.zeros(1, np.int64), tuple(range(count)), (False,) * count),), {}, 0, 0)


@dataclass(frozen=True)
class WindowRequest:
    """What to read around each anchor, checked once against a buffer's space: build it with
    ``rb.window_request(...)`` and reuse it for every batch (the torch dataset and Ray tasks keep one).
    Plain data (picklable, no view of the buffer): the anchors it numbers are those of the view at
    the time of each call.

    Attributes:
        plan: the :class:`WindowPlan` (for steps: every requested leaf at offset 0, no names).
        delta_indices: the offsets as given (``None``: steps, numbered by held step).
        pad: windows may reach past their episode's ends (padded and flagged); else only anchors
            whose every offset lies inside the episode are numbered.
        episodes: sorted episode ids whose anchors are numbered, or ``None`` for every held episode.
        leaves: positions (in :func:`trajstore.spaces.tree.leaves` order) of the leaves read; the
            others come back as ``None``.
    """

    plan: WindowPlan
    delta_indices: dict[str, Any] | None
    pad: bool
    episodes: tuple[int, ...] | None
    leaves: tuple[int, ...]
    #: The leaves (path, shape, dtype) of the space it was checked against (:func:`space_key`): a request
    #: is refused by a buffer of another space.
    space: tuple = ()

    @property
    def margin(self) -> tuple[int, int]:
        """Steps an anchor needs before and after it inside its episode: ``(0, 0)`` when padding."""
        return (0, 0) if self.pad else (self.plan.before, self.plan.after)


def space_key(space: Space) -> tuple:
    """What a :class:`WindowRequest` records of the space it was checked against: every leaf's path,
    shape and dtype, in :func:`trajstore.spaces.tree.leaves` order."""
    return tuple((str(path), tuple(leaf.shape), str(np.dtype(leaf.dtype))) for path, leaf in tree.leaves(space))
