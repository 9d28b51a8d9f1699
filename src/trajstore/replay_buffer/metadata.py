"""The buffer folder's metadata file, ``trajstore.json``: its format, atomic writes, change
signatures, and the rule that keeps it crash-safe while a ring overwrites slots. No data I/O.

The file names the format and version, the space, the storage's registered type and folder, the
ring state and the episode table's counters and log position. It is replaced atomically after the
data it describes is flushed, so a crash leaves the last committed state.

Format versions: 1 had episodes as ``ids``, ``starts``, ``stops``; 2 adds each episode's JSON
data, final observation number and interrupted flag, the counters ``final_count`` and
``discards``, and the ``final_observations`` storage (named only once one was stored). 3 moves the
closed episodes out of this file into the append-only episode log
(:mod:`~trajstore.replay_buffer.episode_log`), so that the file's size, and the cost of a commit,
no longer grow with the number of episodes; ``"episodes"`` keeps the counters and names the log.

Older folders: read-only, versions 1 and 2 open as they are (the table is read from this file).
Opened for writing, they are migrated at once, atomically: the log is written and fsynced, then
this file is replaced by its version 3 in one rename; a crash in between leaves the old folder as
it was plus an unnamed log file, which the next writer removes. Older trajstore releases refuse a
version 3 folder (a newer version) instead of misreading it.

An optional ``check_bounds: false`` (a buffer that stores values outside the space's bounds as
they are) is absent from folders that check bounds, the default. An optional ``stats`` key names
the committed statistics file (:mod:`~trajstore.replay_buffer.stats_keeper`); an optional
``priorities`` key the committed priority sets (:mod:`~trajstore.replay_buffer.priorities`; a trajstore
without them ignores the key, and its writer drops it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from trajstore._damage import damaged_file
from trajstore.errors import FormatError
from trajstore.replay_buffer.ring import RingState
from trajstore.spaces import Space
from trajstore._fs import read_json, write_json_atomic

META_FILE = "trajstore.json"
#: The commit number at the head of ``trajstore.json`` (see :func:`file_signature`).
_COMMIT = re.compile(rb'\{\s*"commit":\s*(\d+)')
STORAGE_DIR = "storage"
FORMAT = "trajstore.replay_buffer"
FORMAT_VERSION = 3


def write_meta(folder: Path, space: Space, storage_type: str, ring: RingState, episodes: dict[str, Any],
               final_observations: dict[str, Any] | None = None, stats: dict[str, Any] | None = None, *,
               check_bounds: bool = True, commit: int = 0, priorities: dict[str, Any] | None = None) -> None:
    """Atomically replace ``folder/trajstore.json`` (temp file, fsync, rename, fsync the folder).

    ``episodes`` is the table's counters and the committed log position
    (:func:`~trajstore.replay_buffer.episode_log.LogPosition.to_json` under ``"log"``), written after
    the log records it commits are durable.

    ``final_observations`` is the ``{"type", "dir"}`` of the final observation storage, once it exists;
    ``stats`` names the committed statistics file (:mod:`~trajstore.replay_buffer.stats_keeper`), if any.
    ``check_bounds`` is written only when False (the default of folders that do not name it).
    ``commit`` (the number of this commit, counted up by every writer) goes first, where
    :func:`file_signature` reads it. ``priorities`` names the committed priority sets' files
    (:mod:`~trajstore.replay_buffer.priorities`), if any.
    """
    meta = {"commit": commit, "format": FORMAT, "format_version": FORMAT_VERSION, "space": space.to_json(),
            "storage": {"type": storage_type, "dir": STORAGE_DIR},
            "ring": ring.to_json(), "episodes": episodes}
    if final_observations is not None:
        meta["final_observations"] = final_observations
    if not check_bounds:
        meta["check_bounds"] = False
    if stats is not None:
        meta["stats"] = stats
    if priorities:
        meta["priorities"] = priorities
    write_json_atomic(folder / META_FILE, meta)


def read_meta(folder: Path) -> dict[str, Any]:
    """The parsed metadata of a buffer folder.

    Raises:
        FormatError: ``folder`` is not a folder or has no ``trajstore.json`` (one line, no errno), a
            corrupt file, not a trajstore buffer, or a newer format version.
    """
    folder = Path(folder)
    if not folder.is_dir() or not (folder / META_FILE).is_file():
        what = "does not exist" if not folder.exists() else ("is a file" if not folder.is_dir()
                                                             else f"has no {META_FILE} ({folder / META_FILE} "
                                                                  "does not exist)")
        hint = ""
        if folder.is_dir() and (folder / "streams.json").is_file():
            raise FormatError(f"{folder} is a stream buffer: open it with StreamBuffer.load_from "
                              "(trajstore.streams)")
        if folder.is_dir() and (folder / "trajstore-dataset.json").is_file():
            raise FormatError(f"{folder} is a sharded dataset: its shards are buffer folders in {folder / 'shards'} "
                              f"(`trajstore info {folder}` lists them; commands take one shard's folder); in "
                              "Python, ShardedBuffer.load_from reads every shard as one buffer and "
                              "ShardedDataset.open(path).writer(name) writes one (trajstore.shards)")
        if not folder.exists() and (url := _collapsed_url(folder)):
            hint = (f" ({url} is a URL: commands that take a folder read a local one; `trajstore pull {url} "
                    "FOLDER` copies it here, and `trajstore info`, `episodes`, `stats` and "
                    "ReplayBuffer.load_from open the URL itself)")
        raise FormatError(f"{folder} is not a trajstore buffer folder: it {what}{hint}")
    with damaged_file(folder / META_FILE):
        meta = read_json(folder / META_FILE, "replay buffer metadata")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise FormatError(f"{folder / META_FILE} is not a trajstore replay buffer file")
        if int(meta.get("format_version", 0)) > FORMAT_VERSION:
            raise FormatError(f"{folder}: format version {meta['format_version']} is newer than this trajstore "
                              f"reads ({FORMAT_VERSION}); upgrade trajstore")
    return meta


def file_signature(folder: Path) -> tuple[int, int, int, int]:
    """Changes whenever the metadata file is replaced: (inode, mtime in ns, size, commit number).

    The commit number (``"commit"``, the file's first key, counted up by every commit) is what makes
    the signature safe: inode numbers are reused by the next replace, and on a kernel with coarse
    timestamps two commits of the same size within one clock tick share an mtime. It is read from the
    file's first bytes (-1 for a folder written before it existed).

    Raises:
        FileNotFoundError: the folder has no metadata file.
    """
    fd = os.open(folder / META_FILE, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        head = os.pread(fd, 64, 0)
    finally:
        os.close(fd)
    match = _COMMIT.match(head)
    return st.st_ino, st.st_mtime_ns, st.st_size, int(match.group(1)) if match else -1


def _collapsed_url(folder: Path) -> str | None:
    """``s3://b/rb`` given as a path reads ``s3:/b/rb`` (pathlib merges the slashes): that URL, else None."""
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]+):/([^/].*)", str(folder))
    return f"{match.group(1)}://{match.group(2)}" if match else None
