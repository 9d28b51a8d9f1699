"""Open a robomimic-layout HDF5 file and check everything it declares before a step is read.

Layout (robomimic's docs, ``docs/datasets/overview.md`` "Dataset Structure", and its writers
``robomimic/scripts/dataset_states_to_obs.py``, ``robomimic.utils.file_utils.create_hdf5_filter_key``;
LIBERO, MimicGen and RoboCasa write the same)::

    data                      attrs total (int), env_args (JSON text)
    data/demo_N               attrs num_samples (int), model_file (MJCF XML text, optional)
    data/demo_N/obs/<key>     (num_samples, ...) numbers
    data/demo_N/next_obs/<key>  the same keys and shapes (optional)
    data/demo_N/actions, rewards, dones, states, and any other (num_samples, ...) dataset, groups allowed
    mask/<name>               1-D array of demo names (bytes or text)

Refused with a :class:`~trajstore.errors.FormatError` naming the file and the object: a file that is not
HDF5 or has no ``data`` group, a member of ``data`` that is not a ``demo_N`` group, an external or soft
link, a virtual dataset or one with external raw storage (nothing outside the file is read), a dataset
that is not numbers or bools, whose length is not the demo's ``num_samples``, that declares more values
per step than :data:`MAX_STEP_VALUES` or more data than it holds (unwritten chunks or contiguous storage:
reading it would make values up), demos with different keys, shapes or dtypes, ``next_obs`` keys that
differ from ``obs``, a mask naming demos the file lacks, ``env_args`` that is not a JSON object.
"""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from trajstore._json import loads_bounded
from trajstore.errors import FormatError
from trajstore.interop.robomimic._keys import NEXT_OBS, OBS

#: Most values one step of one dataset may hold (about 67 M; a 4K RGB frame is 25 M).
MAX_STEP_VALUES = 1 << 26
#: Most members a group may have (demos of ``data``, keys of a demo): a hostile file could list millions.
MAX_MEMBERS = 1 << 20
#: Most characters of a text attribute kept (``env_args``, a demo's small attributes); ``model_file`` (MJCF
#: XML, often 50-300 kB) may have up to :data:`MAX_MODEL_FILE`.
MAX_TEXT = 1 << 20
MAX_MODEL_FILE = 16 << 20
#: Demo attributes kept as episode data ``attrs`` only up to this many values (a larger array is left out).
MAX_ATTR_VALUES = 1024
DEMO = re.compile(r"demo_(0|[1-9][0-9]{0,17})")
#: Per-step scalars: ``(N,)`` or ``(N, 1)`` datasets that become leaves of shape ``()``.
SCALARS = ("rewards", "dones")


@dataclass(frozen=True)
class SourceKey:
    """One dataset of every demo: ``key`` its path in the demo, ``shape``/``dtype`` per step (``()`` for
    :data:`SCALARS`), ``camera`` for ``(H, W, 3)`` uint8 observations."""

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    camera: bool


@dataclass(frozen=True)
class SourceDemo:
    """One demo: its group name, the N of ``demo_N``, its length and the episode data the import gives it."""

    name: str
    index: int
    length: int
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RobomimicSource:
    """What a file declares, checked: its keys (those of every demo), demos sorted by number, masks, the
    ``data`` attributes (``env_args`` decoded, ``total``) and whether demos have ``next_obs``."""

    path: Path
    keys: tuple[SourceKey, ...]
    demos: tuple[SourceDemo, ...]
    masks: dict[str, tuple[str, ...]]
    env_args: dict[str, Any] | None
    total: int | None
    has_next_obs: bool


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise ImportError("robomimic import/export needs h5py: pip install h5py") from None
    return h5py


@contextmanager
def open_source(src: str | os.PathLike, *, model_file: bool = False) -> Iterator[tuple[Any, RobomimicSource]]:
    """The open h5py file and its checked :class:`RobomimicSource` (the file is closed on exit).

    ``model_file=True`` keeps each demo's ``model_file`` attribute as episode data.

    Raises:
        FileNotFoundError: ``src`` does not exist. FormatError: see the module docstring.
    """
    h5py = _h5py()
    path = Path(src)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise FormatError(f"{path} is not an HDF5 file ({exc})") from None
    try:
        yield f, read_source(f, path, model_file=model_file)
    finally:
        f.close()


