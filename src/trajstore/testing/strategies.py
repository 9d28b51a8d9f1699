"""hypothesis strategies for trajstore tests: spaces with leaves of each kind, their values,
capacities and operation sequences of a buffer.

Needs hypothesis (``pip install trajstore[testing]``); importing :mod:`trajstore.testing` or
:mod:`trajstore.testing.storage` does not import it.

- :func:`leaf_spaces`: one leaf: a ``BoxSpace`` (integer or float dtype, 0 to 2 axes, finite
  bounds), a ``BinarySpace``, a ``TextSpace`` or a camera (``(H, W, 3)`` uint8 with
  ``kind="image"``, ``layout="HWC"``).
- :func:`spaces`: a ``DictSpace`` of such leaves, one level of nesting at most, keys that the
  storages accept (no ``"/"``, never ``"*"``), some of them with ``.``, ``-`` or a space.
- :func:`step_values`: a value (or a batch) of a space, drawn by ``space.sample`` from a drawn seed.
- :func:`capacities`: ``None`` (unbounded) or a ring of 1 to ``max_capacity`` slots.
- :func:`operations`: sequences of :class:`~trajstore.testing.ring_model.Op` to run with
  :func:`~trajstore.testing.ring_model.apply_operation`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space, TextSpace
from trajstore.testing.ring_model import Op

#: Dtypes of drawn ``BoxSpace`` leaves.
BOX_DTYPES = ("uint8", "int16", "int64", "float32", "float64")
_KEY_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_.- "


def _box(dtype: str, shape: tuple[int, ...]) -> BoxSpace:
    if np.dtype(dtype).kind == "f":
        return BoxSpace(-100.0, 100.0, shape, dtype)
    info = np.iinfo(dtype)
    return BoxSpace(max(int(info.min), -1000), min(int(info.max), 1000), shape, dtype)


def box_spaces(max_dims: int = 2, max_side: int = 3) -> st.SearchStrategy[BoxSpace]:
    """Numeric ``BoxSpace`` leaves: a dtype of :data:`BOX_DTYPES`, 0 to ``max_dims`` axes of 1 to ``max_side``."""
    shapes = st.lists(st.integers(1, max_side), max_size=max_dims).map(tuple)
    return st.builds(_box, st.sampled_from(BOX_DTYPES), shapes)


def camera_spaces(max_side: int = 12) -> st.SearchStrategy[BoxSpace]:
    """Camera leaves: ``(H, W, 3)`` uint8 (H, W even, 4 to ``max_side``), ``kind="image"``, ``layout="HWC"``."""
    side = st.integers(2, max_side // 2).map(lambda k: 2 * k)
    return st.builds(lambda h, w: BoxSpace(0, 255, (h, w, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
                     side, side)


def leaf_spaces() -> st.SearchStrategy[Space]:
    """One leaf of any kind: numeric box, binary, text or camera."""
    return st.one_of(box_spaces(), st.builds(BinarySpace, st.sampled_from([(), (2,)])),
                     st.builds(TextSpace, st.integers(1, 8)), camera_spaces())


def keys() -> st.SearchStrategy[str]:
    """Dict keys every storage accepts: 1 to 6 characters, no ``"/"``, not ``"*"``, not blank."""
    return st.text(_KEY_CHARS, min_size=1, max_size=6).filter(lambda k: k.strip() == k and k not in (".", ".."))


def spaces(max_leaves: int = 4) -> st.SearchStrategy[DictSpace]:
    """``DictSpace`` of 1 to ``max_leaves`` leaves of :func:`leaf_spaces`, a sub-dict at most one level deep."""
    inner = st.dictionaries(keys(), leaf_spaces(), min_size=1, max_size=2).map(DictSpace)
    return st.dictionaries(keys(), st.one_of(leaf_spaces(), inner), min_size=1, max_size=max_leaves).map(
        DictSpace).filter(lambda s: len(_leaves(s)) <= max_leaves)


def _leaves(space: Space) -> list[Space]:
    if isinstance(space, DictSpace):
        return [leaf for sub in space.spaces.values() for leaf in _leaves(sub)]
    return [space]


def step_values(space: Space, batch_size: int | None = None) -> st.SearchStrategy[Any]:
    """A value of ``space`` (or a batch with leading axis ``batch_size``), from a drawn seed."""
    return st.integers(0, 2**32 - 1).map(lambda seed: space.sample(np.random.default_rng(seed), batch_size))


def capacities(max_capacity: int = 12) -> st.SearchStrategy[int | None]:
    """``None`` (unbounded) or a ring of 1 to ``max_capacity`` slots."""
    return st.one_of(st.none(), st.integers(1, max_capacity))


def ops(*, max_extend: int = 15, reopen: bool = True, final: bool = True) -> st.SearchStrategy[Op]:
    """One :class:`~trajstore.testing.ring_model.Op`: extend (0 to ``max_extend`` steps), append, end_episode
    (with a final observation when ``final``), discard, flush and, when ``reopen``, reopen."""
    choices = [st.integers(0, max_extend).map(lambda n: Op("extend", n=n)), st.just(Op("append")),
               st.booleans().map(lambda f: Op("end_episode", final=f and final)), st.just(Op("discard")),
               st.just(Op("flush"))]
    if reopen:
        choices.append(st.just(Op("reopen")))
    return st.one_of(*choices)


def operations(*, min_size: int = 0, max_size: int = 20, max_extend: int = 15, reopen: bool = True,
               final: bool = True) -> st.SearchStrategy[list[Op]]:
    """Sequences of ``min_size`` to ``max_size`` operations of :func:`ops`."""
    return st.lists(ops(max_extend=max_extend, reopen=reopen, final=final), min_size=min_size, max_size=max_size)
