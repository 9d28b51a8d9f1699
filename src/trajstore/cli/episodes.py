"""``trajstore episodes PATH [--json]``: one row per held episode."""

from __future__ import annotations

import json
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from trajstore.cli import remote
from trajstore.cli._output import QUICK_PROGRESS_HELP, console, progress_option
from trajstore.errors import TrajstoreError


def _cell(value: object) -> str:
    return "-" if value is None else escape(str(value))


def episodes(path: str = typer.Argument(..., help="Buffer folder, or the URL of a pushed buffer (s3://bucket/rb)."),
             as_json: bool = typer.Option(False, "--json", help="Print one JSON document (every field)."),
             storage_option: Optional[List[str]] = typer.Option(None, "--storage-option", "-o",
                                                                help=remote.STORAGE_OPTION_HELP),
             progress: bool = progress_option(QUICK_PROGRESS_HELP)) -> None:
    """List the held episodes: id, steps, task, success, interrupted, duration at the buffer's fps
    (from the camera leaves' metadata, or the step space's), and for a ring whether its first steps
    were overwritten. Ids are what --episode and copy --episodes take. For a stream buffer: each stream's
    samples and rate within each episode."""
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.ops.episodes import summarize_episodes
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(path):
        from trajstore.cli import streams

        return streams.episodes(path, as_json)

    try:
        with ReplayBuffer.load_from(path, read_only=True,
                                    storage_options=remote.parse_storage_options(storage_option)) as rb:
            summary = summarize_episodes(rb)
    except (TrajstoreError, OSError, ValueError, ImportError, *remote.backend_errors()) as exc:
        raise remote.remote_failure(path, path, exc)
    if as_json:
        print(json.dumps(summary.to_json(), indent=1))
        return
    columns = ["id", "steps", "task", "success", "interrupted", "duration (s)"] + (["overwritten"] if summary.ring
                                                                                   else [])
    table = Table(*columns, title=f"episodes of {path}")
    for r in summary.rows:
        state = "open" if r.open else ("yes" if r.interrupted else "no")
        duration = "-" if r.duration_s is None else f"{r.duration_s:.2f}"
        row = [str(r.id), str(r.steps), _cell(r.task), _cell(r.success), state, duration]
        table.add_row(*row, *(["yes" if r.overwritten else "no"] if summary.ring else []))
    console.print(table)
    fps = f"{summary.fps:g} fps ({summary.fps_source})" if summary.fps else f"durations not shown: {summary.fps_source}"
    steps = sum(r.steps for r in summary.rows)
    console.print(escape(f"{len(summary.rows)} episodes, {steps} steps; {fps}"), soft_wrap=True)
    if summary.fps_note:
        console.print(escape(f"note: {summary.fps_note}"), soft_wrap=True)
