"""A map-style ``torch.utils.data.Dataset`` over the steps of a replay buffer.

Safe with DataLoader workers, fork or spawn: under spawn the dataset pickles as a
reference to the buffer folder and each worker reopens it read-only; under fork the
buffer notices the new process on first use and reopens its files (an HDF5 handle never
crosses a fork). Create or load the buffer with ``multiprocessing=True`` when a writer may
append while the workers read.

Camera frames: ``image_layout="CHW"`` and ``image_dtype="float32"`` choose how camera leaves come out
(:mod:`~trajstore.training.images`). With workers, keep ``image_dtype="uint8"`` (a quarter of the bytes
through the workers' queue and the pinned copy) and convert on the main side::

    ds = ReplayBufferDataset(path, image_layout="CHW")
    norm = ds.normalizer(image_dtype="float32")       # rb.stats(); frames skipped (images="per_channel": normalised)
    for batch in DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True):
        batch = norm.normalize(images_to_float(batch, ds.image_keys, device="cuda"))
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from torch.utils.data import Dataset

from trajstore.backends import to_torch
from trajstore.errors import RetriesExhaustedError, StaleReadError
from trajstore.training.images import (camera_leaves, check_image_options, convert_frames, images_to_float,
                                       unconverted_cameras)
from trajstore.training.normalizer import Normalizer  # re-exported: trajstore.training.torch.Normalizer
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.training_api import TrainingAPI
from trajstore.replay_buffer.view import MAX_READ_ATTEMPTS


__all__ = ["ReplayBufferDataset", "Normalizer", "images_to_float"]

#: The key of a window item's padding flags.
IS_PAD = "is_pad"


class ReplayBufferDataset(Dataset):
    """Item ``i`` of a replay buffer (a step, or the window at anchor ``i``) as a nested dict of torch
    tensors (text leaves as ``str``).

    Args:
        buffer: a :class:`ReplayBuffer`, the path of a buffer folder, or the URL of a pushed buffer
            (``s3://bucket/rb``), opened read-only; or an aligned view of a stream buffer
            (``StreamBuffer.aligned(...)``: it pickles as its folder and arguments); or a sharded dataset
            (:class:`~trajstore.shards.ShardedBuffer`, or its folder's path: every shard as one buffer).
        storage_options: fsspec options (endpoint, credentials) for a URL ``buffer``, as for
            :meth:`ReplayBuffer.load_from`; ``TypeError`` with a :class:`ReplayBuffer`.
        transform: optional function applied to each item (nested dict of tensors).
        refresh: a live buffer: re-read the writer's flushed state before each ``len()`` and each
            read, in every worker (also with ``persistent_workers``); indices wrap modulo the
            current length, since a ring's view moves while the writer appends.
        delta_indices: windows instead of steps: item ``i`` is the window anchored at valid anchor
            ``i`` (``rb.windows_at``; anchors numbered in step order, every one exactly once, so an
            epoch, ``shuffle=True`` and ``DistributedSampler`` see each anchor once). Offsets as in
            ``rb.sample_windows``: a named leaf is ``(T, ...)``, another leaf is read at the anchor
            only; the item also has the key ``"is_pad"``: ``{name: bool tensor (T,)}``.
        delta_timestamps: an aligned view only: ``{stream: seconds}`` offsets from each anchor's time
            (``view.sample_windows``); item ``i`` is the window at step ``i``, with ``"is_pad"`` as above.
        pad: as in ``rb.sample_windows``: ``True`` (default) makes every held step an anchor and pads
            at episode boundaries; ``False`` keeps only anchors whose offsets all fall inside their episode.
        episodes: episode ids (``Episode.id``, e.g. from ``rb.split_episodes``): only the steps (or
            anchors) inside those episodes, in step order.
        on_damaged: a buffer with payload files missing (``rb.damaged``): ``"raise"`` (default) raises
            ``FormatError`` here when an episode of the dataset is damaged; ``"skip"`` leaves the damaged
            episodes out (``len`` counts the others; no item is a damaged step).
        image_layout: camera leaves (:attr:`image_keys`: metadata ``kind`` ``"image"``, ``"camera"`` or
            ``"rgb"``, uint8, 3-axis stored HWC or CHW, or grayscale ``(H, W)``;
            :func:`~trajstore.training.images.camera_leaves`) as ``"HWC"`` (default, as stored) frames
            ``(H, W, C)`` or ``"CHW"`` frames ``(C, H, W)``; in a window ``(T, H, W, C)`` / ``(T, C, H, W)``.
            A grayscale ``(H, W)`` leaf is one channel: ``(1, H, W)`` in CHW, ``(H, W)`` in HWC. Another
            leaf of a camera ``kind`` (uint16, 4 axes) stays as stored, with a ``UserWarning`` here naming it
            when ``image_layout`` or ``image_dtype`` is not the default.
        image_dtype: camera leaves as ``"uint8"`` (default) or ``"float32"`` (``value / 255``, in ``[0, 1]``).
            With DataLoader workers prefer ``"uint8"`` and :func:`images_to_float` on the main side:
            float32 frames are 4x the bytes through the workers' queue.

    ``len(dataset)`` is the number of steps (or valid anchors) held when it was last refreshed. Given
    a writer's buffer, ``len()`` flushes it first: workers read the folder, which holds only flushed
    steps. Indexing follows the buffer's logical order (0 = oldest). Batched access (``__getitems__``,
    used by DataLoader with automatic batching) reads the whole batch in one buffer call.

    Many trainers: give each rank ``DataLoader(dataset, sampler=DistributedSampler(dataset, seed=s))``
    and call ``sampler.set_epoch(epoch)`` every epoch. Each rank then reads ``ceil(len / world_size)``
    items; the ranks' shards are disjoint and together hold every step (or anchor) once, from one
    permutation per epoch that every rank computes alike. When ``len % world_size != 0`` the sampler
    repeats the first items of the permutation to even the shards (``drop_last=True`` drops the
    extra items instead: disjoint, not complete). Every rank must see the same ``len``: give a
    read-only folder that no writer changes during the epoch (not ``refresh=True``).

    The request (offsets, padding, episodes) is checked once, here (``rb.window_request``), and the
    same :attr:`request` serves every ``len()`` and batch, in every worker.

    Raises:
        UnknownLeafError: a name in ``delta_indices`` that is not in the space (a ``KeyError`` and ``ValueError``).
        ValueError: ``delta_indices`` or ``episodes`` that the buffer refuses (see ``rb.sample_windows``);
            windows over a space with a top-level key ``"is_pad"``; a bad ``on_damaged``, ``image_layout``
            or ``image_dtype``.
        FormatError: ``on_damaged="raise"`` and a damaged episode in the dataset.
        TypeError: ``pad`` without ``delta_indices``; ``storage_options`` with an open buffer.

    Reading a batch raises ``RetriesExhaustedError`` (with ``refresh=True``) when the writer kept
    overwriting the steps being read on every attempt; ``StaleReadError`` without ``refresh``.
    """

    def __init__(self, buffer: ReplayBuffer | str | os.PathLike, *, transform: Callable[[Any], Any] | None = None,
                 multiprocessing: bool = True, refresh: bool = False, delta_indices: Mapping[str, Any] | None = None,
                 pad: bool | None = None, episodes: Iterable[int] | None = None,
                 storage_options: dict[str, Any] | None = None, on_damaged: str = "raise",
                 delta_timestamps: Mapping[str, Any] | None = None, image_layout: str = "HWC",
                 image_dtype: str = "uint8"):
        image_layout, image_dtype = check_image_options(image_layout, image_dtype)
        if not isinstance(buffer, TrainingAPI):  # a ReplayBuffer or an aligned view
            from trajstore.shards.reader import open_read_only  # a sharded dataset's folder opens as one buffer

            buffer = open_read_only(buffer, multiprocessing=multiprocessing, storage_options=storage_options)
        elif storage_options is not None:
            raise TypeError("storage_options go with a path or URL; this buffer is already open")
        windows = delta_indices is not None or delta_timestamps is not None
        if not windows and pad is not None:
            raise TypeError("pad goes with delta_indices")
        # An aligned view's "is_pad" holds its streams' flags: the windows' flags extend it.
        self._own_pad = bool(getattr(buffer, "own_is_pad", False))
        if windows and IS_PAD in _top_keys(buffer.space) and not self._own_pad:
            raise ValueError(f"the space has a key {IS_PAD!r}: windows cannot add their padding flags")
        self.buffer = buffer
        self.transform = transform
        self.refresh = refresh
        self.delta_indices = dict(delta_indices) if delta_indices is not None else None
        self.windows = windows
        self.pad = True if pad is None else bool(pad)
        #: The checked request every ``len()`` and batch reuses (offsets, padding, episodes): built once here.
        times = {} if delta_timestamps is None else {"delta_timestamps": delta_timestamps}
        self.request = buffer.window_request(self.delta_indices, pad=self.pad, episodes=episodes,
                                             on_damaged=on_damaged, **times)
        self.episodes = None if self.request.episodes is None else list(self.request.episodes)
        self.image_layout, self.image_dtype = image_layout, image_dtype
        # {path: stored layout} of the camera leaves a read converts (none: items as read)
        self._frames = camera_leaves(buffer.space)
        self._convert = {p: s for p, s in self._frames.items() if s != image_layout or image_dtype != "uint8"}
        #: The camera leaves (names joined by ``"/"``) that ``image_layout`` and ``image_dtype`` apply to.
        self.image_keys = ["/".join(p) for p in self._frames]
        defaults = (image_layout, image_dtype) == ("HWC", "uint8")
        skipped = {} if defaults and not self._convert else unconverted_cameras(buffer.space)
        if skipped:
            warnings.warn(f"image_layout={image_layout!r} / image_dtype={image_dtype!r} leave these camera leaves as "
                          f"stored (only uint8 (H, W, C), (C, H, W) or (H, W) frames convert): "
                          + "; ".join(f"{k!r} ({v})" for k, v in skipped.items()), UserWarning, stacklevel=2)

    def normalizer(self, mode: str = "mean_std", eps: float = 1e-8, *, stats: Mapping[str, Any] | None = None,
                   image_dtype: str | None = None, images: str = "skip") -> Normalizer:
        """A :class:`Normalizer` of ``stats`` (default ``buffer.stats()``) for this dataset's items: its
        camera leaves (:attr:`image_keys`) skipped (``images="skip"``, the default: passed through as
        the dataset gives them) or normalised per channel (``images="per_channel"``) in :attr:`image_layout`
        and ``image_dtype`` (default :attr:`image_dtype`; give ``"float32"`` for batches converted by
        :func:`images_to_float`).

        Raises:
            ValueError: a bad ``mode``, ``eps``, ``image_dtype`` or ``images``.
        """
        stats = self.buffer.stats() if stats is None else stats
        dtype = self.image_dtype if image_dtype is None else image_dtype
        return Normalizer(stats, mode, eps, image_keys=self.image_keys, image_layout=self.image_layout,
                          image_dtype=dtype, images=images)

    def __len__(self) -> int:
        if not self.buffer.read_only:
            # Workers reopen the folder and see only what was flushed: flush so they see every step.
            self.buffer.flush()
        elif self.refresh:
            self.buffer.refresh()
        return self._count()

    def _count(self) -> int:
        if not self.windows and self.episodes is None:
            return len(self.buffer)
        return self.buffer.count_anchors(self.request)

    def _indices(self, indices: Any) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        if self.refresh:
            # A live buffer: workers see the writer's newest flushed steps. A ring's view moves
            # (and briefly shrinks while the writer overwrites), so indices wrap onto the current one.
            self.buffer.refresh()
            idx = idx % max(1, self._count())
        return idx

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        batch = self._read(indices)
        return [self._one(batch, i) for i in range(len(indices))]

    def _read(self, indices: Any) -> Any:
        batch = self._read_raw(indices)
        for path, stored in self._convert.items():
            batch = _replace(batch, path, lambda a, s=stored: convert_frames(a, s, self.image_layout, self.image_dtype))
        return batch

    def _read_raw(self, indices: Any) -> Any:
        for _ in range(MAX_READ_ATTEMPTS):
            try:
                idx = self._indices(indices)
                rb = self.buffer
                if self.windows:
                    data, is_pad = rb.windows_at(idx, self.request)
                    return {**data, IS_PAD: {**data[IS_PAD], **is_pad} if self._own_pad else is_pad}
                if self.episodes is not None:
                    idx = rb.anchors_at(idx, self.request)
                return rb[idx]
            except StaleReadError:
                if not self.refresh:
                    raise
        raise RetriesExhaustedError(f"the writer of {self.buffer.cache_path} kept overwriting the steps being read "
                                    f"({MAX_READ_ATTEMPTS} attempts)")

    def _one(self, batch: Any, i: int) -> Any:
        item = to_torch(_take(batch, i))
        return self.transform(item) if self.transform else item


def _take(batch: Any, i: int) -> Any:
    """Row ``i`` of every array of a nested dict."""
    if isinstance(batch, dict):
        return {k: _take(v, i) for k, v in batch.items()}
    return batch[i]


def _replace(batch: Any, path: tuple[str, ...], fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``batch`` with ``batch[path] = fn(batch[path])`` (a nested dict, in place; ``()``: the batch itself);
    a path not in the batch is skipped."""
    if not path:
        return fn(np.asarray(batch))
    node = batch
    for k in path[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if isinstance(node, dict) and path[-1] in node:
        node[path[-1]] = fn(np.asarray(node[path[-1]]))
    return batch


def _top_keys(space: Any) -> set[str]:
    """Top-level keys of a dict space (empty for another space)."""
    return set(getattr(space, "spaces", {}) or {})
