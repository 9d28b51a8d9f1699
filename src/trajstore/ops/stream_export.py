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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from trajstore.ops.stream_info import is_stream_folder
from trajstore.streams.rates import stream_rates

if TYPE_CHECKING:
    from trajstore.streams import StreamBuffer

#: Alignment methods a stream may take (``how``).
METHODS = ("previous", "nearest", "linear")
#: The anchor stream's measured rate may differ from the export's fps by this fraction before a note says so.
RATE_NOTE_FRACTION = 0.05


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


def aligned_for_export(buf: "StreamBuffer", *, fps: float | None, anchor: str | None,
                       how: Mapping[str, str] | None = None, tolerance: Mapping[str, float] | None = None
                       ) -> tuple[Any, list[str]]:
    """The aligned view an export writes, and notes for the user.

    With ``anchor``: ``buf.aligned(anchor=anchor, ...)``; ``fps`` (if given) is only the rate the format
    records, and a note says when the anchor's measured median rate differs from it by more than
    :data:`RATE_NOTE_FRACTION`. Without: ``buf.aligned(rate_hz=fps, ...)``.

    Raises:
        ValueError: neither ``anchor`` nor ``fps``, a non-positive ``fps``; and the errors of ``buf.aligned``
            (``how``/``tolerance``/``anchor`` naming a stream the buffer does not have, a bad method,
            ``"linear"`` for a non-float leaf).
    """
    if fps is not None and not float(fps) > 0:
        raise ValueError(f"fps must be a positive number of Hz, got {fps!r}")
    notes: list[str] = []
    if anchor is not None:
        view = buf.aligned(anchor=anchor, how=dict(how or {}), tolerance=dict(tolerance or {}))
        if fps is not None:
            rate = stream_rates(buf, anchor).rate_hz
            if rate is not None and abs(rate - float(fps)) > RATE_NOTE_FRACTION * float(fps):
                notes.append(f"the anchor stream {anchor!r} runs at {rate:.4g} Hz (median period) but the export "
                             f"records {float(fps):g} fps: its time axis is stretched by {rate / float(fps):.3g}")
    elif fps is None:
        raise ValueError("a stream buffer is exported through an aligned view: pass an anchor stream "
                         "(--anchor NAME) or a rate (--fps HZ, a regular grid)")
    else:
        view = buf.aligned(rate_hz=float(fps), how=dict(how or {}), tolerance=dict(tolerance or {}))
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
                         tolerance: Mapping[str, float] | None = None, **options: Any) -> tuple[Any, list[str]]:
    """Open the stream buffer ``src`` read-only, align it (:func:`aligned_for_export`) and export the view
    to ``out`` with :func:`~trajstore.interop.lerobot.export_lerobot` (``fmt="lerobot"``, ``fps`` passed on)
    or :func:`~trajstore.interop.zarr.export_zarr` (``fmt="zarr"``); ``options`` go to the exporter.

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
        view, notes = aligned_for_export(buf, fps=fps, anchor=anchor, how=how, tolerance=tolerance)
        if fmt == "lerobot":
            from trajstore.interop.lerobot.export import export_lerobot

            result = export_lerobot(view, out, fps=fps, **options)
            flagged = flagged_steps(view, result.episodes)
            if any(flagged.values()):
                notes.append("LeRobot has no place for is_pad: " + ", ".join(
                    f"{n} of {result.frames} frames of {name!r}" for name, n in flagged.items() if n)
                    + " use a sample farther than the stream's tolerance (or none before its first one); "
                    "they were exported with that sample's value")
            return result, notes
        from trajstore.interop.zarr import export_zarr

        return export_zarr(view, out, **options), notes


__all__ = ["export_stream_buffer", "aligned_for_export", "flagged_steps", "parse_how", "parse_tolerance",
           "parse_stream_options"]
