"""One row per held episode (id, steps, task, success, interrupted, duration), the frame rate
behind the durations, and which leaves are cameras. Reads metadata only, no step data.

Where the frame rate comes from, first found wins:

1. the ``fps`` metadata of the camera leaves (the recorder tags frames with the env's
   ``render_fps``); cameras that disagree are reported in :attr:`EpisodeSummary.fps_note`;
2. the ``fps`` metadata of the buffer's step space (its root ``DictSpace``);
3. none: durations are ``None`` and :attr:`EpisodeSummary.fps_source` says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from trajstore.ops.info import leaf_holders
from trajstore.spaces import tree

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

#: Metadata ``kind`` values of camera leaves (what the router sends to image or video storages).
CAMERA_KINDS = ("image", "depth", "rgb", "camera")
#: Storage classes that hold camera frames.
FRAME_STORAGES = ("ImageStorage", "VideoStorage")


@dataclass
class EpisodeRow:
    """One held episode as ``trajstore episodes`` shows it.

    Attributes:
        id: ``Episode.id`` (stable across ring overwrites; what ``--episode`` and selections name).
        start, stop: logical step range ``[start, stop)`` in the buffer now.
        steps: held steps (``stop - start``).
        task, success: ``data["task"]`` and ``data["success"]``, ``None`` when absent.
        interrupted: cut short (``end_episode(interrupted=True)``, or left by a writer that stopped).
        open: still being recorded (no ``end_episode`` yet; a reader's view of a live or crashed writer).
        overwritten: a ring overwrote its first steps.
        duration_s: ``steps / fps`` in seconds, ``None`` without a frame rate.
        data: the episode's whole JSON data.
    """

    id: int
    start: int
    stop: int
    steps: int
    task: Any
    success: Any
    interrupted: bool
    open: bool
    overwritten: bool
    has_final_observation: bool
    duration_s: float | None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeSummary:
    """The episodes of one buffer and the frame rate their durations use."""

    path: str | None
    ring: bool  # the buffer has a capacity (episodes can be overwritten)
    fps: float | None
    fps_source: str  # e.g. "metadata of observation/pixels", or why there is none
    fps_note: str | None
    rows: list[EpisodeRow]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def camera_keys(rb: "ReplayBuffer") -> list[str]:
    """Keys (joined by the layout's separator) of the camera leaves, in the space's order: leaves held
    by an image or video storage, or tagged with a camera ``kind`` (:data:`CAMERA_KINDS`) and of
    frame shape ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)`` (``(1, H, W)`` or ``(3, H, W)`` with ``layout="CHW"``)."""
    holders = leaf_holders(rb.storage)
    sep = getattr(rb.storage, "nested_separator", "/")
    keys = []
    for path, leaf in tree.leaves(rb.space):
        shape = tuple(getattr(leaf, "shape", ()))
        chw = leaf.metadata.get("layout") == "CHW"
        frame_like = len(shape) == 2 or (len(shape) == 3 and shape[0 if chw else 2] in (1, 3))
        if type(holders[path]).__name__ in FRAME_STORAGES or (leaf.metadata.get("kind") in CAMERA_KINDS
                                                                and frame_like):
            keys.append(tree.path_name(path, sep))
    return keys


def buffer_fps(rb: "ReplayBuffer") -> tuple[float | None, str, str | None]:
    """``(fps, where it comes from, note)``: see the module docstring for the order."""
    sep = getattr(rb.storage, "nested_separator", "/")
    rates = {}
    for key in camera_keys(rb):
        fps = tree.subspace(rb.space, tree.parse_name(key, sep)).metadata.get("fps")
        if isinstance(fps, (int, float)) and not isinstance(fps, bool) and fps > 0:
            rates[key] = float(fps)
    if rates:
        first = next(iter(rates))
        note = None
        if len(set(rates.values())) > 1:
            note = "cameras disagree: " + ", ".join(f"{k} {v:g} Hz" for k, v in rates.items())
        return rates[first], f"metadata of {first}", note
    fps = rb.space.metadata.get("fps")
    if isinstance(fps, (int, float)) and not isinstance(fps, bool) and fps > 0:
        return float(fps), "metadata of the buffer's step space", None
    return None, "no fps in the metadata of the camera leaves or of the step space", None


def summarize_episodes(rb: "ReplayBuffer") -> EpisodeSummary:
    """One :class:`EpisodeRow` per held episode (the open one included), oldest first."""
    fps, source, note = buffer_fps(rb)
    rows = []
    for e in rb.episodes:
        data = e.data
        n = len(e)
        rows.append(EpisodeRow(e.id, e.start, e.stop, n, data.get("task"), data.get("success"), e.interrupted,
                               not e.done and not e.interrupted, e.overwritten, e.has_final_observation,
                               None if fps is None else n / fps, data))
    published = rb.published_snapshot
    where = published[0] if published is not None else rb.cache_path  # a URL, not its local mirror
    return EpisodeSummary(None if where is None else str(where), rb.capacity is not None, fps,
                          source, note, rows)


def episode_position(rb: "ReplayBuffer", episode_id: int) -> int:
    """Position ``k`` (for ``rb.episode(k)``) of the held episode with ``Episode.id == episode_id``.

    Raises:
        IndexError: no held episode has that id (the message gives the held range).
    """
    episodes = rb.episodes
    ids = np.asarray(episodes.ids if hasattr(episodes, "ids") else [e.id for e in episodes], np.int64)
    k = int(np.searchsorted(ids, episode_id))  # ids increase with position; no episode data parsed
    if k < len(ids) and ids[k] == episode_id:
        return k
    held = f"ids {episodes[0].id}..{episodes[-1].id}" if episodes else "no episodes"
    raise IndexError(f"episode {episode_id} is not held (the buffer holds {held})")
