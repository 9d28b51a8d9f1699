"""The dataset card (``README.md``) of a LeRobot export, as the Hugging Face Hub reads it.

LeRobot 0.4.4 writes a card when it pushes a dataset (``lerobot.datasets.utils.create_lerobot_dataset_card``):
a YAML header with ``license`` (``apache-2.0`` unless told), ``task_categories: [robotics]``,
``tags: [LeRobot, ...]`` and one ``configs`` entry whose ``data_files`` are ``data/*/*.parquet`` (so the
Hub's viewer and ``datasets.load_dataset`` find the frames), then a body whose "Dataset Structure"
section holds ``meta/info.json`` in a ``json`` code block. The card written here has the same header
keys in the same order and the same sections, with trajstore's own text.

The header is written by hand (no YAML library is a trajstore dependency): keys are fixed, and
every value that is not a plain word is a double-quoted JSON string, which YAML reads as the same
string. Tags and the license are checked first, so a hostile tag cannot add header keys.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Sequence

__all__ = ["write_dataset_card", "card_text", "DEFAULT_LICENSE", "CARD_NAME"]

#: The license LeRobot puts on a card when none is given (``LeRobotDataset.push_to_hub``).
DEFAULT_LICENSE = "apache-2.0"
#: The card's file name at the dataset root.
CARD_NAME = "README.md"
#: The Hub's license identifiers are lowercase words joined by ``-``, ``.`` or ``+`` (``cc-by-nc-4.0``).
_LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")
#: A YAML 1.1 plain scalar that reads back as this very string.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
#: Plain words YAML 1.1 (PyYAML, the Hub's parser) reads as booleans or null.
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
#: The info.json entry trajstore keeps for its import (:mod:`._trajstore_meta`); not shown in the card.
PRIVATE_ENTRY = "trajstore"
_MAX_TAGS = 64
_MAX_TAG_CHARS = 128


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when it is a word YAML keeps as a string, else double-quoted."""
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text, ensure_ascii=False)


