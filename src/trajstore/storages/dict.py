"""``DictStorage``: a nested :class:`DictSpace` split across several storages.

``storage_cls_map`` names, for each key, the storage that holds it. A key is a leaf
path or a sub-dict path joined by ``nested_separator`` (``"observation/pixels"``);
``"*"`` takes every leaf not listed, as one nested ``DictSpace``. Each sub-storage lives
in its own sub-folder, named by :func:`~trajstore.storages._files.safe_name`
(``observation.pixels``, ``@rest``); ``storage.json`` lists key, registered type and folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import DictSpace, Space, flatten_value, leaves_of, unflatten_value
from trajstore.storages._files import check_key, safe_name
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage


def plan_layout(space: DictSpace, keys: list[str], separator: str) -> dict[str, Space]:
    """The space each key of ``storage_cls_map`` stores, in the order given.

    Raises:
        ValueError: a key is malformed, unknown, overlaps another key, or leaves are left
            with no storage and no ``"*"`` key.
    """
    check_layout_keys(space, separator)
    leaves = [p for p, _ in space.leaves(separator)]
    if "*" in space.spaces:
        raise ValueError("the key '*' is reserved in a DictStorage layout (it names every leaf not listed); "
                         "rename that key of the space")
    owned: dict[str, str] = {}
    spaces: dict[str, Space] = {}
    for key in keys:
        check_key(key, separator)
        if key == "*":
            continue
        try:
            sub = space.subspace(key, separator)
        except KeyError as exc:
            raise ValueError(f"storage_cls_map key {key!r} is not in the space: {exc.args[0]}") from None
        covered = [p for p in leaves if p == key or p.startswith(key + separator)]
        for leaf in covered:
            if leaf in owned:
                raise ValueError(f"leaf {leaf!r} is claimed by both {owned[leaf]!r} and {key!r} in storage_cls_map")
            owned[leaf] = key
        spaces[key] = sub
    rest = [p for p in leaves if p not in owned]
    if "*" in keys:
        if rest:
            spaces["*"] = _restrict(space, set(rest), separator)
    elif rest:
        raise ValueError(f"leaves {rest} have no storage in storage_cls_map; list them or add a '*' key")
    return spaces


def check_layout_keys(space: DictSpace, separator: str) -> None:
    """Refuse spaces whose leaves cannot be named by paths joined with ``separator``.

    Raises:
        ValueError: the space has no leaf, or a key contains ``separator`` (two leaves could
            then share one path, e.g. ``{"a/b": x, "a": {"b": y}}``); the message names the key.
    """
    def walk(sub: DictSpace, prefix: str) -> None:
        for key, child in sub.spaces.items():
            if separator in key:
                raise ValueError(f"key {key!r} (under {prefix or 'the top level'!r}) contains the nested_separator "
                                 f"{separator!r}; rename it or pick another nested_separator")
            if isinstance(child, DictSpace):
                walk(child, f"{prefix}{separator}{key}" if prefix else key)

    walk(space, "")
    if not space.leaves(separator):
        raise ValueError("the space has no leaves: there is nothing to store")


def _restrict(space: DictSpace, keep: set[str], separator: str, prefix: str = "") -> DictSpace:
    """The sub-``DictSpace`` of ``space`` holding only the leaf paths in ``keep`` (order kept)."""
    out: dict[str, Space] = {}
    for key, sub in space.spaces.items():
        path = f"{prefix}{separator}{key}" if prefix else key
        if isinstance(sub, DictSpace):
            inner = _restrict(sub, keep, separator, path)
            if inner.spaces:
                out[key] = inner
        elif path in keep:
            out[key] = sub
    return DictSpace(out, space.metadata)


@STORAGE_TYPES.register("dict")
class DictStorage(SpaceStorage):
    """Slots of a :class:`DictSpace`, each key's part held by its own sub-storage.

    Attributes:
        storages: ``{key: sub-storage}`` in layout order (``"*"`` for the rest).
        nested_separator: the string joining nested keys.
    """

    def __init__(self, space: Space, *, storages: dict[str, SpaceStorage], nested_separator: str,
                 **kwargs: Any):
        super().__init__(space, **kwargs)
        self.storages = storages
        self.nested_separator = nested_separator
        self._prefixes = {key: ("" if key == "*" else key) for key in storages}

    @classmethod
    def check_space(cls, space: Space) -> None:
        if not isinstance(space, DictSpace):
            raise UnsupportedSpaceError(f"DictStorage takes a DictSpace, got {space!r}")

    @classmethod
    def create(cls, space: Space, *, capacity: int | None = None, cache_path: Any = None,
               multiprocessing: bool = False, storage_cls_map: Mapping[str, type[SpaceStorage]] | None = None,
               key_kwargs: Mapping[str, Mapping[str, Any]] | None = None, nested_separator: str = "/",
               **kwargs: Any) -> "DictStorage":
        """A new DictStorage; see :meth:`SpaceStorage.create` for the common arguments.

        Args:
            storage_cls_map: ``{key: SpaceStorage subclass}``; keys are leaf or sub-dict paths
                joined by ``nested_separator``, ``"*"`` for every leaf not listed.
            key_kwargs: ``{key: create kwargs}`` for the sub-storages.
            nested_separator: joins nested keys (default ``"/"``).

        Raises:
            ValueError: a bad key, a key in ``key_kwargs`` that is not in ``storage_cls_map``, or a
                leaf routed to a file-writing storage without ``cache_path`` (names the leaf).
            UnsupportedSpaceError: a sub-storage cannot take its part (names the key).
        """
        if not isinstance(nested_separator, str) or not nested_separator:
            raise ValueError(f"nested_separator must be a non-empty str, got {nested_separator!r}")
        if storage_cls_map is None:
            raise ValueError("DictStorage.create needs storage_cls_map (or use dict_storage_kwargs_from_space)")
        if kwargs:
            raise TypeError(f"DictStorage.create got unexpected options {sorted(kwargs)}")
        key_kwargs = dict(key_kwargs or {})
        unknown = [k for k in key_kwargs if k not in storage_cls_map]
        if unknown:
            raise ValueError(f"key_kwargs keys {unknown} are not in storage_cls_map {list(storage_cls_map)}")
        cls.check_space(space)
        layout = plan_layout(space, list(storage_cls_map), nested_separator)  # type: ignore[arg-type]
        for key, sub in layout.items():
            sub_cls = storage_cls_map[key]
            if not (isinstance(sub_cls, type) and issubclass(sub_cls, SpaceStorage)):
                raise TypeError(f"storage_cls_map[{key!r}] must be a SpaceStorage subclass, got {sub_cls!r}")
            if cache_path is None and sub_cls.requires_cache_path:
                raise ValueError(f"leaf {key!r} is routed to {sub_cls.__name__}, which writes files: "
                                 "pass a cache_path")
            try:
                sub_cls.check_space(sub)
            except UnsupportedSpaceError as exc:
                raise UnsupportedSpaceError(f"key {key!r}: {exc}") from None
        return super().create(space, capacity=capacity, cache_path=cache_path, multiprocessing=multiprocessing,
                              _layout=layout, _classes=dict(storage_cls_map), _key_kwargs=key_kwargs,
                              _separator=nested_separator)

    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, multiprocessing: bool,
                _layout: dict[str, Space], _classes: dict[str, type[SpaceStorage]],
                _key_kwargs: dict[str, Any], _separator: str) -> "DictStorage":
        storages: dict[str, SpaceStorage] = {}
        try:
            for key, sub in _layout.items():
                sub_path = path / safe_name(key, _separator) if path is not None else None
                storages[key] = _classes[key].create(sub, capacity=capacity, cache_path=sub_path,
                                                     multiprocessing=multiprocessing, **_key_kwargs.get(key, {}))
        except BaseException:
            for s in storages.values():
                s.close()
            raise
        return cls(space, storages=storages, nested_separator=_separator, capacity=capacity, cache_path=path,
                   multiprocessing=multiprocessing)

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool) -> "DictStorage":
        separator = config["nested_separator"]
        storages: dict[str, SpaceStorage] = {}
        try:
            for child in config["children"]:
                key, folder = child["key"], child["dir"]
                if folder != safe_name(key, separator):  # never follow a folder name read from a file
                    raise FormatError(f"{path}: sub-storage folder {folder!r} does not match key {key!r}")
                expected = (_restrict(space, set(child["leaves"]), separator) if key == "*"  # type: ignore
                            else space.subspace(key, separator))  # type: ignore[union-attr]
                storages[key] = STORAGE_TYPES.get(child["type"]).load_from(
                    path / folder, expected, read_only=read_only, multiprocessing=multiprocessing)
        except BaseException:
            for sub in storages.values():  # release what was opened (files, writer locks)
                sub.close()
            raise
        return cls(space, storages=storages, nested_separator=separator, capacity=capacity, cache_path=path,
                   read_only=read_only, multiprocessing=multiprocessing)

    def get_config(self) -> dict[str, Any]:
        children = []
        for key, sub in self.storages.items():
            entry = {"key": key, "type": sub.type_name, "dir": safe_name(key, self.nested_separator)}
            if key == "*":
                entry["leaves"] = [p for p, _ in sub.space.leaves(self.nested_separator)]  # type: ignore
            children.append(entry)
        return {"nested_separator": self.nested_separator, "children": children}

    # -- slots -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return min((len(s) for s in self.storages.values()), default=0)

    def _read(self, positions: np.ndarray) -> Any:
        flat: dict[str, Any] = {}
        for key, sub in self.storages.items():
            part = sub.get(positions)
            for sub_path, value in flatten_value(sub.space, part, self.nested_separator).items():
                flat[self._join(key, sub_path)] = value
        return unflatten_value(self.space, flat, self.nested_separator)

    def _write(self, positions: np.ndarray, value: Any) -> None:
        flat = flatten_value(self.space, value, self.nested_separator)
        for key, sub in self.storages.items():
            part = {p: flat[self._join(key, p)] for p, _ in leaves_of(sub.space, self.nested_separator)}
            sub.set(positions, unflatten_value(sub.space, part, self.nested_separator))

    def _resize(self, length: int) -> None:
        for sub in self.storages.values():
            if len(sub) < length:
                sub._resize(length)

    def _join(self, key: str, sub_path: str) -> str:
        prefix = self._prefixes[key]
        if not prefix:
            return sub_path
        return f"{prefix}{self.nested_separator}{sub_path}" if sub_path else prefix

    # -- state -----------------------------------------------------------------------------
    def flush(self) -> None:
        for sub in self.storages.values():
            sub.flush()

    def refresh(self) -> None:
        for sub in self.storages.values():
            sub.refresh()

    def _close(self) -> None:
        for sub in self.storages.values():
            sub.close()
