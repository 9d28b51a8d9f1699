"""Per-episode data (``end_episode(task=..., success=..., seed=...)``): checked to be JSON, copied.

The data is kept in the episode log (JSON lines, see :mod:`~trajstore.replay_buffer.episode_log`),
so it must be plain JSON that reads back as it was written: it is checked and copied here, once,
before the buffer changes anything (:func:`trajstore._json.check_storable`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from trajstore._json import MAX_INT_BITS, MAX_STORED_DEPTH, check_storable
from trajstore.errors import InvalidValueError

#: Deepest nesting of lists and dicts accepted in one value (a guard against self-referencing values).
MAX_DEPTH = MAX_STORED_DEPTH

__all__ = ["MAX_DEPTH", "MAX_INT_BITS", "episode_data", "flag"]


def episode_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-only copy of ``data``, in the form it reads back after a reopen.

    Accepted values: ``None``, ``bool``, ``int`` of at most :data:`MAX_INT_BITS` bits (128), finite
    ``float``, ``str``, lists and tuples of them (a tuple reads back as a list), dicts with ``str``
    keys, nested up to :data:`MAX_DEPTH` levels. NumPy scalars (``np.bool_``, integers, floats,
    ``np.str_``) become the Python value.

    Raises:
        InvalidValueError: a value is not JSON (an array, an object, NaN or infinity, a dict with a
            non-``str`` key, too deep), or an integer too large to keep (store it as a ``str``); the
            message names the key, e.g. ``'info/cameras/1'``.
    """
    out = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise InvalidValueError(f"episode data has the key {key!r}: JSON object keys are str")
        out[key] = check_storable(value, key)
    return out


def flag(name: str, value: Any) -> bool:
    """``value`` as a ``bool``: a ``bool`` or a NumPy bool scalar (``np.True_``).

    Raises:
        InvalidValueError: anything else (``"no"``, ``0``, ``None``), naming the argument ``name``: a truthy
            string would otherwise set the flag.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InvalidValueError(f"{name} must be a bool (True or False), got {value!r} of type {type(value).__name__}")