def _check_text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"dataset card: {what} must be a non-empty string, got {value!r:.80}")
    if len(value) > limit:
        raise ValueError(f"dataset card: {what} {value[:40]!r}... is longer than {limit} characters")
    bad = [c for c in value if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp")]
    if bad:
        raise ValueError(f"dataset card: {what} {value!r:.80} holds control, line-break or unassigned characters "
                         f"({bad[0]!r}); a YAML header cannot carry them")
    return value


def _check_license(license: str | None) -> str:
    if license is None:
        return DEFAULT_LICENSE
    if not isinstance(license, str) or not _LICENSE.fullmatch(license):
        raise ValueError(f"dataset card: license {license!r:.80} is not a Hub license identifier (lowercase, "
                         "like 'apache-2.0', 'mit', 'cc-by-4.0' or 'other'; see "
                         "huggingface.co/docs/hub/repositories-licenses)")
    return license


def _check_tags(tags: Sequence[str]) -> list[str]:
    if isinstance(tags, str):
        raise ValueError(f"dataset card: tags must be a sequence of strings, got the string {tags!r:.80}")
    out = ["LeRobot"]
    for tag in tags:
        tag = _check_text(tag, "tag", _MAX_TAG_CHARS)
        if tag not in out:
            out.append(tag)
    if len(out) > _MAX_TAGS:
        raise ValueError(f"dataset card: {len(out)} tags, at most {_MAX_TAGS}")
    return out


def _header(license: str, tags: list[str]) -> str:
    lines = ["---", f"license: {_scalar(license)}", "task_categories:", "- robotics", "tags:"]
    lines += [f"- {_scalar(tag)}" for tag in tags]
    lines += ["configs:", "- config_name: default", "  data_files: data/*/*.parquet", "---"]
    return "\n".join(lines) + "\n"


def _features_table(info: dict) -> list[str]:
    features = info.get("features")
    if not isinstance(features, dict) or not features:
        return []
    rows = ["| feature | dtype | shape |", "|---|---|---|"]
    for key, spec in features.items():
        spec = spec if isinstance(spec, dict) else {}
        shape = spec.get("shape")
        shape_text = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")" \
            if isinstance(shape, list) else "?"
        rows.append(f"| `{_cell(key)}` | {_cell(spec.get('dtype', '?'))} | {shape_text} |")
    return rows + [""]


def _cell(value: Any) -> str:
    """A value for a markdown table cell (no line breaks, pipes or backticks that would break the row)."""
    return " ".join(str(value).split()).replace("|", "\\|").replace("`", "'")


def _load_snippet(repo_id: str, folder: str | None) -> list[str]:
    """Both ways to open the dataset: from its folder (``root=``) and from the Hub (the repo id alone)."""
    rid = json.dumps(repo_id, ensure_ascii=False)
    root = json.dumps(folder if folder else Path(repo_id).name, ensure_ascii=False)
    hub_id = repo_id if not repo_id.startswith("local/") else "<user>/" + repo_id.split("/", 1)[1]
    return ["Load it with LeRobot, from this folder on disk (`root`: the folder that holds this card):", "",
            "```python", "from lerobot.datasets.lerobot_dataset import LeRobotDataset", "",
            f"dataset = LeRobotDataset({rid}, root={root})", "```", "",
            ("or from the Hugging Face Hub, once pushed there "
             + (f"under `{hub_id}`" if hub_id != repo_id else "")).rstrip() + ":", "",
            "```python", f"dataset = LeRobotDataset({json.dumps(hub_id, ensure_ascii=False)})", "```", ""]


def card_text(info: dict, *, repo_id: str, license: str | None = None, tags: Sequence[str] = (),
              folder: str | None = None) -> str:
    """The text of the card :func:`write_dataset_card` writes (arguments as there)."""
    from trajstore.interop.lerobot._repo_id import check_repo_id

    license = _check_license(license)
    all_tags = _check_tags(tags)
    repo_id = check_repo_id(repo_id)
    if not isinstance(info, dict):
        raise ValueError(f"dataset card: info must be the dict of meta/info.json, got {type(info).__name__}")
    shown = {k: v for k, v in info.items() if k != PRIVATE_ENTRY}
    kept_out = PRIVATE_ENTRY in info
    summary = []
    for label, key in (("episodes", "total_episodes"), ("frames", "total_frames"), ("tasks", "total_tasks"),
                       ("frames per second", "fps"), ("robot type", "robot_type"),
                       ("LeRobot format", "codebase_version")):
        if info.get(key) is not None:
            summary.append(f"- **{label}:** {_cell(info[key])}")
    body = [
        "",
        "A robot-learning dataset in LeRobot's format, exported from a trajstore buffer.",
        "",
    ]
    if not repo_id.startswith("local/"):
        body += [f"Browse it with the [LeRobot dataset visualizer]"
                 f"(https://huggingface.co/spaces/lerobot/visualize_dataset?path={_cell(repo_id)}).", ""]
    body += ["## Dataset Description", "", *summary, f"- **License:** {license}", "",
             *_features_table(info),
             *_load_snippet(repo_id, folder),
             "## Dataset Structure", "",
             "[meta/info.json](meta/info.json):", "```json", json.dumps(shown, indent=4), "```", ""]
    if kept_out:
        body += [f"meta/info.json also holds a `{PRIVATE_ENTRY}` entry, left out here: what trajstore needs to "
                 "import the buffer back (leaf paths, spaces, episode data columns); LeRobot ignores it.", ""]
    return _header(license, all_tags) + "\n".join(body)


def write_dataset_card(root: Path, info: dict, *, repo_id: str, license: str | None = None,
                       tags: Sequence[str] = (), folder: str | None = None) -> Path:
    """Write ``root/README.md``, the Hub dataset card of the LeRobot dataset at ``root``.

    Args:
        root: the dataset folder (``meta/info.json`` is written there already; during an export, the
            hidden staged folder).
        info: the content of ``meta/info.json`` (JSON values), shown in the card's "Dataset Structure"
            without its ``"trajstore"`` entry (the card says it is kept in meta/info.json).
        repo_id: the dataset's Hub name (``user/name``, checked by
            :func:`~trajstore.interop.lerobot._repo_id.check_repo_id`; ``local/...`` for a local one, then
            the card has no visualizer link).
        folder: the dataset folder as the user named it, for the card's
            ``LeRobotDataset(repo_id, root=folder)`` (default: the repo id's name).
        license: a Hub license identifier (default ``apache-2.0``, as LeRobot).
        tags: Hub tags after ``LeRobot`` (duplicates dropped, order kept).

    Returns:
        the path of the card.

    Raises:
        ValueError: a license that is not a Hub identifier, a repo_id that is not a Hub dataset name, a
            tag that is empty, too long (128 characters, at most 64 tags) or holds control characters, or
            ``info`` not a dict;
            raised before the file is written.
        OSError: the file cannot be written.
    """
    text = card_text(info, repo_id=repo_id, license=license, tags=tags, folder=folder)
    path = Path(root) / CARD_NAME
    path.write_text(text, encoding="utf-8")
    return path
