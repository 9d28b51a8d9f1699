"""What a preview shows of one episode, read from the buffer: the steps chosen for the frames, their
times, the frames of each camera at those steps, every step of the low-dim leaves, and the episode data.

* Steps (:func:`choose_steps`): ``frames=K`` picks ``K`` steps evenly spaced over the episode, first and
  last included (``round(linspace(0, n - 1, K))``; every step when ``n <= K``); ``every=N`` picks
  ``0, N, 2N, ... < n``. Steps are counted from the episode's first step.
* Times (:func:`step_times`), first found wins: a scalar numeric leaf named ``timestamp`` (seconds, as
  LeRobot records it; shown relative to the episode's first step), else ``step / fps`` with the fps
  of :func:`~trajstore.ops.episodes.buffer_fps`, else none.
* Low-dim leaves (:func:`plottable_leaves`): numeric or bool leaves that are no camera, of at most
  :data:`MAX_PLOT_DIMS` values per step (flattened); wider ones and text leaves are listed as skipped,
  with the reason.

Only the leaves asked for are read (a window request with ``leaves=``): camera frames at the chosen
steps, low-dim leaves at every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from trajstore.ops.episodes import buffer_fps, camera_keys, episode_position
from trajstore.spaces import tree

#: Frames of a contact sheet when neither ``frames`` nor ``every`` is given.
DEFAULT_FRAMES = 16
#: Widest leaf plotted (values per step); wider leaves are skipped and named.
MAX_PLOT_DIMS = 16
#: Name of a step leaf holding the step's time in seconds.
TIMESTAMP_LEAF = "timestamp"
#: Steps read at a time.
READ_BATCH = 128

Progress = Callable[[int], None]


def choose_steps(length: int, frames: int | None = None, every: int | None = None) -> np.ndarray:
    """Steps (int64 ``(K,)``, counted from the episode's first step, increasing) shown of an episode of
    ``length`` steps: ``frames`` evenly spaced ones (default :data:`DEFAULT_FRAMES`), or every ``every``-th.

    Raises:
        ValueError: ``frames`` or ``every`` is not an int >= 1, or both are given.
    """
    if frames is not None and every is not None:
        raise ValueError(f"give frames or every, not both (got frames={frames!r}, every={every!r})")
    for name, value in (("frames", frames), ("every", every)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if every is not None:
        return np.arange(0, length, int(every), dtype=np.int64)
    k = DEFAULT_FRAMES if frames is None else int(frames)
    if length <= k:
        return np.arange(length, dtype=np.int64)
    return np.round(np.linspace(0, length - 1, k)).astype(np.int64)  # distinct: spacing (n-1)/(k-1) >= 1


def leaf_kind(space: Any) -> str | None:
    """Why a leaf is not plotted (``"text"``, ``"N dims, more than 16"``), or ``None`` if it is plottable."""
    dtype = getattr(space, "dtype", None)
    if dtype is None or not (np.issubdtype(np.dtype(dtype), np.number) or np.dtype(dtype) == np.bool_):
        return "text" if type(space).__name__ == "TextSpace" else f"not numeric ({type(space).__name__})"
    dims = math.prod(tuple(getattr(space, "shape", ())))
    if dims > MAX_PLOT_DIMS:
        return f"{dims} dims, more than {MAX_PLOT_DIMS}"
    return None


def plottable_leaves(rb: Any, cameras: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """``(names, skipped)``: the low-dim leaves of ``rb`` to plot, in the space's order, and the other
    non-camera leaves with the reason (``{"note": "text"}``). ``cameras``: the camera keys (default
    :func:`~trajstore.ops.episodes.camera_keys`)."""
    sep = _separator(rb)
    cams = set(camera_keys(rb) if cameras is None else cameras)
    names, skipped = [], {}
    for path, leaf in tree.leaves(rb.space):
        name = tree.path_name(path, sep)
        if name in cams:
            continue
        reason = leaf_kind(leaf)
        if reason is None and path[-1] == TIMESTAMP_LEAF and math.prod(tuple(leaf.shape)) == 1:
            reason = "the time of the frame labels"
        if reason is None:
            names.append(name)
        else:
            skipped[name] = reason
    return names, skipped


@dataclass
class EpisodePreview:
    """What :func:`gather` read of one episode.

    Attributes:
        id, start, stop, interrupted, data: the episode (``Episode.id``, logical steps ``[start, stop)``,
            its JSON data dict); ``overwritten``: a ring overwrote its oldest steps (steps are counted
            from the first held one).
        steps: int64 ``(K,)``, the chosen steps counted from ``start``.
        times: float64 ``(K,)`` seconds since the episode's first step, or ``None`` (no timestamp, no fps).
        time_source: where ``times`` come from (``"leaf timestamp"``, ``"10 fps (metadata of ...)"``, ...).
        fps, fps_source: as :func:`~trajstore.ops.episodes.buffer_fps` (``None`` when none is declared).
        frames: camera key -> uint8 ``(K, H, W, 3)`` display RGB at ``steps``.
        series: low-dim leaf -> float64 ``(n, D)`` at every step (bool as 0/1).
        skipped: leaf -> why it is not plotted.
        units: low-dim leaf -> its ``units`` metadata, where declared.
    """

    id: int
    start: int
    stop: int
    interrupted: bool
    data: dict[str, Any]
    steps: np.ndarray
    times: np.ndarray | None
    time_source: str
    fps: float | None
    fps_source: str
    overwritten: bool = False
    frames: dict[str, np.ndarray] = field(default_factory=dict)
    series: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.stop - self.start


def gather(rb: Any, episode: int, cameras: Sequence[str], *, frames: int | None = None, every: int | None = None,
           steps: str = "chosen", series: bool = True, progress: Progress | None = None) -> EpisodePreview:
    """Read episode ``episode`` (an ``Episode.id``) of ``rb`` for a preview.

    Args:
        cameras: camera keys to read frames of (display RGB, :func:`to_rgb`).
        frames, every: the steps, as :func:`choose_steps`.
        steps: ``"chosen"`` reads the frames at the chosen steps only; ``"all"`` at every step (a video).
        series: read the low-dim leaves (every step) for plots.
        progress: called with a number of steps after each batch of frames read.

    Raises:
        IndexError: no held episode has that id; ValueError: as :func:`choose_steps`, or the episode has
        no steps.
    """
    k = episode_position(rb, episode)
    ep = rb.episode(k)
    n = len(ep)
    if n == 0:
        raise ValueError(f"episode {episode} has no steps yet: nothing to preview")
    chosen = choose_steps(n, frames, every) if steps == "chosen" else np.arange(n, dtype=np.int64)
    fps, fps_source, _ = buffer_fps(rb)
    sep = _separator(rb)
    names, skipped = plottable_leaves(rb) if series else ([], {})
    stamp = _timestamp_leaf(rb)
    out = EpisodePreview(ep.id, ep.start, ep.stop, bool(ep.interrupted), dict(ep.data), chosen, None, "none",
                         fps, fps_source, bool(ep.overwritten), skipped=skipped)
    low = names + ([stamp] if stamp is not None else [])
    if low:
        values = _read(rb, ep.id, np.arange(n), low, None)
        for name in names:
            v = np.asarray(tree.get(values, tree.parse_name(name, sep)))
            out.series[name] = v.reshape(n, -1).astype(np.float64)
            units = tree.subspace(rb.space, tree.parse_name(name, sep)).metadata.get("units")
            if isinstance(units, str):
                out.units[name] = units
        if stamp is not None:
            t = np.asarray(tree.get(values, tree.parse_name(stamp, sep)), np.float64).reshape(n)
            finite = t[np.isfinite(t)]  # a first stamp lost (NaN) must not blank every time
            origin = finite[0] if finite.size else 0.0
            out.times, out.time_source = t[chosen] - origin, f"leaf {stamp}"
    if out.times is None and fps is not None:
        out.times, out.time_source = chosen / fps, f"{fps:g} fps ({fps_source})"
    if cameras:
        values = _read(rb, ep.id, chosen, list(cameras), progress)
        for cam in cameras:
            layout = tree.subspace(rb.space, tree.parse_name(cam, sep)).metadata.get("layout")
            out.frames[cam] = to_rgb(np.asarray(tree.get(values, tree.parse_name(cam, sep))), layout)
    return out


def to_rgb(frames: np.ndarray, layout: Any = None) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 for display: RGB uint8 as it is; ``layout="CHW"`` frames transposed first;
    single-channel frames scaled from their min..max to gray (over the finite values: NaN and infinite
    pixels, a depth camera's "no return", are black)."""
    if layout == "CHW" and frames.ndim == 4:
        frames = np.moveaxis(frames, 1, -1)
    if frames.ndim == 4 and frames.shape[-1] == 3 and frames.dtype == np.uint8:
        return frames
    if frames.ndim == 4 and frames.shape[-1] == 3:  # float or wider RGB: scale as one
        gray_like = frames
    else:
        gray_like = frames[..., 0] if frames.ndim == 4 else frames
    values = gray_like.astype(np.float64)
    finite = np.isfinite(values)
    lo, hi = (float(values[finite].min()), float(values[finite].max())) if finite.any() else (0.0, 1.0)
    scaled = np.where(finite, (values - lo) * (255.0 / (hi - lo if hi > lo else 1.0)), 0.0).round().astype(np.uint8)
    return scaled if scaled.ndim == 4 else np.repeat(scaled[..., None], 3, axis=-1)


def _read(rb: Any, episode_id: int, steps: np.ndarray, leaves: list[str], progress: Progress | None) -> Any:
    """The leaves ``leaves`` at ``steps`` (counted from the episode's start), batched."""
    request = rb.window_request(None, episodes=[episode_id], leaves=leaves)
    parts = []
    for a in range(0, len(steps), READ_BATCH):
        idx = steps[a:a + READ_BATCH]
        parts.append(rb.windows_at(idx, request)[0])
        if progress is not None:
            progress(len(idx))
    sep = _separator(rb)
    paths = [tree.parse_name(name, sep) for name in leaves]
    joined: dict = {}
    for p in paths:  # rebuild a nested dict holding only the leaves read
        node = joined
        for key in p[:-1]:
            node = node.setdefault(key, {})
        node[p[-1]] = np.concatenate([np.asarray(tree.get(part, p)) for part in parts])
    return joined


def _timestamp_leaf(rb: Any) -> str | None:
    sep = _separator(rb)
    for path, leaf in tree.leaves(rb.space):
        if path[-1] == TIMESTAMP_LEAF and leaf_kind(leaf) is None and math.prod(tuple(leaf.shape)) == 1:
            return tree.path_name(path, sep)
    return None


def _separator(rb: Any) -> str:
    return getattr(rb.storage, "nested_separator", "/")
