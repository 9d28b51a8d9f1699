"""Record a ``gymnasium.vector.VectorEnv`` into a :class:`~trajstore.replay_buffer.ReplayBuffer`.

Each sub-env's steps (``{"observation": o_t, "action": a_t, ...}``, as in
:mod:`~trajstore.recording.episodes`) are kept apart in memory and appended as one
contiguous episode when that sub-env's episode ends, so episodes never interleave in the buffer.

gymnasium's autoreset modes (``gymnasium/vector/sync_vector_env.py``, 1.x), as handled here:

- ``NEXT_STEP`` (the default): the step where sub-env ``i`` ends returns its final observation;
  the next ``step`` only resets it (its action is ignored, reward 0): that step is not recorded.
- ``SAME_STEP``: the step where it ends already reset it: the returned observation starts the next
  episode, the final observation is ``info["final_obs"][i]`` and that step's info is
  ``info["final_info"]``. ``render()`` then shows the new episode, so with ``render_key`` the
  final observation's frame is not known and the episode is stored without a final observation.
- ``DISABLED``: as ``NEXT_STEP``, but the caller resets ended sub-envs with
  ``reset(options={"reset_mask": mask})``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

import gymnasium
import numpy as np

from trajstore.recording.step import StepRecorder
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_data import episode_data as checked_episode_data
from trajstore.spaces import from_gymnasium, tree

AutoresetMode = gymnasium.vector.AutoresetMode


class RecordVectorEpisodes(gymnasium.vector.VectorWrapper):
    """:class:`~trajstore.recording.episodes.RecordEpisodes` for a vector env (arguments: :meth:`__init__`).

    Each episode's data holds ``env_index`` (the sub-env) and ``seed`` (its reset seed: ``seed + i``
    for ``reset(seed=int)``, None after an autoreset). A ``reset`` or ``close`` while sub-envs are
    in an episode ends those episodes with ``interrupted_by`` = ``"reset"`` or ``"close"`` in their data.
    """

    def __init__(self, env: Any, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None = None,
                 info_keys: Iterable[str] = (), image_keys: Iterable[str] = (), capacity: int | None = None,
                 routing: Mapping[str, Any] | None = None,
                 episode_data: Callable[[dict], Mapping[str, Any]] | None = None):
        """Wrap the vector env ``env`` to record each sub-env's episodes into ``buffer``.

        Args:
            env (gymnasium.vector.VectorEnv): any vector env; ``render_key`` needs sub-envs made
                with ``render_mode="rgb_array"`` (``render()`` returns one frame per sub-env).
            buffer (ReplayBuffer | str | os.PathLike): an open, writable :class:`ReplayBuffer` (its
                step space must match one sub-env's, checked when the first episode is appended;
                the caller closes it), or a path: a new folder, made when the first episode ends;
                the wrapper closes a buffer it made.
            render_key (str | None): store each sub-env's ``(H, W, 3)`` uint8 frame of ``o_t`` under
                ``observation/<render_key>`` (a Box observation moves to ``observation/state``).
            info_keys (Iterable[str]): entries of the vector ``info`` to store per step under
                ``info/<key>`` (the sub-env's element; its ``_key`` mask must be set).
            image_keys (Iterable[str]): observation leaves (names joined by ``"/"``) that are camera
                frames, tagged ``kind=image``.
            capacity (int | None): a new folder's ring capacity in steps; only with a path.
            routing (Mapping | None): a new folder's storage routing (keyword arguments of
                :func:`~trajstore.storages.dict_storage_kwargs_from_space`); only with a path.
            episode_data (Callable[[dict], Mapping] | None): ``episode_data(info) -> dict``, called
                when a sub-env's episode ends with *that sub-env's* info of its last step (element
                ``i`` of each vector info entry whose ``_key`` mask is set, nested dicts alike; with
                ``SAME_STEP`` autoreset, from ``info["final_info"]``); its values must be JSON.
                Without it, an ``is_success`` entry there is stored as ``success``.

        Raises:
            ValueError: an autoreset mode that is not one of gymnasium's three; ``capacity``/
                ``routing`` given with a buffer, or a read-only or closed buffer; a bad ``capacity``.
            StorageExistsError: ``buffer`` is a path to a file or a non-empty folder.
        """
        super().__init__(env)
        try:
            self._mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        except ValueError:
            raise ValueError(f"autoreset mode {env.metadata.get('autoreset_mode')!r} is not supported "
                             f"(one of {[m.value for m in AutoresetMode]})") from None
        self._data_at_end = episode_data
        self.recorder = StepRecorder(buffer, render_key=render_key, info_keys=info_keys, image_keys=image_keys,
                                     capacity=capacity, routing=routing, fps=env.metadata.get("render_fps"))
        self._single_obs_space = from_gymnasium(env.single_observation_space)
        self._single_action_space = from_gymnasium(env.single_action_space)
        n = self.num_envs
        self._obs: list[Any] = [None] * n  # o_t of each sub-env; None: it needs a reset
        self._steps: list[list[dict]] = [[] for _ in range(n)]  # the running episode of each sub-env
        self._seeds: list[int | None] = [None] * n
        self._resetting = np.zeros(n, bool)  # NEXT_STEP: the next step only resets this sub-env

    @property
    def buffer(self) -> ReplayBuffer | None:
        """The buffer being written (None until the first episode ends when a path was given)."""
        return self.recorder.buffer

    def _frames(self) -> list[Any]:
        if not self.recorder.render_key:
            return [None] * self.num_envs
        frames = self.env.render()
        if frames is None or any(f is None for f in frames):
            raise ValueError("render_key needs sub-envs made with render_mode='rgb_array' (render() returned None)")
        return [np.ascontiguousarray(f, dtype=np.uint8) for f in frames]

    def _single(self, space: Any, batch: Any, i: int) -> Any:
        return tree.map_leaves(space, batch, lambda v: np.array(v[i], copy=True))

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        mask = (options or {}).get("reset_mask")  # the env pops it from options
        which = range(self.num_envs) if mask is None else np.flatnonzero(mask)
        for i in which:
            if self._steps[i]:
                self._commit(i, self._obs[i], interrupted_by="reset")
        obs, info = self.env.reset(seed=seed, options=options)
        frames = self._frames()
        seeds = seed if isinstance(seed, (list, tuple)) else [None if seed is None else seed + i
                                                               for i in range(self.num_envs)]
        for i in which:
            self._obs[i] = self.recorder.observation(self._single(self._single_obs_space, obs, i), frames[i])
            self._seeds[i] = seeds[i]
            self._resetting[i] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        if any(o is None for o in self._obs):
            raise RuntimeError("call reset() before step() (for DISABLED autoreset: reset the sub-envs that ended)")
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        frames = self._frames()
        rec = self.recorder
        for i in range(self.num_envs):
            if self._resetting[i]:  # NEXT_STEP: this step only reset sub-env i
                self._resetting[i] = False
                self._obs[i] = rec.observation(self._single(self._single_obs_space, obs, i), frames[i])
                self._seeds[i] = None
                continue
            ended = bool(terminated[i] or truncated[i])
            same_step_end = ended and self._mode is AutoresetMode.SAME_STEP
            step_info = self._info(info.get("final_info", {}) if same_step_end else info, i)
            action = self._single(self._single_action_space, actions, i)
            self._steps[i].append(rec.record(self._obs[i], action, rewards[i], terminated[i], truncated[i], step_info))
            new_obs = rec.observation(self._single(self._single_obs_space, obs, i), frames[i])
            if not ended:
                self._obs[i] = new_obs
            elif same_step_end:  # new_obs already starts the next episode
                final = None if rec.render_key else rec.observation(info["final_obs"][i], None)
                self._commit(i, final, self._end_data(info.get("final_info", {}), i))
                self._obs[i], self._seeds[i] = new_obs, None
            else:
                self._commit(i, new_obs, self._end_data(info, i))
                self._resetting[i] = self._mode is AutoresetMode.NEXT_STEP
                self._obs[i] = None if self._mode is AutoresetMode.DISABLED else new_obs
        return obs, rewards, terminated, truncated, info

    def _info(self, info: Mapping[str, Any], i: int) -> dict[str, Any]:
        """Sub-env ``i``'s values of ``info_keys`` from a vector info (arrays with ``_key`` masks)."""
        out = {}
        for k in self.recorder.info_keys:
            if k not in info or not np.asarray(info.get("_" + k, np.ones(self.num_envs, bool)))[i]:
                raise KeyError(f"info key {k!r} (in info_keys) is missing from sub-env {i}'s step info")
            out[k] = np.asarray(info[k])[i]
        return out

    def _end_data(self, info: Mapping[str, Any], i: int) -> dict[str, Any]:
        """The episode data known when sub-env ``i``'s episode ends, from its info of the last step."""
        own = sub_env_info(info, i)
        if self._data_at_end is not None:
            return checked_episode_data(dict(self._data_at_end(own)))
        if "is_success" in own:
            return {"success": bool(np.asarray(own["is_success"]).any())}
        return {}

    def _commit(self, i: int, final: Any, data: Mapping[str, Any] | None = None, **extra: Any) -> None:
        """Append sub-env ``i``'s staged episode as one block and end it (``data``: from :meth:`_end_data`)."""
        steps = self._steps[i]
        rec = self.recorder
        first = steps[0]["observation"][rec.render_key] if rec.render_key else None
        buffer = rec.open(self.env.single_observation_space, self.env.single_action_space, first,
                          steps[0].get("info", {}))
        buffer.extend(_stack(steps))
        self._steps[i] = []
        ended = {"seed": self._seeds[i], "env_index": i, **(data or {}), **extra}
        buffer.end_episode(final_observation=final, interrupted="interrupted_by" in extra, **ended)

    def close(self) -> None:
        """End the running episodes (``interrupted_by="close"``), close a buffer the wrapper made, close the env."""
        try:
            for i, steps in enumerate(self._steps):
                if steps:
                    self._commit(i, self._obs[i], interrupted_by="close")
        finally:
            try:
                self.recorder.close()
            finally:
                super().close()


def sub_env_info(info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s part of a vector env's ``info``: element ``i`` of each entry whose ``_<key>``
    mask (when there is one) is set at ``i``, recursing into nested dicts; mask entries are dropped."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue
        mask = info.get("_" + key)
        if mask is not None and not np.asarray(mask)[i]:
            continue
        if isinstance(value, Mapping):
            out[key] = sub_env_info(value, i)
        else:
            out[key] = value[i] if np.ndim(value) else value
    return out


def _stack(values: list[Any]) -> Any:
    # a plain recursive function: a closure calling itself is a reference cycle holding the step's arrays
    if isinstance(values[0], Mapping):
        return {k: _stack([v[k] for v in values]) for k in values[0]}
    return np.stack([np.asarray(v) for v in values])
