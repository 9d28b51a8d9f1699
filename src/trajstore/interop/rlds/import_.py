"""Import an RLDS / Open X-Embodiment dataset (a TFDS dataset directory) into a new trajstore buffer folder:
what ``trajstore import rlds DIR OUT`` calls. No TensorFlow: TFRecord framing, ``tf.train.Example`` and
``features.json`` are read here (see :mod:`~trajstore.interop.rlds._tfrecord`,
:mod:`~trajstore.interop.rlds._example`, :mod:`~trajstore.interop.rlds._features`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import staged_folder
from trajstore.errors import InvalidValueError
from trajstore.interop.rlds._episode import decode_image, step_values
from trajstore.interop.rlds._example import parse_example
from trajstore.interop.rlds._plan import TERMINATED, ImportPlan, plan_import
from trajstore.interop.rlds._source import open_source
from trajstore.interop.rlds._tfrecord import read_record
from trajstore.interop.summary import ImportSummary

__all__ = ["BLOCK_BYTES", "BLOCK_STEPS", "DEFAULT_FPS", "import_rlds"]

#: Camera fps (Hz) when ``fps`` is not given: RLDS keeps no rate. 10 Hz is a common OXE control rate.
DEFAULT_FPS = 10
#: Steps decoded and appended at a time, at most: bounds the decoded frames held (the record itself is
#: held whole, as it is one episode).
BLOCK_STEPS = 64
#: Bytes of decoded images per block, at most (a block has at least one step).
BLOCK_BYTES = 64 << 20


def _fps(fps: Any) -> Any:
    if fps is None:
        return DEFAULT_FPS
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a positive number of frames per second, got {fps!r}")
    return int(fps) if float(fps).is_integer() else float(fps)


def import_rlds(src: str | os.PathLike, out: str | os.PathLike, *, split: str = "train",
                episodes: Iterable[int] | str | None = None, key_map: Mapping[str, str] | None = None,
                camera: str = "jpeg", fps: float | None = None, progress: bool = False) -> ImportSummary:
    """Copy one split of an RLDS dataset (TFDS ``tfrecord`` files, the Open X-Embodiment layout) into a new
    unbounded buffer folder ``out``: one RLDS episode (one ``tf.train.Example`` record) -> one episode, one
    RLDS step -> one step.

    - ``steps/<a>/<b>`` features become leaves ``a/b`` of the step's ``DictSpace`` (``steps/observation/state``
      -> ``rb[i]["observation"]["state"]``), with the shape and dtype of ``features.json``; Scalars have
      shape ``()``; bools (stored as int64 0/1) become ``BinarySpace`` leaves.
    - RGB ``Image`` features (uint8 ``(H, W, 3)``, PNG or JPEG, decoded with Pillow) become camera leaves
      with metadata ``{"kind": "image", "layout": "HWC", "fps": fps}``, stored as ``camera`` says; other
      images (grey, RGBA, uint16 depth) are plain leaves of their shape and dtype (exact, in HDF5).
    - ``is_terminal`` -> leaf ``terminated`` (bool, shape ``()``; all False when the dataset has no
      ``is_terminal``). ``is_first``/``is_last`` are checked (0/1, true only at the first / last step) and
      not kept: they are the episode's boundaries.
    - A leaf ``truncated`` (bool, shape ``()``) is added: ``is_last and not is_terminal``, RLDS's mark of an
      episode cut by a time limit (``is_last`` absent: the last step). So ``terminated``/``truncated`` are
      there for ``rb.sample_transitions``. A ``key_map`` target named ``terminated``/``truncated`` replaces it.
    - ``language_instruction`` -> episode data ``task`` (a list in order of first use when it changes within
      an episode); when it changes within any imported episode it is also a per-step ``TextSpace`` leaf
      ``language_instruction``.
    - ``episode_metadata/<k>`` (and any other top-level feature) -> episode data ``k`` (text decoded as
      UTF-8, nested names as nested dicts), plus ``rlds_index``: the episode's position in the split. So
      ``episodes='file_path == "synthetic/episode_0.npz"'`` selects by metadata.
    - The root space's metadata is ``{"rlds": {"name": ..., "version": ..., "split": ...}}``.

    Args:
        src: the builder folder (``.../<name>/<version>``, holding ``dataset_info.json``) or its parent when it
            holds exactly one version.
        out: the buffer folder to make (absent or empty); it appears only once the import is complete.
        split: the TFDS split (``"train"``).
        episodes: source positions (stored order: TFDS shuffles by key hash, so position is not generation
            order), a selection text (``"0,3-5"`` or an expression over the episode data), or None for all.
        key_map: ``{step feature: leaf path}``, feature names without ``steps/`` (``{"observation/image":
            "observation/images/front"}``); naming ``is_first``, ``is_last`` or ``language_instruction`` keeps
            it as a leaf.
        camera: ``"jpeg"`` (default, lossy), ``"png"`` (exact) or ``"video"``.
        fps: the cameras' rate in Hz (RLDS keeps none); default :data:`DEFAULT_FPS` (10).
        progress: show a progress bar (steps) on stderr.

    Limits (hostile files are refused before anything is allocated for them): a declared image of more than
    :data:`~trajstore.interop.rlds._features.MAX_FRAME_BYTES` (64 MiB) decoded per frame, each image's
    header size checked against ``features.json`` before its pixels are decoded; at most 100 000 shards per
    split; a per-step text of at most :data:`~trajstore.interop.rlds._plan.MAX_TEXT_CHARS` (4096)
    characters, the text leaf as wide as the longest text of the imported episodes.

    Raises:
        FileNotFoundError: ``src`` does not exist.
        FormatError: not a TFDS dataset directory (or several versions), a JSON file or shard that is not a
            regular file (a folder, a FIFO), a JSON value of the wrong type (``shardLengths`` not a list of
            integers, a dimension that is not an integer, ``tensor``/``image`` not an object; names the file
            and key), a split listed twice, more than 100 000 shards, two shards naming one file, a split of
            no episode, a declared image beyond the frame bound, a shard missing or its path leading
            outside ``src``, a record cut short or longer than the file, a CRC32C mismatch (names the file and
            record number), a malformed protobuf (varint or length beyond its message), a feature missing, of
            the wrong list kind or count (not T x its size, T = the length of ``steps/is_first``), ``is_first``
            or ``is_last`` true elsewhere than the first / last step, a shard holding another number of records
            than ``dataset_info.json``, an image that is not PNG/JPEG of the declared size (or that Pillow
            refuses, a decompression bomb), ``is_first``/``is_last``/bools other than 0/1, a float that
            overflows its declared dtype (float16), a NaN step value, a per-step text longer than 4096
            characters, episode metadata named like a key the import sets. All found before ``out`` is made,
            except undecodable image pixels (found while copying; ``out`` is then not made).
        UnsupportedSpaceError: a feature trajstore cannot hold (dynamic shape, ClassLabel, ...).
        InvalidValueError: an unknown ``split`` (names those held), a bad ``episodes`` selection, a ``key_map``
            naming an unknown feature (names those held) or giving a bad or clashing leaf path.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        ValueError: an unknown ``camera``, a bad ``fps``.
    """
    from tqdm import tqdm

    from trajstore._cameras import camera_routing
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    routing = camera_routing(camera)
    rate = _fps(fps)
    source = open_source(src, split)
    plan = plan_import(source, episodes, key_map, rate)
    out = Path(out)
    with staged_folder(out) as staging, tqdm(total=plan.steps, unit="step", disable=not progress,
                                             desc=f"import {source.name}") as bar:
        with ReplayBuffer.create(DictStorage, plan.space, cache_path=staging,
                                 **dict_storage_kwargs_from_space(plan.space, **routing)) as rb:
            _copy(plan, rb, bar)
    return ImportSummary(out, len(plan.episodes), plan.steps,
                         {leaf.spec.key: "/".join(leaf.path) for leaf in plan.leaves if leaf.spec is not None})


def _block_steps(plan: ImportPlan) -> int:
    frame_bytes = sum(leaf.spec.size * np.dtype(leaf.spec.dtype).itemsize for leaf in plan.leaves
                      if leaf.spec is not None and leaf.spec.kind == "image")
    return max(1, min(BLOCK_STEPS, BLOCK_BYTES // max(frame_bytes, 1)))


def _flag(plan: ImportPlan, example: Any, name: str, steps: int, where: str) -> np.ndarray | None:
    spec = next((s for s in plan.source.features.steps if s.name == name), None)
    return None if spec is None else step_values(example, spec, steps, where).reshape(steps) != 0


def _made(plan: ImportPlan, example: Any, name: str, steps: int, where: str) -> np.ndarray:
    """The leaves the import makes: ``terminated`` (no ``is_terminal`` declared: all False) and
    ``truncated`` = ``is_last and not is_terminal`` (``is_last`` absent: the last step)."""
    terminal = _flag(plan, example, "is_terminal", steps, where)
    terminal = np.zeros(steps, bool) if terminal is None else terminal
    if name == TERMINATED:
        return terminal
    last = _flag(plan, example, "is_last", steps, where)
    if last is None:
        last = np.arange(steps) == steps - 1
    return last & ~terminal


def _copy(plan: ImportPlan, rb: Any, bar: Any) -> None:
    block = _block_steps(plan)
    for episode in plan.episodes:
        where = episode.ref.where()
        example = parse_example(read_record(episode.ref), where)
        values = {leaf.path: step_values(example, leaf.spec, episode.steps, where) if leaf.spec is not None
                  else _made(plan, example, leaf.path[-1], episode.steps, where) for leaf in plan.leaves}
        del example
        for start in range(0, episode.steps, block):
            stop = min(start + block, episode.steps)
            batch: dict[str, Any] = {}
            for leaf in plan.leaves:
                part = values[leaf.path][start:stop]
                if leaf.spec is not None and leaf.spec.kind == "image":
                    part = np.stack([decode_image(data, leaf.spec, f"{where}: {leaf.spec.key!r} step {start + i}")
                                     for i, data in enumerate(part)])
                node = batch
                for key in leaf.path[:-1]:
                    node = node.setdefault(key, {})
                node[leaf.path[-1]] = part
            try:
                rb.extend(batch)
            except InvalidValueError as exc:
                raise InvalidValueError(f"{where}: steps {start}..{stop - 1}: {exc}") from None
            bar.update(stop - start)
        rb.end_episode(flush=False, **episode.data)
