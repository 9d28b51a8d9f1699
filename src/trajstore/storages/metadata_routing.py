"""Build a :class:`DictStorage` layout from the ``Space.metadata`` of a ``DictSpace``.

Camera images are best stored by an image or video storage, everything else by a tensor
storage. Instead of listing keys by hand::

    rb = ReplayBuffer.create(DictStorage, obs_space, cache_path="cache/rb", capacity=None,
                             **dict_storage_kwargs_from_space(obs_space))

routes every ``kind == "image"`` (H, W, 3) uint8 leaf to an :class:`ImageStorage` (JPEG)
and the remaining leaves to one :class:`HDF5Storage`.

Whether a storage can take a leaf is asked of the storage class itself
(:meth:`SpaceStorage.accepts`), and which metadata keys become keyword arguments is the
class's declared options marked ``from_metadata`` (``fps`` for video), so a new storage needs no edit here.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import DictSpace, Space, tree
from trajstore.storages.base import SpaceStorage

StorageMap = Mapping[str, Optional[type[SpaceStorage]]]


def _default_kind_map() -> dict[str, type[SpaceStorage]]:
    from trajstore.storages.image import ImageStorage

    return {"image": ImageStorage}


def _default_storage() -> type[SpaceStorage]:
    from trajstore.storages.hdf5 import HDF5Storage

    return HDF5Storage


def dict_storage_kwargs_from_space(
    space: DictSpace,
    *,
    kind_storage_cls: StorageMap | None = None,
    key_storage_cls: StorageMap | None = None,
    default_storage_cls: type[SpaceStorage] | None = None,
    kind_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    key_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    default_kwargs: Mapping[str, Any] | None = None,
    nested_separator: str = "/",
) -> dict[str, Any]:
    """``DictStorage.create`` keyword arguments that route each leaf of ``space`` by its metadata.

    Every leaf (key = nested keys joined by ``nested_separator``) is assigned, in order:

    1. ``key_storage_cls[key]`` if the key is listed (``None`` sends it to the default storage).
       A sub-dict key sends its whole subtree to one storage.
    2. ``kind_storage_cls[leaf.metadata["kind"]]`` if the kind is listed (and not ``None``) and
       that storage accepts the leaf. The default map is ``{"image": ImageStorage}`` (JPEG); image
       leaves must be (H, W, 3) uint8 with an ``"HWC"`` or undeclared layout, others (CHW, float,
       1 or 4 channels) go to the default storage.
    3. Otherwise the default storage, ``default_storage_cls`` (``HDF5Storage`` if not given),
       which receives all remaining leaves as one ``DictSpace`` under the key ``"*"``.

    Keyword arguments of a routed leaf are ``kind_kwargs[kind]`` (when its storage is the one its
    kind maps to) updated by ``key_kwargs[key]``; the default storage gets ``default_kwargs``
    updated by ``key_kwargs["*"]``. Options the storage class declares ``from_metadata``
    (``fps`` for :class:`VideoStorage`) is passed unless the kwargs already give it.

    Returns:
        ``{"storage_cls_map", "key_kwargs", "nested_separator"}``, for
        ``ReplayBuffer.create(DictStorage, space, **kwargs)`` or ``DictStorage.create(space, **kwargs)``.
        Image and video storages write files: a ``cache_path`` is needed when a leaf goes to one.

    Raises:
        TypeError: ``space`` is not a ``DictSpace``.
        KeyError: a ``key_storage_cls`` / ``key_kwargs`` key is not a leaf or sub-dict of ``space``.
        UnsupportedSpaceError: ``key_storage_cls`` forces a leaf onto a storage that cannot take it.
    """
    if not isinstance(space, DictSpace):
        raise TypeError(f"dict_storage_kwargs_from_space needs a DictSpace, got {type(space).__name__}")
    from trajstore.storages.dict import check_layout_keys

    check_layout_keys(space, nested_separator)
    kind_map = dict(_default_kind_map() if kind_storage_cls is None else kind_storage_cls)
    key_map = dict(key_storage_cls or {})
    default_cls = default_storage_cls or _default_storage()
    kind_kwargs = kind_kwargs or {}
    key_kwargs = dict(key_kwargs or {})
    for key in [*key_map, *(k for k in key_kwargs if k != "*")]:
        tree.subspace(space, tree.parse_name(key, nested_separator))  # KeyError naming the key if it is not there

    storage_cls_map: dict[str, type[SpaceStorage]] = {}
    out_kwargs: dict[str, dict[str, Any]] = {}
    to_default: list[tuple[str, ...]] = []
    claimed: set[tuple[str, ...]] = set()

    # 1. keys listed by the user (leaves or whole sub-dicts)
    for key, cls in key_map.items():
        prefix = tree.parse_name(key, nested_separator)
        sub = tree.subspace(space, prefix)
        leaves = [p for p in tree.leaf_paths(space) if tree.under(p, prefix)]
        overlap = claimed.intersection(leaves)
        if overlap:
            names = sorted(nested_separator.join(p) for p in overlap)
            raise ValueError(f"key_storage_cls routes {names} twice (through {key!r})")
        claimed.update(leaves)
        if cls is None:
            to_default.extend(leaves)
            continue
        try:
            cls.check_space(sub)
        except UnsupportedSpaceError as exc:
            raise UnsupportedSpaceError(f"key_storage_cls routes {key!r} to {cls.__name__}, which cannot "
                                        f"take it: {exc}") from None
        storage_cls_map[key] = cls
        out_kwargs[key] = _leaf_kwargs(cls, sub, kind_map, kind_kwargs, key_kwargs.get(key))

    # 2./3. every other leaf by its kind, else the default storage
    for path, leaf in tree.leaves(space):
        if path in claimed:
            continue
        cls = kind_map.get(leaf.metadata.get("kind"))
        if cls is not None and cls.accepts(leaf):
            name = nested_separator.join(path)  # a key of the layout
            storage_cls_map[name] = cls
            out_kwargs[name] = _leaf_kwargs(cls, leaf, kind_map, kind_kwargs, key_kwargs.get(name))
        else:
            to_default.append(path)

    if to_default:
        storage_cls_map["*"] = default_cls
        out_kwargs["*"] = {**(default_kwargs or {}), **key_kwargs.get("*", {})}
    stray = [k for k in key_kwargs if k not in storage_cls_map]
    if stray:
        raise KeyError(f"key_kwargs for {stray}, but those leaves go to the default storage; "
                       "give their options in default_kwargs or key_kwargs['*']")
    return {
        "storage_cls_map": storage_cls_map,
        "key_kwargs": {k: v for k, v in out_kwargs.items() if v},
        "nested_separator": nested_separator,
    }


def _leaf_kwargs(cls: type[SpaceStorage], leaf: Space, kind_map: Mapping[str, Any],
                 kind_kwargs: Mapping[str, Mapping[str, Any]], key_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    kind = leaf.metadata.get("kind")
    kwargs: dict[str, Any] = {}
    if kind is not None and kind_map.get(kind) is cls:
        kwargs.update(kind_kwargs.get(kind, {}))
    kwargs.update(key_kwargs or {})
    for name in cls.metadata_options():
        if name in leaf.metadata and name not in kwargs:
            kwargs[name] = leaf.metadata[name]
    return kwargs


def create_dict_storage_from_space(space: DictSpace, *, capacity: int | None = None, cache_path: Any = None,
                                   multiprocessing: bool = False, **routing_kwargs: Any) -> SpaceStorage:
    """``DictStorage.create`` with the layout of :func:`dict_storage_kwargs_from_space`.

    ``routing_kwargs`` are that function's keyword arguments.
    """
    from trajstore.storages.dict import DictStorage

    return DictStorage.create(space, capacity=capacity, cache_path=cache_path, multiprocessing=multiprocessing,
                              **dict_storage_kwargs_from_space(space, **routing_kwargs))
