"""What an import (LeRobot, zarr) wrote."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trajstore._text import count

__all__ = ["ImportSummary", "count"]


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
