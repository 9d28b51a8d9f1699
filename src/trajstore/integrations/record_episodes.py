"""Record any gymnasium env into a :class:`~trajstore.replay_buffer.ReplayBuffer`, one env or a vector.

:class:`RecordEpisodes` wraps an env; every ``step`` appends one step to the buffer::

    {"observation": o_t, "action": a_t, "reward": r_{t+1}, "terminated": ..., "truncated": ...,
     "info": {key: info[key] for key in info_keys}}

``o_t`` is the observation the action was chosen from (returned by ``reset`` or by the previous
``step``), so a step never pairs an action with the observation it caused. With ``render_key``
the env's ``render()`` frame of ``o_t`` (captured right after ``reset``/the previous ``step``,
before the action) is stored under ``observation/<render_key>``, tagged
``{"kind": "image", "layout": "HWC", "fps": env.metadata["render_fps"]}`` so the router compresses
it; a non-dict observation then moves to ``observation/state``. When an episode ends, the
observation after its last step (and its frame) is kept as the episode's final observation, with
the reset seed and the data given to :meth:`RecordEpisodes.set_episode_data`.

:class:`RecordVectorEpisodes` does the same for a ``gymnasium.vector.VectorEnv``: each
sub-env's episode is staged separately and appended contiguously when it ends.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import gymnasium
import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space, from_gymnasium, tree

STATE_KEY = "state"


def step_space(observation_space: Space, action_space: Space, *, info_spaces: Mapping[str, Space] | None = None,
               render_key: str | None = None, frame_shape: tuple[int, ...] | None = None,
               fps: float | None = None) -> DictSpace:
    """The space of one recorded step (see the module docstring).

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


def _frame(env: Any) -> np.ndarray:
    frame = env.render()
    if frame is None:
        raise ValueError("render_key needs an env made with render_mode='rgb_array' (render() returned None)")
    return np.ascontiguousarray(frame, dtype=np.uint8)


class _Recorder:
    """What the single-env and the vector wrappers share: the buffer, the step space, the layout."""

    def __init__(self, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None,
                 info_keys: Iterable[str], image_keys: Iterable[str], capacity: int | None,
                 routing: Mapping[str, Any] | None, fps: float | None):
        self._target = buffer
        self.buffer: ReplayBuffer | None = buffer if isinstance(buffer, ReplayBuffer) else None
        self._owns_buffer = self.buffer is None
        self.render_key = render_key
        self.info_keys = tuple(info_keys)
        self.image_keys = tuple(image_keys)
        self.capacity = capacity
        self.routing = dict(routing or {})
        self.fps = fps

    def observation(self, obs: Any, frame: np.ndarray | None) -> Any:
        if self.render_key is None:
            return obs
        if isinstance(obs, Mapping):
            return {**obs, self.render_key: frame}
        return {STATE_KEY: obs, self.render_key: frame}

    def open(self, observation_space: Any, action_space: Any, frame: np.ndarray | None, info: Mapping[str, Any]) -> None:
        """Create the buffer (a path was given) from the env's spaces and the first step's info."""
        if self.buffer is not None:
            return
        from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

        missing = [k for k in self.info_keys if k not in info]
        if missing:
            raise KeyError(f"info_keys {missing} are not in the env's step info (keys: {sorted(info)})")
        obs_space = tag_images(from_gymnasium(observation_space), self.image_keys, self.fps)
        space = step_space(obs_space, from_gymnasium(action_space),
                           info_spaces={k: info_space(k, info[k]) for k in self.info_keys},
                           render_key=self.render_key, frame_shape=None if frame is None else frame.shape,
                           fps=self.fps)
        self.buffer = ReplayBuffer.create(DictStorage, space, cache_path=self._target, capacity=self.capacity,
                                          **dict_storage_kwargs_from_space(space, **self.routing))

    def record(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any,
               info: Mapping[str, Any]) -> dict[str, Any]:
        step = {"observation": obs, "action": action, "reward": np.float32(reward),
                "terminated": bool(terminated), "truncated": bool(truncated)}
        if self.info_keys:
            try:
                step["info"] = {k: info[k] for k in self.info_keys}
            except KeyError as exc:
                raise KeyError(f"info key {exc.args[0]!r} (in info_keys) is missing from this step's info") from None
        return step

    def close(self) -> None:
        if self.buffer is not None and self._owns_buffer:
            self.buffer.close()


