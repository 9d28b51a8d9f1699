"""``DictStorage``: a nested :class:`DictSpace` split across several storages.

``storage_cls_map`` names, for each key, the storage that holds it. A key is a leaf
path or a sub-dict path joined by ``nested_separator`` (``"observation/pixels"``);
``"*"`` takes every leaf not listed, as one nested ``DictSpace``. Each sub-storage lives
in its own sub-folder, named by :func:`~trajstore.storages._names.safe_name`
(``observation.pixels``, ``@rest``); ``storage.json`` lists key, registered type and folder.

Sub-storages are owned: they share the writer lock of the folder that owns the DictStorage
(one ``writer.lock`` per buffer), and they take leaf lists straight from the DictStorage,
which maps its leaves to theirs by position once, at open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from trajstore._fs import in_parallel
from trajstore._lock import WriterLock
from trajstore._suggest import check_keywords, did_you_mean
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import DictSpace, Space, tree
from trajstore.storages._names import check_key, safe_name
from trajstore.storages._options import config_from
from trajstore.storages._payload import PayloadSource, payload_under
from trajstore.storages._selection import Selection
from trajstore._damage import damaged_file
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage, check_capacity

REST = "*"


def check_layout_keys(space: DictSpace, separator: str) -> None:
    """Refuse spaces whose leaves cannot be named by keys joined with ``separator``.

    Raises:
        ValueError: the space has no leaf, a key contains ``separator`` (two leaves could then
            share one name, e.g. ``{"a/b": x, "a": {"b": y}}``; the message names the key), or a
            top-level key is the reserved ``"*"``.
    """
    if REST in space.spaces:
        raise ValueError("the key '*' is reserved in a DictStorage layout (it names every leaf not listed); "
                         "rename that key of the space")
    for path, _ in tree.leaves(space):
        for i, key in enumerate(path):
            if separator in key:
                where = tree.path_name(path[:i], separator) if i else "the top level"
                raise ValueError(f"key {key!r} (under {where!r}) contains the nested_separator "
                                 f"{separator!r}; rename it or pick another nested_separator")
    if not tree.leaves(space):
        raise ValueError("the space has no leaves: there is nothing to store")


def plan_layout(space: DictSpace, keys: list[str], separator: str) -> dict[str, Space]:
    """The space each key of ``storage_cls_map`` stores, in the order given (``"*"``: the rest).

    Raises:
        ValueError: a key is malformed, unknown, overlaps another key, or leaves are left
            with no storage and no ``"*"`` key.
    """
    check_layout_keys(space, separator)
    paths = tree.leaf_paths(space)
    owned: dict[tuple[str, ...], str] = {}
    spaces: dict[str, Space] = {}
    for key in keys:
        check_key(key, separator)
        if key == REST:
            continue
        prefix = tree.parse_name(key, separator)
        try:
            spaces[key] = tree.subspace(space, prefix)
        except KeyError as exc:
            raise ValueError(f"storage_cls_map key {key!r} is not in the space: {exc.args[0]}") from None
        for path in paths:
            if tree.under(path, prefix):
                if path in owned:
                    raise ValueError(f"leaf {tree.path_name(path, separator)!r} is claimed by both "
                                     f"{owned[path]!r} and {key!r} in storage_cls_map")
                owned[path] = key
    rest = [p for p in paths if p not in owned]
    if REST in keys:
        spaces[REST] = tree.restrict(space, rest) if rest else DictSpace({})
    elif rest:
        names = [tree.path_name(p, separator) for p in rest]
        raise ValueError(f"leaves {names} have no storage in storage_cls_map; list them or add a '*' key")
    return spaces


@STORAGE_TYPES.register("dict")
class DictStorage(SpaceStorage):
    """Slots of a :class:`DictSpace`, each key's part held by its own sub-storage.

    Attributes:
        storages: ``{key: sub-storage}`` in layout order (``"*"`` for the rest).
        nested_separator: the string joining nested keys.
    """

    #: Opened with a payload source, each sub-storage gets the source of its own sub-folder.
    takes_payload = True

    def __init__(self, space: Space, *, storages: dict[str, SpaceStorage], nested_separator: str, **kwargs: Any):
        super().__init__(space, **kwargs)
        self.storages = storages
        self.nested_separator = nested_separator
        # Position of each sub-storage's leaves among this storage's leaves (mapped by path, once).
        position = {path: i for i, path in enumerate(tree.leaf_paths(space))}
        self._n_leaves = len(position)
        self._leaf_positions = {
            key: [position[(*self._prefix(key), *path)] for path in tree.leaf_paths(sub.space)]
            for key, sub in storages.items()}

    def _prefix(self, key: str) -> tuple[str, ...]:
        return () if key == REST else tree.parse_name(key, self.nested_separator)

    @classmethod
    def check_space(cls, space: Space) -> None:
        if not isinstance(space, DictSpace):
            raise UnsupportedSpaceError(f"DictStorage takes a DictSpace, got {space!r}")

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, space: Space, *, capacity: int | None = None, cache_path: Any = None,  # type: ignore[override]
               multiprocessing: bool = False, storage_cls_map: Mapping[str, type[SpaceStorage]] | None = None,
               key_kwargs: Mapping[str, Mapping[str, Any]] | None = None, nested_separator: str = "/",
               **kwargs: Any) -> "DictStorage":
        """A new DictStorage; see :meth:`SpaceStorage.create` for the common arguments.

        Every sub-storage's options are checked before any folder is made.

        Args:
            storage_cls_map: ``{key: SpaceStorage subclass}``; keys are leaf or sub-dict paths
                joined by ``nested_separator``, ``"*"`` for every leaf not listed. A ``"*"`` that
                receives no leaf stores nothing.
            key_kwargs: ``{key: create options}`` for the sub-storages.
            nested_separator: joins nested keys (default ``"/"``).

        Raises:
            ValueError: a bad key, a key in ``key_kwargs`` that is not in ``storage_cls_map``, a bad
                sub-storage option, or a leaf routed to a file-writing storage without ``cache_path``
                (each names the key).
            UnsupportedSpaceError: a sub-storage cannot take its part (names the key).
            TypeError: a keyword it does not take (``"DictStorage.create got an unexpected keyword 'capacty'
                (did you mean 'capacity'?); ..."``), or a sub-storage option its storage does not declare.
        """
        return super().create(space, capacity=capacity, cache_path=cache_path,  # type: ignore[return-value]
                              multiprocessing=multiprocessing, storage_cls_map=storage_cls_map,
                              key_kwargs=key_kwargs, nested_separator=nested_separator, **kwargs)

    @classmethod
    def create_keywords(cls) -> tuple[str, ...]:
        """``("storage_cls_map", "key_kwargs", "nested_separator")``: see :meth:`SpaceStorage.create_keywords`."""
        return ("storage_cls_map", "key_kwargs", "nested_separator")

    @classmethod
    def prepare(cls, space: Space, *, capacity: int | None, cache_path: Any,  # type: ignore[override]
                storage_cls_map: Mapping[str, type[SpaceStorage]] | None = None,
                key_kwargs: Mapping[str, Mapping[str, Any]] | None = None, nested_separator: str = "/",
                **kwargs: Any) -> dict[str, Any]:
        """Check the layout and every sub-storage's options; returns the plan ``_create`` follows."""
        check_keywords(kwargs, ("capacity", "cache_path", "multiprocessing", *cls.create_keywords()),
                       passed_to="DictStorage.create")
        check_capacity(capacity)
        if not isinstance(nested_separator, str) or not nested_separator:
            raise ValueError(f"nested_separator must be a non-empty str, got {nested_separator!r}")
        if storage_cls_map is None:
            raise ValueError("DictStorage.create needs storage_cls_map (or use dict_storage_kwargs_from_space)")
        key_kwargs = dict(key_kwargs or {})
        unknown = [k for k in key_kwargs if k not in storage_cls_map]
        if unknown:
            hints = [f"{k!r} -> {c!r}" for k in unknown if (c := did_you_mean(k, storage_cls_map))]
            hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise ValueError(f"key_kwargs keys {unknown} are not in storage_cls_map {list(storage_cls_map)}{hint}")
        cls.check_space(space)
        layout = plan_layout(space, list(storage_cls_map), nested_separator)  # type: ignore[arg-type]
        children: dict[str, tuple[type[SpaceStorage], Space, Any]] = {}
        for key, sub in layout.items():
            sub_cls = storage_cls_map[key]
            if not (isinstance(sub_cls, type) and issubclass(sub_cls, SpaceStorage)):
                raise TypeError(f"storage_cls_map[{key!r}] must be a SpaceStorage subclass, got {sub_cls!r}")
            if key == REST and not tree.leaves(sub):  # a "*" that receives no leaf stores nothing
                try:  # its options are still checked: a typo is an error even while it has no leaf
                    config_from(sub_cls.__name__, sub_cls.options, key_kwargs.get(key, {}))
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"key {key!r}: {exc}") from None
                continue
            if cache_path is None and sub_cls.requires_cache_path:
                raise ValueError(f"leaf {key!r} is routed to {sub_cls.__name__}, which writes files: "
                                 "pass a cache_path")
            try:
                plan = sub_cls.prepare(sub, capacity=capacity, cache_path=cache_path, **key_kwargs.get(key, {}))
            except UnsupportedSpaceError as exc:
                raise UnsupportedSpaceError(f"key {key!r}: {exc}") from None
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"key {key!r}: {exc}") from None
            children[key] = (sub_cls, sub, plan)
        return {"children": children, "nested_separator": nested_separator}

    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: dict[str, Any],
                multiprocessing: bool, lock: WriterLock | None) -> "DictStorage":
        separator = config["nested_separator"]
        storages: dict[str, SpaceStorage] = {}
        try:
            for key, (sub_cls, sub, plan) in config["children"].items():
                sub_path = path / safe_name(key, separator) if path is not None else None
                storages[key] = sub_cls._create_owned(sub, capacity=capacity, path=sub_path, plan=plan,
                                                      multiprocessing=multiprocessing, lock=lock)
        except BaseException:
            for s in storages.values():
                s.close()
            raise
        return cls(space, storages=storages, nested_separator=separator, capacity=capacity, cache_path=path,
                   multiprocessing=multiprocessing, lock=lock)

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        try:
            separator = stored["nested_separator"]
            children = [(c["key"], c["type"], c["dir"], c.get("leaves")) for c in stored["children"]]
        except (KeyError, TypeError) as exc:
            raise FormatError(f"{path}: bad DictStorage config in storage.json: {exc!r}") from None
        for key, _, folder, _ in children:
            if folder != safe_name(key, separator):  # never follow a folder name read from a file
                raise FormatError(f"{path}: sub-storage folder {folder!r} does not match key {key!r}")
        return {"nested_separator": separator, "children": children}

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool, lock: WriterLock | None, payload: PayloadSource | None = None) -> "DictStorage":
        separator = config["nested_separator"]
        storages: dict[str, SpaceStorage] = {}
        try:
            for key, type_name, folder, leaves in config["children"]:
                if key == REST:
                    expected = tree.restrict(space, [tree.parse_name(p, separator) for p in leaves])
                else:
                    expected = tree.subspace(space, tree.parse_name(key, separator))
                storages[key] = STORAGE_TYPES.get(type_name)._load_owned(
                    path / folder, expected, capacity=capacity, read_only=read_only,
                    multiprocessing=multiprocessing, lock=lock, payload=payload_under(payload, folder))
        except BaseException:
            for sub in storages.values():  # release what was opened
                sub.close()
            raise
        return cls(space, storages=storages, nested_separator=separator, capacity=capacity, cache_path=path,
                   read_only=read_only, multiprocessing=multiprocessing, lock=lock)

    def get_config(self) -> dict[str, Any]:
        children = []
        for key, sub in self.storages.items():
            entry: dict[str, Any] = {"key": key, "type": sub.type_name, "dir": safe_name(key, self.nested_separator)}
            if key == REST:
                entry["leaves"] = [tree.path_name(p, self.nested_separator) for p in tree.leaf_paths(sub.space)]
            children.append(entry)
        return {"nested_separator": self.nested_separator, "children": children}

    @property
    def lossless(self) -> bool:
        return all(sub.lossless for sub in self.storages.values())

    def parts(self) -> dict[str, SpaceStorage]:
        """``{key: sub-storage}`` in layout order (``"*"`` for the rest); a new dict each call."""
        return dict(self.storages)

    # -- slots -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return min((len(s) for s in self.storages.values()), default=0)

    def _read(self, sel: Selection) -> list[np.ndarray]:
        out: list[Any] = [None] * self._n_leaves
        for key, sub in self.storages.items():
            for i, value in zip(self._leaf_positions[key], sub.read_leaves(sel)):
                out[i] = value
        return out

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        """Only the sub-storages holding a wanted leaf are read, and only those leaves of theirs."""
        wanted = {p: n for n, p in enumerate(which)}
        out: list[Any] = [None] * len(which)
        for key, sub in self.storages.items():
            mine = [(j, wanted[p]) for j, p in enumerate(self._leaf_positions[key]) if p in wanted]
            if not mine:
                continue
            every = len(mine) == len(self._leaf_positions[key])
            values = sub.read_leaves(sel, None if every else [j for j, _ in mine])
            for (_, n), value in zip(mine, values):
                out[n] = value
        return out

    def read_leaves_in_order(self, sel: Selection, which: Sequence[int] | None = None) -> list[np.ndarray]:
        """As :meth:`SpaceStorage.read_leaves_in_order`, each sub-storage holding a wanted leaf reading its
        leaves in the requested order itself (an ``ImageStorage`` decodes straight into those rows)."""
        if sel.order is None:
            return self.read_leaves(sel, which)
        self._check_open()
        if self.cache_path is None:
            return self._read_in_order(sel, which)
        with damaged_file(self.cache_path, f"reading {type(self).__name__} slots"):  # as read_leaves
            return self._read_in_order(sel, which)

    def _read_in_order(self, sel: Selection, which: Sequence[int] | None) -> list[np.ndarray]:
        positions = range(self._n_leaves) if which is None else which
        wanted = {p: n for n, p in enumerate(positions)}
        out: list[Any] = [None] * len(wanted)
        for key, sub in self.storages.items():
            mine = [(j, wanted[p]) for j, p in enumerate(self._leaf_positions[key]) if p in wanted]
            if not mine:
                continue
            every = len(mine) == len(self._leaf_positions[key])
            values = sub.read_leaves_in_order(sel, None if every else [j for j, _ in mine])
            for (_, n), value in zip(mine, values):
                out[n] = value
        return out

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        """Each sub-storage's leaves; an ``OSError`` (a full disk, on the write-behind thread too) is raised
        again with the same errno and the leaf in its message (the original as ``__cause__``)."""
        for key, sub in self.storages.items():
            try:
                sub.write_leaves(sel, [leaves[i] for i in self._leaf_positions[key]])
            except OSError as exc:
                raise naming_leaves(exc, self._writing(key, sub)) from exc
            except Exception as exc:
                exc.add_note(f"while {self._writing(key, sub)}")
                raise

    def _writing(self, key: str, sub: SpaceStorage) -> str:
        """``"writing leaf 'observation/pixels': ImageStorage at <folder>"`` (the leaves of a part holding several)."""
        names = [self.nested_separator.join((*self._prefix(key), *path)) for path in tree.leaf_paths(sub.space)]
        where = f"{type(sub).__name__} at {sub.cache_path or 'memory'}"
        if len(names) == 1 and key != REST:
            return f"writing leaf {names[0]!r}: {where}"
        listed = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        return f"writing leaves {listed} of storage {key!r}: {where}"

    def _resize(self, length: int) -> None:
        for sub in self.storages.values():
            if len(sub) != length:
                sub._resize(length)

    # -- state -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Flush every sub-storage; their fsyncs (separate files) run at the same time."""
        in_parallel(*(sub.flush for sub in self.storages.values()))

    def refresh(self) -> None:
        for sub in self.storages.values():
            sub.refresh()

    def _close(self) -> None:
        for sub in self.storages.values():
            sub.close()

    def _after_fork(self) -> None:
        for sub in self.storages.values():
            sub._check_open()  # each child switches itself to read-only in this process


def naming_leaves(exc: OSError, writing: str) -> OSError:
    """An ``OSError`` like ``exc`` (same errno, so the same subclass, and file name) whose message ends with
    ``(<writing>)``, e.g. ``"[Errno 28] No space left on device (writing leaf 'observation/pixels': ...)"``."""
    if exc.errno is None:
        return OSError(f"{exc} ({writing})")
    text = exc.strerror or str(exc)
    return OSError(exc.errno, f"{text} ({writing})", *(() if exc.filename is None else (exc.filename,)))
