"""The root attributes of an ALOHA episode file as JSON values (``sim``, ``compress`` and any others a
recorder wrote), each one's declared size checked before it is read."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.errors import FormatError

#: Root attributes that would clash with what the import adds or ``end_episode``'s own parameters.
RESERVED_ATTRS = ("file", "interrupted", "final_observation", "flush")
MAX_ATTRS = 64
MAX_ATTR_BYTES = 1 << 20       # declared size of one attribute
MAX_ATTR_ITEMS = 256           # elements of an array attribute
MAX_ATTR_CHARS = 4096          # characters of a string attribute


def root_attrs(f: Any, path: Path) -> dict[str, Any]:
    """``{name: JSON value}`` of the root attributes of the open h5py file ``f``.

    Raises:
        FormatError: names the file and attribute: more than :data:`MAX_ATTRS` of them, one named like
            :data:`RESERVED_ATTRS`, one declaring more than :data:`MAX_ATTR_BYTES`, an array of more than
            :data:`MAX_ATTR_ITEMS` items or a string of more than :data:`MAX_ATTR_CHARS`, a non-finite number,
            or another kind of value (compound, reference, ...).
    """
    names = list(f.attrs.keys())
    if len(names) > MAX_ATTRS:
        raise FormatError(f"{path}: {len(names)} root attributes, more than {MAX_ATTRS}")
    out: dict[str, Any] = {}
    for name in names:
        if name in RESERVED_ATTRS:
            raise FormatError(f"{path}: root attribute {name!r} would clash with the episode data the import "
                              f"adds ({', '.join(RESERVED_ATTRS)})")
        try:
            aid = f.attrs.get_id(name)
            declared = math.prod(aid.shape or ()) * aid.dtype.itemsize
            if declared > MAX_ATTR_BYTES:
                raise FormatError(f"{path}: root attribute {name!r} declares {declared} bytes, more than "
                                  f"{MAX_ATTR_BYTES}")
            value = f.attrs[name]
        except FormatError:
            raise
        except (OSError, TypeError, ValueError, KeyError) as exc:
            raise FormatError(f"{path}: root attribute {name!r} cannot be read ({exc})") from None
        out[name] = _json_value(value, f"{path}: root attribute {name!r}")
    return out


def _json_value(value: Any, where: str) -> Any:
    if isinstance(value, (bytes, np.bytes_)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{where} is bytes that are not UTF-8") from None
    if isinstance(value, str):
        if len(value) > MAX_ATTR_CHARS:
            raise FormatError(f"{where} is a string of {len(value)} characters, more than {MAX_ATTR_CHARS}")
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise FormatError(f"{where} is {float(value)}, expected a finite number")
        return float(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufSU" and value.ndim <= 2:
        if value.size > MAX_ATTR_ITEMS:
            raise FormatError(f"{where} is an array of {value.size} items, more than {MAX_ATTR_ITEMS}")
        return [_json_value(v, where) for v in value]  # rows of a 2-D array are arrays again
    raise FormatError(f"{where} is a {type(value).__name__} ({getattr(value, 'dtype', '')}), expected a bool, "
                      "number, string or small array")
