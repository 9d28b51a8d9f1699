"""Check a stream buffer folder on its own: every stream's sub-buffer as
:func:`~trajstore.ops.verify.verify_buffer` checks any buffer folder (files, payloads, counts), then
the timestamps against the episode log:

* **metadata**: ``streams.json`` reads, names each stream's folder inside the buffer, and the folder
  opens as a stream buffer (read-only);
* **timestamps**, read from each sub-buffer (its ``timestamp`` leaf alone): declared int64 ``()``
  (nanoseconds), read back as int64, non-decreasing within every episode (the first sample out of
  order is named: stream, episode id, index within the episode, both times). A stream buffer that does
  not open (a damaged stream) still gets this check for its other streams, each episode then named by
  its position in the stream's sub-buffer;
* **spans**: the spans of a stream follow one another (``start`` of one is the ``stop`` of the one
  before) and end at the stream's length; the sub-buffer's episodes are the spans with samples, in
  order, of the same lengths, with the first and last times the log gives.

Reads only (no lock, nothing written). Timestamps of a stream whose sub-buffer is damaged are not read.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from trajstore.errors import FormatError
from trajstore.ops.stream_info import TIMESTAMP_LEAF, VALUE_LEAF, stream_folders
from trajstore.streams.folder import META_FILE as STREAMS_FILE
from trajstore.ops.verify import Problem, VerifyReport, _text, steps_to_read, verify_buffer

Progress = Callable[[int], None]


@dataclass
class StreamCheck:
    """What was checked of one stream: its sub-buffer's report, its samples and episodes, its problems."""

    name: str
    folder: str
    samples: int = 0
    episodes_with_samples: int = 0
    timestamps_checked: bool = False  # False when its sub-buffer is damaged (times not read)
    problems: int = 0
    buffer: VerifyReport | None = None


@dataclass
class StreamVerifyReport:
    """The result of :func:`verify_stream_buffer`; :attr:`ok` when no problem was found."""

    path: str
    episodes: int = 0
    streams: list[StreamCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def samples(self) -> int:
        return sum(s.samples for s in self.streams)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "streams", **asdict(self), "ok": self.ok}


def stream_samples_to_read(path: str | os.PathLike) -> int:
    """Steps :func:`verify_stream_buffer` reads over all sub-buffers (its progress total), 0 if unknown."""
    try:
        return sum(steps_to_read(folder) for folder in stream_folders(path).values())
    except Exception:  # noqa: BLE001 - only a progress total
        return 0


