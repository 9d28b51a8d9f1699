"""Copy episodes of a buffer into a new folder, or merge buffers with equal spaces into one.

Everything goes through the public write path, episode by episode: held steps are read in batches
of :data:`COPY_BATCH_BYTES` and handed to ``extend``, then ``end_episode(final_observation=...,
interrupted=..., **data)`` commits the episode with its data, final observation and interrupted flag.
The new folder gets the source's layout (storage classes and their options, e.g. JPEG quality or
video crf, ``check_bounds``); a ring source is compacted: the copy is unbounded unless a capacity is
given. Episode ids are renumbered from 0 in the order written.

Lossy leaves (JPEG frames, video) are decoded and encoded again: one more generation of codec
loss, within the storage's usual bound. Lossless leaves (HDF5, PNG) are copied exactly.

A ring episode whose first steps were overwritten is copied from its first held step; an episode
still open in the source (a live or crashed writer) is copied as interrupted.
"""

from __future__ import annotations

import errno
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from trajstore._fs import check_new_folder, staged_folder
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import FormatError, InvalidValueError, TrajstoreError
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.spaces import Space, tree
from trajstore.storages.base import SpaceStorage

#: Bytes of step data read and extended at a time (bounded memory whatever the episode length).
COPY_BATCH_BYTES = 64 << 20

#: ``progress(steps)`` is called after each batch with the number of steps it copied.
Progress = Callable[[int], None]


@dataclass
class CopySummary:
    """What a copy or merge wrote."""

    path: str
    episodes: int
    steps: int
    source_episodes: list[tuple[str, int]]  # (source path, source Episode.id) of each episode written, in order
    #: (source path, source Episode.id) of each damaged episode left out (``skip_damaged``).
    skipped: list[tuple[str, int]] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.path}: {self.episodes} episode{'s' * (self.episodes != 1)}, {self.steps} steps"


def storage_kwargs_of(storage: SpaceStorage) -> tuple[type[SpaceStorage], dict[str, Any]]:
    """``(storage class, create options)`` that build a storage laid out like ``storage``: the same
    classes per key, each with the options it was created with (``DictStorage``: ``storage_cls_map``,
    ``key_kwargs``, ``nested_separator``)."""
    children = storage.parts()
    if not children:
        return type(storage), _options_of(storage)
    return type(storage), {"storage_cls_map": {key: type(sub) for key, sub in children.items()},
                           "key_kwargs": {key: _options_of(sub) for key, sub in children.items()},
                           "nested_separator": storage.nested_separator}  # type: ignore[attr-defined]


def _options_of(sub: SpaceStorage) -> dict[str, Any]:
    config = sub.get_config()
    return {o.name: config[o.name] for o in type(sub).options if o.name in config}


def first_difference(a: Space, b: Space, separator: str = "/") -> str | None:
    """``None`` when ``a`` and ``b`` are equal spaces (metadata included), else a sentence naming the
    first leaf (in ``a``'s order) that is missing from one of them or differs."""
    leaves_a, leaves_b = dict(tree.leaves(a)), dict(tree.leaves(b))
    for path, leaf in leaves_a.items():
        name = tree.path_name(path, separator)
        if path not in leaves_b:
            return f"leaf {name!r} is missing from the second space"
        if leaf.to_json() != leaves_b[path].to_json():
            return f"leaf {name!r} differs: {leaf!r} vs {leaves_b[path]!r}"
    for path in leaves_b:
        if path not in leaves_a:
            return f"leaf {tree.path_name(path, separator)!r} is missing from the first space"
    if a.to_json() != b.to_json():
        return "the spaces differ in their dict metadata or key order"
    return None


def held_steps(paths: Iterable[str | os.PathLike]) -> int:
    """Steps the buffer folders ``paths`` hold, summed (a copy's or merge's progress total), from their
    metadata alone; 0 when one cannot be read (the copy itself then reports why)."""
    from trajstore.replay_buffer.metadata import read_meta

    try:
        return sum(int(read_meta(Path(p))["ring"]["count"]) for p in paths)
    except Exception:  # noqa: BLE001 - only a progress total; the copy reports real errors
        return 0


