"""What the gymnasium recorders write: the space of one recorded step, and the buffer it goes to.

A recorded step is::

    {"observation": o_t, "action": a_t, "reward": r_{t+1}, "terminated": ..., "truncated": ...,
     "info": {key: info[key] for key in info_keys}}

With a ``render_key`` the env's frame of ``o_t`` is one more observation leaf,
``observation/<render_key>``, tagged ``{"kind": "image", "layout": "HWC", "fps": render_fps}`` so
that the router compresses it; a non-dict observation then moves to ``observation/state``.

:class:`StepRecorder` is what :class:`~trajstore.integrations.record_episodes.RecordEpisodes` and
:class:`~trajstore.integrations.record_vector_episodes.RecordVectorEpisodes` share: the options,
the step space derived from an env's spaces, and the buffer (created from a path, or a given
one checked against that space).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.errors import StorageExistsError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space, from_gymnasium, tree
from trajstore.storages.base import check_capacity

STATE_KEY = "state"


def step_space(observation_space: Space, action_space: Space, *, info_spaces: Mapping[str, Space] | None = None,
               render_key: str | None = None, frame_shape: tuple[int, ...] | None = None,
               fps: float | None = None) -> DictSpace:
    """The space of one recorded step (see the module docstring).

    Args:
        frame_shape: ``(H, W, 3)`` of the rendered frames, with ``render_key``.
        fps: the env's ``render_fps`` (Hz), kept in the frame leaf's metadata.

    Raises:
        ValueError: ``render_key`` is already a key of a dict observation.
    """
    observation = observation_space
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
        KeyError: a name is not a leaf of ``space``.
    """
    for name in image_keys:
        path = tree.parse_name(name, separator)
        leaf = tree.subspace(space, path)  # KeyError naming it
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


def recorded_step_space(observation_space: Any, action_space: Any, *, render_key: str | None = None,
                        frame: np.ndarray | None = None, fps: float | None = None,
                        info: Mapping[str, Any] | None = None, info_keys: Iterable[str] = (),
                        image_keys: Iterable[str] = ()) -> DictSpace:
    """The step space the recorders write for an env's gymnasium spaces.

    Args:
        observation_space, action_space: the env's (single) gymnasium spaces.
        frame: one rendered ``(H, W, 3)`` uint8 frame, with ``render_key`` (for its shape).
        fps: the env's ``render_fps`` (Hz).
        info: one step's ``info`` (the values of ``info_keys`` give their spaces).

    Raises:
        KeyError: an ``info_keys`` entry is not in ``info``, or an ``image_keys`` entry is not an
            observation leaf.
        TypeError: an info value is not a bool, number or numeric array; a gymnasium space type
            trajstore does not convert.
        ValueError: ``render_key`` is already an observation key.
    """
    info = info or {}
    info_keys = tuple(info_keys)
    missing = [k for k in info_keys if k not in info]
    if missing:
        raise KeyError(f"info_keys {missing} are not in the env's step info (keys: {sorted(info)})")
    obs_space = tag_images(from_gymnasium(observation_space), image_keys, fps)
    return step_space(obs_space, from_gymnasium(action_space),
                      info_spaces={k: info_space(k, info[k]) for k in info_keys},
                      render_key=render_key, frame_shape=None if frame is None else frame.shape, fps=fps)


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
        """:func:`recorded_step_space` with this recorder's options."""
        return recorded_step_space(observation_space, action_space, render_key=self.render_key, frame=frame,
                                   fps=self.fps, info=info, info_keys=self.info_keys, image_keys=self.image_keys)

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
