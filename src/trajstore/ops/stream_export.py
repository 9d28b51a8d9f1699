"""Export a stream buffer in a one-rate format (LeRobot v3.0, Diffusion Policy zarr) through its aligned
view: ``buf.aligned(anchor=NAME)`` (one step per sample of the anchor stream) or ``buf.aligned(rate_hz=fps)``
(a regular grid), each stream's value at a step's time by its method (``how``), flagged when farther than
its tolerance. What ``trajstore export lerobot|zarr STREAMBUF OUT --fps/--anchor`` runs.

What each format keeps of the view's own leaves (``timestamp``: the anchor time in int64 ns;
``is_pad``: per stream, the value is farther than its tolerance from that time):

* LeRobot: neither. Its own ``timestamp`` column is ``frame_index / fps`` (the loader checks it against
  the fps and seeks video frames by it), and it makes its own ``<key>_is_pad`` masks at load time for
  ``delta_timestamps``; a LeRobot user gets the features a LeRobot recording has (the streams).
* zarr: both, as ``data/timestamp`` (int64 ns) and ``data/is_pad.<stream>`` (bool): Diffusion Policy reads
  the arrays its ``shape_meta`` names and ignores the others, and its own real-robot data carries a
  ``timestamp`` array too; ``exclude=["timestamp", "is_pad/<stream>"]`` leaves them out.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from trajstore.ops.stream_info import is_stream_folder
from trajstore.spaces import DictSpace
from trajstore.streams.rates import differences, episode_timestamps, stream_rates

if TYPE_CHECKING:
    from trajstore.streams import StreamBuffer

#: Alignment methods a stream may take (``how``).
METHODS = ("previous", "nearest", "linear")
#: The anchor stream's measured rate may differ from the export's fps by this fraction before a note says so.
RATE_NOTE_FRACTION = 0.05
#: Episodes a gaps note lists by id.
GAP_NOTE_EPISODES = 8


def parse_stream_options(values: Iterable[str] | None, option: str, convert: Callable[[str], Any] = str
                         ) -> dict[str, Any]:
    """``["joints=linear", ...]`` -> ``{"joints": "linear"}``, each value through ``convert``.

    Raises:
        ValueError: an item without ``=``, an empty name or value, a name given twice, a value ``convert``
            refuses (the message names ``option`` and the item).
    """
    out: dict[str, Any] = {}
    for item in values or ():
        name, sep, value = str(item).partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{option}: expected STREAM=VALUE, got {item!r}")
        if name in out:
            raise ValueError(f"{option}: stream {name!r} given twice")
        try:
            out[name] = convert(value)
        except ValueError as exc:
            raise ValueError(f"{option}: {item!r}: {exc}") from None
    return out


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError("expected a number of seconds >= 0")
    return value


def _method(text: str) -> str:
    if text not in METHODS:
        raise ValueError(f"expected one of {list(METHODS)}")
    return text


def parse_how(values: Iterable[str] | None) -> dict[str, str]:
    """``--how stream=METHOD`` items -> ``{stream: method}`` (methods: :data:`METHODS`)."""
    return parse_stream_options(values, "--how", _method)


def parse_tolerance(values: Iterable[str] | None) -> dict[str, float]:
    """``--tolerance stream=SECONDS`` items -> ``{stream: seconds}``."""
    return parse_stream_options(values, "--tolerance", _seconds)


def _check_names(buf: "StreamBuffer", anchor: str | None, streams: Sequence[str] | None,
                 how: Mapping[str, str] | None, tolerance: Mapping[str, float] | None) -> None:
    """Stream names of the options checked against the buffer, the errors naming the CLI options."""
    known = list(buf.streams)
    given = [("--anchor", [anchor] if anchor is not None else []), ("--streams", list(streams or [])),
             ("--how", list(how or {})), ("--tolerance", list(tolerance or {}))]
    for option, names in given:
        unknown = [n for n in names if n not in buf.streams]
        if unknown:
            what = "is not a stream" if len(unknown) == 1 else "are not streams"
            raise ValueError(f"{option}: {', '.join(map(repr, unknown))} {what} of the buffer (streams: {known})")
    if streams:
        for option, names in given[2:]:
            left = [n for n in names if n not in streams]
            if left:
                raise ValueError(f"{option}: stream {left[0]!r} is not among the exported streams (--streams "
                                 f"{' --streams '.join(streams)})")


def anchor_fps(buf: "StreamBuffer", anchor: str) -> tuple[float, str]:
    """The frame rate to record for an export at the anchor stream's samples when none is given: its
    ``fps`` metadata (the stream space's, else the one its leaves agree on), else its measured median rate;
    and a note saying which.

    Raises:
        ValueError: no ``fps`` metadata and no period to measure (fewer than two distinct sample times).
    """
    from trajstore.interop.lerobot._export_features import common_fps

    space = buf.streams[anchor]
    fps = space.metadata.get("fps") if isinstance(getattr(space, "metadata", None), Mapping) else None
    if fps is None:
        try:
            fps = common_fps(space if hasattr(space, "spaces") else DictSpace({anchor: space}))
        except Exception:  # noqa: BLE001 - leaves that disagree: measure instead
            fps = None
    if fps is not None and isinstance(fps, (int, float)) and np.isfinite(float(fps)) and float(fps) > 0:
        return float(fps), f"no --fps: recording {float(fps):g} fps, the fps metadata of the anchor stream {anchor!r}"
    rate = stream_rates(buf, anchor).rate_hz
    if rate is None:
        raise ValueError(f"--anchor {anchor}: the stream has no fps metadata and too few samples to measure its rate; "
                         "give the frame rate to record with --fps HZ")
    return rate, (f"no --fps: recording {rate:.6g} fps, the measured median rate of the anchor stream {anchor!r} "
                  "(it has no fps metadata; --fps HZ sets the rate)")


def gaps_note(buf: "StreamBuffer", anchor: str, episode_ids: Iterable[int], fps: float) -> str | None:
    """A note when the anchor stream has gaps (dropped samples, :mod:`trajstore.streams.rates`) in the
    exported episodes: LeRobot's ``timestamp`` is ``frame_index / fps``, so every frame after a gap is stamped
    earlier than it was recorded. ``None`` without gaps."""
    rates = stream_rates(buf, anchor)
    if rates.median_period_s is None:
        return None
    wanted = set(int(i) for i in episode_ids)
    eps = [e for e in buf.episodes if e.id in wanted]
    limit = rates.gap_factor * rates.median_period_s * 1e9
    counts = {}
    for e, t in zip(eps, episode_timestamps(buf, anchor, eps)):
        n = int(np.count_nonzero(differences(t[1:], t[:-1]) > limit))
        if n:
            counts[e.id] = n
    if not counts:
        return None
    shown = ", ".join(f"episode {i}: {n}" for i, n in list(counts.items())[:GAP_NOTE_EPISODES])
    more = f", ... ({len(counts) - GAP_NOTE_EPISODES} more episodes)" if len(counts) > GAP_NOTE_EPISODES else ""
    total = sum(counts.values())
    return (f"the anchor stream {anchor!r} has {total} gap{'s' if total != 1 else ''} (dropped samples, periods over "
            f"{rates.gap_factor:g} x its median {rates.median_period_s * 1e3:.3g} ms) in {len(counts)} of the "
            f"{len(eps)} exported episodes ({shown}{more}); LeRobot's timestamp is frame_index / fps ({fps:g}), so "
            "every frame after a gap is stamped earlier than it was recorded; for true times export on a regular "
            "grid instead: --fps HZ without --anchor")


def aligned_for_export(buf: "StreamBuffer", *, fps: float | None, anchor: str | None,
                       how: Mapping[str, str] | None = None, tolerance: Mapping[str, float] | None = None,
                       streams: Sequence[str] | None = None) -> tuple[Any, list[str]]:
    """The aligned view an export writes, and notes for the user.

    With ``anchor``: ``buf.aligned(anchor=anchor, ...)``; ``fps`` (if given) is only the rate the format
    records, and a note says when the anchor's measured median rate differs from it by more than
    :data:`RATE_NOTE_FRACTION`. Without: ``buf.aligned(rate_hz=fps, ...)``. ``streams``: the streams to
    include (default all).

    Raises:
        ValueError: neither ``anchor`` nor ``fps``, a non-positive ``fps``, an option naming a stream the
            buffer does not have or that ``streams`` leaves out (the message names the CLI option); and the
            errors of ``buf.aligned`` (a bad method, ``"linear"`` for a non-float leaf).
    """
    if fps is not None and not (np.isfinite(float(fps)) and float(fps) > 0):
        raise ValueError(f"--fps must be a positive number of Hz, got {fps!r}")
    _check_names(buf, anchor, streams, how, tolerance)
    notes: list[str] = []
    kwargs = dict(how=dict(how or {}), tolerance=dict(tolerance or {}), streams=list(streams) if streams else None)
    if anchor is not None:
        view = buf.aligned(anchor=anchor, **kwargs)
        if fps is not None:
            rate = stream_rates(buf, anchor).rate_hz
            if rate is not None and abs(rate - float(fps)) > RATE_NOTE_FRACTION * float(fps):
                notes.append(f"the anchor stream {anchor!r} runs at {rate:.4g} Hz (median period) but the export "
                             f"records {float(fps):g} fps: its time axis is stretched by {rate / float(fps):.3g}")
    elif fps is None:
        raise ValueError("a stream buffer is exported through an aligned view: pass an anchor stream "
                         "(--anchor NAME) or a rate (--fps HZ, a regular grid)")
    else:
        view = buf.aligned(rate_hz=float(fps), **kwargs)
    return view, notes


def flagged_steps(view: Any, episodes: Iterable[int] | None = None) -> dict[str, int]:
    """``{stream: steps whose is_pad is True}`` over the view's ``episodes`` (ids; default all); reads the
    masks only (no stream value is read or decoded)."""
    import numpy as np

    request = view.window_request(None, leaves=["is_pad"], episodes=episodes)
    data, _ = view.windows_at(np.arange(view.count_anchors(request), dtype=np.int64), request)
    return {name: int(np.count_nonzero(mask)) for name, mask in data["is_pad"].items()}


def export_stream_buffer(fmt: str, src: str | os.PathLike, out: str | os.PathLike, *, fps: float | None = None,
                         anchor: str | None = None, how: Mapping[str, str] | None = None,
                         tolerance: Mapping[str, float] | None = None, streams: Sequence[str] | None = None,
                         **options: Any) -> tuple[Any, list[str]]:
    """Open the stream buffer ``src`` read-only, align it (:func:`aligned_for_export`) and export the view
    to ``out`` with :func:`~trajstore.interop.lerobot.export_lerobot` (``fmt="lerobot"``, ``fps`` passed on)
    or :func:`~trajstore.interop.zarr.export_zarr` (``fmt="zarr"``); ``options`` go to the exporter.
    LeRobot at an anchor without ``fps`` records :func:`anchor_fps` (a note says which), and a note names
    the anchor's gaps in the exported episodes (:func:`gaps_note`).

    Returns:
        ``(the exporter's summary, notes)``.

    Raises:
        FormatError: ``src`` is not a stream buffer folder; and the errors of the exporter and of
            :func:`aligned_for_export`, all before anything is written.
    """
    from trajstore.errors import FormatError
    from trajstore.streams import StreamBuffer

    if fmt not in ("lerobot", "zarr"):
        raise ValueError(f"format must be 'lerobot' or 'zarr', got {fmt!r}")
    if not is_stream_folder(src):
        raise FormatError(f"{src} is not a stream buffer folder (no streams.json)")
    with StreamBuffer.load_from(src, read_only=True) as buf:
        first: list[str] = []
        if fmt == "lerobot" and anchor is not None and fps is None and anchor in buf.streams:
            fps, note = anchor_fps(buf, anchor)
            first.append(note)
        view, notes = aligned_for_export(buf, fps=fps, anchor=anchor, how=how, tolerance=tolerance, streams=streams)
        notes = first + notes
        if fmt == "lerobot":
            from trajstore.interop.lerobot.export import export_lerobot

            result = export_lerobot(view, out, fps=fps, **options)
            if anchor is not None:
                gaps = gaps_note(buf, anchor, result.episodes, result.fps)
                if gaps:
                    notes.append(gaps)
            flagged = flagged_steps(view, result.episodes)
            if any(flagged.values()):
                notes.append("LeRobot has no place for is_pad: " + ", ".join(
                    f"{n} of {result.frames} frames of {name!r}" for name, n in flagged.items() if n)
                    + " use a sample farther than the stream's tolerance (or none before its first one); "
                    "they were exported with that sample's value")
            return result, notes
        from trajstore.interop.zarr import export_zarr

        return export_zarr(view, out, **options), notes


__all__ = ["export_stream_buffer", "aligned_for_export", "anchor_fps", "gaps_note", "flagged_steps", "parse_how",
           "parse_tolerance", "parse_stream_options"]
