"""What the gymnasium recorders write: the space of one recorded step, and the buffer it goes to.

A recorded step is::

    {"observation": o_t, "action": a_t, "reward": r_{t+1}, "terminated": ..., "truncated": ...,
     "info": {key: info[key] for key in info_keys}}

With a ``render_key`` the env's frame of ``o_t`` is one more observation leaf,
``observation/<render_key>``, tagged ``{"kind": "image", "layout": "HWC", "fps": render_fps}`` so
that the router compresses it; a non-dict observation then moves to ``observation/state``.

:class:`StepRecorder` is what :class:`~trajstore.recording.episodes.RecordEpisodes` and
:class:`~trajstore.recording.vector.RecordVectorEpisodes` share: the options,
the step space derived from an env's spaces, and the buffer (created from a path, or a given
one checked against that space).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.errors import StorageExistsError, UnknownLeafError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space, from_gymnasium, tree
from trajstore.storages.base import check_capacity

STATE_KEY = "state"


def step_space(observation_space: Space, action_space: Space, *, info_spaces: Mapping[str, Space] | None = None,
               image_keys: Iterable[str] = (), render_key: str | None = None,
               frame_shape: tuple[int, ...] | None = None, fps: float | None = None) -> DictSpace:
    """The space of one recorded step (see the module docstring): the one builder every recorder,
    the PushT job and :func:`~trajstore.recording.episodes.recorded_space` use.

    Args:
        observation_space, action_space: trajstore spaces (``from_gymnasium(env.observation_space)``
            for a gymnasium env's).
        info_spaces: ``{key: space}`` of the ``info`` entries recorded (:func:`info_spaces`), under ``info/``.
        image_keys: observation leaves (names joined by "/") that are camera frames, tagged
            ``kind=image`` (and ``fps``); none are guessed.
        render_key: add the rendered frame under ``observation/<render_key>``.
        frame_shape: ``(H, W, 3)`` of the rendered frames, with ``render_key``.
        fps: the env's ``render_fps`` (Hz), kept in the frame leaves' metadata.

    Raises:
        UnknownLeafError: an ``image_keys`` entry is not an observation leaf.
        ValueError: ``render_key`` is already a key of a dict observation.
    """
    observation = tag_images(observation_space, image_keys, fps)
    if render_key is not None:
        meta: dict[str, Any] = {"kind": "image", "layout": "HWC"}
        if fps:
            meta["fps"] = fps
        frame = BoxSpace(0, 255, tuple(frame_shape or ()), np.uint8, metadata=meta)
        if isinstance(observation, DictSpace):
            if render_key in observation.spaces:
                raise ValueError(f"render_key {render_key!r} is already an observation key; pick another")
            observation = DictSpace({**observation.spaces, render_key: frame}, observation.metadata)
        else:
            observation = DictSpace({STATE_KEY: observation, render_key: frame})
    spaces: dict[str, Space] = {
        "observation": observation,
        "action": action_space,
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
        "terminated": BinarySpace(),
        "truncated": BinarySpace(),
    }
    if info_spaces:
        spaces["info"] = DictSpace(dict(info_spaces))
    return DictSpace(spaces)


def info_spaces(info: Mapping[str, Any], info_keys: Iterable[str]) -> dict[str, Space]:
    """``{key: space}`` of the ``info_keys`` entries of one step's ``info`` (:func:`info_space` each).

    Raises:
        KeyError: an ``info_keys`` entry is not in ``info`` (the message lists the keys there).
        TypeError: as :func:`info_space`.
    """
    info_keys = tuple(info_keys)
    missing = [k for k in info_keys if k not in info]
    if missing:
        raise KeyError(f"info_keys {missing} are not in the env's step info (keys: {sorted(info)})")
    return {k: info_space(k, info[k]) for k in info_keys}


def info_space(key: str, value: Any) -> Space:
    """The space of an ``info[key]`` value, inferred from its first value (bool flags, numbers, arrays).

    Raises:
        TypeError: a value that is not a bool, a number or a numeric array.
    """
    arr = np.asarray(value)
    if arr.dtype == bool:
        return BinarySpace(arr.shape)
    if arr.dtype.kind in "iuf":
        info = np.finfo(arr.dtype) if arr.dtype.kind == "f" else np.iinfo(arr.dtype)
        dtype = np.float32 if arr.dtype.kind == "f" and arr.dtype.itemsize < 4 else arr.dtype
        low, high = (-np.inf, np.inf) if arr.dtype.kind == "f" else (info.min, info.max)
        return BoxSpace(low, high, arr.shape, dtype)
    raise TypeError(f"info[{key!r}] = {value!r:.80}: only bools, numbers and numeric arrays are recorded")


def tag_images(space: Space, image_keys: Iterable[str], fps: float | None, separator: str = "/") -> Space:
    """``space`` with the named leaves (paths in the observation) tagged ``kind=image`` (and ``fps``).

    Nothing is guessed from dtypes or shapes: only the leaves named are tagged.

    Raises:
        UnknownLeafError: a name is not a leaf of ``space``.
    """
    for name in image_keys:
        path = tree.parse_name(name, separator)
        try:
            leaf = tree.subspace(space, path)
        except KeyError as exc:
            raise UnknownLeafError(f"image_keys: {exc.args[0] if exc.args else name}") from None
        meta = {"kind": "image", "layout": "HWC", **({"fps": fps} if fps else {})}
        space = _replace(space, path, leaf.with_metadata(meta))
    return space


def _replace(space: Space, path: tuple[str, ...], new: Space) -> Space:
    if not path:
        return new
    assert isinstance(space, DictSpace)
    return DictSpace({**space.spaces, path[0]: _replace(space.spaces[path[0]], path[1:], new)}, space.metadata)


def space_differences(held: Space, recorded: Space) -> list[str]:
    """How the step space of a buffer (``held``) and the one an env records differ, leaf by leaf,
    ignoring metadata (routing was decided when the buffer was made); ``[]`` when they match.

    Each entry names the leaf, e.g. ``"observation/pixels: (400, 600, 3) uint8 in the buffer,
    (96, 96, 3) uint8 from the env"``.
    """
    a = {"/".join(p): s.without_metadata() for p, s in tree.leaves(held)}
    b = {"/".join(p): s.without_metadata() for p, s in tree.leaves(recorded)}
    out = [f"{k}: only in the buffer" for k in a if k not in b]
    out += [f"{k}: only from the env" for k in b if k not in a]
    out += [f"{k}: {_describe(a[k])} in the buffer, {_describe(b[k])} from the env"
            for k in a if k in b and a[k] != b[k]]
    return out


def _describe(space: Space) -> str:
    """``"box (4,) float32 in [-4.8, 4.8]"``: type, shape, dtype and (when one value each) bounds."""
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    text = " ".join(str(x) for x in (space.type_name, shape, dtype) if x is not None)
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is not None and high is not None:
        lo, hi = np.unique(low), np.unique(high)
        text += f" in [{lo[0]:g}, {hi[0]:g}]" if len(lo) == 1 and len(hi) == 1 else " (bounds per element)"
    return text


def render_frame(env: Any) -> np.ndarray:
    """``env.render()`` as a C-contiguous uint8 ``(H, W, 3)`` array.

    Raises:
        ValueError: ``render()`` returned None (the env was not made with ``render_mode="rgb_array"``)
            or not an ``(H, W, 3)`` image.
    """
    frame = env.render()
    if frame is None:
        raise ValueError("render_key needs an env made with render_mode='rgb_array' (render() returned None)")
    frame = np.ascontiguousarray(frame, dtype=np.uint8)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"render() returned an array of shape {frame.shape}; an (H, W, 3) RGB frame is needed")
    return frame


def copy_leaves(value: Any) -> Any:
    """A copy of a nested observation (dicts of arrays): envs and vector envs may reuse their arrays."""
    if isinstance(value, Mapping):
        return {k: copy_leaves(v) for k, v in value.items()}
    return np.array(value, copy=True)


class StepRecorder:
    """The options, step space and buffer the single-env and vector wrappers share.

    Args:
        buffer: an open, writable :class:`ReplayBuffer` (its space is checked against the env's
            at the first step) or a path: a new folder, made at the first step.
        capacity, routing: for a new folder only (a ring of ``capacity`` steps; keyword arguments
            of :func:`~trajstore.storages.dict_storage_kwargs_from_space`).

    Raises:
        ValueError: ``capacity`` or ``routing`` given with a buffer; a bad ``capacity``.
        StorageExistsError: the path is a file or a non-empty folder.
    """

    def __init__(self, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None,
                 info_keys: Iterable[str], image_keys: Iterable[str], capacity: int | None,
                 routing: Mapping[str, Any] | None, fps: float | None):
        if isinstance(buffer, ReplayBuffer):
            if capacity is not None or routing:
                raise ValueError("capacity and routing are for a new folder; this buffer has its own")
            if buffer.read_only or buffer.closed:
                raise ValueError(f"the buffer at {buffer.cache_path} is {'closed' if buffer.closed else 'read-only'}")
        else:
            check_capacity(capacity)
            path = Path(buffer)
            if path.exists() and (not path.is_dir() or any(path.iterdir())):
                raise StorageExistsError(f"{path} already exists and is not an empty folder; pick a new path, or "
                                         "pass ReplayBuffer.load_from(path, read_only=False) to add to it")
        self._target = buffer
        self.buffer: ReplayBuffer | None = buffer if isinstance(buffer, ReplayBuffer) else None
        #: the buffer's folder (None for a buffer in memory)
        self.path: Path | None = buffer.cache_path if isinstance(buffer, ReplayBuffer) else Path(buffer)
        self._owns_buffer = self.buffer is None
        self._checked = False  # a given buffer's space was checked against the env's
        self.render_key = render_key
        self.info_keys = tuple(info_keys)
        self.image_keys = tuple(image_keys)
        self.capacity = capacity
        self.routing = dict(routing or {})
        self.fps = fps

    def observation(self, obs: Any, frame: np.ndarray | None) -> Any:
        """The recorded observation: ``obs`` (copied) with the frame under ``render_key``."""
        obs = copy_leaves(obs)
        if self.render_key is None:
            return obs
        if isinstance(obs, Mapping):
            return {**obs, self.render_key: frame}
        return {STATE_KEY: obs, self.render_key: frame}

    def space(self, observation_space: Any, action_space: Any, frame: np.ndarray | None,
              info: Mapping[str, Any]) -> DictSpace:
        """:func:`step_space` of the env's gymnasium spaces with this recorder's options (``frame``: one
        rendered ``(H, W, 3)`` frame, for its shape; ``info``: one step's, for the info spaces)."""
        return step_space(from_gymnasium(observation_space), from_gymnasium(action_space),
                          info_spaces=info_spaces(info, self.info_keys), image_keys=self.image_keys,
                          render_key=self.render_key, frame_shape=None if frame is None else frame.shape,
                          fps=self.fps)

    def open(self, observation_space: Any, action_space: Any, frame: np.ndarray | None,
             info: Mapping[str, Any]) -> ReplayBuffer:
        """The buffer, made (a path was given) or checked (a buffer was given) at the first step.

        Raises:
            ValueError: the given buffer's step space differs from the env's (the message names the
                leaves); nothing is written.
            and those of :meth:`space` and ``ReplayBuffer.create``.
        """
        if self.buffer is None:
            from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

            space = self.space(observation_space, action_space, frame, info)
            self.buffer = ReplayBuffer.create(DictStorage, space, cache_path=self._target, capacity=self.capacity,
                                              **dict_storage_kwargs_from_space(space, **self.routing))
        elif not self._checked:
            space = self.space(observation_space, action_space, frame, info)
            diff = space_differences(self.buffer.space, space)
            if diff:
                raise ValueError(f"the buffer at {self.buffer.cache_path} holds other steps than this env records: "
                                 + "; ".join(diff))
        self._checked = True
        return self.buffer

    def record(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any,
               info: Mapping[str, Any]) -> dict[str, Any]:
        """One step as a value of the step space (``obs`` already made by :meth:`observation`).

        Raises:
            KeyError: an ``info_keys`` entry is missing from ``info``.
        """
        step = {"observation": obs, "action": action, "reward": np.float32(reward),
                "terminated": bool(terminated), "truncated": bool(truncated)}
        if self.info_keys:
            try:
                step["info"] = {k: info[k] for k in self.info_keys}
            except KeyError as exc:
                raise KeyError(f"info key {exc.args[0]!r} (in info_keys) is missing from this step's info") from None
        return step

    def close(self) -> None:
        """Close the buffer if this recorder made it."""
        if self.buffer is not None and self._owns_buffer:
            self.buffer.close()
