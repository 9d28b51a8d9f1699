"""What an import wrote, and the counted nouns the one-line summaries of the integrations print."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def count(n: int, noun: str) -> str:
    """``count(1, "leaf")`` -> ``"1 leaf"``; ``count(3, "leaf")`` -> ``"3 leaves"``; other nouns get an ``s``."""
    plural = "leaves" if noun == "leaf" else f"{noun}s"
    return f"{n} {noun if n == 1 else plural}"


@dataclass(frozen=True)
class ImportSummary:
    """What an import (LeRobot, zarr) wrote.

    Attributes:
        path: the new buffer folder.
        episodes, steps: episodes and steps imported.
        leaves: source name -> trajstore leaf path (LeRobot ``"observation.images.front"`` ->
            ``"observation/images/front"``; zarr ``"data/img"`` -> ``"img"``).
    """

    path: Path
    episodes: int
    steps: int
    leaves: dict[str, str]

    def line(self) -> str:
        return (f"imported {count(self.episodes, 'episode')} ({count(self.steps, 'step')}, "
                f"{count(len(self.leaves), 'leaf')}) into {self.path}")
