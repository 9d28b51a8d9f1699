"""``BoxSpace``: a fixed-shape numeric array with bounds, like ``gymnasium.spaces.Box``."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces.base import SPACE_TYPES, Space, leaf_name
from trajstore.spaces.metadata import SpaceMetadata


def _json_number(v: float) -> Any:
    if np.isposinf(v):
        return "inf"
    if np.isneginf(v):
        return "-inf"
    return v.item() if hasattr(v, "item") else v


def _bound_to_json(bound: np.ndarray) -> Any:
    flat = bound.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return _json_number(flat[0])
    return [_json_number(v) for v in flat]


def _bound_from_json(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    conv = lambda v: float(v) if isinstance(v, str) else v  # noqa: E731  "inf"/"-inf"
    if isinstance(value, list):
        return np.asarray([conv(v) for v in value], dtype=np.float64).reshape(shape)
    return np.full(shape, conv(value), dtype=np.float64)


def check_array(x: Any, shape: tuple[int, ...], dtype: np.dtype, *, batched: bool, path: str,
                kind_check: str = "same_kind") -> np.ndarray:
    """Convert ``x`` to an array of ``dtype`` and check its shape (with a leading ``N`` if batched).

    Casting follows NumPy's ``same_kind`` rule (float64 -> float32 is fine, float -> int is not);
    integers must fit the target integer dtype.

    Raises:
        InvalidValueError: naming ``path``, with the expected and the received shape or dtype.
    """
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise InvalidValueError(f"leaf {leaf_name(path)!r}: cannot convert to an array ({exc})") from None
    expected = ("N", *shape) if batched else shape
    ok_shape = arr.ndim == len(shape) + int(batched) and arr.shape[int(batched):] == shape
    if not ok_shape:
        raise InvalidValueError(
            f"leaf {leaf_name(path)!r}: expected shape {_fmt_shape(expected)}, got {arr.shape}"
        )
    if arr.dtype != dtype:
        both_int = arr.dtype.kind in "iub" and dtype.kind in "iu"
        if arr.dtype == object or not (both_int or np.can_cast(arr.dtype, dtype, casting=kind_check)):
            raise InvalidValueError(
                f"leaf {leaf_name(path)!r}: expected dtype {dtype} (or one that casts to it "
                f"without changing kind), got {arr.dtype}"
            )
        if np.issubdtype(dtype, np.integer) and arr.size and arr.dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise InvalidValueError(
                    f"leaf {leaf_name(path)!r}: values in [{lo}, {hi}] do not fit dtype {dtype} "
                    f"([{info.min}, {info.max}])"
                )
        with np.errstate(over="ignore"):  # overflow is reported below, naming the leaf
            cast = arr.astype(dtype)
        if dtype.kind == "f" and arr.dtype.kind == "f" and np.any(np.isinf(cast) & np.isfinite(arr)):
            raise InvalidValueError(f"leaf {leaf_name(path)!r}: values overflow dtype {dtype} "
                                    f"(largest magnitude {np.abs(arr[np.isfinite(arr)]).max():g})")
        arr = cast
    return arr


def _fmt_shape(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


@SPACE_TYPES.register("box")
class BoxSpace(Space):
    """Arrays of ``shape`` and ``dtype`` with elementwise bounds ``low <= x <= high``.

    Args:
        low, high: scalars or arrays broadcastable to ``shape`` (may be +-inf for floats). For an
            integer dtype they must fit the dtype. Kept as float64 arrays; values are compared with
            them cast to ``dtype`` (as gymnasium does).
        shape: value shape, e.g. ``(96, 96, 3)``; ``()`` for a scalar such as a reward.
            Inferred from ``low``/``high`` when omitted.
        dtype: NumPy dtype of the stored values (default ``float32``).
        metadata: JSON metadata, e.g. ``{"kind": "image", "layout": "HWC", "fps": 10}``.

    :meth:`validate` refuses values outside the bounds and NaN (also for a float leaf on
    ``[-inf, inf]``: NaN is in no interval) unless called with ``check_bounds=False``; a leaf whose
    bounds are its dtype's limits (uint8 on ``[0, 255]``) costs no check at all, an unbounded float
    leaf one ``min`` per batch.

    Raises:
        TypeError: a non-numeric dtype.
        ValueError: a negative shape, ``low > high``, or an integer bound outside the dtype's range.
    """

    def __init__(self, low: Any, high: Any, shape: Sequence[int] | None = None,
                 dtype: Any = np.float32, metadata: Any = None):
        super().__init__(metadata)
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf":
            raise TypeError(f"BoxSpace dtype must be numeric, got {self.dtype}")
        if shape is None:
            shape = np.broadcast_shapes(np.shape(low), np.shape(high))
        self.shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise ValueError(f"BoxSpace shape must be non-negative, got {self.shape}")
        self.low = np.broadcast_to(np.asarray(low, dtype=np.float64), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=np.float64), self.shape).copy()
        if np.any(self.low > self.high):
            raise ValueError("BoxSpace low must be <= high elementwise")
        if self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            if np.any(self.low < info.min) or np.any(self.high > info.max):
                raise ValueError(f"BoxSpace bounds [{self.low.min()}, {self.high.max()}] do not fit dtype "
                                 f"{self.dtype} ([{info.min}, {info.max}])")
        self._bounds = self._bounds_to_check()

    def _bounds_to_check(self) -> tuple[Any, Any] | None:
        """``(low, high)`` to compare values with (scalars when uniform, in ``dtype``), or None
        when every value of the dtype is inside (no check needed)."""
        if self.dtype.kind == "b":
            lo, hi = self.low.astype(bool), self.high.astype(bool)
            limits = (False, True)
        elif self.dtype.kind in "iu":
            lo, hi = self.low.astype(self.dtype), self.high.astype(self.dtype)
            limits = (np.iinfo(self.dtype).min, np.iinfo(self.dtype).max)
        else:
            with np.errstate(over="ignore"):  # bounds beyond float16/32 widen to +-inf
                lo, hi = self.low.astype(self.dtype), self.high.astype(self.dtype)
            limits = (-np.inf, np.inf)  # still checked: NaN
        if self.dtype.kind != "f" and np.all(lo == limits[0]) and np.all(hi == limits[1]):
            return None
        uniform = lambda b: b.reshape(-1)[0] if b.size and np.all(b == b.reshape(-1)[0]) else b  # noqa: E731
        return uniform(lo), uniform(hi)

    def _copy_with(self, metadata: SpaceMetadata) -> "BoxSpace":
        return BoxSpace(self.low, self.high, self.shape, self.dtype, metadata)

    def validate(self, x: Any, *, batched: bool = False, path: str = "", check_bounds: bool = True) -> np.ndarray:
        """``x`` as an array of ``shape`` (``(N, *shape)`` if ``batched``) and ``dtype``.

        Raises:
            InvalidValueError: a wrong shape or dtype, or (with ``check_bounds``) a value outside
                ``[low, high]`` or NaN; the message names the leaf, the first offending index and value.
        """
        arr = check_array(x, self.shape, self.dtype, batched=batched, path=path)
        if check_bounds and self._bounds is not None and arr.size:
            self._check_bounds(arr, batched, path)
        return arr

    def _check_bounds(self, arr: np.ndarray, batched: bool, path: str) -> None:
        lo, hi = self._bounds
        if np.ndim(lo) == 0 and np.ndim(hi) == 0:
            ok = arr.min() >= lo and arr.max() <= hi  # NaN propagates through min/max and compares False
        else:
            ok = bool(np.all(arr >= lo) and np.all(arr <= hi))
        if ok:
            return
        with np.errstate(invalid="ignore"):
            bad = ~((arr >= lo) & (arr <= hi))
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        elem = where[1:] if batched else where
        b_lo = lo if np.ndim(lo) == 0 else lo[elem]
        b_hi = hi if np.ndim(hi) == 0 else hi[elem]
        raise InvalidValueError(f"leaf {leaf_name(path)!r}: value {arr[where]} at index {where} is outside the "
                                f"space's bounds [{b_lo}, {b_hi}]" + (" (NaN is refused)" if arr.dtype.kind == "f" else "")
                                + "; a buffer made with check_bounds=False stores such values as they are")

    def contains(self, x: Any) -> bool:
        try:
            self.validate(x)
        except (InvalidValueError, TypeError, ValueError):
            return False
        return True

    def sample(self, rng: np.random.Generator | None = None, batch_size: int | None = None) -> np.ndarray:
        rng = rng or np.random.default_rng()
        shape = self.shape if batch_size is None else (batch_size, *self.shape)
        if self.dtype.kind == "f":
            lo = np.where(np.isfinite(self.low), self.low, -1e3)
            hi = np.where(np.isfinite(self.high), self.high, 1e3)
            return rng.uniform(lo, hi, size=shape).astype(self.dtype)
        if self.dtype.kind == "b":
            return rng.integers(0, 2, size=shape).astype(bool)
        info = np.iinfo(self.dtype)
        lo = np.clip(self.low, info.min, info.max).astype(np.int64)
        hi = np.clip(self.high, info.min, info.max).astype(np.int64)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(self.dtype)

    def _config(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype.str if self.dtype.byteorder not in "=|" else self.dtype.name,
            "low": _bound_to_json(self.low),
            "high": _bound_to_json(self.high),
        }

    @classmethod
    def _from_config(cls, config: dict[str, Any], metadata: SpaceMetadata) -> "BoxSpace":
        shape = tuple(config["shape"])
        dtype = np.dtype(config["dtype"])
        return cls(_bound_from_json(config["low"], shape, dtype), _bound_from_json(config["high"], shape, dtype),
                   shape, dtype, metadata)

    def __repr__(self) -> str:
        meta = f", metadata={self.metadata.to_json()}" if self.metadata else ""
        return f"BoxSpace(shape={self.shape}, dtype={self.dtype}{meta})"
