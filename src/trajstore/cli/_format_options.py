"""The options every ``trajstore import FORMAT`` / ``export FORMAT`` command shares, and their parsing.

``--episodes SELECTION`` (ids ``'0,3,5-9'`` or an expression over episode data, as ``copy --episodes``),
``--key FROM=TO`` (repeat); ``--progress/--no-progress`` is every command's
(:func:`trajstore.cli._output.progress_option`).
"""

from __future__ import annotations

from enum import Enum
from typing import List, Optional

import typer

IMPORT_EPISODES_HELP = ("Source episodes to import: indices ('0,3,5-9') or an expression over the episode data "
                        "the import gives them ('success == true', 'steps > 20'); default: all.")
EXPORT_EPISODES_HELP = ("Episodes to export: ids ('0,3,5-9') or an expression over episode data ('success == "
                        "true and not interrupted'); default: every ended episode.")
IMPORT_KEY_HELP = "SOURCE_KEY=LEAF, e.g. observation/image=observation/images/front (repeat)."
EXPORT_KEY_HELP = "LEAF=KEY: the format's name for a leaf, e.g. observation/agent_pos=observation.state (repeat)."


class Camera(str, Enum):
    """``--camera``: how an import stores camera frames (``trajstore._cameras.camera_routing``)."""

    jpeg = "jpeg"
    png = "png"
    video = "video"


def import_episodes_option() -> Optional[str]:
    return typer.Option(None, "--episodes", help=IMPORT_EPISODES_HELP)


def export_episodes_option() -> Optional[str]:
    return typer.Option(None, "--episodes", help=EXPORT_EPISODES_HELP)


def key_option(help_text: str) -> Optional[List[str]]:
    return typer.Option(None, "--key", help=help_text)


def parse_pairs(values: Optional[List[str]], option: str = "--key") -> dict[str, str]:
    """``["a=b", ...]`` -> ``{"a": "b"}``; a value without ``=``, or with an empty side, is a
    ``typer.BadParameter`` naming ``option``; a name given twice too."""
    out: dict[str, str] = {}
    for value in values or []:
        name, sep, target = value.partition("=")
        if not sep or not name or not target:
            raise typer.BadParameter(f"expected NAME=TARGET, got {value!r}", param_hint=option)
        if name in out:
            raise typer.BadParameter(f"{name!r} is given twice", param_hint=option)
        out[name] = target
    return out
