"""``BoxSpace``: a fixed-shape numeric array with bounds, like ``gymnasium.spaces.Box``."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces.base import SPACE_TYPES, LeafCheck, Space, leaf_name
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


def _bound_from_json(value: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """A bound as :class:`BoxSpace` takes it: floats (``"inf"``/``"-inf"`` decoded) or exact Python ints."""
    conv = lambda v: float(v) if isinstance(v, str) else v  # noqa: E731  "inf"/"-inf"
    if isinstance(value, list):
        if dtype.kind in "iu":
            return np.array([conv(v) for v in value], dtype=object).reshape(shape)
        return np.asarray([conv(v) for v in value], dtype=np.float64).reshape(shape)
    return conv(value)


def _int_of(v: Any, side: str, info: np.iinfo, dtype: np.dtype) -> int:
    """One bound of an integer space as an exact Python int (a float ``low`` rounds up, ``high`` down).

    A float equal to ``float(info.max)`` (``2.0**63`` for int64, the nearest float to the
    largest int64) means the dtype's limit, so bounds that went through float64 still open.
    """
    if isinstance(v, (bool, int, np.integer, np.bool_)):
        n = int(v)
    else:
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"BoxSpace bounds ({side} {f}) do not fit dtype {dtype} ([{info.min}, {info.max}])")
        n = math.ceil(f) if side == "low" else math.floor(f)
        if f == float(info.max):
            n = min(n, int(info.max))
        if f == float(info.min):
            n = max(n, int(info.min))
    if not int(info.min) <= n <= int(info.max):
        raise ValueError(f"BoxSpace bounds ({side} {v}) do not fit dtype {dtype} ([{info.min}, {info.max}])")
    return n


def _int_bound(value: Any, shape: tuple[int, ...], dtype: np.dtype, side: str) -> np.ndarray:
    """``value`` broadcast to ``shape`` in the integer ``dtype``, exactly (no float64 round trip).

    Raises:
        ValueError: a bound outside the dtype's range, or not finite.
    """
    info = np.iinfo(dtype)
    arr = value if isinstance(value, np.ndarray) else np.array(value, dtype=object)
    if arr.dtype.kind in "iub":
        if arr.size:
            _int_of(arr.min(), side, info, dtype), _int_of(arr.max(), side, info, dtype)
        exact = arr.astype(dtype)
    else:  # Python ints of any size, or floats: one element at a time (bounds are small)
        exact = np.array([_int_of(v, side, info, dtype) for v in arr.reshape(-1)], dtype=dtype).reshape(arr.shape)
    return np.broadcast_to(exact, shape).copy()


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
            integer dtype they are kept exactly in that dtype (``low``/``high`` are arrays of
            ``dtype``; a float ``low`` rounds up, a float ``high`` down); for a float dtype they are
            float64 arrays, and values are compared with them cast to ``dtype`` (as gymnasium does).
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
        if self.dtype.kind in "iu":
            self.low = _int_bound(low, self.shape, self.dtype, "low")
            self.high = _int_bound(high, self.shape, self.dtype, "high")
        else:
            self.low = np.broadcast_to(np.asarray(low, dtype=np.float64), self.shape).copy()
            self.high = np.broadcast_to(np.asarray(high, dtype=np.float64), self.shape).copy()
        if np.any(self.low > self.high):
            raise ValueError("BoxSpace low must be <= high elementwise")
        self._bounds = self._bounds_to_check()

    def _bounds_to_check(self) -> tuple[Any, Any] | None:
        """``(low, high)`` to compare values with (scalars when uniform, in ``dtype``), or None
        when every value of the dtype is inside (no check needed)."""
        if self.dtype.kind == "b":
            lo, hi = self.low.astype(bool), self.high.astype(bool)
            limits = (False, True)
        elif self.dtype.kind in "iu":
            lo, hi = self.low, self.high
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

    def leaf_check(self) -> LeafCheck:
        """Takes an array of exactly ``shape`` and ``dtype`` as it is (a view, no copy), and for a
        ``()`` leaf a NumPy or Python scalar whose ``np.asarray`` has ``dtype``; the bounds are
        those :meth:`validate` checks, element by element."""
        shape, dtype, scalar = self.shape, self.dtype, self.shape == ()

        def convert(x: Any) -> np.ndarray | None:
            if type(x) is np.ndarray:
                return x if x.shape == shape and (x.dtype is dtype or x.dtype == dtype) else None
            if scalar and isinstance(x, (np.generic, float, int)):  # bool is an int
                a = np.asarray(x)  # ints beyond 64 bits give an object array: refused below
                return a if a.dtype == dtype else None
            return None

        if self._bounds is None or not int(np.prod(shape, dtype=np.int64)):
            return LeafCheck(convert)
        flat = lambda b: np.broadcast_to(b, shape).ravel().astype(dtype)  # noqa: E731
        return LeafCheck(convert, flat(self._bounds[0]), flat(self._bounds[1]))

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
        nan = " (NaN is refused)" if arr.dtype.kind == "f" else ""
        raise InvalidValueError(f"leaf {leaf_name(path)!r}: value {arr[where]} at index {where} is outside the "
                                f"space's bounds [{b_lo}, {b_hi}]{nan}; a buffer made with check_bounds=False "
                                "stores such values as they are")

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
        # Exact bounds in the dtype: the whole int64/uint64 range draws uniformly.
        return rng.integers(self.low, self.high, size=shape, endpoint=True, dtype=self.dtype)

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