def member(group: Any, name: str, where: str) -> Any:
    """``group[name]`` after refusing soft and external links (``where`` names it in errors)."""
    h5py = _h5py()
    link = group.get(name, getlink=True)
    if isinstance(link, h5py.ExternalLink):
        raise FormatError(f"{where} is an external link to {link.filename}:{link.path}; refused (nothing outside "
                          "the file is read)")
    if isinstance(link, h5py.SoftLink):
        raise FormatError(f"{where} is a soft link to {link.path}; refused (robomimic files hold their objects)")
    return group[name]


def _members(group: Any, where: str) -> list[str]:
    if len(group) > MAX_MEMBERS:
        raise FormatError(f"{where} has {len(group)} members; at most {MAX_MEMBERS} are read")
    return list(group.keys())


def read_source(f: Any, path: Path, *, model_file: bool = False) -> RobomimicSource:
    """Check the open file ``f`` (see the module docstring) and describe it."""
    h5py = _h5py()
    if "data" not in f or not isinstance(f.get("data", getlink=True), h5py.HardLink) \
            or not isinstance(f["data"], h5py.Group):
        raise FormatError(f"{path} is not a robomimic file: it has no 'data' group (robomimic, LIBERO and MimicGen "
                          "files keep their demos in data/demo_N)")
    data = f["data"]
    names = _members(data, f"{path}: data")
    bad = [n for n in names if not DEMO.fullmatch(n)]
    if bad:
        raise FormatError(f"{path}: data/{bad[0]} is not a demo group named demo_N (robomimic's layout holds only "
                          "data/demo_0, data/demo_1, ...)")
    if not names:
        raise FormatError(f"{path}: data holds no demo")
    names.sort(key=lambda n: int(n[5:]))
    masks = _masks(f, path, set(names))
    keys: tuple[SourceKey, ...] | None = None
    has_next: bool | None = None
    demos = []
    for name in names:
        group = member(data, name, f"{path}: data/{name}")
        if not isinstance(group, h5py.Group):
            raise FormatError(f"{path}: data/{name} is a dataset, not a demo group")
        length, demo_keys, demo_next = _demo(group, f"{path}: data/{name}")
        if keys is None:
            keys, has_next = demo_keys, demo_next
        elif demo_keys != keys or demo_next != has_next:
            raise FormatError(f"{path}: data/{name} differs from data/{names[0]}: "
                              f"{_difference(keys, demo_keys, has_next, demo_next)}")
        episode = {"demo": name, "masks": [m for m, held in masks.items() if name in held]}
        episode.update(_demo_attrs(group, f"{path}: data/{name}", model_file))
        demos.append(SourceDemo(name, int(name[5:]), length, episode))
    assert keys is not None
    return RobomimicSource(path, keys, tuple(demos), masks, _env_args(data, path), _total(data, path), bool(has_next))


def _difference(a: tuple[SourceKey, ...], b: tuple[SourceKey, ...], next_a: bool | None, next_b: bool) -> str:
    if next_a != next_b:
        return "one has next_obs, the other not"
    ka, kb = {k.key: k for k in a}, {k.key: k for k in b}
    if set(ka) != set(kb):
        return f"keys {sorted(set(ka) ^ set(kb))} are in one only"
    k = next(k for k in ka if ka[k] != kb[k])
    return f"{k!r} is {ka[k].dtype} {list(ka[k].shape)} per step in one, {kb[k].dtype} {list(kb[k].shape)} in the other"


