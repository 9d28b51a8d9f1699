"""``trajstore copy SRC DST [--episodes SELECTION] [--capacity N]`` and ``trajstore merge A B ... OUT``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from trajstore.cli._advice import cli_words
from trajstore.cli._output import EXIT_DAMAGE, console, fail, progress_bar, progress_option
from trajstore.damage import DamagedDataError
from trajstore.errors import SelectionWarning, TrajstoreError


def copy(src: Path = typer.Argument(..., help="Source buffer folder."),
         dst: Path = typer.Argument(..., help="New buffer folder."),
         episodes: Optional[str] = typer.Option(None, help="Episode ids ('0,3,5-9') or an expression over episode "
                                                           "data ('success == true', 'task == \"push the T\" and not "
                                                           "interrupted'); default: every held episode."),
         capacity: Optional[int] = typer.Option(None, min=1, help="Ring capacity of the copy (default: unbounded)."),
         progress: bool = progress_option(),
         skip_damaged: bool = typer.Option(False, "--skip-damaged", help="Leave out the episodes that cannot be "
                                                                         "read (a missing or damaged payload file) "
                                                                         "and copy the others."),
         allow_empty: bool = typer.Option(False, "--allow-empty",
                                          help="Write the copy even if --episodes selects no episode.")) -> None:
    """Copy episodes into a new folder with the same layout and options, keeping episode data, final
    observations and interrupted flags; a ring is compacted. JPEG/video frames are re-encoded. A damaged
    source is refused unless --skip-damaged."""
    from trajstore.ops.copy import copy_episodes, held_steps

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SelectionWarning)
            with progress_bar(total=None if episodes else held_steps([src]), desc="copying", unit="step",
                              enabled=progress) as bar:
                summary = copy_episodes(src, dst, episodes=episodes, capacity=capacity, progress=bar.update,
                                        skip_damaged=skip_damaged, allow_empty=allow_empty)
    except DamagedDataError as exc:  # damage, not bad input
        raise fail(exc, EXIT_DAMAGE)
    except (TrajstoreError, OSError, ValueError) as exc:
        raise fail(exc)  # one line: a refused empty selection names the keys the warnings would
    for w in caught:
        if issubclass(w.category, SelectionWarning):
            text = cli_words(" ".join(str(w.message).split()))
            console.print(f"[yellow]warning:[/yellow] {escape(text)}", soft_wrap=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    skipped = [i for _, i in summary.skipped]
    note = f"; skipped {len(skipped)} damaged episode(s): {skipped[:20]}" if skipped else ""
    console.print(escape(f"copied {summary.line()}{note}"), soft_wrap=True)


def merge(paths: List[Path] = typer.Argument(..., help="Source buffer folders, then the new output folder."),
          capacity: Optional[int] = typer.Option(None, min=1, help="Ring capacity of the output (default: unbounded)."),
          progress: bool = progress_option()) -> None:
    """Merge buffers with equal step spaces into a new folder (laid out like the first), every held
    episode in the order given."""
    from trajstore.ops.copy import held_steps, merge_buffers

    if len(paths) < 2:
        raise fail("merge needs at least one source and the output folder: trajstore merge A [B ...] OUT")
    *srcs, out = paths
    try:
        with progress_bar(total=held_steps(srcs), desc="merging", unit="step", enabled=progress) as bar:
            summary = merge_buffers(srcs, out, capacity=capacity, progress=bar.update)
    except (TrajstoreError, OSError, ValueError) as exc:
        raise fail(exc)
    console.print(escape(f"merged {len(srcs)} buffers into {summary.line()}"), soft_wrap=True)