class RecordEpisodes(gymnasium.Wrapper):
    """A gymnasium wrapper that records every step and episode into a replay buffer.

    Args:
        env: any env; ``render_key`` needs ``render_mode="rgb_array"``.
        buffer: an open, writable :class:`ReplayBuffer` whose space is :func:`step_space` of this
            env, or a path: a new folder, created at the first step with the space derived
            from the env (``from_gymnasium``), the routing of ``routing``
            (:func:`~trajstore.storages.dict_storage_kwargs_from_space` keyword arguments) and
            ``capacity``; the wrapper closes a buffer it created.
        render_key: store ``env.render()`` of each ``o_t`` under ``observation/<render_key>``.
        info_keys: ``info`` entries to store per step under ``info/<key>`` (bools, numbers, arrays).
        image_keys: observation leaves (names joined by "/") that are camera frames, tagged
            ``kind=image`` so they are compressed; none are guessed.

    Per episode, ``end_episode`` receives the final observation, ``seed`` (the ``reset`` seed,
    or None) and what :meth:`set_episode_data` set. An episode left open by a ``reset`` or
    ``close`` before it ended is ended all the same, with ``interrupted_by`` = ``"reset"`` or
    ``"close"`` in its data.
    """

    def __init__(self, env: Any, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None = None,
                 info_keys: Iterable[str] = (), image_keys: Iterable[str] = (), capacity: int | None = None,
                 routing: Mapping[str, Any] | None = None):
        super().__init__(env)
        fps = env.metadata.get("render_fps")
        self.recorder = _Recorder(buffer, render_key=render_key, info_keys=info_keys, image_keys=image_keys,
                                  capacity=capacity, routing=routing, fps=fps)
        self._obs: Any = None
        self._open = False  # steps of the current episode were recorded
        self._episode_data: dict[str, Any] = {}

    @property
    def buffer(self) -> ReplayBuffer | None:
        """The buffer being written (None until the first step when a path was given)."""
        return self.recorder.buffer

    def set_episode_data(self, **data: Any) -> None:
        """JSON data to store with the current episode (e.g. ``task="push the T"``, ``success=True``)."""
        self._episode_data.update(data)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if self._open:
            self._end_episode(interrupted_by="reset")
        obs, info = self.env.reset(seed=seed, options=options)
        frame = _frame(self.env) if self.recorder.render_key else None
        self._obs = self.recorder.observation(obs, frame)
        self._episode_data = {"seed": seed}
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        frame = _frame(self.env) if self.recorder.render_key else None
        rec = self.recorder
        if rec.buffer is None:
            first = self._obs[rec.render_key] if rec.render_key else None
            rec.open(self.env.observation_space, self.env.action_space, first, info)
        rec.buffer.append(rec.record(self._obs, action, reward, terminated, truncated, info))  # type: ignore
        self._open = True
        self._obs = rec.observation(obs, frame)
        if terminated or truncated:
            self._end_episode()
        return obs, reward, terminated, truncated, info

    def _end_episode(self, **extra: Any) -> None:
        self.recorder.buffer.end_episode(final_observation=self._obs,  # type: ignore[union-attr]
                                         **{**self._episode_data, **extra})
        self._open = False
        self._episode_data = {"seed": None}

    def close(self) -> None:
        try:
            if self._open:
                self._end_episode(interrupted_by="close")
            self.recorder.close()
        finally:
            super().close()

