"""The folder of a sharded dataset: names and the shard listing (no buffer logic here).

::

    fleet/
      trajstore-dataset.json   {"format": "trajstore.dataset", "version": 1}: what makes it a dataset
      template/                an empty buffer folder: the space, storage layout and options every shard copies
      shards/<name>/           one buffer folder per writer (its own trajstore.json, episode log, writer.lock)
      keys.lock                flock taken around the commit of an episode with an ``episode_key``

A shard's name is a plain file name (letters, digits, ``._-``; not starting with a dot). A shard
exists once its folder holds ``trajstore.json``: shards are made as a hidden copy of ``template/`` and
renamed into place, so a reader never lists a half-made one.
"""

from __future__ import annotations

import re
from pathlib import Path

DATASET_FILE = "trajstore-dataset.json"
DATASET_FORMAT = "trajstore.dataset"
DATASET_VERSION = 1
TEMPLATE_DIR = "template"
SHARDS_DIR = "shards"
KEYS_LOCK = "keys.lock"
#: A shard name: a plain, visible file name.
SHARD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def is_dataset(path: str | Path) -> bool:
    """Whether ``path`` (a local folder) holds a sharded dataset."""
    return (Path(path) / DATASET_FILE).is_file()


def check_shard_name(name: object) -> str:
    """``name`` if it is a valid shard name.

    Raises:
        TypeError: not a str.
        ValueError: not 1-128 characters of letters, digits and ``._-``, or starting with ``.`` or ``-``.
    """
    if not isinstance(name, str):
        raise TypeError(f"a shard name must be a str, got {type(name).__name__}")
    if not SHARD_NAME.fullmatch(name):
        raise ValueError(f"shard name {name!r}: expected 1-128 letters, digits or '._-', not starting with '.' or '-'")
    return name


def shard_names(path: str | Path) -> list[str]:
    """The committed shards of the dataset at ``path``, sorted by name (the global numbering's order).
    A symbolic link is not a shard (it could name another shard, or a folder outside the dataset)."""
    root = Path(path) / SHARDS_DIR
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if SHARD_NAME.fullmatch(p.name) and not p.is_symlink() and (p / "trajstore.json").is_file())
