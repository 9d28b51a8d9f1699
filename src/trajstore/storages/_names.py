"""Keys become file and dataset names here, and only here: checked, encoded, never able to escape a folder."""

from __future__ import annotations

import hashlib
import re

_SAFE_CHAR = re.compile(r"[A-Za-z0-9_\-]")
MAX_NAME = 200  # bytes; below the common 255-byte limit of a file name


def safe_name(key: str, separator: str = "/") -> str:
    """A readable, reversible file name for a nested key.

    The separator becomes ``.``; characters outside ``[A-Za-z0-9_-]`` become ``%XX``
    (UTF-8 bytes), so ``..``, absolute paths and other separators can never escape the folder.
    ``"*"`` (every leaf not listed) becomes ``@rest``, which no encoded key can produce. Names
    longer than :data:`MAX_NAME` keep a prefix and gain a hash of the key (``~`` + 16 hex digits).
    """
    if key == "*":
        return "@rest"
    parts = key.split(separator)
    name = ".".join("".join(c if _SAFE_CHAR.match(c) else "".join(f"%{b:02X}" for b in c.encode())
                            for c in part) for part in parts)
    if len(name) > MAX_NAME:  # file systems refuse names over 255 bytes: keep a readable prefix + a hash
        name = f"{name[:MAX_NAME - 17]}~{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return name


def check_key(key: str, separator: str) -> None:
    """Refuse a key that cannot name a storage: empty parts, ``.``/``..`` parts, NUL.

    Raises:
        ValueError: naming the key and the rule it breaks.
    """
    if key == "*":
        return
    if not isinstance(key, str) or not key:
        raise ValueError(f"storage key {key!r} must be a non-empty str")
    for part in key.split(separator):
        if part in ("", ".", ".."):
            raise ValueError(f"storage key {key!r}: part {part!r} is not allowed "
                             f"(no empty, '.' or '..' parts; nested keys are joined by {separator!r})")
        if "\x00" in part:
            raise ValueError(f"storage key {key!r} contains a NUL character")
