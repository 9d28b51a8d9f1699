"""The arguments of an aligned view, checked once (:func:`checked_arguments`), and the hashable form of
window arguments its request cache keys on (:func:`frozen`). No I/O."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from trajstore.replay_buffer.window_plan import SEPARATOR
from trajstore.spaces import tree
from trajstore.streams.align import check_method, tolerance_ns

def checked_arguments(spaces: Mapping[str, Any], anchor: Any, rate_hz: Any, how: Any, tolerance: Any,
                      streams: Any) -> tuple[list[str], dict[str, str], dict[str, int | None], float | None]:
    """``(included stream names, method per stream, tolerance per stream in int ns or None, rate_hz or None)``
    of the arguments of :class:`~trajstore.streams.aligned.AlignedView`, checked once (see its Raises)."""
    known = list(spaces)

    def stream(name: Any, what: str) -> str:
        if not isinstance(name, str) or name not in spaces:
            raise ValueError(f"{what}: {name!r} is not a stream of the buffer (streams: {known})")
        return name

    if (anchor is None) == (rate_hz is None):
        raise TypeError("aligned() takes exactly one of anchor= (a stream name) and rate_hz= (steps per second)")
    rate = None
    if anchor is not None:
        stream(anchor, "anchor")
    else:
        if isinstance(rate_hz, (bool, np.bool_)) or not isinstance(rate_hz, (int, float, np.integer, np.floating)) \
                or not np.isfinite(float(rate_hz)) or float(rate_hz) <= 0:
            raise ValueError(f"rate_hz must be a positive finite number of steps per second, got {rate_hz!r}")
        rate = float(rate_hz)
    if isinstance(streams, str):
        raise TypeError(f"streams must be a collection of stream names, got the str {streams!r}")
    names = known if streams is None else list(dict.fromkeys(stream(n, "streams") for n in streams))
    if not names:
        raise ValueError("streams is empty: include at least one stream")
    for arg, value in (("how", how), ("tolerance", tolerance)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{arg} must be a mapping of stream names, got {type(value).__name__}")
        for name in value or {}:
            if stream(name, arg) not in names:
                raise ValueError(f"{arg}: stream {name!r} is not included in the view (streams={names})")
    methods = {n: check_method((how or {}).get(n, "previous"), n) for n in names}
    for n in names:
        if methods[n] == "linear":
            for path, leaf in tree.leaves(spaces[n]):
                if np.dtype(getattr(leaf, "dtype", object)).kind != "f":
                    where = SEPARATOR.join((n, *path))
                    raise ValueError(f"how[{n!r}] = 'linear' needs float leaves; leaf {where!r} is "
                                     f"{getattr(leaf, 'dtype', type(leaf).__name__)}: use 'previous' or 'nearest'")
    tolerances = {n: tolerance_ns((tolerance or {}).get(n), n) for n in names}
    return names, methods, tolerances, rate


UNHASHABLE = ("unhashable",)


def frozen(value: Any) -> Any:
    """A hashable copy of window arguments (mappings, numeric sequences and arrays, scalars), or
    :data:`UNHASHABLE` if it has none (the request is then checked again at each call)."""
    try:
        if isinstance(value, Mapping):
            return tuple((k, frozen(v)) for k, v in value.items())
        if isinstance(value, (list, tuple, range, np.ndarray)):
            arr = np.asarray(list(value) if isinstance(value, range) else value)
            if arr.dtype.kind not in "biuf":
                raise TypeError("not numbers")
            return ("seq", arr.dtype.str, arr.shape, arr.tobytes())
        hash(value)
        return value
    except (TypeError, ValueError):
        return UNHASHABLE
