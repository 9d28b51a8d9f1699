"""Dataset names (``repo_id``) of a LeRobot export, checked as the Hugging Face Hub checks a repository id,
so that a name written in the card and the export's summary can be pushed and opened as it is.

Rules (``huggingface_hub.utils.validate_repo_id``, Hub repository names): ``namespace/name``, each part of
``A-Z a-z 0-9 . _ -`` only (ASCII: the Hub's site refuses other letters), not starting or ending with ``.``
or ``-``, no ``..`` or ``--``, the name at most :data:`MAX_REPO_ID` characters, not ending in ``.git``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_REPO_ID", "check_repo_id", "default_repo_id"]

#: Longest name (the part after ``/``) accepted.
MAX_REPO_ID = 96
_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")


def check_repo_id(repo_id: Any) -> str:
    """``repo_id`` when it is a Hub dataset name ``namespace/name`` (see the module docstring).

    Raises:
        ValueError: naming the id and the rule it breaks (raised before an export writes anything).
    """
    if not isinstance(repo_id, str):
        raise ValueError(f"repo_id must be a str 'namespace/name', got {type(repo_id).__name__}")
    parts = repo_id.split("/")
    why = None
    if len(parts) != 2:
        why = "it must be 'namespace/name' (one '/')"
    elif len(parts[1]) > MAX_REPO_ID or len(parts[0]) > MAX_REPO_ID:
        why = f"a part is longer than {MAX_REPO_ID} characters"
    elif ".." in repo_id or "--" in repo_id:
        why = "'..' and '--' are not allowed"
    elif not all(_PART.fullmatch(p) for p in parts):
        why = ("each part must be letters, digits, '.', '_' or '-', and not start or end with '.' or '-'")
    elif repo_id.endswith(".git"):
        why = "it may not end in '.git'"
    if why:
        raise ValueError(f"repo_id {repo_id!r:.120} is not a Hub dataset name: {why} (e.g. 'user/my_dataset')")
    return repo_id


def default_repo_id(folder_name: str) -> str:
    """``"local/<name>"`` for an export folder: the folder's name with every run of characters a Hub name
    cannot hold turned into ``_`` (``"my data"`` -> ``"local/my_data"``), ``..``/``--`` runs shortened,
    edges trimmed, cut to fit; ``"local/dataset"`` when nothing is left."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", folder_name)
    name = re.sub(r"\.{2,}", ".", re.sub(r"-{2,}", "-", name)).strip(".-")
    name = name[:MAX_REPO_ID].rstrip(".-")
    if name.endswith(".git"):
        name = name[:-4].rstrip(".-")
    return check_repo_id(f"local/{name or 'dataset'}")