class RecordVectorEpisodes(gymnasium.vector.VectorWrapper):
    """:class:`RecordEpisodes` for a ``gymnasium.vector.VectorEnv``.

    Each sub-env's steps are kept apart and appended as one contiguous episode when it ends
    (so episodes never interleave in the buffer), with ``env_index`` and ``seed`` in its data.
    Both autoreset modes of gymnasium are handled: ``NEXT_STEP`` (the default: the step after
    an episode's end only resets that sub-env and is not recorded) and ``SAME_STEP`` (the
    final observation comes in ``info["final_obs"]``). Frames need
    ``render_mode="rgb_array"`` (``render()`` returns one frame per sub-env).
    """

    def __init__(self, env: Any, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None = None,
                 info_keys: Iterable[str] = (), image_keys: Iterable[str] = (), capacity: int | None = None,
                 routing: Mapping[str, Any] | None = None):
        super().__init__(env)
        mode = env.metadata.get("autoreset_mode", gymnasium.vector.AutoresetMode.NEXT_STEP)
        if mode not in (gymnasium.vector.AutoresetMode.NEXT_STEP, gymnasium.vector.AutoresetMode.SAME_STEP):
            raise ValueError(f"autoreset mode {mode} is not supported (NEXT_STEP or SAME_STEP)")
        self._same_step = mode == gymnasium.vector.AutoresetMode.SAME_STEP
        self.recorder = _Recorder(buffer, render_key=render_key, info_keys=info_keys, image_keys=image_keys,
                                  capacity=capacity, routing=routing, fps=env.metadata.get("render_fps"))
        self._obs: list[Any] = []
        self._steps: list[list[dict]] = []
        self._seeds: list[int | None] = []
        self._resetting = np.zeros(self.num_envs, bool)  # NEXT_STEP: this sub-env resets at the next step

    @property
    def buffer(self) -> ReplayBuffer | None:
        return self.recorder.buffer

    def _frames(self) -> list[Any]:
        if not self.recorder.render_key:
            return [None] * self.num_envs
        frames = self.env.render()
        if frames is None:
            raise ValueError("render_key needs sub-envs made with render_mode='rgb_array'")
        return [np.ascontiguousarray(f, dtype=np.uint8) for f in frames]

    def _split(self, obs: Any, i: int) -> Any:
        return tree.map_leaves(self._single_obs_space, obs, lambda v: v[i])

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._single_obs_space = from_gymnasium(self.env.single_observation_space)
        frames = self._frames()
        self._obs = [self.recorder.observation(self._split(obs, i), frames[i]) for i in range(self.num_envs)]
        self._steps = [[] for _ in range(self.num_envs)]
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        self._seeds = list(seeds)
        self._resetting[:] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        frames = self._frames()
        rec = self.recorder
        single_actions = from_gymnasium(self.env.single_action_space)
        for i in range(self.num_envs):
            new_obs = rec.observation(self._split(obs, i), frames[i])
            if self._resetting[i]:  # NEXT_STEP: this step only reset sub-env i
                self._resetting[i] = False
                self._obs[i] = new_obs
                self._seeds[i] = None
                continue
            step_info = {k: np.asarray(info[k])[i] for k in rec.info_keys if k in info}
            self._steps[i].append(rec.record(self._obs[i], tree.map_leaves(single_actions, actions,
                                                                           lambda v: v[i]),
                                             rewards[i], terminated[i], truncated[i], step_info))
            if terminated[i] or truncated[i]:
                final = new_obs
                if self._same_step:
                    final = rec.observation(self._split(info["final_obs"], i) if isinstance(info["final_obs"], dict)
                                            else info["final_obs"][i], frames[i])
                self._commit(i, final)
                if self._same_step:
                    self._obs[i] = new_obs
                    self._seeds[i] = None
                else:
                    self._resetting[i] = True
            else:
                self._obs[i] = new_obs
        return obs, rewards, terminated, truncated, info

    def _commit(self, i: int, final: Any, **extra: Any) -> None:
        """Append sub-env ``i``'s staged episode as one block and end it."""
        steps = self._steps[i]
        rec = self.recorder
        if rec.buffer is None:
            first = steps[0]["observation"][rec.render_key] if rec.render_key else None
            rec.open(self.env.single_observation_space, self.env.single_action_space, first,
                     steps[0].get("info", {}))
        rec.buffer.extend(_stack(steps))  # type: ignore[union-attr]
        rec.buffer.end_episode(final_observation=final, seed=self._seeds[i], env_index=i, **extra)  # type: ignore
        self._steps[i] = []

    def close(self) -> None:
        try:
            for i, steps in enumerate(self._steps):  # episodes still running are ended, marked
                if steps:
                    self._commit(i, self._obs[i], interrupted_by="close")
            self.recorder.close()
        finally:
            super().close()


def _stack(steps: list[dict]) -> dict:
    def stack(values: list[Any]) -> Any:
        if isinstance(values[0], Mapping):
            return {k: stack([v[k] for v in values]) for k in values[0]}
        return np.stack([np.asarray(v) for v in values])

    return stack(steps)