def copy_episodes(src: str | os.PathLike, dst: str | os.PathLike, *, episodes: Iterable[int] | str | None = None,
                  capacity: int | None = None, progress: Progress | None = None,
                  skip_damaged: bool = False, allow_empty: bool = False) -> CopySummary:
    """Copy episodes of the buffer at ``src`` into a new buffer folder ``dst``.

    Args:
        src: a buffer folder (opened read-only; a live writer may keep writing).
        dst: a new (or empty) folder.
        episodes: ``Episode.id`` values, a selection text (``"0,3,5-9"``, ``'success == true'``; see
            :mod:`~trajstore.replay_buffer.episode_query`), or ``None`` for every held episode.
        capacity: ring capacity of the copy in steps, or ``None`` (unbounded).
        progress: called with the number of steps after each batch written.
        skip_damaged: leave out the episodes that cannot be read (a payload file holding some of their
            steps is missing, ``ReplayBuffer.damaged``, or fails to decode while copying: that
            episode's copied steps are discarded); they are listed in ``CopySummary.skipped``.
        allow_empty: write the copy even when ``episodes`` selects no episode (an empty buffer).

    Returns:
        A :class:`CopySummary`.

    Raises:
        FormatError: ``src`` is not a buffer folder, or is damaged (:class:`~trajstore.damage.DamagedDataError`:
            without ``skip_damaged``, a selected episode is; with it, every selected episode is, unless
            ``allow_empty``; names the damage, before anything is written).
        ValueError: a malformed selection, an id that is not held, a bad capacity; a selection that
            selects no episode unless ``allow_empty`` (:class:`~trajstore.errors.InvalidValueError`,
            naming the data keys of the selection that no held episode has); ``dst`` inside ``src``
            (:class:`~trajstore.errors.InvalidValueError`, naming both).
        StorageExistsError: ``dst`` exists and is not an empty folder, or appeared while copying.
        OSError: a full disk (``ENOSPC``, ``EDQUOT``): the message names ``dst``.
        Nothing is written when one of these is raised. ``dst`` appears only whole: the copy is built in a
        hidden sibling folder and renamed at the end (an error, or a kill, leaves ``dst`` as it was).
    """
    refuse_nested([src], dst)
    with warnings.catch_warnings():  # the damage is reported below, or skipped as asked
        warnings.simplefilter("ignore", DamagedBufferWarning)
        rb = ReplayBuffer.load_from(src, read_only=True)
    with rb:
        ids = _selected_ids(rb, episodes, allow_empty=allow_empty)
        damaged = [i for i in ids if i in set(rb.damaged.episodes)]
        if damaged and not skip_damaged:
            raise DamagedDataError(f"{src}: {rb.damaged.summary()}; pass skip_damaged=True (--skip-damaged) to copy "
                              "the other episodes")
        if ids and len(damaged) == len(ids) and not allow_empty:
            raise DamagedDataError(f"{src}: every selected episode is damaged ({_id_list(damaged)}): "
                                   f"{rb.damaged.summary()}; nothing was written (to write an empty buffer: "
                                   "allow_empty=True, on the command line --allow-empty)")
        summary = _write(dst, [(rb, [i for i in ids if i not in damaged])], template=rb, capacity=capacity,
                         progress=progress, skip_damaged=skip_damaged, allow_empty=allow_empty or not ids)
        summary.skipped[:0] = [(str(rb.cache_path), i) for i in damaged]
        return summary


def merge_buffers(srcs: Sequence[str | os.PathLike], dst: str | os.PathLike, *, capacity: int | None = None,
                  progress: Progress | None = None) -> CopySummary:
    """Every held episode of each buffer of ``srcs``, in that order, into a new buffer folder ``dst``,
    laid out like the first source.

    Raises:
        ValueError: no source, or two sources whose step spaces differ (names the sources and the first
            differing leaf).
        FormatError, StorageExistsError: as :func:`copy_episodes`. Nothing is written when one of these
            is raised; ``dst`` appears only whole, as in :func:`copy_episodes`.
    """
    if not srcs:
        raise ValueError("merge_buffers needs at least one source buffer")
    refuse_nested(srcs, dst)
    opened: list[ReplayBuffer] = []
    try:
        for path in srcs:
            opened.append(ReplayBuffer.load_from(path, read_only=True))
        first = opened[0]
        sep = getattr(first.storage, "nested_separator", "/")
        for path, rb in zip(srcs[1:], opened[1:]):
            diff = first_difference(first.space, rb.space, sep)
            if diff is not None:
                raise InvalidValueError(f"cannot merge {path} into {srcs[0]}: their step spaces differ: {diff}")
        return _write(dst, [(rb, [e.id for e in rb.episodes]) for rb in opened], template=first,
                      capacity=capacity, progress=progress)
    finally:
        for rb in opened:
            rb.close()


def refuse_nested(srcs: Iterable[str | os.PathLike], dst: str | os.PathLike) -> None:
    """Raise :class:`~trajstore.errors.StorageExistsError` unless ``dst`` is absent or an empty folder, then
    :class:`~trajstore.errors.InvalidValueError` (naming both) when ``dst`` lies inside one of ``srcs``
    (symlinks followed): a copy written there would land in its own source."""
    check_new_folder(dst)
    out = Path(dst).resolve()
    for src in srcs:
        if Path(src).resolve() in out.parents:
            raise InvalidValueError(f"the output folder {dst} lies inside the source {src}; pick an output "
                                    "folder outside the source (nothing was written)")


def _id_list(ids: list[int], limit: int = 10) -> str:
    text = ", ".join(str(i) for i in ids[:limit])
    return f"episode(s) {text}{', ...' if len(ids) > limit else ''}"


