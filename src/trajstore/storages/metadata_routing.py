"""Build a :class:`DictStorage` layout from the ``Space.metadata`` of a ``DictSpace``.

Camera images are best stored by an image or video storage, everything else by a tensor
storage. Instead of listing keys by hand::

    rb = ReplayBuffer.create(DictStorage, obs_space, cache_path="cache/rb", capacity=None,
                             **dict_storage_kwargs_from_space(obs_space))

routes every ``kind == "image"`` (H, W, 3) uint8 leaf (or (3, H, W) declared ``layout="CHW"``) to an
:class:`ImageStorage` (JPEG) and the remaining leaves to one :class:`HDF5Storage`.

Whether a storage can take a leaf is asked of the storage class itself, given the options the
leaf would be created with (:meth:`SpaceStorage.accepts`: an ``ImageStorage`` takes a depth frame
as PNG but not as JPEG), and which metadata keys become keyword arguments is the class's declared
options marked ``from_metadata`` (``fps`` for video), so a new storage needs no edit here.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Optional

from trajstore._suggest import suggests_keywords
from trajstore.errors import RoutingWarning, UnsupportedSpaceError
from trajstore.spaces import DictSpace, Space, tree
from trajstore.storages._options import config_from
from trajstore.storages.base import SpaceStorage

StorageMap = Mapping[str, Optional[type[SpaceStorage]]]


def _default_kind_map() -> dict[str, type[SpaceStorage]]:
    from trajstore.storages.frames.image import ImageStorage

    return {"image": ImageStorage}


def _default_storage() -> type[SpaceStorage]:
    from trajstore.storages.hdf5 import HDF5Storage

    return HDF5Storage


@suggests_keywords
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
       that storage accepts the leaf with the leaf's options (:meth:`SpaceStorage.accepts`). The
       default map is ``{"image": ImageStorage}`` (JPEG), which takes (H, W, 3) uint8 with an
       ``"HWC"`` (any case) or undeclared layout, and (3, H, W) uint8 declared ``"CHW"`` (stored
       transposed, read back as (3, H, W); ``VideoStorage`` likewise). A leaf its kind's storage
       refuses (float, 1 or 4 channels under JPEG, another layout) goes to the default storage with a
       :class:`RoutingWarning` naming the leaf, the reason and how to route it. With ``format="PNG"``
       an ``ImageStorage`` also takes (H, W) / (H, W, 1) / CHW (1, H, W) uint8 or uint16 frames:
       ``kind_storage_cls={"image": ImageStorage,
       "depth": ImageStorage}, kind_kwargs={"depth": {"format": "PNG"}}`` keeps a depth camera exact.
    3. Otherwise the default storage, ``default_storage_cls`` (``HDF5Storage`` if not given),
       which receives all remaining leaves as one ``DictSpace`` under the key ``"*"``.

    ``"*"`` is always in the returned ``storage_cls_map``, even when every leaf is routed elsewhere
    (``DictStorage`` then makes no folder for it). Keyword arguments of a routed leaf are
    ``kind_kwargs[kind]`` (only when its storage is the one its kind maps to) updated by
    ``key_kwargs[key]``; the default storage always gets ``default_kwargs`` updated by
    ``key_kwargs["*"]``. ``key_kwargs`` naming a leaf that goes to the default storage (or a
    sub-dict that is not a key of the layout) are ignored with a :class:`RoutingWarning`. Options
    the storage class declares ``from_metadata`` (``fps`` for :class:`VideoStorage`) are passed
    unless the kwargs already give them.

    Same layout as UniEnv's ``unienv_data`` for the same call, with one deliberate difference:
    UniEnv hands ``kind_kwargs[kind]`` to every leaf of that kind routed to a non-default storage,
    also one that ``key_storage_cls`` sent to another storage (JPEG ``quality`` to an
    ``HDF5Storage``, which then fails at create); here they go only to a leaf whose storage is the
    one its kind maps to. Beyond UniEnv: keys not in the space raise, sub-dict keys route whole
    subtrees, and single-channel PNG frames are accepted (UniEnv sends them to the default storage).

    Returns:
        ``{"storage_cls_map", "key_kwargs", "nested_separator"}``, for
        ``ReplayBuffer.create(DictStorage, space, **kwargs)`` or ``DictStorage.create(space, **kwargs)``.
        Image and video storages write files: a ``cache_path`` is needed when a leaf goes to one.

    Raises:
        TypeError: ``space`` is not a ``DictSpace``.
        ValueError: ``key_storage_cls`` routes a leaf twice, or an option for a leaf's storage has a value
            that storage refuses (naming the leaf and the option). Options that conflict with each
            other are refused by ``DictStorage.create``, naming the key, before any folder is made.
        TypeError: an option for a leaf's storage (``kind_kwargs[kind]``, ``key_kwargs[key]``) that the
            storage does not declare, naming the leaf, the option and the closest declared one
            (``"leaf 'cam': ImageStorage got an unexpected keyword 'qualty' (did you mean 'quality'?); ..."``).
            Whether a storage takes a leaf never depends on such an option. A keyword this function does
            not take, with the closest one it does.
        KeyError: a ``key_storage_cls`` / ``key_kwargs`` key is not a leaf or sub-dict of ``space``.
        UnsupportedSpaceError: ``key_storage_cls`` forces a leaf onto a storage that cannot take it.
    """
    if not isinstance(space, DictSpace):
        raise TypeError(f"dict_storage_kwargs_from_space needs a DictSpace, got {type(space).__name__}")
    from trajstore.storages.dict import REST, check_layout_keys

    check_layout_keys(space, nested_separator)
    kind_map = dict(_default_kind_map() if kind_storage_cls is None else kind_storage_cls)
    key_map = dict(key_storage_cls or {})
    default_cls = default_storage_cls or _default_storage()
    kind_kwargs = kind_kwargs or {}
    key_kwargs = dict(key_kwargs or {})
    for key in [*key_map, *(k for k in key_kwargs if k != REST)]:
        tree.subspace(space, tree.parse_name(key, nested_separator))  # KeyError naming the key if it is not there

    storage_cls_map: dict[str, type[SpaceStorage]] = {}
    out_kwargs: dict[str, dict[str, Any]] = {}
    destination: dict[tuple[str, ...], str] = {}  # leaf path -> key of the layout that stores it

    # 1. keys listed by the user (leaves or whole sub-dicts)
    for key, cls in key_map.items():
        prefix = tree.parse_name(key, nested_separator)
        sub = tree.subspace(space, prefix)
        leaves = [p for p in tree.leaf_paths(space) if tree.under(p, prefix)]
        overlap = set(destination).intersection(leaves)
        if overlap:
            names = sorted(nested_separator.join(p) for p in overlap)
            raise ValueError(f"key_storage_cls routes {names} twice (through {key!r})")
        destination.update((p, key if cls is not None else REST) for p in leaves)
        if cls is None:
            continue
        kwargs = _leaf_kwargs(cls, sub, kind_map, kind_kwargs, key_kwargs.get(key))
        reason = _refusal(cls, sub, kwargs, key)
        if reason is not None:
            raise UnsupportedSpaceError(f"key_storage_cls routes {key!r} to {cls.__name__}, which cannot "
                                        f"take it: {reason}")
        storage_cls_map[key] = cls
        out_kwargs[key] = kwargs

    # 2./3. every other leaf by its kind, else the default storage
    for path, leaf in tree.leaves(space):
        if path in destination:
            continue
        name = nested_separator.join(path)  # a key of the layout
        kind = leaf.metadata.get("kind")
        cls = kind_map.get(kind)
        destination[path] = REST
        if cls is None:
            continue
        kwargs = _leaf_kwargs(cls, leaf, kind_map, kind_kwargs, key_kwargs.get(name))
        reason = _refusal(cls, leaf, kwargs, name)
        if reason is None:
            destination[path] = name
            storage_cls_map[name] = cls
            out_kwargs[name] = kwargs
        else:
            warnings.warn(RoutingWarning(
                f"leaf {name!r} has kind {kind!r} but {cls.__name__} cannot take it ({reason}); it goes to the "
                f"default storage {default_cls.__name__} ('*'), stored raw. Frames are uint8 (H, W, 3), or "
                f"(3, H, W) with metadata layout 'CHW'; a float or 4-channel camera stays raw. To store it "
                f"elsewhere, route it with key_storage_cls={{{name!r}: ...}} or give it another kind (a depth or "
                f"grayscale camera, (H, W) or CHW (1, H, W) uint8/uint16: kind 'depth' with "
                f"kind_storage_cls={{'depth': ImageStorage}} and kind_kwargs={{'depth': {{'format': 'PNG'}}}})"),
                stacklevel=2)

    storage_cls_map[REST] = default_cls  # always there, as in UniEnv; DictStorage skips it if it gets no leaf
    out_kwargs[REST] = {**(default_kwargs or {}), **key_kwargs.get(REST, {})}
    for key in key_kwargs:
        if key not in storage_cls_map:
            warnings.warn(RoutingWarning(_ignored_kwargs_message(key, destination, storage_cls_map,
                                                                 nested_separator)), stacklevel=2)
    return {
        "storage_cls_map": storage_cls_map,
        "key_kwargs": {k: v for k, v in out_kwargs.items() if v},
        "nested_separator": nested_separator,
    }


