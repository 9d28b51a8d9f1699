"""Record any registered gymnasium env that renders ``rgb_array`` into a buffer folder: what
``trajstore record --env gymnasium:ID`` calls.

:func:`record_gymnasium` makes the env (``gymnasium.make(env_id, render_mode="rgb_array")``),
derives the step space (:func:`~trajstore.recording.episodes.recorded_space`, with the
rendered frame under ``observation/<render_key>``), makes the folder (or reopens it with
``resume``, after checking that it holds the same steps) and records episodes through
:class:`~trajstore.recording.episodes.RecordEpisodes` with a policy, uniformly random
by default (a policy gets the observation as recorded, frame included: see
:mod:`~trajstore.recording.policy`). :func:`open_buffer` and :func:`camera_routing` are shared with
the PushT recording. :func:`use_headless_gl` picks MuJoCo's off-screen back-end when there is no display.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping

from trajstore.recording.loop import RecordingInterrupted, RecordingSummary, run_episodes
from trajstore.recording.policy import Policy, load_policy, policy_for
from trajstore.recording.step import space_differences
from trajstore.recording.reference import ReferenceSteps
from trajstore.replay_buffer import ReplayBuffer
from trajstore._cameras import CAMERAS, camera_of, camera_routing  # re-exported: part of this module's API
from trajstore.spaces import Space

class EnvSetupError(RuntimeError):
    """The env could not be made or could not render an ``rgb_array`` frame (e.g. MuJoCo without
    an OpenGL back-end: ``MUJOCO_GL=egl`` renders without a display). The cause is chained."""


def use_headless_gl() -> str | None:
    """Set ``MUJOCO_GL=egl`` when ``MUJOCO_GL`` is unset and there is no display (neither ``DISPLAY``
    nor ``WAYLAND_DISPLAY`` is set), so MuJoCo renders off-screen; a value already set is kept.
    It takes effect for a MuJoCo env made afterwards (MuJoCo reads it when its renderer is imported).

    Returns:
        ``MUJOCO_GL`` as it is now (None: unset, a display is there).
    """
    if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["MUJOCO_GL"] = "egl"
    return os.environ.get("MUJOCO_GL")


def _setup_error(env_id: str, what: str, exc: BaseException) -> EnvSetupError:
    import gymnasium

    try:
        mujoco = "mujoco" in str(gymnasium.spec(env_id).entry_point).lower()
    except Exception:  # an id gymnasium.spec cannot look up ("module:EnvId")
        mujoco = False
    hint = (f" (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}; without a display MuJoCo renders with MUJOCO_GL=egl)"
            if mujoco else "")
    return EnvSetupError(f"{what}: {type(exc).__name__}: {exc}{hint}")


def open_buffer(out: str | os.PathLike, space: Space, *, capacity: int | None = None, camera: str | None = None,
                camera_key: str | None = None, resume: bool = False) -> ReplayBuffer:
    """A writable buffer for steps of ``space``: a new folder ``out``, or with ``resume`` the
    existing one, reopened for writing once its space is known to match ``space``.

    Args:
        capacity: a new folder's ring capacity in steps (None: unbounded). With ``resume``, None or
            the folder's capacity.
        camera: how frames are stored (:data:`CAMERAS`; default ``"jpeg"``). With ``resume``, None
            or how the folder stores the leaf ``camera_key``.

    Raises:
        StorageExistsError: (new) ``out`` is a file or a non-empty folder.
        FormatError: (resume) ``out`` is not a buffer folder (or does not exist).
        ValueError: (resume) the folder holds other steps than ``space`` (metadata aside; the message
            names the leaves), or another capacity or camera storage. Nothing is written.
        LockedError: (resume) another process is writing the folder.
    """
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    if not resume:
        routing = camera_routing(camera or "jpeg")
        return ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=capacity,
                                   **dict_storage_kwargs_from_space(space, **routing))
    if camera is not None and camera not in CAMERAS:
        raise ValueError(f"camera must be one of {CAMERAS}, got {camera!r}")
    with ReplayBuffer.load_from(out, read_only=True) as held:
        diff = space_differences(held.space, space)
        if diff:
            raise ValueError(f"cannot resume {out}: it holds other steps than this env records: " + "; ".join(diff))
        if capacity is not None and capacity != held.capacity:
            raise ValueError(f"cannot resume {out} with capacity {capacity}: its capacity is "
                             f"{held.capacity or 'unbounded'}")
        held_camera = camera_of(held, camera_key) if camera_key else None
        if camera is not None and camera != held_camera:
            raise ValueError(f"cannot resume {out} with camera {camera}: it stores {camera_key} as {held_camera}")
    return ReplayBuffer.load_from(out, read_only=False)


def next_episode_number(buffer: ReplayBuffer) -> int:
    """How many episodes the buffer has had (the id its next episode gets), ring overwrites included."""
    return buffer.episode(-1).id + 1 if buffer.num_episodes else 0


def make_env(env_id: str, *, max_steps: int | None = None, env_kwargs: Mapping[str, Any] | None = None) -> Any:
    """``gymnasium.make(env_id, render_mode="rgb_array", max_episode_steps=max_steps, **env_kwargs)``.

    ``env_id`` may name a module to import first, gymnasium's ``"module:EnvId"`` form (e.g.
    ``"gym_pusht:gym_pusht/PushT-v0"``).

    Raises:
        ValueError: no env is registered as ``env_id``, or it does not render ``rgb_array``.
        ImportError: gymnasium, the named module or a dependency of the env (e.g. ``mujoco``:
            ``pip install trajstore[sim]``) is not installed.
        EnvSetupError: the env's constructor failed (bad ``env_kwargs``, no OpenGL back-end, ...).
    """
    try:
        import gymnasium
    except ImportError as exc:
        raise ImportError("recording gymnasium envs needs gymnasium: pip install trajstore[sim]") from exc
    kwargs = dict(env_kwargs or {})
    if max_steps is not None:
        kwargs["max_episode_steps"] = max_steps
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*render_mode.*not in the possible render_modes")
            env = gymnasium.make(env_id, render_mode="rgb_array", **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise ImportError(f"{env_id}: {exc} (pip install trajstore[sim] installs MuJoCo)") from exc
    except gymnasium.error.Error as exc:
        raise ValueError(f"gymnasium env {env_id!r}: {exc}") from exc
    except ImportError:
        raise
    except Exception as exc:  # the env's constructor (its kwargs, its simulator, an OpenGL back-end)
        raise _setup_error(env_id, f"could not make {env_id}", exc) from exc
    if "rgb_array" not in env.metadata.get("render_modes", ()):
        env.close()
        raise ValueError(f"gymnasium env {env_id!r} does not render rgb_array frames "
                         f"(its render modes: {env.metadata.get('render_modes', [])})")
    return env


def random_policy(env: Any) -> Policy:
    """``env.action_space.sample()`` whatever the observation (reproducible once the action space is seeded)."""
    return lambda obs, info: env.action_space.sample()


def record_gymnasium(env_id: str, out: str | os.PathLike, episodes: int, *, camera: str | None = None,
                     capacity: int | None = None, max_steps: int | None = None, seed: int = 0, resume: bool = False,
                     render_key: str = "pixels", policy: Policy | str | None = None,
                     env_kwargs: Mapping[str, Any] | None = None, reference: str | os.PathLike | None = None,
                     progress: bool = True) -> RecordingSummary:
    """Record ``episodes`` episodes of a registered gymnasium env into the folder ``out``.

    Each step is ``{"observation": {"state" or the env's keys..., render_key: (H, W, 3) uint8 frame},
    "action", "reward" (float32), "terminated", "truncated"}``, each episode ends with its final
    observation and ``data["seed"]``.

    Args:
        env_id: a registered id (``"CartPole-v1"``, ``"Pusher-v5"``; see :func:`make_env`).
        camera: ``"jpeg"`` (default for a new folder), ``"png"`` or ``"video"`` (:func:`camera_routing`).
        capacity: ring capacity in steps (default: unbounded).
        max_steps: cap on steps per episode (the last one is marked truncated); default: the env's.
        seed: episode ``k`` of the folder (counting earlier runs, with ``resume``) resets the env and
            seeds its action space with ``seed + k``, so a resumed run continues the seed sequence.
        resume: add to the existing folder ``out`` (see :func:`open_buffer`: the env must record the
            same steps; ``capacity``/``camera`` None or the folder's).
        render_key: the observation key of the rendered frame.
        policy: ``policy(observation, info) -> action``, called with the observation *as recorded*
            (``{"state" or the env's keys..., render_key: (H, W, 3) uint8 frame}``, see
            :attr:`RecordEpisodes.recorded_observation`) and the env's info; or a factory
            ``make_policy(env)`` (one parameter named ``env``), called once with the env and
            returning the policy; or the text ``"module:function"`` / ``"path/to/file.py:function"``
            naming either (:func:`~trajstore.recording.policy.load_policy`). Default
            :func:`random_policy`. Episode ``k`` seeds ``env.action_space`` with ``seed + k`` (for a
            policy that samples it); other noise is the policy's own.
        env_kwargs: more keyword arguments of ``gymnasium.make`` (e.g. ``width=96, height=96`` for MuJoCo).
        reference: also save the raw steps to this ``.npz`` for
            :func:`~trajstore.recording.reference.compare_to_reference` (not with ``resume``).
        progress: show a progress bar (tqdm) on stderr.

    Without a display, ``MUJOCO_GL=egl`` is set first unless ``MUJOCO_GL`` is set (:func:`use_headless_gl`).

    Returns:
        What was recorded; the buffer is closed.

    Raises:
        RecordingInterrupted: Ctrl-C; the open episode was discarded, the buffer is closed, the
            summary says what was kept (see :mod:`~trajstore.recording.loop`).
        ValueError: ``episodes`` < 1, an unknown env or camera, ``reference`` with ``resume``, an env
            whose spaces trajstore does not convert (``Tuple``, ``MultiDiscrete``, ...), and those of
            :func:`make_env` and :func:`open_buffer`: raised before anything is written.
        PolicyLoadError: (a ``ValueError``) a policy text that does not load, or a factory that
            returns no callable; raised before the folder is made.
        EnvSetupError: the env could not be made or render (headless MuJoCo needs ``MUJOCO_GL=egl``).
        StorageExistsError, FormatError, LockedError, ImportError: see :func:`open_buffer`, :func:`make_env`.
    """
    check_run(episodes, camera, reference, resume)
    if isinstance(policy, str):
        policy = load_policy(policy)
    elif policy is not None and not callable(policy):
        raise TypeError(f"policy must be a callable policy(observation, info) -> action, got {type(policy).__name__}")
    use_headless_gl()
    env = make_env(env_id, max_steps=max_steps, env_kwargs=env_kwargs)
    try:
        space = _space_of(env, env_id, render_key, seed)
        chosen = None if policy is None else policy_for(policy, env)
    except BaseException:
        env.close()
        raise

    def make_policy(wrapper: Any, first: int) -> Policy:
        if chosen is None:
            return random_policy(wrapper)
        return lambda obs, info: chosen(wrapper.recorded_observation, info)

    return record_run(env, space, out, episodes=episodes, seed=seed, capacity=capacity, camera=camera,
                      render_key=render_key, resume=resume, reference=reference, progress=progress,
                      desc=f"recording {env_id}", make_policy=make_policy)


def check_run(episodes: int, camera: str | None, reference: Any, resume: bool) -> None:
    """The checks every recording run makes before anything is opened.

    Raises:
        ValueError: ``episodes`` < 1, an unknown ``camera``, or ``reference`` with ``resume``.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if camera is not None and camera not in CAMERAS:
        raise ValueError(f"camera must be one of {CAMERAS}, got {camera!r}")
    if reference is not None and resume:
        raise ValueError("a reference covers one run: record with reference into a new folder, not with resume")


def record_run(env: Any, space: Space, out: str | os.PathLike, *, episodes: int, seed: int, capacity: int | None,
               camera: str | None, render_key: str | None, resume: bool, reference: Any, progress: bool, desc: str,
               make_policy: Any) -> RecordingSummary:
    """Record ``episodes`` episodes of ``env`` (steps of ``space``) into ``out``; ``env`` and the buffer are
    closed at the end. ``make_policy(wrapper, first_episode_number)`` gives the policy; episode ``k`` of
    the folder is reset with ``seed + k``. With ``reference``, the raw steps of the whole episodes
    recorded (also of an interrupted run) are saved there."""
    from trajstore.recording.episodes import RecordEpisodes

    camera_key = f"observation/{render_key or 'pixels'}"
    rb = wrapper = None
    try:
        rb = open_buffer(out, space, capacity=capacity, camera=camera, camera_key=camera_key, resume=resume)
        first = next_episode_number(rb)
        wrapper = RecordEpisodes(env, rb, render_key=render_key)
        kept = ReferenceSteps() if reference is not None else None
        try:
            return run_episodes(wrapper, make_policy(wrapper, first), range(seed + first, seed + first + episodes),
                                progress=progress, desc=desc, on_step=kept)
        finally:  # an interrupted run keeps the reference of its whole episodes too
            if kept is not None and kept.episodes:
                kept.save(reference, space, rb.capacity)  # type: ignore[arg-type]
    finally:
        try:
            (wrapper or env).close()
        finally:
            if rb is not None:
                rb.close()


def _space_of(env: Any, env_id: str, render_key: str, seed: int) -> Space:
    from trajstore.recording.episodes import recorded_space

    try:
        return recorded_space(env, render_key=render_key, seed=seed)
    except TypeError as exc:  # a gymnasium space trajstore does not convert (Tuple, MultiDiscrete, ...)
        raise ValueError(f"{env_id} cannot be recorded: {exc}") from exc
    except (ValueError, KeyError):
        raise
    except Exception as exc:  # the env's renderer failed (an OpenGL context, a display)
        raise _setup_error(env_id, f"{env_id} could not render a frame", exc) from exc


__all__ = ["CAMERAS", "RecordingInterrupted", "EnvSetupError", "camera_routing", "make_env", "open_buffer",
           "random_policy", "record_gymnasium", "use_headless_gl"]
