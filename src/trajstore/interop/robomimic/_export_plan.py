"""What an export writes, decided before the file is made: each leaf's dataset (its key in the demo, dtype,
compression), the episodes in order with their demo names, and the filter keys (``mask/<name>``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.errors import InvalidValueError, UnknownLeafError, UnsupportedSpaceError
from trajstore.interop.robomimic._keys import (KEY_METADATA, NEXT_OBS, OBS, OBSERVATION, check_name,
                                               default_export_key)
from trajstore.spaces import BinarySpace, BoxSpace, Space, tree
from trajstore.storages.frames import FrameLayout


@dataclass(frozen=True)
class LeafPlan:
    """One leaf's dataset: ``key`` its path in ``data/demo_i`` (``"obs/agentview_image"``), ``dtype`` written,
    ``camera`` (``(H, W, 3)`` uint8 frames, gzip-compressed as ``dataset_states_to_obs.py --compress`` does),
    ``layout`` (``"CHW"``: a ``(3, H, W)`` camera leaf, written ``(H, W, 3)`` as robomimic reads image obs)."""

    path: tuple[str, ...]
    space: Space
    key: str
    dtype: np.dtype
    camera: bool
    layout: FrameLayout = FrameLayout()

    @property
    def shape(self) -> tuple[int, ...]:
        """The dataset's shape per sample: the leaf's, channel last for a CHW camera."""
        return self.layout.stored_shape(self.space.shape)  # type: ignore[attr-defined]

    def written(self, values: np.ndarray) -> np.ndarray:
        """Values of the leaf (``(n, ...)`` or one) as written: a CHW camera's frames transposed."""
        return self.layout.to_stored(values)

    @property
    def obs(self) -> bool:
        return self.key.startswith(OBS + "/")


def plan_leaves(space: Space, key_map: Mapping[str, str], exclude: Iterable[str] = ()) -> list[LeafPlan]:
    """The dataset of every leaf but those of ``exclude``: its key is ``key_map[leaf path]``, else the source
    key an import kept in the leaf's metadata (:data:`~trajstore.interop.robomimic._keys.KEY_METADATA`), else
    :func:`default_export_key`.

    Raises:
        UnknownLeafError: ``key_map`` or ``exclude`` names a leaf the buffer lacks.
        UnsupportedSpaceError: a text leaf not excluded (robomimic's datasets hold numbers; names every such
            leaf and the ``exclude`` that leaves them out).
        InvalidValueError: a bad key, two leaves on one key (or one inside the other), an observation leaf
            mapped outside ``obs/`` or another leaf into it, a key under ``next_obs/``, no observation leaf.
    """
    excluded = set(exclude)
    names = {tree.path_name(p) for p, _ in tree.leaves(space)}
    unknown = sorted((set(key_map) | excluded) - names)
    if unknown:
        raise UnknownLeafError(f"key_map/exclude name {unknown}, not leaves of the buffer (leaves: {sorted(names)})")
    leaves = [(p, leaf) for p, leaf in tree.leaves(space) if tree.path_name(p) not in excluded]
    text = [tree.path_name(p) for p, leaf in leaves if not isinstance(leaf, (BoxSpace, BinarySpace))]
    if text:
        raise UnsupportedSpaceError(f"leaves {text} are not numbers or bools (text): robomimic's HDF5 datasets "
                                    f"cannot hold them; leave them out with exclude={text} (on the command line "
                                    + " ".join(f"--exclude {t}" for t in text) + ")")
    plans, owner = [], {}
    for path, leaf in leaves:
        name = tree.path_name(path)
        kept = None if name in key_map else leaf.metadata.get(KEY_METADATA)
        what = f"leaf {name!r}: its key" + (f" (metadata {KEY_METADATA!r}, from an import)" if kept else "")
        key = "/".join(check_name(key_map.get(name) or kept or default_export_key(path), what))
        if (path[0] == OBSERVATION) != key.startswith(OBS + "/") or key == OBS \
                or key.split("/")[0] == NEXT_OBS:
            raise InvalidValueError(f"{what} {key!r}: leaves under 'observation' go to obs/<name>, other leaves "
                                    "outside obs/ (next_obs/ is written from the observations); name another "
                                    "with key_map (--key)")
        for other, other_name in owner.items():
            if key == other or key.startswith(other + "/") or other.startswith(key + "/"):
                raise InvalidValueError(f"leaves {other_name!r} and {name!r} map to {other!r} and {key!r}, which "
                                        "cannot both be HDF5 datasets; rename one with key_map (--key)")
        owner[key] = name
        dtype = np.dtype(bool) if isinstance(leaf, BinarySpace) else np.dtype(leaf.dtype)
        if key == "dones":
            dtype = np.dtype(np.int64)  # robomimic's dones are int64 0/1
        layout = FrameLayout.of_camera(leaf)
        shape = layout.stored_shape(leaf.shape)
        camera = leaf.metadata.get("kind") == "image" and dtype == np.uint8 and len(shape) == 3 and shape[2] == 3
        plans.append(LeafPlan(path, leaf, key, dtype, camera, layout if camera else FrameLayout()))
    if not any(p.obs for p in plans):
        raise InvalidValueError("the buffer has no 'observation' leaf: robomimic's obs/ group would be empty")
    return plans


