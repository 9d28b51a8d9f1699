"""Per-episode data (``end_episode(task=..., success=..., seed=...)``): checked to be JSON, copied.

The data is kept in the episode log (JSON lines, see :mod:`~trajstore.replay_buffer.episode_log`),
so it must be plain JSON: it is checked and copied here, once, before the buffer changes anything.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from trajstore.errors import InvalidValueError

#: Deepest nesting of lists and dicts accepted in one value (a guard against self-referencing values).
MAX_DEPTH = 64


def episode_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-only copy of ``data``, in the form it reads back after a reopen.

    Accepted values: ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists and tuples of
    them (a tuple reads back as a list), dicts with ``str`` keys, nested up to :data:`MAX_DEPTH`
    levels. NumPy scalars (``np.bool_``, integers, floats, ``np.str_``) become the Python value.

    Raises:
        InvalidValueError: a value is not JSON (an array, an object, NaN or infinity, a dict with a
            non-``str`` key, too deep); the message names the key, e.g. ``'info/cameras/1'``.
    """
    return {key: _json_value(value, key, 0) for key, value in data.items()}


def _json_value(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise InvalidValueError(f"episode data {where!r} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, np.generic) and isinstance(value, (np.bool_, np.integer, np.floating, np.str_)):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(f"episode data {where!r} is {value}: JSON has no NaN or infinity; "
                                    "store None or a string instead")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}/{i}", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise InvalidValueError(f"episode data {where!r} has the key {key!r}: JSON object keys are str")
            out[key] = _json_value(v, f"{where}/{key}", depth + 1)
        return out
    hint = "; convert it with .tolist()" if isinstance(value, np.ndarray) else ""
    raise InvalidValueError(f"episode data {where!r} is a {type(value).__name__}, which is not JSON "
                            f"(use None, bool, int, float, str, lists and dicts of them){hint}")
