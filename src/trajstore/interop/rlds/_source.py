"""A TFDS dataset directory holding an RLDS dataset: its builder folder, splits, shards and records.

Files (TFDS 4.x ``DatasetInfo``): ``dataset_info.json`` (``name``, ``version``, ``fileFormat``, ``splits``:
``name``, ``shardLengths`` (episodes per shard, as strings), ``filepathTemplate``, default
``{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}``), ``features.json`` (see
:mod:`~trajstore.interop.rlds._features`) and the shards ``<name>-<split>.tfrecord-00000-of-00002``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from trajstore._fs import path_inside, read_json
from trajstore.errors import FormatError, InvalidValueError
from trajstore.interop.rlds._example import Feature, parse_example
from trajstore.interop.rlds._features import (RldsFeatures, check_json_size, check_regular_file, json_int,
                                              read_features)
from trajstore.interop.rlds._tfrecord import RecordRef, iter_records

__all__ = ["DEFAULT_TEMPLATE", "RldsSource", "builder_dir", "iter_episodes", "open_source"]

DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_PLACEHOLDER = re.compile(r"\{([A-Z_]+)\}")
#: The most shards a split may declare.
MAX_SHARDS = 100_000
#: The most episodes one shard may declare.
MAX_SHARD_LENGTH = 1 << 40


@dataclass(frozen=True)
class RldsSource:
    """One split of an RLDS dataset.

    Attributes:
        root: the builder folder (``.../<name>/<version>``).
        name, version: from ``dataset_info.json``.
        split: the split read; ``splits`` every split it holds.
        features: the declared features.
        shards: the split's shard files, in order; ``shard_lengths`` their episode counts.
    """

    root: Path
    name: str
    version: str
    split: str
    splits: tuple[str, ...]
    features: RldsFeatures
    shards: tuple[Path, ...]
    shard_lengths: tuple[int, ...]

    @property
    def episodes(self) -> int:
        return sum(self.shard_lengths)


def builder_dir(src: str | os.PathLike) -> Path:
    """The builder folder: ``src`` if it holds ``dataset_info.json``, else its one subfolder that does.

    Raises:
        FileNotFoundError: ``src`` does not exist.
        FormatError: neither ``src`` nor exactly one of its subfolders holds ``dataset_info.json`` (names
            the versions found when there are several).
    """
    src = Path(src)
    if not src.exists():
        raise FileNotFoundError(f"{src} does not exist")
    if (src / "dataset_info.json").is_file():
        return src
    found = sorted(p for p in src.iterdir() if p.is_dir() and (p / "dataset_info.json").is_file()) \
        if src.is_dir() else []
    if len(found) == 1:
        path_inside(src, found[0].name, "RLDS dataset")
        return found[0]
    if not found:
        raise FormatError(f"{src}: no dataset_info.json in it or in a version folder below it (not a TFDS "
                          "dataset directory)")
    raise FormatError(f"{src} holds {len(found)} versions ({', '.join(p.name for p in found)}); give one of them")


def _text(info: dict, key: str, path: Path) -> str:
    value = info.get(key)
    if not isinstance(value, str) or not value:
        raise FormatError(f"{path}: {key!r} is not a non-empty string")
    return value


def _shard_name(template: str, fields: dict[str, str], path: Path) -> str:
    def one(m: re.Match) -> str:
        if m.group(1) not in fields:
            raise FormatError(f"{path}: filepathTemplate {template!r} uses {{{m.group(1)}}}; known: "
                              f"{', '.join(sorted(fields))}")
        return fields[m.group(1)]

    return _PLACEHOLDER.sub(one, template)


def _shard_lengths(lengths: object, where: str) -> tuple[int, ...]:
    if not isinstance(lengths, list):
        raise FormatError(f"{where}: shardLengths {lengths!r:.80} is not a list of integers")
    if not lengths or len(lengths) > MAX_SHARDS:
        raise FormatError(f"{where}: shardLengths lists {len(lengths)} shards (1 to {MAX_SHARDS} expected)")
    out = tuple(json_int(n, where, "a shardLengths entry") for n in lengths)
    bad = [n for n in out if not 0 <= n <= MAX_SHARD_LENGTH]
    if bad:
        raise FormatError(f"{where}: a shardLengths entry {bad[0]} outside 0..{MAX_SHARD_LENGTH}")
    if not sum(out):
        raise FormatError(f"{where} holds no episode (shardLengths {list(out)[:8]})")
    return out


def open_source(src: str | os.PathLike, split: str) -> RldsSource:
    """Read ``dataset_info.json`` and ``features.json`` of the dataset at ``src`` (the builder folder or its
    parent) and find the shards of ``split``; the shards are checked to exist, not yet read.

    Raises:
        FileNotFoundError: ``src`` does not exist.
        FormatError: not a TFDS dataset directory, malformed JSON entries, a format other than tfrecord, a
            shard path leading outside the folder, a shard missing (names it).
        InvalidValueError: an unknown ``split`` (names the splits held).
    """
    root = builder_dir(src)
    info_path = path_inside(root, "dataset_info.json", "TFDS dataset_info")
    check_json_size(info_path)
    info = read_json(info_path, "TFDS dataset_info")
    if not isinstance(info, dict):
        raise FormatError(f"{info_path}: not a JSON object")
    name, version = _text(info, "name", info_path), str(info.get("version", ""))
    file_format = info.get("fileFormat", "tfrecord")
    if file_format != "tfrecord":
        raise FormatError(f"{info_path}: fileFormat {file_format!r}; trajstore reads 'tfrecord' datasets")
    splits = info.get("splits")
    if not isinstance(splits, list) or not all(isinstance(s, dict) for s in splits):
        raise FormatError(f"{info_path}: 'splits' is not a list of objects")
    names = tuple(s.get("name") for s in splits)
    if not all(isinstance(n, str) and n for n in names):
        raise FormatError(f"{info_path}: a split whose 'name' is not a non-empty string")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FormatError(f"{info_path}: split {twice[0]!r} is listed twice")
    if split not in names:
        raise InvalidValueError(f"{root}: no split {split!r}; it holds {', '.join(names) or 'none'}")
    entry = splits[names.index(split)]
    shard_lengths = _shard_lengths(entry.get("shardLengths"), f"{info_path}: split {split!r}")
    template = entry.get("filepathTemplate") or DEFAULT_TEMPLATE
    if not isinstance(template, str):
        raise FormatError(f"{info_path}: split {split!r}: filepathTemplate is not a string")
    n = len(shard_lengths)
    shards = []
    for i in range(n):
        fields = {"DATASET": name, "SPLIT": split, "FILEFORMAT": file_format, "SHARD_INDEX": f"{i:05d}",
                  "NUM_SHARDS": f"{n:05d}", "SHARD_X_OF_Y": f"{i:05d}-of-{n:05d}"}
        shard = path_inside(root, _shard_name(template, fields, info_path), f"{info_path}: split {split!r}")
        if not shard.exists():
            raise FormatError(f"{root}: shard {shard.name} of split {split!r} is missing ({n} shards declared)")
        check_regular_file(shard, f"shard {i} of split {split!r}")
        shards.append(shard)
    if len({os.path.realpath(p) for p in shards}) != n:
        raise FormatError(f"{info_path}: split {split!r}: filepathTemplate {template!r} names one file for "
                          f"several of its {n} shards")
    features = read_features(path_inside(root, "features.json", "RLDS features"))
    return RldsSource(root, name, version, split, names, features, tuple(shards), shard_lengths)


def iter_episodes(source: RldsSource) -> Iterator[tuple[RecordRef, dict[str, Feature]]]:
    """Every episode of the split in stored order (shard by shard, record by record): its record and its
    parsed features, one at a time.

    Raises:
        FormatError: a damaged record (see :func:`~trajstore.interop.rlds._tfrecord.iter_records`), a
            record that is not a ``tf.train.Example``, a shard holding another number of records than
            ``shardLengths`` says (names the shard).
    """
    for shard, declared in zip(source.shards, source.shard_lengths):
        held = 0
        for ref, payload in iter_records(shard):
            if held == declared:
                raise FormatError(f"{shard}: holds more than the {declared} records dataset_info.json declares")
            held += 1
            yield ref, parse_example(payload, ref.where())
        if held != declared:
            raise FormatError(f"{shard}: holds {held} records, dataset_info.json declares {declared}")