def _demo(group: Any, where: str) -> tuple[int, tuple[SourceKey, ...], bool]:
    """A demo's length, keys (sorted) and whether it has next_obs; every dataset checked."""
    h5py = _h5py()
    found: dict[str, Any] = {}
    _walk(group, "", where, found)
    if not found:
        raise FormatError(f"{where} holds no dataset")
    declared = group.attrs.get("num_samples")
    if declared is not None:
        if not _is_integer(declared):
            raise FormatError(f"{where}: attribute num_samples is {declared!r}, not an integer")
        length = int(declared)
    else:
        first = found["actions"] if "actions" in found else found[sorted(found)[0]]
        length = int(first.shape[0]) if first.ndim else 0
    if length <= 0:
        raise FormatError(f"{where} has num_samples {length}; a demo needs at least one sample")
    nexts = {k[len(NEXT_OBS) + 1:]: d for k, d in found.items() if k.startswith(NEXT_OBS + "/")}
    keys = []
    for key, ds in sorted(found.items()):
        if key.startswith(NEXT_OBS + "/"):
            continue
        keys.append(_check_dataset(ds, key, length, f"{where}/{key}"))
    obs = {k.key[len(OBS) + 1:]: k for k in keys if k.key.startswith(OBS + "/")}
    if NEXT_OBS in group and isinstance(group[NEXT_OBS], h5py.Group) or nexts:
        if set(nexts) != set(obs):
            raise FormatError(f"{where}: next_obs holds {sorted(nexts)}, obs {sorted(obs)}; robomimic's next_obs "
                              "has the keys of obs")
        for k, ds in nexts.items():
            got = _check_dataset(ds, f"{NEXT_OBS}/{k}", length, f"{where}/{NEXT_OBS}/{k}")
            if (got.shape, got.dtype) != (obs[k].shape, obs[k].dtype):
                raise FormatError(f"{where}/{NEXT_OBS}/{k}: {ds.dtype} {list(ds.shape[1:])} per step, obs/{k} is "
                                  f"{obs[k].dtype} {list(obs[k].shape)}")
    return length, tuple(keys), bool(nexts)


def _walk(group: Any, prefix: str, where: str, out: dict[str, Any]) -> None:
    h5py = _h5py()
    for name in _members(group, f"{where}/{prefix}".rstrip("/")):
        key = f"{prefix}{name}"
        obj = member(group, name, f"{where}/{key}")
        if isinstance(obj, h5py.Group):
            _walk(obj, key + "/", where, out)
        else:
            out[key] = obj


def _check_dataset(ds: Any, key: str, length: int, where: str) -> SourceKey:
    if ds.is_virtual:
        raise FormatError(f"{where} is a virtual dataset (mapped from other files); refused")
    if ds.external:
        raise FormatError(f"{where} keeps its data in external files {[e[0] for e in ds.external]}; refused")
    dtype = ds.dtype
    if dtype.kind not in "biuf" or dtype.subdtype is not None or dtype.names is not None:
        raise FormatError(f"{where} holds {dtype}; robomimic datasets hold numbers or bools")
    if ds.ndim == 0 or ds.shape[0] != length:
        raise FormatError(f"{where} has shape {list(ds.shape)}; the demo's num_samples is {length}, every dataset "
                          f"has that many rows")
    shape = tuple(int(s) for s in ds.shape[1:])
    if key in SCALARS:
        if shape not in ((), (1,)):
            raise FormatError(f"{where} has shape {list(ds.shape)}; {key} holds one value per sample, (N,) or (N, 1)")
        shape = ()
    values = math.prod(shape)
    if values > MAX_STEP_VALUES:
        raise FormatError(f"{where} declares {list(ds.shape[1:])} = {values} values per sample; at most "
                          f"{MAX_STEP_VALUES} are read")
    _check_held(ds, where)
    camera = key.startswith(OBS + "/") and dtype == np.uint8 and len(shape) == 3 and shape[2] == 3
    return SourceKey(key, shape, np.dtype(dtype), camera)


