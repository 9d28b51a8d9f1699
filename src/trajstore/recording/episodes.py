"""Record any gymnasium env into a :class:`~trajstore.replay_buffer.ReplayBuffer`.

:class:`RecordEpisodes` wraps an env; every ``step`` appends one step to the buffer::

    {"observation": o_t, "action": a_t, "reward": r_{t+1}, "terminated": ..., "truncated": ...,
     "info": {key: info[key] for key in info_keys}}

``o_t`` is the observation the action was chosen from (returned by ``reset`` or by the previous
``step``), so a step never pairs an action with the observation it caused. With ``render_key``
the env's ``render()`` frame of ``o_t`` (captured right after ``reset``/the previous ``step``,
before the action) is stored under ``observation/<render_key>`` (see
:mod:`~trajstore.recording.step` for the space). When an episode ends, the
observation after its last step (and its frame) is kept as the episode's final observation, with
the reset seed and the data given to :meth:`RecordEpisodes.set_episode_data`.

:class:`~trajstore.recording.vector.RecordVectorEpisodes` (re-exported here)
does the same for a ``gymnasium.vector.VectorEnv``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

import gymnasium
import numpy as np

from trajstore.recording.step import StepRecorder, render_frame, step_space
from trajstore.recording.vector import RecordVectorEpisodes
from trajstore.replay_buffer.episode_keys import checked_key
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_data import episode_data
from trajstore.spaces import DictSpace, from_gymnasium

__all__ = ["RecordEpisodes", "RecordVectorEpisodes", "recorded_space"]


class RecordEpisodes(gymnasium.Wrapper):
    """A gymnasium wrapper that records every step and episode into a replay buffer
    (arguments: :meth:`__init__`).

    Per episode, ``end_episode`` receives the final observation, ``seed`` (the ``reset`` seed,
    or None), what :meth:`set_episode_data` set and what ``episode_data`` returned. An episode
    left open by a ``reset`` or ``close`` before it ended is ended all the same as *interrupted*
    (``Episode.interrupted``), with ``interrupted_by`` = ``"reset"`` or ``"close"`` in its data;
    :meth:`discard_episode` drops it instead. After an episode ended,
    ``step`` needs a ``reset`` first. :attr:`recorded_observation` is the observation the next
    step will store (with its frame): what a policy should act on.
    """

    def __init__(self, env: Any, buffer: ReplayBuffer | str | os.PathLike, *, render_key: str | None = None,
                 info_keys: Iterable[str] = (), image_keys: Iterable[str] = (), capacity: int | None = None,
                 routing: Mapping[str, Any] | None = None,
                 episode_data: Callable[[dict], Mapping[str, Any]] | None = None):
        """Wrap ``env`` to record it into ``buffer``.

        Args:
            env (gymnasium.Env): any env; ``render_key`` needs ``render_mode="rgb_array"``.
            buffer (ReplayBuffer | str | os.PathLike): an open, writable :class:`ReplayBuffer` (its
                step space must match this env's, metadata aside: checked at the first step, before
                anything is appended; the caller closes it), or a path: a new folder, made at the
                first step with the space derived from the env (``from_gymnasium``); the wrapper
                closes a buffer it made.
            render_key (str | None): store ``env.render()`` of each ``o_t``, an ``(H, W, 3)`` uint8
                frame, under ``observation/<render_key>`` (a Box observation moves to
                ``observation/state``). None: no frames.
            info_keys (Iterable[str]): ``info`` entries to store per step under ``info/<key>``
                (bools, numbers, arrays; their spaces come from the first step's values).
            image_keys (Iterable[str]): observation leaves (names joined by ``"/"``) that are camera
                frames, tagged ``kind=image`` so they are compressed; none are guessed.
            capacity (int | None): a new folder's ring capacity in steps (None: unbounded); only
                with a path.
            routing (Mapping | None): a new folder's storage routing, keyword arguments of
                :func:`~trajstore.storages.dict_storage_kwargs_from_space` (e.g.
                ``{"kind_kwargs": {"image": {"format": "PNG"}}}``); only with a path.
            episode_data (Callable[[dict], Mapping] | None): ``episode_data(info) -> dict``, called
                when an episode ends with the info of its last step, for what is known only then
                (e.g. ``lambda info: {"success": bool(info["is_success"])}``); its values must be
                JSON. Without it, an ``is_success`` entry of the last step's info is stored as
                ``success``.

        Raises:
            StorageExistsError: ``buffer`` is a path to a file or a non-empty folder.
            ValueError: ``capacity``/``routing`` given with a buffer, or a read-only or closed
                buffer; a bad ``capacity``.
            Later, at the first ``step``: ``ValueError`` when a given buffer holds other steps, or
            ``render()`` gives no ``(H, W, 3)`` frame.
        """
        super().__init__(env)
        self._data_at_end = episode_data
        self.recorder = StepRecorder(buffer, render_key=render_key, info_keys=info_keys, image_keys=image_keys,
                                     capacity=capacity, routing=routing, fps=env.metadata.get("render_fps"))
        self._obs: Any = None  # o_t as recorded; None before reset and after an episode ended
        self._open = False  # steps of the current episode are in the buffer
        self._seed: int | None = None
        self._episode_data: dict[str, Any] = {}
        self._last_step: dict[str, Any] | None = None
        self._last_end: Any = None

    @property
    def buffer(self) -> ReplayBuffer | None:
        """The buffer being written (None until the first step when a path was given)."""
        return self.recorder.buffer

    @property
    def recorded_observation(self) -> Any:
        """The observation ``o_t`` as the next ``step`` records it: a copy of the env's last
        observation (from ``reset`` or ``step``) with, under ``render_key``, its ``(H, W, 3)`` uint8
        frame (a Box observation is then ``{"state": obs, render_key: frame}``). This is what to
        give a policy that needs the frame; the next ``step`` stores this very object, so read it
        without changing it in place. None before the first ``reset`` and after an episode ended
        (until the next ``reset``)."""
        return self._obs

    @property
    def last_episode_end(self) -> Any:
        """What the buffer's ``end_episode`` returned for the last episode ended (an
        :class:`~trajstore.replay_buffer.episode_keys.EpisodeEnd`: ``duplicate`` is True when its
        ``episode_key`` was committed already and its steps were dropped), or None before the first."""
        return self._last_end

    @property
    def last_step(self) -> dict[str, Any] | None:
        """The step the last ``step`` appended, as handed to the buffer (its observation is the
        wrapper's copy; its action is the caller's object)."""
        return self._last_step

    def set_episode_data(self, **data: Any) -> None:
        """JSON data to store with the current episode (e.g. ``task="push the T"``, ``success=True``).

        Called between episodes, the data goes to the next one. Repeated keys take the last value.
        ``episode_key="..."`` is the episode's key (``ReplayBuffer.end_episode``'s keyword: committed once).

        Raises:
            InvalidValueError: a value is not JSON (names the key), or a bad ``episode_key``; nothing is kept.
        """
        if "episode_key" in data:
            checked_key(data["episode_key"])
        self._episode_data.update(episode_data(data))

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if self._open:
            self._end_episode(interrupted_by="reset")
        obs, info = self.env.reset(seed=seed, options=options)
        frame = render_frame(self.env) if self.recorder.render_key else None
        self._obs = self.recorder.observation(obs, frame)
        self._seed = seed
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        if self._obs is None:
            raise RuntimeError("call reset() before step(): no episode is running (none started, or the last "
                               "one ended)")
        obs, reward, terminated, truncated, info = self.env.step(action)
        rec = self.recorder
        frame = render_frame(self.env) if rec.render_key else None
        first = self._obs[rec.render_key] if rec.render_key else None
        buffer = rec.open(self.env.observation_space, self.env.action_space, first, info)
        step = rec.record(self._obs, action, reward, terminated, truncated, info)
        buffer.append(step)
        self._last_step = step
        self._open = True
        self._obs = rec.observation(obs, frame)
        if terminated or truncated:
            if self._data_at_end is not None:
                at_end = episode_data(dict(self._data_at_end(info)))
                if "episode_key" in at_end:  # a bad key leaves the episode open, the recorder usable
                    checked_key(at_end["episode_key"])
                self._episode_data.update(at_end)
            elif "is_success" in info:
                self._episode_data.setdefault("success", bool(np.asarray(info["is_success"]).any()))
            self._end_episode()
        return obs, reward, terminated, truncated, info

    def _end_episode(self, **extra: Any) -> None:
        data = {"seed": self._seed, **self._episode_data, **extra}
        self._last_end = self.recorder.buffer.end_episode(final_observation=self._obs,  # type: ignore[union-attr]
                                                          interrupted="interrupted_by" in extra, **data)
        self._open = False
        self._obs = None
        self._episode_data = {}

    def discard_episode(self) -> int:
        """Drop the steps of the episode being recorded from the buffer (a failed attempt, an
        interrupt) and its data; returns how many steps (0 when none were recorded).

        The env is not reset: call ``reset`` before the next ``step``. See
        :meth:`ReplayBuffer.discard_episode` for what readers see.
        """
        buffer = self.recorder.buffer
        n = buffer.discard_episode() if buffer is not None else 0
        self._open = False
        self._obs = None
        self._episode_data = {}
        return n

    def close(self) -> None:
        """End an open episode (``interrupted_by="close"``), close a buffer the wrapper made, close the env."""
        try:
            if self._open:
                self._end_episode(interrupted_by="close")
        finally:
            try:
                self.recorder.close()
            finally:
                super().close()


def recorded_space(env: Any, *, render_key: str | None = None, image_keys: Iterable[str] = (),
                   seed: int | None = None) -> DictSpace:
    """The step space ``RecordEpisodes(env, ..., render_key=..., image_keys=...)`` records (without
    ``info_keys``), to make or check a buffer before recording.

    With ``render_key`` the env is reset (with ``seed``) and rendered once, for the frame's shape.

    Raises:
        ValueError: ``render()`` gave no ``(H, W, 3)`` frame; ``render_key`` is an observation key.
        UnknownLeafError: an ``image_keys`` entry is not an observation leaf.
        TypeError: a gymnasium space type trajstore does not convert.
    """
    frame = None
    if render_key is not None:
        env.reset(seed=seed)
        frame = render_frame(env)
    return step_space(from_gymnasium(env.observation_space), from_gymnasium(env.action_space),
                      image_keys=image_keys, render_key=render_key,
                      frame_shape=None if frame is None else frame.shape, fps=env.metadata.get("render_fps"))