def _refusal(cls: type[SpaceStorage], space: Space, kwargs: Mapping[str, Any], name: str) -> str | None:
    """Why ``cls`` cannot take the leaf (or sub-dict) ``name`` of space ``space`` with ``kwargs``, or ``None``.

    The answer comes from the leaf and the options ``cls`` declares, never from a bad option: an
    option ``cls`` does not declare, or a value its check refuses, raises here (naming the leaf and
    the option) instead of sending the leaf elsewhere. Options that conflict with each other (JPEG
    ``quality`` with ``format="PNG"``) do not change the route either: ``DictStorage.create``
    refuses them, naming the key, before any folder is made.

    Raises:
        TypeError: ``kwargs`` names an option ``cls`` does not declare.
        ValueError: an option's value is refused by its check.
    """
    try:
        config_from(cls.__name__, cls.options, kwargs)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"leaf {name!r}: {exc} (options for the storage the leaf goes to by its kind or "
                        "key: kind_kwargs, key_kwargs)") from None
    try:
        cls.check_space_with(space, kwargs)
    except UnsupportedSpaceError as exc:
        return str(exc)
    except (TypeError, ValueError):
        return None  # the leaf passed; the options conflict with each other: create's to refuse
    return None


def _ignored_kwargs_message(key: str, destination: Mapping[tuple[str, ...], str],
                            storage_cls_map: Mapping[str, type[SpaceStorage]], separator: str) -> str:
    prefix = tree.parse_name(key, separator)
    places = sorted({dest for path, dest in destination.items() if tree.under(path, prefix)})
    if places == ["*"]:
        where = (f"goes to the default storage {storage_cls_map['*'].__name__} ('*'), whose options are "
                 "default_kwargs updated by key_kwargs['*']")
    else:
        where = (f"is not a key of the layout: its leaves go to {places}; give options per leaf, or route "
                 "the sub-dict as one with key_storage_cls")
    return f"key_kwargs[{key!r}] is ignored: {key!r} {where}"


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
