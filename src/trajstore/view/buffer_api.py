"""The viewer's answers, read from one open buffer: what each request of the page gets, as JSON-ready
dicts or image bytes. No HTTP here (:mod:`trajstore.view.server` maps URLs to these methods).

* :meth:`BufferAPI.buffer`: the buffer at a glance: steps, episodes, fps, the cameras, the plottable
  low-dim leaves (names and units from their metadata), the statistics of each leaf.
* :meth:`BufferAPI.episodes`: every held episode as columns (id, steps, flags, task, success), read
  without parsing each episode's data (:meth:`~trajstore.replay_buffer.episode_list.EpisodeList.columns`),
  so 20,000 episodes answer in milliseconds; :meth:`BufferAPI.select` evaluates a selection text as
  ``trajstore copy --episodes`` does (:func:`~trajstore.replay_buffer.episode_query.parse_selection`).
* :meth:`BufferAPI.episode`, :meth:`BufferAPI.series`: one episode's data, times and final observation;
  its low-dim leaves at every step, one column per dimension.
* :meth:`BufferAPI.frame`, :meth:`BufferAPI.final_frame`: one camera frame as an image
  (:func:`~trajstore.view.frames.encode_frame`), read through the buffer's own window reads (byte
  ranges for a buffer opened from a URL).

Every method refreshes nothing by itself except :meth:`buffer` and :meth:`episodes`, which call
``rb.refresh()`` so that a page reloaded while a writer records sees the new episodes. Reads of the
buffer are serialised by one lock (the server answers requests on several threads).
Bad requests raise :class:`ViewRequestError` with an HTTP status and a message naming what was wrong.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from trajstore.errors import TrajstoreError
from trajstore.ops.episodes import buffer_fps, camera_keys, episode_position
from trajstore.ops.info import leaf_holders
from trajstore.ops.preview_data import plottable_leaves
from trajstore.replay_buffer.data_columns import MISSING
from trajstore.spaces import tree
from trajstore.view.frames import encode_frame

__all__ = ["BufferAPI", "ViewRequestError"]

#: Window requests kept (one per episode and leaf set read): a page steps through one episode at a time.
_REQUESTS_KEPT = 64
#: Most points per line of a series answer: longer episodes are sent every k-th step (``"every": k``).
MAX_SERIES_POINTS = 20_000
#: Widest final-observation leaf whose values are sent (a wider one is left out of the answer).
_FINAL_VALUES = 64
#: Statistics fields sent to the page.
_STAT_FIELDS = ("count", "min", "max", "mean", "std", "q01", "q50", "q99")


class ViewRequestError(Exception):
    """A request the viewer cannot answer: ``status`` (400 bad request, 404 nothing there) and a message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class BufferAPI:
    """Answers of the viewer for the open buffer ``rb`` (read-only; not closed by this object)."""

    def __init__(self, rb: Any, title: str):
        self.rb, self.title = rb, title
        self._lock = threading.RLock()
        self._sep = getattr(rb.storage, "nested_separator", "/")
        holders = leaf_holders(rb.storage)
        self._cameras = camera_keys(rb)
        self._lossless = {key: bool(getattr(holders[tree.parse_name(key, self._sep)], "lossless", True))
                          for key in self._cameras}
        self._storage = {key: type(holders[tree.parse_name(key, self._sep)]).__name__ for key in self._cameras}
        self._leaves, self._skipped = plottable_leaves(rb, self._cameras)
        self._requests: OrderedDict[tuple, Any] = OrderedDict()
        self._stats: tuple[int, dict] | None = None  # (steps appended when computed, answer)

    # -- the buffer --------------------------------------------------------------------------
    def buffer(self) -> dict[str, Any]:
        """The buffer at a glance (see the module docstring); statistics as ``rb.stats()`` gives them."""
        with self._lock:
            self._refresh()
            rb = self.rb
            fps, fps_source, _ = buffer_fps(rb)
            cameras = [self._camera_info(key) for key in self._cameras]
            leaves = [self._leaf_info(key) for key in self._leaves]
            stats, stats_error = self._statistics()
            return {"title": self.title, "steps": len(rb), "episodes": len(rb.episodes), "capacity": rb.capacity,
                    "fps": fps, "fps_source": fps_source, "cameras": cameras, "leaves": leaves,
                    "skipped": dict(self._skipped), "stats": stats, "stats_error": stats_error,
                    "data_keys": self._data_keys()}

    def _camera_info(self, key: str) -> dict[str, Any]:
        space = self._space_of(key)
        meta = space.metadata
        shape = tuple(space.shape)
        layout = "CHW" if meta.get("layout") == "CHW" and len(shape) == 3 else "HWC"
        if layout == "CHW":
            shape = (shape[1], shape[2], shape[0])
        fps = meta.get("fps")
        return {"key": key, "height": int(shape[0]), "width": int(shape[1]),
                "channels": int(shape[2]) if len(shape) == 3 else 1, "layout": layout,
                "storage": self._storage[key], "lossless": self._lossless[key],
                "fps": float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) else None}

    def _leaf_info(self, key: str) -> dict[str, Any]:
        space = self._space_of(key)
        dims = int(math.prod(tuple(space.shape)))
        names = space.metadata.get("names")
        if isinstance(names, (list, tuple)) and len(names) == dims and all(isinstance(n, str) for n in names):
            names = list(names)
        else:
            names = [key] if dims == 1 and not tuple(space.shape) else [f"{key}[{i}]" for i in range(dims)]
        units = space.metadata.get("units")
        return {"key": key, "dims": dims, "names": names, "units": units if isinstance(units, str) else None,
                "dtype": str(np.dtype(space.dtype))}

    def _statistics(self) -> tuple[dict[str, Any], str | None]:
        """Per-leaf statistics (cached until the buffer changes), or ``({}, why)``."""
        appended = self.rb.total_steps
        if self._stats is not None and self._stats[0] == appended:
            return self._stats[1], None
        if len(self.rb) == 0:
            return {}, "the buffer holds no steps"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stats = self.rb.stats()
        except (TrajstoreError, ValueError, IndexError, OSError) as exc:
            return {}, f"{type(exc).__name__}: {exc}"
        answer = {}
        for name, s in stats.items():
            d = s.to_json()
            answer[name] = {k: d[k] for k in (*_STAT_FIELDS, "reduction", "shape") if k in d}
        self._stats = (appended, answer)
        return answer, None

    def _data_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for e in self.rb.episodes[-64:]:  # the newest episodes' data: the keys a selection can name
            keys.update(dict.fromkeys(e.data))
        return list(keys)

    # -- episodes ----------------------------------------------------------------------------
    def episodes(self) -> dict[str, list]:
        """Columns ``id, steps, done, interrupted, overwritten, task, success`` over the held episodes,
        oldest first (``task``/``success`` ``None`` where the data lacks them)."""
        with self._lock:
            self._refresh()
            eps = self.rb.episodes
            cols = eps.columns()
            out: dict[str, list] = {k: v.tolist() for k, v in cols.items()}
            for key in ("task", "success"):
                out[key] = [None if v is MISSING else _json_scalar(v) for v in eps.data_values(key)]
            return out

    def select(self, text: str) -> dict[str, Any]:
        """``{"ids": [...], "selection": text}``: the held episodes ``text`` selects.

        Raises:
            ViewRequestError: 400, a malformed selection (the parser's message).
        """
        from trajstore.replay_buffer.episode_query import parse_selection

        try:
            selection = parse_selection(text)
        except (TrajstoreError, ValueError) as exc:
            raise ViewRequestError(400, str(exc)) from None
        with self._lock:
            self._refresh()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    ids = selection.select(self.rb.episodes)
                except (TrajstoreError, ValueError) as exc:  # ids that are not held
                    raise ViewRequestError(400, str(exc)) from None
            notes = [str(w.message) for w in caught]
        return {"ids": [int(i) for i in ids], "selection": text, "notes": notes}

    def episode(self, episode_id: int) -> dict[str, Any]:
        """One episode: its range, flags, JSON data, the time of each step (seconds from its first step:
        a ``timestamp`` leaf, else ``step / fps``, else ``None``) and its final observation's low-dim values.

        Raises:
            ViewRequestError: 404, no held episode has that id.
        """
        from trajstore.ops.preview_data import gather

        with self._lock:
            k = self._position(episode_id)
            ep = self.rb.episode(k)
            n = len(ep)
            info = gather(self.rb, episode_id, [], every=1, series=False) if n else None
            final, final_cameras = self._final(k)
            return {"id": ep.id, "start": ep.start, "stop": ep.stop, "first": self._first(ep), "steps": n,
                    "done": bool(ep.done),
                    "interrupted": bool(ep.interrupted), "overwritten": bool(ep.overwritten),
                    "data": _jsonable(dict(ep.data)),
                    "times": None if info is None or info.times is None else _floats(info.times),
                    "time_source": "none" if info is None else info.time_source,
                    "final_observation": final, "final_cameras": final_cameras}

    def _final(self, k: int) -> tuple[dict[str, list] | None, list[str]]:
        obs = self.rb.final_observation(k)
        if obs is None:
            return None, []
        values, cameras = {}, []
        prefix = ("observation",)
        for path, _ in tree.leaves(tree.subspace(self.rb.space, prefix)):
            name = tree.path_name(prefix + tuple(path), self._sep)
            leaf = np.asarray(tree.get(obs, path))
            if name in self._cameras:
                cameras.append(name)
            elif leaf.size <= _FINAL_VALUES and leaf.dtype.kind in "biuf":
                values[name] = _floats(leaf.astype(np.float64))
        return values, cameras

    def series(self, episode_id: int) -> dict[str, Any]:
        """``{"step": [0, k, 2k, ...], "every": k, "series": {leaf: [[dim 0 at each step], ...]}}`` of the
        plottable leaves, NaN as ``None``; ``k`` is 1 up to :data:`MAX_SERIES_POINTS` steps, then the
        smallest stride that keeps the points within it.

        Raises:
            ViewRequestError: 404, no held episode has that id.
        """
        from trajstore.ops.preview_data import gather

        with self._lock:
            self._position(episode_id)
            info = gather(self.rb, episode_id, [], every=1, series=True) if self._length(episode_id) else None
        if info is None:
            return {"step": [], "series": {key: [] for key in self._leaves}}
        n = len(info)
        every = max(1, -(-n // MAX_SERIES_POINTS))  # a long episode is sent every k-th step
        x = np.arange(0, n, every)
        return {"step": x.tolist(), "every": every,
                "series": {key: [_floats(col[x]) for col in values.T] for key, values in info.series.items()}}

    # -- frames ------------------------------------------------------------------------------
    def frame(self, episode_id: int, step: int, camera: str, first: int | None = None) -> tuple[bytes, str]:
        """``(image bytes, content type)`` of camera ``camera`` at step ``step`` (counted from the episode's
        first held step) of episode ``episode_id``. ``first``: the episode's ``first`` as the page got it;
        when a ring has overwritten the episode's start since, its steps are counted from another step.

        Raises:
            ViewRequestError: 404, no such camera, episode, or step in it; 409, ``first`` is not the
                episode's first held step any more (the page reloads the episode).
        """
        self._check_camera(camera)
        with self._lock:
            if first is not None:
                now = self._first(self.rb.episode(self._position(episode_id)))
                if now != first:
                    raise ViewRequestError(409, f"a ring overwrote the start of episode {episode_id}: its first held "
                                                f"step is now {now}, not {first}; reload the episode")
            n = self._length(episode_id)
            if not 0 <= step < n:
                raise ViewRequestError(404, f"episode {episode_id} has steps 0..{n - 1}, not {step}")
            request = self._request(episode_id, camera)
            try:
                batch = self.rb.windows_at(np.array([step]), request)[0]
            except IndexError as exc:  # a ring overwrote the step meanwhile (StaleReadError)
                raise ViewRequestError(404, f"episode {episode_id} step {step}: {exc}") from None
            frame = np.asarray(tree.get(batch, tree.parse_name(camera, self._sep)))[0]
        if frame.size == 0:
            raise ViewRequestError(404, f"{camera} holds empty frames (shape {frame.shape})")
        return encode_frame(frame, layout=self._space_of(camera).metadata.get("layout"),
                            lossless=self._lossless[camera])

    def final_frame(self, episode_id: int, camera: str) -> tuple[bytes, str]:
        """The final observation's frame of ``camera`` as :meth:`frame`.

        Raises:
            ViewRequestError: 404, no such camera or episode, or the episode has no final observation.
        """
        self._check_camera(camera)
        path = tree.parse_name(camera, self._sep)
        if path[0] != "observation":
            raise ViewRequestError(404, f"{camera} is not an observation leaf: final observations hold those")
        with self._lock:
            obs = self.rb.final_observation(self._position(episode_id))
        if obs is None:
            raise ViewRequestError(404, f"episode {episode_id} has no final observation")
        frame = np.asarray(tree.get(obs, path[1:]) if len(path) > 1 else obs)
        return encode_frame(frame, layout=self._space_of(camera).metadata.get("layout"),
                            lossless=self._lossless[camera])

    # -- helpers -----------------------------------------------------------------------------
    def _refresh(self) -> None:
        if getattr(self.rb, "read_only", False):
            self.rb.refresh()

    def _first(self, ep: Any) -> int:
        """The episode's first held step, counted over every step appended (moves when a ring overwrites it)."""
        return int(self.rb.total_steps - len(self.rb) + ep.start)

    def _position(self, episode_id: int) -> int:
        try:
            return episode_position(self.rb, episode_id)
        except IndexError as exc:
            raise ViewRequestError(404, str(exc)) from None

    def _length(self, episode_id: int) -> int:
        return len(self.rb.episode(self._position(episode_id)))

    def _check_camera(self, camera: str) -> None:
        if camera not in self._cameras:
            raise ViewRequestError(404, f"no camera {camera!r}; the cameras: {self._cameras}")

    def _request(self, episode_id: int, camera: str) -> Any:
        key = (episode_id, camera, len(self.rb), self.rb.total_steps)  # a new request when the buffer moved
        request = self._requests.get(key)
        if request is None:
            request = self.rb.window_request(None, episodes=[episode_id], leaves=[camera])
            self._requests[key] = request
            while len(self._requests) > _REQUESTS_KEPT:
                self._requests.popitem(last=False)
        self._requests.move_to_end(key)
        return request

    def _space_of(self, key: str) -> Any:
        return tree.subspace(self.rb.space, tree.parse_name(key, self._sep))


def _floats(values: Any) -> list:
    """A float list with NaN and infinities as ``None`` (JSON has no NaN)."""
    a = np.asarray(values, np.float64).reshape(-1)
    return [None if not math.isfinite(v) else v for v in a.tolist()]


def _json_scalar(v: Any) -> Any:
    return _jsonable(v)


def _jsonable(value: Any) -> Any:
    """``value`` with NaN/inf floats as ``None`` (episode data is JSON, but may hold NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
