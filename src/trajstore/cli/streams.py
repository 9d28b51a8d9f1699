"""``trajstore info | episodes | verify`` on a stream buffer folder (one with ``streams.json``): each calls one
function of :mod:`trajstore.ops.stream_info` / :mod:`trajstore.ops.stream_verify` and prints its result."""

from __future__ import annotations

import json

import typer
from rich.markup import escape
from rich.table import Table

from trajstore.cli._output import EXIT_DAMAGE, console, fail, progress_bar
from trajstore.errors import TrajstoreError


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def _fixed_ms(seconds: float | None) -> str:
    """Milliseconds in fixed notation, 3 decimals (1 us) below 1 s, whole ms above: never an exponent."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3f}" if abs(ms) < 1000 else f"{ms:,.0f}"


def _hz(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.4g}"


def info(path: str, as_json: bool) -> None:
    """Print the streams of the stream buffer at ``path``: leaves and storages, samples, measured rates."""
    from trajstore.ops.stream_info import describe_streams

    try:
        d = describe_streams(path)
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    if as_json:
        print(json.dumps(d.to_json(), indent=1))
        return
    state = ", one open" if d.open_episode else ""
    console.print(escape(f"{d.path}: stream buffer, {len(d.streams)} streams, {d.episodes} episodes "
                         f"({d.complete_episodes} complete, {d.interrupted_episodes} interrupted{state}), "
                         f"{d.duration_s:.3f} s recorded"), soft_wrap=True)
    # short two-line headers and fixed-point ms: the table fits 120 columns without cutting a number
    rates = Table("stream", "samples", "episodes", "Hz", "period\nms", "jitter\nstd ms", "jitter\np99 ms", "gaps",
                  "largest gap", "equal\ntimes", "out of\norder",
                  title="measured rates (median period; gap: a period > 1.5 x it)")
    for i in (1, 3, 4, 5, 6):
        rates.columns[i].justify = "right"
    rates.columns[0].overflow = "fold"  # a long stream name wraps whole, never cut to "camera.…"
    for s in d.streams:
        r = s.rates
        largest = ("-" if r.max_gap_s is None else
                   f"{_ms(r.max_gap_s)} ms, ep {r.max_gap_episode} at {r.max_gap_at_s:.3f} s")
        rates.add_row(escape(s.name), f"{s.samples:,}", str(s.episodes_with_samples), _hz(r.rate_hz),
                      _fixed_ms(r.median_period_s), _fixed_ms(r.jitter_std_s), _fixed_ms(r.jitter_p99_s), str(r.gaps),
                      largest,
                      str(r.duplicates), str(r.non_monotonic) if r.ordered else f"[red]{r.non_monotonic}[/red]")
    console.print(rates)
    leaves = Table("stream", "leaf", "storage", "dtype", "shape", "metadata", "bytes on disk", title="streams")
    for s in d.streams:
        for i, leaf in enumerate(s.leaves):
            meta = ", ".join(f"{k}={v}" for k, v in leaf.metadata.items())
            leaves.add_row(escape(s.name) if i == 0 else "", escape(leaf.key), leaf.storage, leaf.dtype,
                           str(leaf.shape), escape(meta), f"{s.nbytes:,}" if i == 0 else "")
    console.print(leaves)
    console.print(f"total: {d.nbytes:,} bytes")


def episodes(path: str, as_json: bool) -> None:
    """Print one row per held episode of the stream buffer at ``path``, each stream's span in it."""
    from trajstore.ops.stream_info import summarize_stream_episodes
    from trajstore.streams import StreamBuffer

    try:
        with StreamBuffer.load_from(path, read_only=True) as buf:
            summary = summarize_stream_episodes(buf)
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    if as_json:
        print(json.dumps(summary.to_json(), indent=1))
        return
    table = Table("id", "task", "success", "interrupted", "duration (s)",
                  *(f"{escape(n)}: samples @ Hz (gaps)" for n in summary.streams), title=f"episodes of {path}")
    for r in summary.rows:
        state = "open" if r.open else ("yes" if r.interrupted else "no")
        duration = "-" if r.duration_s is None else f"{r.duration_s:.3f}"
        cells = []
        for name in summary.streams:
            s = r.streams[name]
            cells.append(f"{s.samples} @ {_hz(s.rate_hz)}" + (f" ({s.gaps})" if s.gaps else ""))
        table.add_row(str(r.id), "-" if r.task is None else escape(str(r.task)),
                      "-" if r.success is None else escape(str(r.success)), state, duration, *cells)
    console.print(table)
    total = {name: sum(r.streams[name].samples for r in summary.rows) for name in summary.streams}
    console.print(escape(f"{len(summary.rows)} episodes; samples: " + ", ".join(f"{n} {c}" for n, c in total.items())),
                  soft_wrap=True)