def verify_stream_buffer(path: str | os.PathLike, *, progress: Progress | None = None) -> StreamVerifyReport:
    """Check the stream buffer folder at ``path`` (see the module docstring) and report what is damaged.

    Args:
        path: a stream buffer folder (holding ``streams.json``).
        progress: called with a number of samples after each batch a sub-buffer check reads; the total
            is :func:`stream_samples_to_read`.

    Returns:
        A :class:`StreamVerifyReport`; damage is in its ``problems`` (each sub-buffer's problems are
        there too, naming their files), never raised.

    Raises:
        FormatError: ``path`` holds no ``streams.json``.
    """
    folder = Path(path)
    if not (folder / STREAMS_FILE).is_file():
        raise FormatError(f"{folder} is not a stream buffer folder (no {STREAMS_FILE})")
    report = StreamVerifyReport(str(folder))
    try:
        folders = stream_folders(folder)
    except FormatError as exc:
        report.problems.append(Problem(str(folder / STREAMS_FILE), f"unreadable metadata: {_text(exc)}"))
        return report
    for name, sub in folders.items():
        check = StreamCheck(name, str(sub))
        report.streams.append(check)
        if not sub.is_dir():
            _problem(report, check, str(sub), f"stream {name!r}: its folder is missing")
            continue
        check.buffer = verify_buffer(sub, progress=progress)
        check.problems += len(check.buffer.problems)
        report.problems += check.buffer.problems
    subs = {c.name: _sub_timestamps(report, c) for c in report.streams if c.buffer is not None and c.buffer.ok}
    from trajstore.damage import DamagedBufferWarning
    from trajstore.streams import StreamBuffer

    try:
        with warnings.catch_warnings():  # the damage is in the report already
            warnings.simplefilter("ignore", DamagedBufferWarning)
            buf = StreamBuffer.load_from(folder, read_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to open is damage to report
        report.problems.append(Problem(str(folder), f"does not open as a stream buffer: {_text(exc)}"))
        for check in report.streams:  # the order within each sub-buffer episode, at least
            if subs.get(check.name) is not None:
                _check_order(report, check, subs[check.name], None)
        return report
    with buf:
        report.episodes = buf.num_episodes
        if list(buf.streams) != list(folders):
            report.problems.append(Problem(str(folder / STREAMS_FILE), f"streams {list(folders)} in the metadata, "
                                                                       f"but the buffer opens {list(buf.streams)}"))
        episodes = buf.episodes
        for check in report.streams:
            times = subs.get(check.name)
            if times is None or check.name not in buf.streams:
                continue
            spans = [e.streams[check.name] for e in episodes]
            ids = [e.id for e, sp in zip(episodes, spans) if sp.count]
            _check_order(report, check, times, ids if len(ids) == len(times) else None)
            _check_spans(report, check, times, spans, [e.id for e in episodes], int(buf.stream_length(check.name)))
    return report


def _problem(report: StreamVerifyReport, check: StreamCheck, where: str, what: str) -> None:
    check.problems += 1
    report.problems.append(Problem(where, what))


def _sub_timestamps(report: StreamVerifyReport, check: StreamCheck) -> list[np.ndarray] | None:
    """The timestamps of each episode of the stream's sub-buffer (its ``timestamp`` leaf, read alone), or
    ``None`` (and a problem) when its space is not a stream's or they cannot be read."""
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace

    name, where = check.name, check.folder
    try:
        with ReplayBuffer.load_from(where, read_only=True) as rb:
            space = rb.space
            leaf = space[TIMESTAMP_LEAF] if isinstance(space, DictSpace) and TIMESTAMP_LEAF in space.keys() else None
            if not (isinstance(leaf, BoxSpace) and np.dtype(leaf.dtype) == np.int64 and tuple(leaf.shape) == ()
                    and VALUE_LEAF in space.keys()):
                _problem(report, check, where, f"stream {name!r}: the sub-buffer's step space must be a dict of "
                                               f"'{TIMESTAMP_LEAF}' (int64, shape ()) and '{VALUE_LEAF}', got "
                                               f"{space!r}")
                return None
            request = rb.window_request(None, leaves=[TIMESTAMP_LEAF])
            data, _ = rb.windows_at(np.arange(len(rb), dtype=np.int64), request)
            t = np.asarray(data[TIMESTAMP_LEAF])
            bounds = [(e.start, e.stop) for e in rb.episodes]
    except Exception as exc:  # noqa: BLE001 - a read that fails is damage
        _problem(report, check, where, f"stream {name!r}: timestamps cannot be read: {_text(exc)}")
        return None
    if t.dtype != np.int64:
        _problem(report, check, where, f"stream {name!r}: timestamps read as {t.dtype}, not int64 nanoseconds")
        return None
    check.timestamps_checked = True
    check.samples = len(t)
    check.episodes_with_samples = sum(1 for a, b in bounds if b > a)
    return [t[a:b] for a, b in bounds]


def _check_order(report: StreamVerifyReport, check: StreamCheck, times: list[np.ndarray],
                 ids: list[int] | None) -> None:
    """Timestamps non-decreasing within each episode; ``ids``: the stream buffer's episode id of each
    sub-buffer episode (``None``: unknown, the sub-buffer's episode position is named instead)."""
    for k, t in enumerate(times):
        down = t[1:] < t[:-1]  # neighbours compared: np.diff would wrap at the int64 edges
        if np.any(down):
            i = int(np.argmax(down)) + 1
            label = f"episode {ids[k]}" if ids is not None else f"episode {k} of its sub-buffer"
            _problem(report, check, check.folder,
                     f"stream {check.name!r}, {label}: timestamps out of order: sample {i} at {int(t[i])} ns is "
                     f"before sample {i - 1} at {int(t[i - 1])} ns ({int(np.count_nonzero(down))} decrease(s) in "
                     "the episode)")


def _check_spans(report: StreamVerifyReport, check: StreamCheck, times: list[np.ndarray], spans: list[Any],
                 ids: list[int], length: int) -> None:
    """The episode log's spans of the stream against its sub-buffer's episodes and timestamps."""
    name, where = check.name, check.folder
    at = 0
    for i, span in zip(ids, spans):
        if span.start != at:
            _problem(report, check, where, f"stream {name!r}, episode {i}: the log's span starts at sample "
                                           f"{span.start}, the previous episode's ends at {at}")
        at = span.stop
    if at != length:
        _problem(report, check, where, f"stream {name!r}: the episodes' spans end at sample {at}, the stream holds "
                                       f"{length}")
    with_samples = [(i, sp) for i, sp in zip(ids, spans) if sp.count]
    if [sp.count for _, sp in with_samples] != [len(t) for t in times]:
        _problem(report, check, where, f"stream {name!r}: the sub-buffer's episodes have "
                                       f"{_short([len(t) for t in times])} samples, the log's spans with samples "
                                       f"{_short([sp.count for _, sp in with_samples])}")
        return
    for (i, sp), t in zip(with_samples, times):
        if sp.first_ns != int(t[0]) or sp.last_ns != int(t[-1]):
            _problem(report, check, where, f"stream {name!r}, episode {i}: the log's first/last time "
                                           f"{sp.first_ns}/{sp.last_ns} ns, the sub-buffer's "
                                           f"{int(t[0])}/{int(t[-1])} ns")


def _short(values: list[int], limit: int = 8) -> str:
    return str(values[:limit])[:-1] + (", ...]" if len(values) > limit else "]")


__all__ = ["verify_stream_buffer", "StreamVerifyReport", "StreamCheck", "stream_samples_to_read"]
