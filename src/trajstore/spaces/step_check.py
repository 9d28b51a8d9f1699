"""One-step validation in one pass: the caller's cost of ``ReplayBuffer.append``. NumPy only, no I/O.

:meth:`Space.validate` walks the space leaf by leaf and checks each leaf's bounds with its own
``min``/``max`` calls: about ten NumPy calls and a few dozen Python frames per leaf, most of the
caller's time for steps of a few small leaves. :class:`StepCheck`, built once per space, takes the
usual step of a recording loop (a dict of arrays and scalars that already are what the leaves hold)
in one walk:

1. the leaf values are collected from the nested dict (exactly the space's keys, plain dicts);
2. every leaf, whatever its type (box, binary, text, ...), goes through the one ``convert`` its space
   contributes (:meth:`Space.leaf_check`): the value as the leaf's array, or ``None``;
3. the bounds of all leaves of one dtype are checked with a single comparison over their
   concatenated values (same dtype, so the comparisons are exactly those of
   :meth:`BoxSpace.validate`, NaN refused as there).

The full validation is the slow path only: a leaf that ``convert`` does not take (a list, a dtype
that needs a cast) is validated alone by its space's :meth:`Space.validate`, then converted; and a
step that is refused (wrong keys, a value outside its bounds, a leaf's validation raising) is
validated whole by :meth:`Space.validate`, so the error is the one it raises, naming the first bad
leaf in the space's order. Either way a leaf's array is ``convert`` of its validated value: fast
and slow path give the same dtypes, shapes and values (a text leaf: ``<U{max_length}``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from trajstore.spaces import tree
from trajstore.spaces.base import LeafCheck, Space

_Node = list[tuple[str, "_Node | None"]]  # a dict node: (key, child node or None for a leaf)


def step_check(space: Space, check_bounds: bool) -> "StepCheck":
    """The :class:`StepCheck` of ``space`` (built once per space and ``check_bounds``; spaces are immutable)."""
    key = f"_step_check_{bool(check_bounds)}"
    checker = space.__dict__.get(key)
    if checker is None:
        checker = space.__dict__[key] = StepCheck(space, check_bounds)
    return checker


class StepCheck:
    """Validates one step of ``space`` into its leaf arrays (see the module docstring)."""

    def __init__(self, space: Space, check_bounds: bool):
        leaves = tree.leaves(space)
        self._space = space
        self._check_bounds = bool(check_bounds)
        self._root = _node(space) if tree._is_dict(space) else None
        self._leaves = [(tree.path_name(path) if path else "", leaf) for path, leaf in leaves]
        checks = [_leaf_check(leaf) for _, leaf in leaves]
        self._converts: list[Callable[[Any], np.ndarray | None]] = [c.convert for c in checks]
        # Per dtype: the leaves whose bounds need a check, and those bounds flattened in that dtype.
        self._groups: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        if not check_bounds:
            return
        by_dtype: dict[np.dtype, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        for i, c in enumerate(checks):
            if c.low is not None and c.high is not None:
                by_dtype.setdefault(c.low.dtype, []).append((i, c.low, c.high))
        for group in by_dtype.values():
            self._groups.append(([i for i, _, _ in group], np.concatenate([lo for _, lo, _ in group]),
                                 np.concatenate([hi for _, _, hi in group])))

    def validate(self, value: Any) -> list[np.ndarray]:
        """The leaf arrays of ``value`` (one step), in :func:`tree.leaves` order, each with a leading
        axis of 1 (a view of the caller's array where it was taken as it is).

        Raises:
            InvalidValueError: naming the leaf and what was expected (the error of :meth:`Space.validate`).
        """
        out = self._collect(value)
        if out is None:
            return self._validate_whole(value)
        for i, convert in enumerate(self._converts):
            arr = convert(out[i])
            out[i] = arr if arr is not None else self._validate_leaf(i, out[i], value)
        if not self._in_bounds(out):
            return self._validate_whole(value)
        return [v[None] for v in out]

    def leaves(self, value: Any) -> list[np.ndarray] | None:
        """The fast path alone: what :meth:`validate` returns when every leaf is taken as it is and
        in its bounds, else ``None`` (never validates, never raises)."""
        out = self._collect(value)
        if out is None:
            return None
        for i, convert in enumerate(self._converts):
            arr = convert(out[i])
            if arr is None:
                return None
            out[i] = arr
        return [v[None] for v in out] if self._in_bounds(out) else None

    # -- the parts ------------------------------------------------------------------------
    def _collect(self, value: Any) -> list[Any] | None:
        if self._root is None:
            return [value]
        out: list[Any] = []
        return out if _collect(self._root, value, out) else None

    def _in_bounds(self, out: list[np.ndarray]) -> bool:
        for idx, lo, hi in self._groups:
            x = np.concatenate([out[i] for i in idx], axis=None) if len(idx) > 1 else out[idx[0]].reshape(-1)
            if not np.logical_and(x >= lo, x <= hi).all():  # NaN compares False: refused
                return False
        return True

    def _validate_leaf(self, i: int, x: Any, step: Any) -> np.ndarray:
        """Leaf ``i`` that the fast path does not take, through its space's full validation."""
        path, leaf = self._leaves[i]
        try:
            valid = leaf.validate(x, batched=False, path=path, check_bounds=self._check_bounds)
        except Exception:
            self._validate_whole(step)  # raises the error of the first bad leaf, as Space.validate names it
            raise
        return self._as_array(i, valid)

    def _validate_whole(self, step: Any) -> list[np.ndarray]:
        valid = self._space.validate(step, batched=False, check_bounds=self._check_bounds)
        return [self._as_array(i, v)[None] for i, v in enumerate(tree.flatten(self._space, valid))]

    def _as_array(self, i: int, valid: Any) -> np.ndarray:
        arr = self._converts[i](valid)
        return np.asarray(valid) if arr is None else arr


def _leaf_check(leaf: Space) -> LeafCheck:
    """``leaf.leaf_check()``, or no fast path when its class overrides ``validate`` below the class that
    defines ``leaf_check`` (a subclass with checks of its own: its values all go through them)."""
    mro = type(leaf).__mro__
    owner = lambda name: next(c for c in mro if name in c.__dict__)  # noqa: E731
    if issubclass(owner("leaf_check"), owner("validate")):
        return leaf.leaf_check()
    return Space.leaf_check(leaf)


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
