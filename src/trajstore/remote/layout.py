"""Which files of a buffer folder are *payload* and which are *small*, and where they go in a bucket.

A published buffer (``trajstore push``) is, under its URL::

    trajstore-manifest.json      the one mutable object: maps every file of the folder to its object
    objects/<sha256, 32 hex>     the files' bytes, named by their content (immutable)

*Payload* files are the image chunks (``.../chunks/NNNNNN.bin``) and the video segments
(``.../segments/NNNNNNNN.mp4``): big, append-only or written once, read remotely by byte range (a
frame) or whole (a segment). Every other file (``trajstore.json``, the episode log, ``stats.json``,
``storage.json``, ``index.log``, ``data.h5``, ``data.bin``) is *small* metadata or low-dimensional
data: a reader downloads them all once when it opens the buffer.

Not published: the writer's lock and files a writer is still building (``*.tmp``, hidden names).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trajstore._lock import LOCK_FILE
from trajstore._urls import MANIFEST_NAME

MANIFEST = MANIFEST_NAME
OBJECTS = "objects"
# The image storage's chunk names (image.chunk_name) and the video storage's segment names (video.segment_name).
_PAYLOAD = re.compile(r"(?:^|/)(?:chunks/\d{6,}\.bin|segments/\d{8,}\.mp4)$")


def is_payload(relpath: str) -> bool:
    """True for an image chunk or a video segment (``relpath`` uses ``/``)."""
    return _PAYLOAD.search(relpath) is not None


def is_published(relpath: str) -> bool:
    """False for the writer's lock and for temporary files (``*.tmp``, ``*.partial``, hidden names)."""
    name = relpath.rsplit("/", 1)[-1]
    return name != LOCK_FILE and not name.startswith(".") and not name.endswith((".tmp", ".partial"))


def folder_files(folder: Path) -> list[str]:
    """Relative paths (``/``-separated, sorted) of the published files under ``folder``."""
    out = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel_top = Path(top).relative_to(folder).as_posix()
        for name in files:
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if is_published(rel):
                out.append(rel)
    return sorted(out)


def object_key(sha256_hex: str) -> str:
    """``objects/<first 32 hex digits of the SHA-256>``: 128 bits, so two different files never meet."""
    return f"{OBJECTS}/{sha256_hex[:32]}"


def check_relpath(relpath: str, where: str) -> str:
    """A manifest's file path, checked before it becomes a local path: relative, no ``..``, no ``\\``.

    Raises:
        FormatError: names ``where`` (the manifest) and the path.
    """
    from trajstore.errors import FormatError

    parts = relpath.split("/")
    if (not relpath or relpath.startswith("/") or "\\" in relpath or "\0" in relpath
            or any(p in ("", ".", "..") for p in parts)):
        raise FormatError(f"{where} names an unsafe file path {relpath!r}")
    return relpath
