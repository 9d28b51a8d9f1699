"""``SpaceMetadata``: an immutable, JSON-only mapping attached to every space.

Metadata such as ``{"kind": "image", "layout": "HWC", "fps": 30}`` drives where a
leaf is stored (see :mod:`trajstore.storages.metadata_routing`). It must survive a
JSON round trip unchanged, so only JSON values are accepted: ``None``, ``bool``,
``int``, finite ``float``, ``str``, lists (stored as tuples) and string-keyed
mappings (stored as nested ``SpaceMetadata``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Iterator

import numpy as np


def _freeze(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ValueError(f"metadata {where}: {value!r} is not a finite number (JSON has no inf/nan)")
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, Mapping):
        return SpaceMetadata(value, _where=where)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise TypeError(
        f"metadata {where}: {type(value).__name__} is not a JSON value "
        "(use None, bool, int, float, str, list or dict)"
    )


def _thaw(value: Any) -> Any:
    if isinstance(value, SpaceMetadata):
        return value.to_json()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


class SpaceMetadata(Mapping[str, Any]):
    """Immutable mapping of JSON values; hashable and comparable by content.

    Raises:
        TypeError: a key is not a ``str`` or a value is not a JSON value.
        ValueError: a float is inf or nan.
    """

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, Any] | None = None, *, _where: str = "") -> None:
        frozen: dict[str, Any] = {}
        for key, value in (data or {}).items():
            if not isinstance(key, str):
                raise TypeError(f"metadata key {key!r} at {_where or 'top level'} is not a str")
            frozen[key] = _freeze(value, f"{_where}.{key}" if _where else key)
        self._data = frozen
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpaceMetadata):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self.to_json() == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted((k, _hashable(v)) for k, v in self._data.items())))
        return self._hash

    def __repr__(self) -> str:
        return f"SpaceMetadata({self.to_json()!r})"

    def to_json(self) -> dict[str, Any]:
        """A plain ``dict`` (lists for tuples) ready for ``json.dumps``."""
        return {k: _thaw(v) for k, v in self._data.items()}

    def updated(self, other: Mapping[str, Any] | None = None, **kwargs: Any) -> "SpaceMetadata":
        """A copy with ``other`` and ``kwargs`` merged in (shallow, later wins)."""
        merged = dict(self._data)
        merged.update(other or {})
        merged.update(kwargs)
        return SpaceMetadata({k: _thaw(v) for k, v in merged.items()})


def _hashable(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_hashable(v) for v in value)
    return value


EMPTY_METADATA = SpaceMetadata()
