"""The ``Space`` base class: what a value (one step, or a batch of steps) looks like."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Callable, ClassVar, NamedTuple

import numpy as np

from trajstore._registry import Registry
from trajstore.errors import InvalidValueError
from trajstore.spaces.metadata import EMPTY_METADATA, SpaceMetadata

#: Registry of space type names used in the JSON form (``"box"``, ``"dict"``, ...).
SPACE_TYPES: Registry = Registry("space")


class LeafCheck(NamedTuple):
    """What one leaf space contributes to the one-step fast path (:mod:`trajstore.spaces.step_check`).

    Attributes:
        convert: ``convert(x)`` -> ``x`` as the array (no batch axis) that :meth:`Space.validate`
            followed by ``convert`` gives for it, or ``None`` when it does not take ``x`` cheaply as it
            is: then :meth:`Space.validate` decides (converts, or raises naming the leaf). It never
            raises and never checks bounds. It also takes what :meth:`Space.validate` returns.
        low, high: the bounds every element of ``convert``'s array must lie in (``low <= x <= high``,
            NaN refused), flattened in C order and in the leaf's dtype; ``None`` when no value needs
            a check.
    """

    convert: Callable[[Any], "np.ndarray | None"]
    low: np.ndarray | None = None
    high: np.ndarray | None = None


def _no_fast_path(x: Any) -> None:
    return None


class Space(abc.ABC):
    """A set of values of one structure, with JSON ``metadata``.

    Equality compares structure, shape, dtype, bounds **and metadata**: metadata
    decides where a leaf is stored, so two spaces that route differently are not
    equal. Use :meth:`without_metadata` to compare the values alone.

    A *batched* value has one extra leading axis ``N`` on every leaf.
    """

    type_name: ClassVar[str]

    def __init__(self, metadata: Mapping[str, Any] | None = None):
        self._metadata = metadata if isinstance(metadata, SpaceMetadata) else (
            SpaceMetadata(metadata) if metadata else EMPTY_METADATA
        )

    @property
    def metadata(self) -> SpaceMetadata:
        """Immutable JSON-only mapping, e.g. ``{"kind": "image", "layout": "HWC", "fps": 30}``."""
        return self._metadata

    def with_metadata(self, metadata: Mapping[str, Any] | None = None, *, replace: bool = False,
                      **kwargs: Any) -> "Space":
        """A copy with ``metadata``/``kwargs`` merged into (or, with ``replace``, replacing) the current one."""
        new = SpaceMetadata({**(metadata or {}), **kwargs}) if replace else self._metadata.updated(metadata, **kwargs)
        return self._copy_with(new)

    def without_metadata(self) -> "Space":
        """A copy with empty metadata (recursively for dict spaces)."""
        return self._copy_with(EMPTY_METADATA)

    @abc.abstractmethod
    def _copy_with(self, metadata: SpaceMetadata) -> "Space": ...

    # -- values ---------------------------------------------------------------------------
    def contains(self, x: Any) -> bool:
        """True if ``x`` is one value (not batched) of this space."""
        try:
            self.validate(x)
        except (InvalidValueError, TypeError, ValueError):
            return False
        return True

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)

    @abc.abstractmethod
    def validate(self, x: Any, *, batched: bool = False, path: str = "", check_bounds: bool = True) -> Any:
        """Check ``x`` and return it converted to the stored form (numpy arrays).

        With ``batched=True`` every leaf has a leading axis ``N`` (the same ``N`` for all leaves).
        With ``check_bounds=False`` a :class:`BoxSpace` leaf takes values outside its bounds and NaN
        (shape and dtype are still checked).

        Raises:
            InvalidValueError: naming the leaf ``path`` and what was expected.
        """

    def leaf_check(self) -> LeafCheck:
        """This leaf's part of the one-step fast path (see :class:`LeafCheck`); computed once per
        space by :func:`trajstore.spaces.step_check.step_check`.

        The default takes nothing on the fast path: every value goes through :meth:`validate`.
        """
        return LeafCheck(_no_fast_path)

    @abc.abstractmethod
    def sample(self, rng: np.random.Generator | None = None, batch_size: int | None = None) -> Any:
        """A random value (or a batch of ``batch_size`` values) inside the space."""

    # -- JSON -----------------------------------------------------------------------------
    @abc.abstractmethod
    def _config(self) -> dict[str, Any]:
        """JSON-only fields of this space type, without ``type`` and ``metadata``."""

    @classmethod
    @abc.abstractmethod
    def _from_config(cls, config: dict[str, Any], metadata: SpaceMetadata) -> "Space": ...

    def to_json(self) -> dict[str, Any]:
        """JSON form: ``{"type": <registered name>, ..., "metadata": {...}}``.

        Computed once (spaces are immutable); do not mutate the returned dict.
        """
        cached = self.__dict__.get("_json")
        if cached is None:
            cached = {"type": self.type_name, **self._config()}
            if self._metadata:
                cached["metadata"] = self._metadata.to_json()
            self.__dict__["_json"] = cached
        return cached

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "Space":
        """Rebuild a space from :meth:`to_json` output, through the type registry (no imports)."""
        return space_from_json(data)

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return self.to_json() == other.to_json()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        import json

        return hash(json.dumps(self.to_json(), sort_keys=True))


def space_from_json(data: Mapping[str, Any]) -> Space:
    """Rebuild any registered space from its JSON form.

    Raises:
        UnknownTypeError: the ``type`` is not a registered space type.
        FormatError: the JSON form has no ``type``.
    """
    from trajstore.errors import FormatError

    if not isinstance(data, Mapping) or "type" not in data:
        raise FormatError(f"a space's JSON form needs a 'type' field, got {data!r:.200}")
    cls = SPACE_TYPES.get(data["type"])
    config = {k: v for k, v in data.items() if k not in ("type", "metadata")}
    return cls._from_config(config, SpaceMetadata(data.get("metadata") or {}))


def leaf_name(path: str) -> str:
    return path or "<root>"
