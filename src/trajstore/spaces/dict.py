"""``DictSpace``: a nested mapping of spaces; key order is kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces.base import SPACE_TYPES, Space, space_from_json
from trajstore.spaces.metadata import SpaceMetadata


@SPACE_TYPES.register("dict")
class DictSpace(Space):
    """An ordered mapping ``str -> Space``; values are ``dict``s with exactly these keys.

    Leaves are addressed by their path: keys joined by a separator (``"/"`` by default),
    e.g. ``"observation/pixels"``.

    Raises:
        TypeError: a key is not a non-empty ``str`` or a value is not a ``Space``.
    """

    def __init__(self, spaces: Mapping[str, Space], metadata: Any = None):
        super().__init__(metadata)
        for key, space in spaces.items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"DictSpace keys must be non-empty str, got {key!r}")
            if not isinstance(space, Space):
                raise TypeError(f"DictSpace[{key!r}] must be a Space, got {type(space).__name__}")
        self.spaces: dict[str, Space] = dict(spaces)

    def __getitem__(self, key: str) -> Space:
        return self.spaces[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.spaces)

    def __len__(self) -> int:
        return len(self.spaces)

    def keys(self):
        return self.spaces.keys()

    def items(self):
        return self.spaces.items()

    def _copy_with(self, metadata: SpaceMetadata) -> "DictSpace":
        return DictSpace(self.spaces, metadata)

    def without_metadata(self) -> "DictSpace":
        return DictSpace({k: s.without_metadata() for k, s in self.spaces.items()})

    # -- leaves ---------------------------------------------------------------------------
    def leaves(self, separator: str = "/", prefix: str = "") -> list[tuple[str, Space]]:
        """Every non-dict leaf as ``(path, space)`` in key order."""
        out: list[tuple[str, Space]] = []
        for key, space in self.spaces.items():
            path = f"{prefix}{separator}{key}" if prefix else key
            if isinstance(space, DictSpace):
                out.extend(space.leaves(separator, path))
            else:
                out.append((path, space))
        return out

    def subspace(self, path: str, separator: str = "/") -> Space:
        """The space at ``path`` (a leaf or a sub-dict).

        Raises:
            KeyError: no such path; the message lists the keys at the level where it failed.
        """
        space: Space = self
        for part in path.split(separator):
            if not isinstance(space, DictSpace) or part not in space.spaces:
                known = list(space.spaces) if isinstance(space, DictSpace) else []
                raise KeyError(f"no key {path!r} in the space (at {part!r}; keys there: {known})")
            space = space.spaces[part]
        return space

    # -- values ---------------------------------------------------------------------------
    def validate(self, x: Any, *, batched: bool = False, path: str = "") -> dict[str, Any]:
        if not isinstance(x, Mapping):
            raise InvalidValueError(f"{'leaf ' + repr(path) if path else 'value'}: expected a dict, "
                                    f"got {type(x).__name__}")
        missing = [k for k in self.spaces if k not in x]
        extra = [k for k in x if k not in self.spaces]
        if missing or extra:
            where = f" at {path!r}" if path else ""
            raise InvalidValueError(f"keys{where} do not match the space: missing {missing}, unexpected {extra}")
        out = {}
        for key, space in self.spaces.items():
            out[key] = space.validate(x[key], batched=batched, path=f"{path}/{key}" if path else key)
        if batched and not path:
            check_batch_size(self, out)
        return out

    def contains(self, x: Any) -> bool:
        return (isinstance(x, Mapping) and set(x) == set(self.spaces)
                and all(s.contains(x[k]) for k, s in self.spaces.items()))

    def sample(self, rng: np.random.Generator | None = None, batch_size: int | None = None) -> dict[str, Any]:
        rng = rng or np.random.default_rng()
        return {k: s.sample(rng, batch_size) for k, s in self.spaces.items()}

    def _config(self) -> dict[str, Any]:
        return {"spaces": {k: s.to_json() for k, s in self.spaces.items()}}

    @classmethod
    def _from_config(cls, config: dict[str, Any], metadata: SpaceMetadata) -> "DictSpace":
        return cls({k: space_from_json(v) for k, v in config["spaces"].items()}, metadata)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {s!r}" for k, s in self.spaces.items())
        return f"DictSpace({{{inner}}})"


def check_batch_size(space: Space, batch: Any) -> int:
    """The common leading size ``N`` of a validated batch.

    Raises:
        InvalidValueError: leaves disagree on ``N``; names two of them.
    """
    sizes: dict[str, int] = {}

    def walk(sub: Space, value: Any, path: str) -> None:  # no key splitting: keys may hold any separator
        if isinstance(sub, DictSpace):
            for key, child in sub.spaces.items():
                walk(child, value[key], f"{path}/{key}" if path else key)
        else:
            sizes[path] = len(value)

    walk(space, batch, "")
    distinct = set(sizes.values())
    if len(distinct) > 1:
        items = sorted(sizes.items(), key=lambda kv: kv[1])
        raise InvalidValueError(f"leaves have different batch sizes: {items[0][0]!r} has {items[0][1]}, "
                                f"{items[-1][0]!r} has {items[-1][1]}")
    return distinct.pop() if distinct else 0


def leaves_of(space: Space, separator: str = "/") -> list[tuple[str, Space]]:
    """Leaves of any space: a non-dict space is its own single leaf with path ``""``."""
    return space.leaves(separator) if isinstance(space, DictSpace) else [("", space)]


def flatten_value(space: Space, value: Any, separator: str = "/") -> dict[str, Any]:
    """``{path: leaf value}`` for a (batched or not) value of ``space``; paths as :meth:`DictSpace.leaves`."""
    out: dict[str, Any] = {}

    def walk(sub: Space, node: Any, path: str) -> None:  # walks keys, never splits paths
        if isinstance(sub, DictSpace):
            for key, child in sub.spaces.items():
                walk(child, node[key], f"{path}{separator}{key}" if path else key)
        else:
            if path in out:
                raise ValueError(f"two leaves share the path {path!r}: a key contains {separator!r}")
            out[path] = node

    walk(space, value, "")
    return out


def unflatten_value(space: Space, flat: Mapping[str, Any], separator: str = "/") -> Any:
    """Inverse of :func:`flatten_value`; keys come out in the space's order."""

    def build(sub: Space, path: str) -> Any:
        if isinstance(sub, DictSpace):
            return {key: build(child, f"{path}{separator}{key}" if path else key) for key, child in sub.spaces.items()}
        return flat[path]

    return build(space, "")


def map_leaves(space: Space, value: Any, fn: Any) -> Any:
    """Apply ``fn(leaf_value)`` to every leaf of a value of ``space``; the nesting is kept."""
    if isinstance(space, DictSpace):
        return {k: map_leaves(s, value[k], fn) for k, s in space.spaces.items()}
    return fn(value)
