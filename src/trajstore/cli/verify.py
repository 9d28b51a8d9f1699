"""``trajstore verify PATH [--reference REF.npz] [--json]``: check a buffer on its own, or against a reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from trajstore._urls import is_remote
from trajstore.cli._output import EXIT_DAMAGE, console, fail, progress_bar, progress_option
from trajstore.errors import TrajstoreError


def verify(path: str = typer.Argument(..., help="Buffer folder (a local one: pull a pushed buffer first)."),
           reference: Optional[Path] = typer.Option(None, help="The .npz saved by `record --reference`: compare "
                                                              "every step with it instead."),
           as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (without --reference)."),
           progress: bool = progress_option()) -> None:
    """Check a buffer folder: every file its metadata names exists, every payload decodes (every frame
    of every image chunk and video segment, every HDF5 leaf), counts agree. Exit status 1 on damage.
    With --reference: read every step back and compare it with the reference (lossy leaves within
    the codec bound). A stream buffer: every stream's sub-buffer so, then its timestamps (int64,
    non-decreasing within each episode, spans as the episode log says)."""
    if is_remote(path):  # reading every frame through ranged GETs would cost more than a pull
        raise fail(f"{path}: verify checks a local folder; copy it first (`trajstore pull {path} FOLDER`, "
                   "which checks every file against its SHA-256), then `trajstore verify FOLDER`")
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(path):
        if reference is not None:
            raise fail(f"{path}: --reference compares a replay buffer's steps; this is a stream buffer")
        from trajstore.cli import streams

        return streams.verify(path, as_json, progress)
    if reference is not None:
        _verify_reference(path, reference)
        return
    from trajstore.ops.verify import steps_to_read, verify_buffer

    try:
        with progress_bar(total=steps_to_read(path), desc="verifying", unit="step", enabled=progress) as bar:
            report = verify_buffer(path, progress=bar.update)
    except (TrajstoreError, OSError) as exc:
        raise fail(exc)
    if as_json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        table = Table("storage folder", "type", "steps decoded", "problems", title=f"verify {path}")
        for s in report.storages:
            table.add_row(escape(s.folder), s.storage, f"{s.steps_read:,}",
                          "[green]0[/green]" if not s.problems else f"[red]{s.problems}[/red]")
        console.print(table)
        for p in report.problems:
            console.print(f"[red]damage:[/red] {escape(p.line())}", soft_wrap=True)
        summary = (f"{report.steps} steps, {report.episodes} episodes, "
                   f"{report.final_observations} final observations checked")
        if report.ok:
            console.print(escape(f"ok: {summary}; no damage found"), soft_wrap=True)
        else:
            console.print(escape(f"DAMAGED: {len(report.problems)} problem(s); {summary}"), soft_wrap=True)
            if report.damaged_episodes:
                console.print(escape(f"damaged episodes: {report.damaged_episodes} ({report.damaged_steps} held "
                                     "steps); the others read as usual"), soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_DAMAGE)


def _verify_reference(path: Path, reference: Path) -> None:
    from trajstore.recording.reference import MAX_MEAN_ABS_ERROR, MIN_PSNR_DB, compare_to_reference

    try:
        checks = compare_to_reference(path, reference)
    except (TrajstoreError, OSError, ValueError) as exc:
        raise fail(exc)
    table = Table("leaf", "storage", "check", "max |error|", "mean |error|", "min PSNR (dB)", "result",
                  title=f"read-back of {path}")
    for c in checks:
        rule = "exact" if c.exact else f">= {MIN_PSNR_DB:g} dB, mean <= {MAX_MEAN_ABS_ERROR:g}"
        psnr = "inf" if c.min_psnr_db is None else f"{c.min_psnr_db:.1f}"
        table.add_row(c.key, c.storage, rule, f"{c.max_abs_error:g}", f"{c.mean_abs_error:.3g}",
                      psnr if not c.exact else "-", "[green]ok[/green]" if c.ok else "[red]FAIL[/red]")
    console.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_DAMAGE)
    console.print("every step read back within bounds")
