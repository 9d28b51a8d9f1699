"""Leaf-wise helpers shared by the conformance suites (:mod:`~trajstore.testing.storage`,
:mod:`~trajstore.testing.buffer`): name the leaves of a space, flatten and rebuild values, stack and
join batches, compare every leaf exactly. NumPy only; no pytest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.spaces import Space, tree


@dataclass(frozen=True)
class NoBackDoor:
    """Stands for ``back_door_read`` in a storage's tests when it has no raw form to read.

    Raises:
        ValueError: an empty reason.
    """

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError("NoBackDoor needs a reason: say why the storage cannot be read around its own reads")


def leaves_of(space: Space) -> list[tuple[str, Space]]:
    """``(name, leaf space)``: the leaf's keys joined by "/" ("" for a space that is one leaf)."""
    return [("/".join(p), leaf) for p, leaf in tree.leaves(space)]


def flatten_value(space: Space, value: Any) -> dict[str, Any]:
    """``{name: leaf value}`` of a value of ``space`` (names as :func:`leaves_of`)."""
    return dict(zip((name for name, _ in leaves_of(space)), tree.flatten(space, value)))


def unflatten_value(space: Space, flat: dict[str, Any]) -> Any:
    """Inverse of :func:`flatten_value`."""
    return tree.unflatten(space, [flat[name] for name, _ in leaves_of(space)])


def stack(space: Space, values: list[Any]) -> dict[str, np.ndarray]:
    """Oracle form of single values: ``{leaf path: array of shape (N, ...)}``."""
    return {p: np.stack([np.asarray(flatten_value(space, v)[p]) for v in values]) for p, _ in leaves_of(space)}


def concat(space: Space, *batches: Any) -> Any:
    """Batches of ``space`` joined along the leading axis."""
    flats = [flatten_value(space, b) for b in batches]
    return unflatten_value(space, {p: np.concatenate([np.asarray(f[p]) for f in flats]) for p, _ in leaves_of(space)})


def assert_same_values(space: Space, actual: Any, expected: Any) -> None:
    """Every leaf equal in shape, dtype and value.

    Raises:
        AssertionError: naming the first leaf that differs.
    """
    got, want = flatten_value(space, actual), flatten_value(space, expected)
    for path, _ in leaves_of(space):
        np.testing.assert_array_equal(got[path], want[path], err_msg=f"leaf {path!r}", strict=True)