def _selected_ids(rb: ReplayBuffer, episodes: Iterable[int] | str | None, *, allow_empty: bool = False) -> list[int]:
    from trajstore.replay_buffer.episode_query import parse_selection

    held = rb.episodes
    if episodes is None:
        return [e.id for e in held]
    if isinstance(episodes, str):
        selection = parse_selection(episodes)
        ids = selection.select(held)
        what, why = selection.quoted, "; ".join(selection.missing_keys(held))
    else:
        ids = sorted({int(i) for i in episodes})
        known = {e.id for e in held}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(f"episodes {missing[:5]} are not held in {rb.cache_path}")
        what, why = "the episode list given", ""
    if not ids and not allow_empty:
        raise InvalidValueError(f"{what} selects no episode of the {len(held)} held in {rb.cache_path}"
                                f"{' (' + why + ')' if why else ''}; nothing was written (to write an empty "
                                "buffer: allow_empty=True, on the command line --allow-empty)")
    return ids


def _write(dst: str | os.PathLike, sources: list[tuple[ReplayBuffer, list[int]]], *, template: ReplayBuffer,
           capacity: int | None, progress: Progress | None, skip_damaged: bool = False,
           allow_empty: bool = True) -> CopySummary:
    """Build the new buffer in a hidden sibling of ``dst`` (:func:`~trajstore._fs.staged_folder`) and rename
    it to ``dst`` once every episode is committed and the buffer closed: ``dst`` is absent or whole, even
    after a kill; a failed or killed run's staging folder is removed (by the next run, after a kill)."""
    dst = Path(dst)
    storage_cls, kwargs = storage_kwargs_of(template.storage)
    written: list[tuple[str, int]] = []
    skipped: list[tuple[str, int]] = []
    try:
        with staged_folder(dst) as staging:
            out = ReplayBuffer.create(storage_cls, template.space, cache_path=staging, capacity=capacity,
                                      check_bounds=template.check_bounds, **kwargs)
            try:
                steps = _fill(out, sources, progress, skip_damaged, written, skipped)
                if skipped and not written and not allow_empty:  # raised here: the staging folder is removed
                    raise DamagedDataError(f"every selected episode is damaged ({_id_list([i for _, i in skipped])}"
                                           f" of {skipped[0][0]} fail to decode); nothing was written (to write "
                                           "an empty buffer: allow_empty=True, on the command line --allow-empty)")
                out.close()
            except BaseException:
                out.close(discard=True)  # its folder is removed next
                raise
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(exc, TrajstoreError):
            raise
        raise OSError(exc.errno, f"{dst}: {exc.strerror} while writing the copy; nothing was written") from exc
    return CopySummary(str(dst), len(written), steps, written, skipped)


def _fill(out: ReplayBuffer, sources: list[tuple[ReplayBuffer, list[int]]], progress: Progress | None,
          skip_damaged: bool, written: list[tuple[str, int]], skipped: list[tuple[str, int]]) -> int:
    """Copy the episodes of ``sources`` into ``out``, appending to ``written`` and ``skipped``; returns the
    number of steps copied."""
    steps = 0
    for rb, ids in sources:
        wanted = set(ids)
        for k, ep in enumerate(rb.episodes):
            if ep.id not in wanted:
                continue
            try:
                steps += _copy_episode(rb, k, out, progress)
            except FormatError:  # a payload that does not decode: the episode is damaged
                if not skip_damaged:
                    raise
                out.discard_episode()
                skipped.append((str(rb.cache_path), ep.id))
                continue
            written.append((str(rb.cache_path), ep.id))
    return steps


def _copy_episode(rb: ReplayBuffer, k: int, out: ReplayBuffer, progress: Progress | None) -> int:
    ep = rb.episode(k)
    batch = max(1, COPY_BATCH_BYTES // max(1, _step_bytes(rb.space)))
    for a in range(ep.start, ep.stop, batch):
        b = min(ep.stop, a + batch)
        out.extend(rb.get_at(slice(a, b)))
        if progress is not None:
            progress(b - a)
    data = ep.data
    if out.capacity is not None and "episode_key" in data:  # a ring cannot keep keys (ReplayBuffer.end_episode)
        warnings.warn(f"{rb.cache_path}: episode keys are not kept in a ring copy", stacklevel=4)
        data.pop("episode_key")
    end = out.end_episode(rb.final_observation(k), interrupted=ep.interrupted or not ep.done, **data)
    return 0 if end.duplicate else len(ep)  # a key copied already (a merge of copies): the episode once


def _step_bytes(space: Space) -> int:
    total = 0
    for _, leaf in tree.leaves(space):
        n = 1
        for d in getattr(leaf, "shape", ()):
            n *= int(d)
        total += n * getattr(getattr(leaf, "dtype", None), "itemsize", 8)
    return total
