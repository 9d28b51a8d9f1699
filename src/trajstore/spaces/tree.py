"""The one tree helper: leaves of a (nested) space and of its values, keyed by tuples of keys.

A leaf is addressed by its *path*, the tuple of dict keys leading to it (``("observation",
"pixels")``); a space that is not a :class:`DictSpace` is its own single leaf with path ``()``.
Keys are never joined or split here: a separator turns a path into a name only where a name
is needed (a file, a dataset, a message), through :func:`path_name` and :func:`parse_name`.

Every function walks the space, never the value, so a value with extra or missing keys is the
caller's to validate first (``Space.validate``). Leaf order is the space's key order, depth
first; it is computed once per space and cached on it (spaces are immutable).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from trajstore._suggest import did_you_mean
from trajstore.errors import UnknownLeafError
from trajstore.spaces.base import Space

Path = tuple[str, ...]


def _is_dict(space: Space) -> bool:
    return getattr(space, "spaces", None) is not None and space.type_name == "dict"


def leaves(space: Space) -> tuple[tuple[Path, Space], ...]:
    """Every leaf of ``space`` as ``(path, leaf space)``, depth first in key order (cached)."""
    cached = space.__dict__.get("_tree_leaves")
    if cached is None:
        out: list[tuple[Path, Space]] = []

        def walk(sub: Space, path: Path) -> None:
            if _is_dict(sub):
                for key, child in sub.spaces.items():  # type: ignore[attr-defined]
                    walk(child, (*path, key))
            else:
                out.append((path, sub))

        walk(space, ())
        cached = tuple(out)
        space.__dict__["_tree_leaves"] = cached
    return cached


def leaf_paths(space: Space) -> tuple[Path, ...]:
    """The paths of :func:`leaves`."""
    return tuple(p for p, _ in leaves(space))


def flatten(space: Space, value: Any) -> list[Any]:
    """The leaf values of ``value`` (a value or batch of ``space``), in :func:`leaves` order."""
    if not _is_dict(space):
        return [value]
    out: list[Any] = []
    _collect(space, value, out)
    return out


def _collect(sub: Space, node: Any, out: list[Any]) -> None:
    # not a self-referencing closure (a reference cycle that would keep ``out``'s arrays alive, see _nest)
    for key, child in sub.spaces.items():  # type: ignore[attr-defined]
        if _is_dict(child):
            _collect(child, node[key], out)
        else:
            out.append(node[key])


def unflatten(space: Space, values: Sequence[Any]) -> Any:
    """Inverse of :func:`flatten`: nest leaf values (in :func:`leaves` order) as ``space`` is nested."""
    if not _is_dict(space):
        return values[0]
    return _nest(space, iter(values))


def _nest(sub: Space, it: Any) -> Any:
    # a module function, not a closure over itself: a self-referencing closure is a reference cycle that
    # kept every batch's arrays alive until the cyclic GC ran (tens of MiB per DataLoader worker)
    return {key: _nest(child, it) if _is_dict(child) else next(it)
            for key, child in sub.spaces.items()}  # type: ignore[attr-defined]


def map_leaves(space: Space, value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn(leaf value)`` to every leaf of a value of ``space``; the nesting is kept."""
    if _is_dict(space):
        return {k: map_leaves(s, value[k], fn) for k, s in space.spaces.items()}  # type: ignore[attr-defined]
    return fn(value)


def get(value: Any, path: Path) -> Any:
    """The node of a nested value (or space's ``spaces``) at ``path``."""
    for key in path:
        value = value[key]
    return value


def subspace(space: Space, path: Path) -> Space:
    """The space at ``path`` (a leaf or a sub-dict).

    Raises:
        UnknownLeafError: (a ``KeyError`` and a ``ValueError``) no such path; the message lists the keys at
            the level where it failed, and the closest of them (``did you mean 'pixels'?``).
    """
    sub = space
    for i, key in enumerate(path):
        if not _is_dict(sub) or key not in sub.spaces:  # type: ignore[attr-defined]
            known = list(sub.spaces) if _is_dict(sub) else []  # type: ignore[attr-defined]
            close = did_you_mean(key, known) if isinstance(key, str) else None
            hint = f"did you mean {close!r}? " if close else ""
            raise UnknownLeafError(f"no key {path_name(path)!r} in the space (at {key!r}; {hint}keys there: {known})")
        sub = sub.spaces[key]  # type: ignore[attr-defined]
    return sub


def restrict(space: Space, keep: Iterable[Path]) -> Space:
    """The sub-``DictSpace`` of ``space`` holding only the leaf paths in ``keep`` (order and metadata kept)."""
    keep = set(keep)

    def build(sub: Space, path: Path) -> Space | None:
        if not _is_dict(sub):
            return sub if path in keep else None
        kept = {}
        for key, child in sub.spaces.items():  # type: ignore[attr-defined]
            inner = build(child, (*path, key))
            if inner is not None and not (_is_dict(inner) and not inner.spaces):  # type: ignore[attr-defined]
                kept[key] = inner
        return type(sub)(kept, sub.metadata)  # type: ignore[call-arg]

    return build(space, ())  # type: ignore[return-value]


def under(path: Path, prefix: Path) -> bool:
    """True if ``path`` is ``prefix`` or lies below it."""
    return path[:len(prefix)] == prefix


def path_name(path: Path, separator: str = "/") -> str:
    """The name of a path: its keys joined by ``separator`` (``"<root>"`` for the root)."""
    return separator.join(path) if path else "<root>"


def parse_name(name: str, separator: str = "/") -> Path:
    """The path a user's name stands for (``"observation/pixels"`` -> ``("observation", "pixels")``)."""
    return tuple(name.split(separator)) if name else ()