def verify(path: str, as_json: bool, progress: bool) -> None:
    """Check the stream buffer at ``path``: every stream's sub-buffer, then timestamps and spans. Exit
    status 1 on damage."""
    from trajstore.ops.stream_verify import stream_samples_to_read, verify_stream_buffer

    try:
        with progress_bar(total=stream_samples_to_read(path), desc="verifying", unit="sample",
                          enabled=progress) as bar:
            report = verify_stream_buffer(path, progress=bar.update)
    except (TrajstoreError, OSError) as exc:
        raise fail(exc)
    if as_json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        table = Table("stream", "storage folder", "type", "steps decoded", "timestamps", "problems",
                      title=f"verify {path}")
        for s in report.streams:
            checks = s.buffer.storages if s.buffer is not None else []
            times = "ordered" if s.timestamps_checked and not s.problems else ("not read" if not s.timestamps_checked
                                                                                else "see below")
            for i, c in enumerate(checks or [None]):
                table.add_row(escape(s.name) if i == 0 else "", escape(c.folder) if c else escape(s.folder),
                              c.storage if c else "?", f"{c.steps_read:,}" if c else "-", times if i == 0 else "",
                              ("[green]0[/green]" if not s.problems else f"[red]{s.problems}[/red]") if i == 0 else "")
        console.print(table)
        for p in report.problems:
            console.print(f"[red]damage:[/red] {escape(p.line())}", soft_wrap=True)
        summary = f"{len(report.streams)} streams, {report.episodes} episodes, {report.samples:,} samples checked"
        if report.ok:
            console.print(escape(f"ok: {summary}; timestamps ordered, spans agree with the episode log; "
                                 "no damage found"), soft_wrap=True)
        else:
            console.print(escape(f"DAMAGED: {len(report.problems)} problem(s); {summary}"), soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_DAMAGE)


def stats(path: str, as_json: bool, rows: int) -> None:
    """Print the statistics of each stream of the stream buffer at ``path`` (``StreamBuffer.stats()``: every
    held sample, at the stream's own rate, not aligned); at most ``rows`` elements of a leaf (all with JSON)."""
    import numpy as np

    from trajstore.streams import StreamBuffer

    try:
        with StreamBuffer.load_from(path, read_only=True) as buf:
            result = buf.stats()
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    if as_json:
        print(json.dumps({name: {leaf: s.to_json() for leaf, s in leaves.items()} for name, leaves in result.items()},
                         indent=1))
        return
    table = Table("stream/leaf", "shape", "element", "count", "min", "max", "mean", "std", "q01", "q99",
                  title=f"statistics of {path}: each stream's samples at its own rate (per channel for image leaves, "
                        "per element for small leaves, else of the whole leaf)")
    table.columns[0].overflow = "fold"  # whole names, wrapped
    for column in table.columns[3:]:
        column.no_wrap, column.justify = True, "right"
    for name, leaves in result.items():
        for leaf, s in leaves.items():
            flat = {k: np.asarray(getattr(s, k)).reshape(-1) for k in ("count", "min", "max", "mean", "std", "q01",
                                                                       "q99")}
            n = flat["count"].size
            for i in range(min(n, rows)):
                index = str(tuple(int(k) for k in np.unravel_index(i, s.shape))) if s.shape else "-"
                element = f"channel {i}" if s.per_channel else index
                label = name if leaf == name else f"{name}/{leaf}"
                table.add_row(escape(label) if i == 0 else "", str(s.shape) if i == 0 else "", element,
                              f"{flat['count'][i]:,}",
                              *(f"{flat[k][i]:.6g}" for k in ("min", "max", "mean", "std", "q01", "q99")))
            if n > rows:
                table.add_row("", "", f"... {n - rows} more (--json)", *[""] * 7)
    console.print(table)


def preview_refusal(path: str) -> str:
    """Why ``trajstore preview`` does not take the stream buffer at ``path``, and what to run instead."""
    return (f"{path} is a stream buffer: `trajstore preview` shows an episode of a replay buffer. Its streams and "
            f"rates: `trajstore info {path}`; its episodes: `trajstore episodes {path}`; to see frames, export them "
            f"aligned and import the result, `trajstore export zarr {path} OUT.zarr --anchor CAMERA_STREAM` then "
            "`trajstore import zarr OUT.zarr RB` and `trajstore preview RB --episode 0 --out sheet.png`")
