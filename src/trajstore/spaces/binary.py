"""``BinarySpace``: boolean arrays (flags such as ``terminated``, gripper open/closed)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces.base import SPACE_TYPES, LeafCheck, Space, leaf_name
from trajstore.spaces.metadata import SpaceMetadata


@SPACE_TYPES.register("binary")
class BinarySpace(Space):
    """Arrays of ``shape`` and dtype ``bool``; ``shape=()`` is a single flag.

    Integer input is accepted when every value is 0 or 1.
    """

    dtype = np.dtype(bool)

    def __init__(self, shape: Sequence[int] = (), metadata: Any = None):
        super().__init__(metadata)
        self.shape = tuple(int(s) for s in shape)

    def _copy_with(self, metadata: SpaceMetadata) -> "BinarySpace":
        return BinarySpace(self.shape, metadata)

    def validate(self, x: Any, *, batched: bool = False, path: str = "", check_bounds: bool = True) -> np.ndarray:
        arr = np.asarray(x)
        expected = ("N", *self.shape) if batched else self.shape
        if arr.ndim != len(self.shape) + int(batched) or arr.shape[int(batched):] != self.shape:
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected shape {tuple(expected)}, got {arr.shape}")
        if arr.dtype == bool:
            return arr
        if arr.dtype.kind in "iu":
            bad = ~((arr == 0) | (arr == 1))
            if not bad.any():
                return arr.astype(bool)
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected bool values (or 0/1 integers), got "
                                    f"{arr.dtype} value {arr[bad].flat[0]}")
        raise InvalidValueError(f"leaf {leaf_name(path)!r}: expected bool values (or 0/1 integers), got {arr.dtype}")

    def leaf_check(self) -> LeafCheck:
        """Takes a bool array of exactly ``shape`` as it is (a view), an integer array of ``shape``
        holding only 0/1 (cast), and for a ``()`` leaf a Python or NumPy bool or 0/1 integer, exactly
        as :meth:`validate` does; no bounds."""
        shape, scalar = self.shape, self.shape == ()

        def convert(x: Any) -> np.ndarray | None:
            if type(x) is np.ndarray:
                if x.shape != shape:
                    return None
                kind = x.dtype.kind
                if kind == "b":
                    return x
                return x.astype(bool) if kind in "iu" and ((x == 0) | (x == 1)).all() else None
            if scalar:
                if type(x) is bool or type(x) is np.bool_:
                    return np.asarray(x)
                if isinstance(x, (int, np.integer)) and (x == 0 or x == 1):
                    return np.asarray(bool(x))
            return None

        return LeafCheck(convert)

    def sample(self, rng: np.random.Generator | None = None, batch_size: int | None = None) -> np.ndarray:
        rng = rng or np.random.default_rng()
        shape = self.shape if batch_size is None else (batch_size, *self.shape)
        return rng.integers(0, 2, size=shape).astype(bool)

    def _config(self) -> dict[str, Any]:
        return {"shape": list(self.shape)}

    @classmethod
    def _from_config(cls, config: dict[str, Any], metadata: SpaceMetadata) -> "BinarySpace":
        return cls(tuple(config["shape"]), metadata)

    def __repr__(self) -> str:
        return f"BinarySpace(shape={self.shape})"
