"""Export a buffer's episodes as a robomimic-layout HDF5 file: what ``trajstore export robomimic`` calls.

The layout is the one :mod:`~trajstore.interop.robomimic._source` reads (robomimic's docs,
``docs/datasets/overview.md``, and ``dataset_states_to_obs.py``); robomimic 0.3.0's ``SequenceDataset``
reads the file (``interop/robomimic_check.py`` checks it value by value).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._text import count
from trajstore.errors import InvalidValueError, StorageExistsError
from trajstore.interop.robomimic._export_plan import LeafPlan, ended_episodes, plan_leaves, plan_masks
from trajstore.interop.robomimic._keys import NEXT_OBS, OBS
from trajstore.interop.robomimic._publish import staged_file
from trajstore.interop.robomimic._source import MAX_ATTR_VALUES, MAX_MODEL_FILE, MAX_TEXT, _h5py
from trajstore.spaces import tree

#: Bytes of buffer data read per block of steps.
BLOCK_BYTES = 64 << 20
#: ``env_args`` written when neither ``env_args=`` nor the buffer's root metadata (an import's) gives one:
#: robomimic's ``EnvType.GYM_TYPE`` (2) with no name or kwargs known.
MINIMAL_ENV_ARGS = {"env_name": "", "env_version": None, "type": 2, "env_kwargs": {}}


@dataclass(frozen=True)
class RobomimicExport:
    """What :func:`export_robomimic` wrote: the file, the ``Episode.id`` of ``demo_0``, ``demo_1``, ...,
    samples, ``{leaf path: key in the demo}``, ``{filter key: demos}``."""

    path: Path
    episodes: list[int]
    samples: int
    keys: dict[str, str]
    masks: dict[str, int]

    def line(self) -> str:
        masks = ", ".join(f"{k} {v}" for k, v in self.masks.items())
        return (f"exported {count(len(self.episodes), 'demo')} ({count(self.samples, 'sample')}, "
                f"{count(len(self.keys), 'dataset')} each{'; masks ' + masks if masks else ''}) to {self.path}")


def export_robomimic(buffer_or_path: Any, out_file: str | os.PathLike, *, episodes: Iterable[int] | str | None = None,
                     key_map: Mapping[str, str] | None = None, val_fraction: float | None = None, seed: int = 0,
                     masks: Mapping[str, Iterable[int] | str] | None = None, env_args: Mapping[str, Any] | None = None,
                     exclude: Iterable[str] = (), progress: bool = False) -> RobomimicExport:
    """Write episodes of a buffer as a new robomimic-layout HDF5 file ``out_file``.

    - Episode ``k`` of the export is ``data/demo_k`` (attr ``num_samples``); each leaf a dataset ``(N, ...)``
      of its dtype: ``observation/<name>`` -> ``obs/<name>`` (nested names joined by ``_``), ``action`` ->
      ``actions``, ``reward`` -> ``rewards`` ``(N,)``, ``done`` -> ``dones`` int64 ``(N,)``, ``state`` ->
      ``states``, any other leaf at its path. Without a ``done`` leaf, ``dones`` is 1 at each demo's last
      sample (robomimic's end-of-demo convention), else 0.
    - A leaf whose metadata holds ``robomimic_key`` (an import's source key, kept when the import renamed it)
      is written to that key unless ``key_map`` names the leaf.
    - ``next_obs/<name>[t]`` is ``obs/<name>[t + 1]``; the last row is the episode's final observation, or, for
      an episode without one, a copy of its last observation.
    - Camera leaves (``kind="image"``, ``(H, W, 3)`` uint8) are gzip-compressed, as robomimic's
      ``dataset_states_to_obs.py --compress`` writes them; other datasets uncompressed, values exact. A
      ``(3, H, W)`` camera declared ``layout="CHW"`` is written ``(H, W, 3)``, the layout robomimic reads
      image observations in (an import gives it back as an HWC leaf).
    - ``data`` attrs ``total`` (samples) and ``env_args`` (``json.dumps(..., indent=4)``: ``env_args=``, else the
      buffer's root metadata ``robomimic.env_args`` an import kept, else :data:`MINIMAL_ENV_ARGS`); a demo's
      episode data ``model_file`` (text of at most 16 M characters, as an import reads) and ``attrs`` (an
      import's: ``{name: text of at most 1 M characters, a number or up to 1024 numbers}``; other values are
      left out, as an import would leave them) come back as its attributes.
    - Filter keys ``mask/<name>`` (``np.array(demo names, dtype="S")`` as robomimic's
      ``create_hdf5_filter_key``): see ``val_fraction`` and ``masks``.

    The file is written under a hidden temporary name beside ``out_file`` (``.<name>.<pid>-<token>.partial``
    with an owner record ``.partial.owner``), fsynced and hard-linked to ``out_file``, which never replaces
    a file: it appears whole or not at all, and a file that appeared there meanwhile (another export's, a
    user's) is kept. Temporary files that killed exports of the same ``out_file`` left behind (their
    process is gone) are removed first.

    Args:
        buffer_or_path: a :class:`~trajstore.replay_buffer.ReplayBuffer` or its folder (opened read-only).
        out_file: the new file (it must not exist; its folder must).
        episodes: ``Episode.id`` values, or a selection text as ``trajstore copy --episodes`` takes; default
            every ended episode (done or interrupted), oldest first, but those the ring cut
            (``Episode.overwritten``: they lost their first steps). Named ids must be whole ended episodes;
            a selection expression takes the whole ended episodes it selects.
        key_map: ``{leaf path: key in the demo}``, e.g. ``{"observation/pixels": "obs/agentview_image"}``.
        val_fraction: write ``mask/train`` and ``mask/valid`` from ``rb.split_episodes(val_fraction, seed)``
            (a number in [0, 1]; either mask may be empty).
        seed: the split's seed.
        masks: ``{name: ids or selection}``: more filter keys. Ids (a list or ``"0,3-5"``) must be exported
            episodes; an expression (``"success == true"``) takes the exported episodes it selects; a mask
            holding none is refused. With neither this nor ``val_fraction``, the filter keys an import kept
            (episode data ``masks``) are written.
        env_args: the ``env_args`` to write (a JSON object).
        exclude: leaf paths not to export (a text leaf, which robomimic cannot hold).
        progress: show a progress bar (tqdm, in samples) on stderr.

    Raises:
        UnsupportedSpaceError: a text leaf not in ``exclude``. UnknownLeafError: ``key_map`` or ``exclude``
            names no leaf.
        InvalidValueError (a ValueError): a bad key or mask name, keys that collide, no observation leaf, a
            bad selection, an episode named that is open or was cut by the ring ("lost its first steps to the
            ring"), a mask id not exported or a mask holding no episode, an episode's ``model_file`` that is
            not text or longer than an import reads.
        StorageExistsError: ``out_file`` exists, or appeared while exporting (it is left as it was).
            FileNotFoundError: its folder does not exist.
        ValueError: ``val_fraction`` not a number in [0, 1]; ``env_args`` not a JSON object.
        All but the appearing ``out_file`` before anything is written.
    """
    from trajstore.replay_buffer import ReplayBuffer

    h5py = _h5py()
    out = Path(out_file)
    if out.exists() or out.is_symlink():
        raise StorageExistsError(f"{out} already exists; pick a new file name")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out.parent} is not a folder")
    owned = isinstance(buffer_or_path, (str, os.PathLike))
    rb = ReplayBuffer.load_from(buffer_or_path) if owned else buffer_or_path
    try:
        plans = plan_leaves(rb.space, dict(key_map or {}), exclude)
        chosen = ended_episodes(rb, episodes)
        mask_ids = plan_masks(rb, chosen, val_fraction, seed, masks)
        args = _env_args_text(_env_args(rb, env_args))
        for e in chosen:
            _check_model_file(e)
        with staged_file(out) as tmp, h5py.File(tmp, "x") as f:
            _write(f, rb, plans, chosen, mask_ids, args, progress and f"export {out.name}")
    finally:
        if owned:
            rb.close()
    return RobomimicExport(out, [e.id for e in chosen], sum(len(e) for e in chosen),
                           {tree.path_name(p.path): p.key for p in plans}, {k: len(v) for k, v in mask_ids.items()})


def _env_args(rb: Any, given: Mapping[str, Any] | None) -> dict[str, Any]:
    if given is not None:
        if not isinstance(given, Mapping):
            raise ValueError(f"env_args must be a JSON object (a dict), got {type(given).__name__} {given!r:.60}")
        return dict(given)
    kept = rb.space.metadata.get("robomimic", {})
    value = kept.get("env_args") if hasattr(kept, "get") else None
    return value.to_json() if hasattr(value, "to_json") else dict(MINIMAL_ENV_ARGS)


def _env_args_text(value: dict[str, Any]) -> str:
    try:
        return json.dumps(value, indent=4, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"env_args must be a JSON object (of JSON values, no NaN or infinity): {exc}") from None


def _check_model_file(e: Any) -> None:
    """Refuse an episode's ``model_file`` that an import would refuse (not text, or too long)."""
    model = e.data.get("model_file")
    if model is None:
        return
    if not isinstance(model, str):
        raise InvalidValueError(f"episode id {e.id}: data 'model_file' is {type(model).__name__}, expected the "
                                "MJCF XML text robomimic keeps as a demo attribute")
    if len(model) > MAX_MODEL_FILE:
        raise InvalidValueError(f"episode id {e.id}: data 'model_file' has {len(model)} characters; an import "
                                f"reads at most {MAX_MODEL_FILE}")


def _write(f: Any, rb: Any, plans: list[LeafPlan], chosen: list[Any], mask_ids: dict[str, list[int]], args: str,
           progress: str | bool) -> None:
    from tqdm import tqdm

    data = f.create_group("data")
    positions = {e.id: k for k, e in enumerate(rb.episodes)}
    step_bytes = sum(int(np.prod(p.space.shape, dtype=np.int64)) * p.dtype.itemsize for p in plans)
    block = max(1, BLOCK_BYTES // max(step_bytes, 1))
    leaf_index = {path: i for i, (path, _) in enumerate(tree.leaves(rb.space))}
    derive_dones = not any(p.key == "dones" for p in plans)
    with tqdm(total=sum(len(e) for e in chosen), unit="sample", disable=not progress, desc=progress or None) as bar:
        for d, ep in enumerate(chosen):
            n = len(ep)
            g = data.create_group(f"demo_{d}")
            sets = {p.key: _dataset(g, p.key, n, p) for p in plans}
            nexts = {p.key: _dataset(g, f"{NEXT_OBS}/{p.key[len(OBS) + 1:]}", n, p) for p in plans if p.obs}
            last: dict[str, np.ndarray] = {}
            for a in range(ep.start, ep.stop, block):
                b = min(a + block, ep.stop)
                values = tree.flatten(rb.space, rb.get_at(slice(a, b)))
                lo, hi = a - ep.start, b - ep.start
                for p in plans:
                    v = p.written(np.asarray(values[leaf_index[p.path]]).astype(p.dtype, copy=False))
                    sets[p.key][lo:hi] = v
                    if p.obs:
                        if lo > 0:
                            nexts[p.key][lo - 1:hi - 1] = v
                        elif hi > 1:
                            nexts[p.key][0:hi - 1] = v[1:]
                        last[p.key] = v[-1]
                bar.update(b - a)
            final = rb.final_observation(positions[ep.id])
            for p in plans:
                if p.obs:
                    nexts[p.key][n - 1] = last[p.key] if final is None else p.written(_at(final, p.path[1:]))
            if derive_dones:
                g.create_dataset("dones", data=(np.arange(n) == n - 1).astype(np.int64))
            g.attrs["num_samples"] = n
            _episode_attrs(g, ep.data)
        data.attrs["total"] = sum(len(e) for e in chosen)
        data.attrs["env_args"] = args
    names = {e.id: f"demo_{d}" for d, e in enumerate(chosen)}
    for name, ids in mask_ids.items():
        f[f"mask/{name}"] = np.array([names[i] for i in ids], dtype="S") if ids else np.zeros(0, "S1")


def _dataset(g: Any, key: str, n: int, p: LeafPlan) -> Any:
    shape = (n, *p.shape)
    if p.camera:
        return g.create_dataset(key, shape=shape, dtype=p.dtype, compression="gzip")
    return g.create_dataset(key, shape=shape, dtype=p.dtype)


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        value = value[part]
    return np.asarray(value)


def _episode_attrs(g: Any, data: Mapping[str, Any]) -> None:
    """An import's ``model_file`` (checked by :func:`_check_model_file`) and ``attrs`` episode data back as
    the demo's attributes: what an import reads back (text up to ``MAX_TEXT`` characters, numbers and lists of
    up to ``MAX_ATTR_VALUES`` numbers, finite floats); others are left out."""
    model = data.get("model_file")
    if isinstance(model, str):
        g.attrs["model_file"] = model
    attrs = data.get("attrs")
    for name, value in (attrs.items() if isinstance(attrs, dict) else ()):
        if not isinstance(name, str) or not name or name in ("num_samples", "model_file"):
            continue
        if isinstance(value, str):
            if len(value) <= MAX_TEXT:
                g.attrs[name] = value
            continue
        array = _number_array(value)
        if array is not None and array.size <= MAX_ATTR_VALUES and (array.dtype.kind != "f"
                                                                    or np.isfinite(array).all()):
            g.attrs[name] = array


def _number_array(value: Any) -> np.ndarray | None:
    if not isinstance(value, (bool, int, float, list)):
        return None
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError):  # ragged lists, ints beyond 64 bits
        return None
    return array if array.dtype.kind in "biuf" else None
