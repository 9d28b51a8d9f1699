"""The manifest of a published buffer: the one object a push replaces, last.

``trajstore-manifest.json`` (JSON)::

    {"format": "trajstore.remote", "version": 1, "generation": 7, "created": 1764561234.5,
     "files": {"trajstore.json": {"key": "objects/9f2c...", "size": 4711, "sha256": "9f2c...",
                                   "mtime_ns": 1764561234000000000, "kind": "small"},
               "storage/observation.pixels/chunks/000000.bin": {...}, ...}}

Every object it names was uploaded before it (payload first, metadata last), and objects are never
rewritten (their key is their content's SHA-256), so a reader that reads the manifest and then
the objects it names sees one whole committed state. A copy of each manifest is kept as
``manifests/<generation, 8 digits>.json`` while its objects are retained
(:mod:`~trajstore.remote.retention`). ``mtime_ns`` is the pusher's local
modification time, used only by the next push from the same folder to skip re-hashing unchanged
payload files (append-only, so a changed one has a new size). ``kind`` is ``"payload"`` or ``"small"``
as the folder's storages declared it at the push (:mod:`trajstore.storages.files`); a manifest
written before kinds were recorded has none, and a reader asks the storages' descriptors instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trajstore._json import loads_bounded
from trajstore.errors import FormatError
from trajstore.remote.layout import OBJECTS, PAYLOAD, SMALL, check_relpath

FORMAT = "trajstore.remote"
VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One file of the folder: its object ``key``, ``size`` in bytes, ``sha256`` (hex), local ``mtime_ns``,
    and ``kind`` (``"payload"``, ``"small"``, or ``None`` in a manifest that recorded none)."""

    key: str
    size: int
    sha256: str
    mtime_ns: int = 0
    kind: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "size": self.size, "sha256": self.sha256, "mtime_ns": self.mtime_ns}
        if self.kind is not None:
            out["kind"] = self.kind
        return out


@dataclass(frozen=True)
class Manifest:
    """``generation``: 1 for the first push, +1 each push; ``created``: when it was pushed (Unix seconds,
    the pusher's clock); ``files``: relative path -> :class:`Entry`."""

    generation: int
    files: dict[str, Entry]
    created: float = 0.0

    def to_bytes(self) -> bytes:
        return json.dumps({"format": FORMAT, "version": VERSION, "generation": self.generation,
                           "created": self.created,
                           "files": {p: e.to_json() for p, e in sorted(self.files.items())}},
                          indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> "Manifest":
        """Parse and check a manifest.

        Raises:
            FormatError: not JSON (or nested too deep, see :func:`trajstore._json.loads_bounded`), not a
                trajstore manifest, a newer version, or a bad entry (names ``where``).
        """
        doc = loads_bounded(data, source=where)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise FormatError(f"{where} is not a trajstore remote manifest")
        if not isinstance(doc.get("version"), int) or doc["version"] > VERSION:
            raise FormatError(f"{where}: manifest version {doc.get('version')!r} is newer than this trajstore "
                              f"reads ({VERSION}); upgrade trajstore")
        files = {}
        try:
            for path, e in doc["files"].items():
                key = e["key"]
                if not (isinstance(key, str) and key.startswith(OBJECTS + "/") and "/" not in key[len(OBJECTS) + 1:]
                        and ".." not in key):
                    raise FormatError(f"{where}: {path!r} names a bad object key {key!r}")
                kind = e.get("kind")
                if kind not in (None, PAYLOAD, SMALL):
                    raise FormatError(f"{where}: {path!r} has an unknown kind {kind!r}")
                files[check_relpath(path, where)] = Entry(key, int(e["size"]), str(e["sha256"]),
                                                          int(e.get("mtime_ns", 0)), kind)
            return cls(int(doc["generation"]), files, float(doc.get("created", 0.0)))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, FormatError):
                raise
            raise FormatError(f"{where}: a damaged manifest ({type(exc).__name__}: {exc})") from None