def _check_held(ds: Any, where: str) -> None:
    """Refuse a dataset whose file holds less data than its shape declares (before reading any of it)."""
    if ds.size == 0:
        return
    if ds.chunks is not None:
        want = math.prod(-(-s // c) for s, c in zip(ds.shape, ds.chunks))
        held = ds.id.get_num_chunks()
        if held < want:
            raise FormatError(f"{where} declares {list(ds.shape)} in {want} chunks, the file holds {held}; refused "
                              "(the rest would read as made-up fill values)")
    elif ds.id.get_storage_size() < ds.size * ds.dtype.itemsize:
        raise FormatError(f"{where} declares {list(ds.shape)} ({ds.size * ds.dtype.itemsize} bytes) but the file "
                          f"holds {ds.id.get_storage_size()}; refused")


def _text(value: Any, where: str, limit: int = MAX_TEXT) -> str:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{where} is not UTF-8 text") from None
    if not isinstance(value, str):
        raise FormatError(f"{where} is {type(value).__name__}, expected text")
    if len(value) > limit:
        raise FormatError(f"{where} has {len(value)} characters; at most {limit} are read")
    return value


def _env_args(data: Any, path: Path) -> dict[str, Any] | None:
    if "env_args" not in data.attrs:
        return None
    where = f"{path}: data attribute env_args"
    value = loads_bounded(_text(data.attrs["env_args"], where), source=where)
    if not isinstance(value, dict):
        raise FormatError(f"{where} is JSON {type(value).__name__}, expected an object")
    return value


def _total(data: Any, path: Path) -> int | None:
    total = data.attrs.get("total")
    if total is None:
        return None
    if not _is_integer(total):
        raise FormatError(f"{path}: data attribute total is {total!r}, not an integer")
    return int(total)


def _is_integer(value: Any) -> bool:
    """A scalar attribute of an integer dtype (a bool, though Python counts it as one, is not)."""
    array = np.asarray(value)
    return array.ndim == 0 and array.dtype.kind in "iu"


def _masks(f: Any, path: Path, demos: set[str]) -> dict[str, tuple[str, ...]]:
    h5py = _h5py()
    if "mask" not in f:
        return {}
    group = member(f, "mask", f"{path}: mask")
    if not isinstance(group, h5py.Group):
        raise FormatError(f"{path}: mask is not a group")
    out: dict[str, tuple[str, ...]] = {}
    for name in _members(group, f"{path}: mask"):
        where = f"{path}: mask/{name}"
        ds = member(group, name, where)
        if not isinstance(ds, h5py.Dataset) or ds.ndim != 1 or not (ds.dtype.kind == "S"
                                                                     or h5py.check_string_dtype(ds.dtype)):
            raise FormatError(f"{where} is not a 1-D array of demo names")
        if ds.shape[0] > len(demos):
            raise FormatError(f"{where} lists {ds.shape[0]} demos; the file has {len(demos)}")
        if ds.dtype.kind == "S" and ds.dtype.itemsize > 64:
            raise FormatError(f"{where} holds names of {ds.dtype.itemsize} bytes; demo names are short")
        _check_held(ds, where)
        held = tuple(_text(v, f"{where}[{i}]", 64) for i, v in enumerate(ds[()]))
        unknown = sorted(set(held) - demos)
        if unknown:
            raise FormatError(f"{where} names {unknown[:5]}, which data does not hold")
        out[name] = held
    return out


def _demo_attrs(group: Any, where: str, model_file: bool) -> dict[str, Any]:
    """Episode data from a demo's attributes: ``model_file`` (with ``model_file=True``) and ``attrs``, the
    other small ones (text, numbers, arrays of up to :data:`MAX_ATTR_VALUES` numbers) as JSON values."""
    out: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for name in group.attrs:
        if name == "num_samples":
            continue
        if name == "model_file":
            if model_file:
                out["model_file"] = _text(group.attrs[name], f"{where} attribute model_file", MAX_MODEL_FILE)
            continue
        value = _json_attr(group.attrs, name)
        if value is not None:
            attrs[name] = value
    if attrs:
        out["attrs"] = attrs
    return out


def _json_attr(attrs: Any, name: str) -> Any:
    """A small attribute as a JSON value, or None when it has no JSON form or is too big (left out)."""
    shape = attrs.get_id(name).shape
    if math.prod(shape) > MAX_ATTR_VALUES:
        return None
    try:
        value = np.asarray(attrs[name])
    except (OSError, TypeError, ValueError):
        return None
    if value.dtype.kind in "SU" and value.ndim == 0:
        text = value.item()
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return text if len(text) <= MAX_TEXT else None
    if value.dtype.kind in "biu" or (value.dtype.kind == "f" and np.isfinite(value).all()):
        return value.tolist()
    if value.dtype.kind == "O" and value.ndim == 0 and isinstance(value.item(), str):
        return value.item() if len(value.item()) <= MAX_TEXT else None
    return None
