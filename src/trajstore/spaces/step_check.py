"""A fast path for validating one step: the usual case of a recording loop, a dict of NumPy arrays
that already have every leaf's dtype and shape. NumPy only, no I/O.

:meth:`Space.validate` walks the space leaf by leaf and checks each leaf's bounds with its own
``min``/``max`` calls: about ten NumPy calls and a few dozen Python frames per leaf, which is most
of the caller's time in ``ReplayBuffer.append`` for steps of a few small leaves. :class:`StepCheck`
is built once per space: it collects the leaf arrays in one walk, compares dtype and shape by
identity first, and checks the bounds of all leaves of one dtype with a single comparison over
their concatenated values (same dtype, so the comparisons are exactly those of
:meth:`BoxSpace.validate`, NaN refused as there).

It never raises for bad input: anything it does not accept as it is (a list, another dtype that
would need a cast, a wrong key, a value out of bounds, a space with non-Box leaves) makes it
return ``None``, and the caller runs the full validation, which raises the error naming the leaf.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trajstore.spaces import tree
from trajstore.spaces.base import Space
from trajstore.spaces.box import BoxSpace

_Node = list[tuple[str, "_Node | None"]]  # a dict node: (key, child node or None for a leaf)


def step_check(space: Space, check_bounds: bool) -> "StepCheck":
    """The :class:`StepCheck` of ``space`` (built once per space and ``check_bounds``; spaces are immutable)."""
    key = f"_step_check_{bool(check_bounds)}"
    checker = space.__dict__.get(key)
    if checker is None:
        checker = space.__dict__[key] = StepCheck(space, check_bounds)
    return checker


class StepCheck:
    """Checks one step of ``space`` whose leaves are arrays of exactly the leaves' dtype and shape."""

    def __init__(self, space: Space, check_bounds: bool):
        leaves = tree.leaves(space)
        self.enabled = bool(leaves) and all(type(leaf) is BoxSpace for _, leaf in leaves)
        self._root = _node(space) if tree._is_dict(space) else None
        self._specs = [(leaf.shape, leaf.dtype) for _, leaf in leaves]
        # Per dtype: the leaves whose bounds need a check, and those bounds flattened in that dtype.
        self._groups: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        if not (self.enabled and check_bounds):
            return
        by_dtype: dict[np.dtype, list[int]] = {}
        for i, (_, leaf) in enumerate(leaves):
            if leaf._bounds is not None and int(np.prod(leaf.shape, dtype=np.int64)) > 0:  # type: ignore[attr-defined]
                by_dtype.setdefault(leaf.dtype, []).append(i)  # type: ignore[attr-defined]
        for dtype, idx in by_dtype.items():
            lo = np.concatenate([np.broadcast_to(leaves[i][1]._bounds[0], leaves[i][1].shape).ravel()  # type: ignore
                                 for i in idx]).astype(dtype)
            hi = np.concatenate([np.broadcast_to(leaves[i][1]._bounds[1], leaves[i][1].shape).ravel()  # type: ignore
                                 for i in idx]).astype(dtype)
            self._groups.append((idx, lo, hi))

    def leaves(self, value: Any) -> list[np.ndarray] | None:
        """The leaf arrays of ``value`` (one step, tree order, each with a leading axis of 1), or ``None``
        when the fast path does not apply: validate ``value`` the usual way then."""
        if not self.enabled:
            return None
        out: list[Any] = []
        if self._root is None:
            out.append(value)
        elif not _collect(self._root, value, out):
            return None
        for i, (shape, dtype) in enumerate(self._specs):
            v = out[i]
            if type(v) is not np.ndarray:
                if not (isinstance(v, np.generic) and shape == ()):  # a NumPy scalar of a () leaf: as 0-d
                    return None
                v = out[i] = np.asarray(v)
            if v.shape != shape or (v.dtype is not dtype and v.dtype != dtype):
                return None
        for idx, lo, hi in self._groups:
            x = np.concatenate([out[i] for i in idx], axis=None) if len(idx) > 1 else out[idx[0]].reshape(-1)
            if not np.logical_and(x >= lo, x <= hi).all():  # NaN compares False: refused
                return None
        return [v[None] for v in out]


def _node(space: Any) -> _Node:
    return [(key, _node(child) if tree._is_dict(child) else None) for key, child in space.spaces.items()]


def _collect(node: _Node, value: Any, out: list[Any]) -> bool:
    """Append the leaf values of ``value`` under ``node`` to ``out``; False unless ``value`` is a plain dict
    with exactly the node's keys (and so on down)."""
    if type(value) is not dict or len(value) != len(node):
        return False
    for key, child in node:
        v = value.get(key, _MISSING)
        if v is _MISSING:
            return False
        if child is None:
            out.append(v)
        elif not _collect(child, v, out):
            return False
    return True


_MISSING = object()