def ended_episodes(rb: Any, episodes: Iterable[int] | str | None) -> list[Any]:
    """The episodes to export, oldest first: by default every ended one (done or interrupted) that the ring
    did not cut (``Episode.overwritten``: it lost its first steps), else those of ``episodes``: ids (a list, or
    a selection text of ids ``"0,3-5"``), each of which must be such an episode, or a selection expression
    (``"success == true"``), of which the exportable episodes it selects are taken.

    Raises:
        InvalidValueError (a ValueError): a bad selection, an id not held or of the episode still being
            recorded, an id of an overwritten episode ("lost its first steps to the ring"), nothing selected.
    """
    from trajstore.replay_buffer.episode_query import parse_selection

    held = rb.episodes
    where = getattr(rb, "cache_path", None) or "buffer"
    closed = {e.id: e for e in held if e.done or e.interrupted}
    whole = {i: e for i, e in closed.items() if not e.overwritten}
    if episodes is None:
        ids = sorted(whole)
    elif isinstance(episodes, str) and (selection := parse_selection(episodes)).ranges is None:
        ids = sorted(i for i in selection.select(held) if i in whole)
        if not ids:
            raise InvalidValueError(f"{where}: {selection.quoted} selects no whole ended episode of the "
                                    f"{len(held)} held; nothing was written")
    else:
        ids = sorted(_ids(rb, episodes))
        open_ = [i for i in ids if i not in closed]
        if open_:
            raise InvalidValueError(f"{where}: episodes {open_[:5]} are not ended episodes (held ids: "
                                    f"{_span(held)}; the one being recorded cannot be exported)")
        cut = [i for i in ids if i not in whole]
        if cut:
            raise InvalidValueError(f"{where}: episode id{'s' if len(cut) > 1 else ''} {', '.join(map(str, cut[:5]))} "
                                    "lost its first steps to the ring; it cannot be exported whole (leave it out "
                                    "of episodes)")
    if not ids:
        cut = len(closed) - len(whole)
        raise InvalidValueError(f"no ended episode to export (held: {len(held)}"
                                f"{f', {cut} of them cut by the ring' if cut else ''}); nothing was written")
    return [whole[i] for i in ids]


def _span(held: Any) -> str:
    ids = [e.id for e in held]
    return f"{ids[0]}..{ids[-1]}" if ids else "none"


def _ids(rb: Any, selection: Iterable[int] | str) -> set[int]:
    from trajstore.replay_buffer.episode_query import parse_selection

    if isinstance(selection, str):
        return set(parse_selection(selection).select(rb.episodes))
    if isinstance(selection, (bytes, Mapping)) or not isinstance(selection, Iterable):
        raise InvalidValueError(f"episode ids must be a list of ints or a selection text, got {selection!r:.60}")
    out = set()
    for i in selection:
        if isinstance(i, bool) or isinstance(i, np.bool_) or not hasattr(i, "__index__"):
            raise InvalidValueError(f"an episode id must be an int, got {i!r:.60}")
        out.add(int(i))
    return out


def plan_masks(rb: Any, chosen: list[Any], val_fraction: float | None, seed: int,
               masks: Mapping[str, Iterable[int] | str] | None) -> dict[str, list[int]]:
    """Filter key name -> the exported episode ids it holds, in export order.

    ``val_fraction``: ``train`` / ``valid`` from ``rb.split_episodes(val_fraction, seed)`` over the exported
    episodes (either may be empty: ``val_fraction`` 0 or 1). ``masks``: ``{name: ids or selection}``: ids (a
    list, or a selection text of ids ``"0,3-5"``) must each be an exported episode; a selection expression
    (``"success == true"``) takes the exported episodes it selects. A mask that holds no episode is refused
    (robomimic would train on nothing with it). With neither, the masks the import kept (episode data
    ``"masks"``).

    Raises:
        InvalidValueError: a bad mask name, a name given twice (``train``/``valid`` with ``val_fraction``), an
            id not exported, a mask holding no exported episode, a bad selection.
        ValueError: ``val_fraction`` not a number in [0, 1] (a bool is refused).
    """
    from trajstore.replay_buffer.episode_query import parse_selection

    ids = [e.id for e in chosen]
    order = {i: k for k, i in enumerate(ids)}
    out: dict[str, list[int]] = {}
    if val_fraction is not None:
        if isinstance(val_fraction, (bool, np.bool_)) or not isinstance(val_fraction, (int, float, np.integer,
                                                                                        np.floating)):
            raise ValueError(f"val_fraction must be a number in [0, 1], got {val_fraction!r:.60}")
        train, valid = rb.split_episodes(val_fraction, seed, episodes=ids)
        out.update(train=train, valid=valid)
    if masks is not None and not isinstance(masks, Mapping):
        raise InvalidValueError(f"masks must map a mask name to episode ids or a selection, got {masks!r:.60}")
    for name, selection in (masks or {}).items():
        check_name(name, "a mask name")
        if "/" in name:
            raise InvalidValueError(f"mask name {name!r}: a filter key is one name (no '/')")
        if name in out:
            raise InvalidValueError(f"mask {name!r} is given twice (val_fraction makes 'train' and 'valid')")
        expression = isinstance(selection, str) and parse_selection(selection).ranges is None
        selected = _ids(rb, selection)
        if not expression:
            outside = sorted(selected - set(order))
            if outside:
                raise InvalidValueError(f"mask {name!r}: episodes {outside[:5]} are not exported (exported ids: "
                                        f"{_short(ids)}); a filter key names exported demos")
        out[name] = sorted((i for i in selected if i in order), key=order.__getitem__)
        if not out[name]:
            raise InvalidValueError(f"mask {name!r}: {selection!r:.60} holds none of the {len(ids)} exported "
                                    "episodes; nothing was written (leave the mask out)")
    if val_fraction is None and not masks:
        for e in chosen:
            kept = e.data.get("masks")
            for name in kept if isinstance(kept, list) else ():
                if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
                    out.setdefault(name, []).append(e.id)
    return out


def _short(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:8])) + (f", ... ({len(ids)})" if len(ids) > 8 else "")
