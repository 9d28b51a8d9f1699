"""Export a replay buffer as a LeRobot dataset, format v3.0 (``codebase_version "v3.0"``), laid out as
lerobot 0.4.4 writes it, so that ``LeRobotDataset(repo_id, root=out)`` opens it. LeRobot itself is not
needed: the files are written with pyarrow and PyAV (``pip install 'trajstore[lerobot]'``).

What is written (the format is LeRobot's; the model is ``shared/fixtures/lerobot_v3_sim``, written by
lerobot 0.4.4 itself)::

    out/meta/info.json                         fps, features (dtype/shape/names), totals, path templates
    out/meta/stats.json                        dataset statistics per feature
    out/meta/tasks.parquet                     task text -> task_index
    out/meta/episodes/chunk-000/file-000.parquet   one row per episode: length, where its rows and frames
                                               are, stats/<feature>/<stat>
    out/data/chunk-000/file-000.parquet        one row per step (several episodes per file)
    out/videos/<key>/chunk-000/file-000.mp4    one per camera per file index, episodes back to back
    out/meta/trajstore/final_observations.parquet   trajstore's final observations (LeRobot ignores it)
    out/README.md                              the dataset card

How leaves become features is in :mod:`._export_features` (cameras -> video or PNG image
features, other leaves -> columns of their own dtype, ``observation/state`` -> ``observation.state``),
the video settings in :mod:`._export_video`, the statistics in :mod:`._export_stats`.
Low-dimensional values are copied exactly; camera frames go through the video codec (lossy) or PNG
(exact). The output is deterministic: the same buffer gives the same parquet and JSON files.

The task of an episode is its ``end_episode(task=...)`` data; an episode without one gets
``default_task`` (:data:`DEFAULT_TASK`, the empty string: "no task known").

What the format has no place for is kept where LeRobot 0.4.4 ignores it, so that
:func:`~trajstore.interop.lerobot.import_lerobot` gives the buffer back:

- info.json's top-level ``"trajstore"`` entry (:mod:`._trajstore_meta`): each feature's leaf path, its
  own shape (``()`` for a scalar, which LeRobot must call ``[1]``), metadata and space; the episode data
  columns; the interrupted episodes; the final observations file;
- episode data as extra columns ``episode_data/<key>`` of ``meta/episodes`` (:mod:`._episode_data`);
- final observations in ``meta/trajstore/final_observations.parquet`` (:mod:`._final_observations`).

The dataset card ``out/README.md`` (the Hub's YAML header and info.json) is written by
``trajstore.interop.lerobot._dataset_card.write_dataset_card`` once info.json is (:mod:`._export_meta`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trajstore._fs import check_new_folder, staged_folder
from trajstore.errors import UnknownLeafError, UnsupportedSpaceError
from trajstore.interop.lerobot import _episode_data
from trajstore.interop.lerobot._export_episode import OpenFiles, fsync_tree, write_episode
from trajstore.interop.lerobot._export_features import common_fps, index_features, plan_features
from trajstore.interop.lerobot._export_meta import CODEBASE_VERSION, EPISODES_PATH, MetaPlan, write_meta  # noqa: F401
from trajstore.interop.lerobot._export_select import episode_tasks, select_episodes
from trajstore.interop.lerobot._export_video import CODECS, ExportVideo, pix_fmt_for
from trajstore.interop.lerobot._final_observations import (FINALS_PATH, observation_features,
                                                           write_final_observations)
from trajstore.interop.lerobot._key_maps import export_keys
from trajstore.interop.lerobot._trajstore_meta import build_entry
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import DictSpace, Space
from trajstore.spaces.tree import Path as LeafPath
from trajstore.spaces.tree import leaf_paths, path_name, restrict

#: Seconds of work before the progress bar appears (a quick export prints none).
PROGRESS_DELAY_S = 1.0
#: Task text of an episode whose data has no ``task``.
DEFAULT_TASK = ""


@dataclass(frozen=True)
class LeRobotExport:
    """What :func:`export_lerobot` wrote.

    Attributes:
        path: the dataset folder.
        repo_id: the name to open it with (``LeRobotDataset(repo_id, root=path)``).
        episodes: trajstore ``Episode.id`` of each exported episode, in LeRobot ``episode_index`` order.
        frames: steps written.
        fps: frame rate (Hz).
        tasks: task texts, in ``task_index`` order.
        video_keys: features stored as MP4.
        files: files written, relative to ``path``, sorted.
    """

    path: Path
    repo_id: str
    episodes: list[int]
    frames: int
    fps: float
    tasks: list[str]
    video_keys: list[str]
    files: list[str] = field(default_factory=list)

    def line(self) -> str:
        n = len(self.episodes)
        return (f"exported {n} episode{'s' if n != 1 else ''}, {self.frames} frames at {self.fps:g} fps, "
                f"{len(self.tasks)} task{'s' if len(self.tasks) != 1 else ''}, {len(self.video_keys)} video "
                f"feature{'s' if len(self.video_keys) != 1 else ''} to {self.path} "
                f"(open with LeRobotDataset({self.repo_id!r}, root={str(self.path)!r}))")


def export_lerobot(buffer_or_path: ReplayBuffer | str | os.PathLike, out: str | os.PathLike, *,
                   episodes: Iterable[int] | str | None = None, repo_id: str | None = None,
                   fps: float | None = None, camera: str = "video", vcodec: str = "h264", crf: int | None = None,
                   default_task: str = DEFAULT_TASK, robot_type: str | None = None, chunks_size: int = 1000,
                   data_file_size_mb: float = 100, video_file_size_mb: float = 200, exclude: Sequence[str] = (),
                   key_map: Mapping[str, str] | str | None = None, license: str | None = None,
                   tags: Sequence[str] = (), progress: bool = False) -> LeRobotExport:
    """Write episodes of a buffer as a new LeRobot v3.0 dataset folder ``out``.

    Args:
        buffer_or_path: an open :class:`ReplayBuffer`, a buffer folder (opened read-only and closed), or
            an aligned view of a stream buffer (``StreamBuffer.aligned(...)``, whose steps are the anchor
            times): its streams become the features, its own ``timestamp`` and ``is_pad`` leaves are left
            out (LeRobot's ``timestamp`` column is ``frame_index / fps``; it makes its ``_is_pad`` masks at
            load time).
        out: a new folder, or an empty one.
        episodes: ``Episode.id`` values to export, in that order, or a selection text as ``trajstore copy
            --episodes`` takes (ids ``"0,3-5"`` or an expression over the episode data, ``"success == true"``;
            see :mod:`~trajstore.replay_buffer.episode_query`); default: every held episode that has ended
            (done or interrupted) and was not overwritten by the ring, oldest first. They become
            ``episode_index`` 0, 1, ...
        repo_id: the dataset's name for LeRobot, a Hub dataset name ``"user/name"``
            (:func:`~trajstore.interop.lerobot._repo_id.check_repo_id`); default ``"local/<out folder name>"``
            (characters a Hub name cannot hold become ``_``).
        fps: frame rate (Hz); default: the ``fps`` of the leaves' metadata (cameras carry it).
        camera: ``"video"`` (MP4, LeRobot's default) or ``"image"`` (PNG bytes in the data parquet, exact).
        vcodec: ``"h264"`` (default) or ``"libsvtav1"``; see :mod:`._export_video`.
        crf: video quality (lower: better, bigger); default 20 for h264, 30 for AV1.
        default_task: task text of episodes without ``task`` data.
        robot_type: ``robot_type`` of info.json (``None`` -> ``null``).
        chunks_size: files per ``chunk-XXX`` folder (LeRobot's default 1000).
        data_file_size_mb, video_file_size_mb: a data / video file takes no more episodes once it is this
            big (MB, LeRobot's defaults 100 and 200); an episode is never split across files.
        exclude: leaf names not to export (``"imu/orientation_covariance"``; a leaf LeRobot cannot hold).
        key_map: LeRobot feature keys: ``{leaf path: key}`` (``{"observation/pixels": "observation.image"}``),
            ``"policy"`` (the names LeRobot's policies read: the one low-dim observation vector ->
            ``observation.state``, cameras -> ``observation.images.<name>``, ``action``), or a mapping with
            the entry ``"*": "policy"`` (that preset under its explicit entries); see :mod:`._key_maps`.
            Default: the leaf path joined by ``"."``. An import gives the leaves their paths back.
        license, tags: the dataset card's license (``"apache-2.0"``) and tags, after LeRobot's own.
        progress: show a progress bar (tqdm, in frames, one update per episode) on stderr.

    Returns:
        :class:`LeRobotExport`.

    Raises:
        UnsupportedSpaceError: a leaf LeRobot cannot hold (names every such leaf and the ``exclude`` /
            ``--exclude`` that leaves them out; for a view, also the streams to keep), two leaves with the same
            key, leaves that disagree on fps (names the leaves).
        UnknownLeafError: ``exclude`` or ``key_map`` names a leaf the buffer does not have.
        InvalidValueError: an episode's ``task`` data is not a string (names the episode), a ``key_map``
            feature key LeRobot cannot take, a selection that is malformed or selects nothing.
        ValueError: no fps known, an unknown or unexported episode id, nothing to export, a bad option.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        FormatError: ``buffer_or_path`` is not a buffer folder.
        ImportError: pyarrow or PyAV missing.
        All of these are raised before anything is written. The dataset is built in a hidden folder next
        to ``out`` and renamed into place at the end: ``out`` is whole or absent, even after a crash.
    """
    opened = isinstance(buffer_or_path, (str, os.PathLike))
    rb = ReplayBuffer.load_from(buffer_or_path) if opened else buffer_or_path
    try:
        return _export(rb, Path(out), episodes=episodes, repo_id=repo_id, fps=fps, camera=camera, vcodec=vcodec,
                       crf=crf, default_task=default_task, robot_type=robot_type, chunks_size=chunks_size,
                       data_mb=data_file_size_mb, video_mb=video_file_size_mb, exclude=exclude, key_map=key_map,
                       license=license, tags=tags, progress=progress)
    finally:
        if opened:
            rb.close()


#: Leaves of an aligned view that are not exported (the view's anchor time and masks).
ALIGNED_VIEW_LEAVES = ("timestamp", "is_pad")


def exported_space(rb: Any) -> Space:
    """The step space whose leaves become features: ``rb.space``, without :data:`ALIGNED_VIEW_LEAVES` for
    an aligned view of a stream buffer."""
    if isinstance(rb, ReplayBuffer):
        return rb.space
    from trajstore.streams.aligned import AlignedView

    if not isinstance(rb, AlignedView):
        return rb.space
    return DictSpace({k: v for k, v in rb.space.items() if k not in ALIGNED_VIEW_LEAVES}, rb.space.metadata)


def _without(space: Space, exclude: Sequence[str]) -> Space:
    """``space`` without the leaves named in ``exclude``."""
    if isinstance(exclude, str):
        raise TypeError(f"exclude must be a collection of leaf names, got the str {exclude!r}")
    names = {path_name(p): p for p in leaf_paths(space)}
    unknown = sorted(set(exclude) - set(names))
    if unknown:
        raise UnknownLeafError(f"exclude names {unknown}, not leaves of the buffer (leaves: {sorted(names)})")
    if not exclude:
        return space
    kept = [p for n, p in names.items() if n not in set(exclude)]
    if not kept:
        raise ValueError("every leaf is excluded: nothing to export")
    return restrict(space, kept)


def _plan(rb: Any, space: Space, camera: str, keys: dict[LeafPath, str]) -> list[Any]:
    """:func:`plan_features` of ``space``; a refusal of leaves LeRobot cannot hold names all of them and how
    to leave them out (``exclude``; for an aligned view, the streams to keep)."""
    try:
        return plan_features(space, camera=camera, keys=keys)
    except UnsupportedSpaceError as exc:
        bad = []
        for path in leaf_paths(space):
            try:
                plan_features(restrict(space, [path]), camera=camera, keys=keys)
            except UnsupportedSpaceError:
                bad.append(path_name(path))
        if not bad:
            raise
        hint = (f"{exc}; LeRobot cannot hold {len(bad)} lea{'f' if len(bad) == 1 else 'ves'} ({', '.join(bad)}): "
                f"leave {'it' if len(bad) == 1 else 'them'} out with exclude={bad} (on the command line "
                + " ".join(f"--exclude {b}" for b in bad) + ")")
        streams = list(getattr(rb, "streams", ()) or ()) if not isinstance(rb, ReplayBuffer) else []
        keep = [n for n in streams if not any(b == n or b.startswith(n + "/") for b in bad)]
        if streams and keep:
            hint += (f", or keep only the other streams in the view: streams={keep} (on the command line "
                     + " ".join(f"--streams {n}" for n in keep) + ")")
        raise UnsupportedSpaceError(hint) from None


def _export(rb: ReplayBuffer, out: Path, *, episodes, repo_id, fps, camera, vcodec, crf, default_task, robot_type,
            chunks_size, data_mb, video_mb, exclude=(), key_map=None, license=None, tags=(),
            progress=False) -> LeRobotExport:
    # -- every check first: nothing is written until all pass -------------------------------
    import pyarrow  # noqa: F401  (fail early when the extra is missing)

    from trajstore.interop.lerobot import _export_parquet as tables
    from trajstore.interop.lerobot._export_video import _av

    _av()
    space = _without(exported_space(rb), exclude)
    features = _plan(rb, space, camera, export_keys(space, key_map))
    fps = float(fps) if fps is not None else common_fps(space)
    if fps is None or not np.isfinite(fps) or fps <= 0:
        raise ValueError("no frame rate: no leaf has metadata 'fps'; pass fps= (Hz; on the command line --fps)"
                         if fps is None else f"fps must be a positive number of Hz, got {fps!r}")
    if vcodec not in CODECS:
        raise ValueError(f"vcodec must be one of {sorted(CODECS)}, got {vcodec!r}")
    if not (isinstance(chunks_size, int) and chunks_size >= 1) or not data_mb > 0 or not video_mb > 0:
        raise ValueError(f"chunks_size must be an int >= 1 and file sizes > 0 MB, got {chunks_size!r}, "
                         f"{data_mb!r}, {video_mb!r}")
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise TypeError(f"tags must be a collection of strings, got {tags!r}")
    pix_fmts = {f.key: pix_fmt_for(vcodec, f.shape[0], f.shape[1], f.key) for f in features if f.dtype == "video"}
    chosen = select_episodes(rb, episodes)
    tasks, task_of = episode_tasks(chosen, default_task)
    datas = [e.data for e in chosen]
    data_columns = _episode_data.plan_columns(datas)
    finals = _finals_of(rb, chosen, features)
    from trajstore.interop.lerobot._repo_id import check_repo_id, default_repo_id

    repo_id = default_repo_id(out.resolve().name) if repo_id is None else check_repo_id(repo_id)
    check_new_folder(out)

    # -- build in a hidden sibling, renamed into place at the end (_fs.staged_folder) ------------
    all_features = features + index_features()
    video_keys = [f.key for f in features if f.dtype == "video"]
    from tqdm import tqdm

    with staged_folder(out) as tmp, tqdm(total=sum(len(e) for e in chosen), unit="frame", disable=not progress,
                                         desc=f"export {out.name}", delay=PROGRESS_DELAY_S) as bar:
        tmp.mkdir()
        files = OpenFiles(tmp, tables.data_schema(all_features), chunks_size, data_mb * 1e6, video_mb * 1e6)
        try:
            rows, stats = [], []
            first = 0
            for index, (ep, task_index) in enumerate(zip(chosen, task_of)):
                row, ep_stats = write_episode(rb, ep, index, first, task_index, tasks[task_index], features, fps,
                                               files, lambda p, f: ExportVideo(p, f.shape[0], f.shape[1], fps, vcodec,
                                                                               crf, pix_fmts[f.key]))
                rows.append(row)
                stats.append(ep_stats)
                first += len(ep)
                bar.update(len(ep))
            files.close()
        except BaseException:
            try:  # close the open writers before the folder goes; the first error is the one to raise
                files.close()
            except Exception:
                pass
            raise
        wrote_finals = write_final_observations(tmp, finals, lambda k: rb.final_observation(k), features)
        entry = build_entry(features, lambda path: _leaf(space, path), data_columns,
                            [i for i, e in enumerate(chosen) if e.interrupted], FINALS_PATH if wrote_finals else None)
        plan = MetaPlan(fps, vcodec, pix_fmts, robot_type, chunks_size, data_mb, video_mb, repo_id, license,
                        tuple(tags), folder=out.name)
        write_meta(tmp, all_features, video_keys, rows, stats, tasks, first, plan, entry,
                   _episode_data.arrays(data_columns, datas))
        written = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        fsync_tree(tmp)  # the files' bytes before the rename that publishes them
    return LeRobotExport(out, repo_id, [e.id for e in chosen], first, fps, tasks, video_keys, written)


def _leaf(space: Space, path: LeafPath) -> Space:
    for part in path:
        space = space[part]
    return space


def _finals_of(rb: Any, chosen: list, features: list) -> list[tuple[int, int]]:
    """``(episode_index, position in rb.episodes)`` of the chosen episodes that have a final observation,
    when the buffer keeps them (an aligned view has none) and some exported leaf is under ``observation``."""
    if not isinstance(rb, ReplayBuffer) or not observation_features(features):
        return []
    position = {int(i): k for k, i in enumerate(rb.episodes.ids.tolist())}
    return [(index, position[e.id]) for index, e in enumerate(chosen) if e.has_final_observation]


__all__ = ["export_lerobot", "LeRobotExport", "DEFAULT_TASK"]
