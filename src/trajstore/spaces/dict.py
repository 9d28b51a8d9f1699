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
    def leaves(self, separator: str = "/") -> list[tuple[str, Space]]:
        """Every non-dict leaf as ``(name, space)`` in key order; a name is the keys joined by ``separator``.

        Code that walks leaves uses :func:`trajstore.spaces.tree.leaves` (tuple paths); this is for display.
        """
        from trajstore.spaces import tree

        return [(separator.join(path), leaf) for path, leaf in tree.leaves(self)]

    def subspace(self, name: str, separator: str = "/") -> Space:
        """The space at ``name`` (a leaf or a sub-dict; keys joined by ``separator``).

        Raises:
            KeyError: no such path; the message lists the keys at the level where it failed.
        """
        from trajstore.spaces import tree

        return tree.subspace(self, tree.parse_name(name, separator))

    # -- values ---------------------------------------------------------------------------
    def validate(self, x: Any, *, batched: bool = False, path: str = "",
                 check_bounds: bool = True) -> dict[str, Any]:
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
            out[key] = space.validate(x[key], batched=batched, path=f"{path}/{key}" if path else key,
                                      check_bounds=check_bounds)
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
    from trajstore.spaces import tree

    sizes = [len(v) for v in tree.flatten(space, batch)]
    if len(set(sizes)) > 1:
        paths = tree.leaf_paths(space)
        lo, hi = int(np.argmin(sizes)), int(np.argmax(sizes))
        raise InvalidValueError(f"leaves have different batch sizes: {tree.path_name(paths[lo])!r} has {sizes[lo]}, "
                                f"{tree.path_name(paths[hi])!r} has {sizes[hi]}")
    return sizes[0] if sizes else 0
