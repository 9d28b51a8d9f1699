"""Encode and decode camera frames as JPEG or PNG.

JPEG takes RGB frames, shape ``(H, W, 3)``, dtype uint8. PNG takes those and single-channel frames
``(H, W)`` or ``(H, W, 1)``, uint8 (8-bit grayscale, Pillow mode ``"L"``) or uint16 (16-bit grayscale,
mode ``"I;16"``: depth in millimetres keeps every value).

Choices (numbers from ``benchmarks/image_codecs.py`` and ``benchmarks/jpeg_settings.py``, run on
the development machine):

* **JPEG** through simplejpeg (libjpeg-turbo), RGB input. simplejpeg encodes and decodes faster
  than Pillow's JPEG at the same settings and can decode straight into a preallocated array.
  Defaults: quality :data:`JPEG_QUALITY` = 90 and chroma :data:`JPEG_SUBSAMPLING` = 4:4:4,
  chosen from ``jpeg_settings.py`` (see :data:`JPEG_QUALITY` and :data:`JPEG_SUBSAMPLING`).
* **PNG** through Pillow (lossless), zlib ``compress_level`` :data:`PNG_COMPRESS_LEVEL` = 1:
  several times faster to encode than Pillow's default of 6 for frames only slightly larger
  (see the benchmark for the ratios).

Batches of at least :data:`POOL_MIN_BYTES` run on a shared pool of :data:`WORKERS` threads
(libjpeg-turbo and zlib release the GIL) while the machine has a CPU to spare (its 1-minute load
average below :data:`CPUS`); otherwise on the calling thread: on loaded cores a second thread only
adds the hand-off.
"""

from __future__ import annotations

import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np

from trajstore.errors import FormatError

#: Formats by canonical (upper-case) name.
FORMATS = ("JPEG", "PNG")
#: JPEG quality (1..100) when none is given.
#:
#: 90, from ``benchmarks/jpeg_settings.py`` (96x96, 4:4:4; 200 frames per simulator): against quality 95
#: a frame takes 0.80x the bytes on PushT (2388 vs 2972 bytes), 0.77x on MuJoCo Pusher (2527 vs
#: 3284), 0.75x on MuJoCo HalfCheetah (6309 vs 8365) and 0.72x on five scikit-image photos shrunk
#: to 96x96, for a mean PSNR of 41.8 / 41.3 / 37.5 / 35.8 dB instead of 46.5 / 45.4 / 39.6 / 39.1
#: (worst PushT frame 41.1 dB) and a worst pixel error of 33-44 levels instead of 21-25.
#: Encode time hardly depends on quality (about 50 us per 96x96 PushT frame from 75 to 95).
#: Quality 85 would save another 11-19% of the bytes for 2-3 dB less and a worst pixel error of
#: 45-79 levels (79 on PushT): ringing around the small objects that matter at 96x96.
JPEG_QUALITY = 90
#: Chroma subsampling of JPEG frames (libjpeg-turbo notation) when none is given.
#:
#: "444" (colour at full resolution), from ``benchmarks/jpeg_settings.py``. Subsampling at
#: quality 90-95 loses to 4:4:4 one quality step down, which takes fewer bytes for a higher
#: PSNR on every set: q95 4:2:0 vs q90 4:4:4 is 2470 vs 2388 bytes and 39.1 vs 41.8 dB on PushT,
#: 3082 vs 2527 and 39.8 vs 41.3 on Pusher, 7001 vs 6309 and 36.3 vs 37.5 on HalfCheetah,
#: 6089 vs 5683 and 34.3 vs 35.8 on the 96x96 photos (only at quality 75-85 do the two lie on
#: about one bytes/PSNR curve). At equal quality 4:2:0 more than doubles the worst pixel error
#: on PushT and Pusher (q90: 101 vs 44 and 114 vs 37 levels), at the edge of PushT's 5-pixel blue
#: agent (a pixel (65, 105, 225) read back (56, 126, 124)) and of Pusher's red goal: one colour
#: per 2x2 pixels smears small coloured objects. What 4:2:0 buys is CPU time: encoding takes
#: 0.6-0.7x as long at equal quality (31 vs 50 us per 96x96 PushT frame at q90), decoding
#: 0.7-0.85x (two runs). At 96x96 the whole encode is 0.05% of a 10 Hz control step; for large
#: frames, where encoding costs 1.5-1.7 ms (the photos, q90), ``subsampling="420"`` is the option.
JPEG_SUBSAMPLING = "444"
#: Chroma subsamplings offered, in libjpeg-turbo's notation: "444" keeps colour at full
#: resolution, "422" halves it horizontally, "420" halves it both ways (one colour per 2x2 pixels).
SUBSAMPLINGS = ("444", "422", "420")
#: zlib level of PNG frames: 1 trades a few percent of size for much faster encoding than 6.
PNG_COMPRESS_LEVEL = 1
#: Threads of the shared codec pool.
WORKERS = 2
#: A batch goes to the pool only if its frames hold at least this many bytes (decoded): below about
#: 1 MiB (~20 frames of 128x128x3, ~2 ms to decode) handing parts to threads and waiting for them costs
#: about what the second thread saves.
POOL_MIN_BYTES = 2**20
#: CPUs this process may run on (its affinity mask where the platform tells it).
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()


def normalize_format(fmt: object) -> str:
    """``"jpeg"``/``"JPG"``/``"png"``... -> ``"JPEG"`` or ``"PNG"``.

    Raises:
        ValueError: another format; the message lists the accepted ones.
    """
    name = fmt.upper() if isinstance(fmt, str) else None
    name = "JPEG" if name == "JPG" else name
    if name not in FORMATS:
        raise ValueError(f"image format must be one of {list(FORMATS)} (case-insensitive), got {fmt!r}")
    return name


def check_quality(quality: object) -> int:
    """A JPEG quality as an int in 1..100.

    Raises:
        ValueError: not an int, or outside 1..100.
    """
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be an int in 1..100, got {quality!r}")
    return int(quality)


def check_subsampling(subsampling: object) -> str:
    """A JPEG chroma subsampling: one of :data:`SUBSAMPLINGS` (strings, as libjpeg-turbo names them).

    Raises:
        ValueError: anything else (``420`` as an int, ``"4:2:0"``...); the message lists the accepted ones.
    """
    if not isinstance(subsampling, str) or subsampling not in SUBSAMPLINGS:
        raise ValueError(f"JPEG chroma subsampling must be one of {list(SUBSAMPLINGS)}, got {subsampling!r}")
    return subsampling


# -- one frame ---------------------------------------------------------------------------------
def encode(frame: np.ndarray, fmt: str = "JPEG", quality: int = JPEG_QUALITY,
           subsampling: str = JPEG_SUBSAMPLING) -> bytes:
    """Encode one C-contiguous frame (``fmt`` is ``"JPEG"`` or ``"PNG"``).

    JPEG: uint8 ``(H, W, 3)``. PNG: that, or uint8 / native uint16 ``(H, W)`` or ``(H, W, 1)``.
    The frame, ``quality`` and ``subsampling`` (JPEG only) are trusted (checked by the caller).
    """
    if fmt == "JPEG":
        import simplejpeg

        return simplejpeg.encode_jpeg(frame, quality=quality, colorspace="RGB", colorsubsampling=subsampling)
    from PIL import Image

    buf = io.BytesIO()
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[:, :, 0]  # Pillow's grayscale modes take (H, W)
    Image.fromarray(frame).save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


#: The start-of-image marker every complete JPEG (and PNG never) begins with.
JPEG_SOI = b"\xff\xd8"


def jpeg_header(data: bytes | memoryview) -> bytes:
    """The bytes of a baseline JPEG up to the end of its start-of-scan segment: markers, quantisation
    and Huffman tables, frame size (ITU T.81, B.2). What follows is entropy-coded data and EOI, in
    which a 0xFF byte is followed only by 0x00 or a restart marker (0xD0-0xD7), never by 0xD8.

    Frames of one size, quality and subsampling encoded by libjpeg-turbo with its standard Huffman
    tables share this header byte for byte (623 bytes for 128x128 at quality 75, 4:2:0: ~30% of a
    frame).

    Raises:
        ValueError: ``data`` is not a JPEG whose markers lead to a start-of-scan segment.
    """
    data = bytes(data[:65536 * 4]) if len(data) > 65536 * 4 else bytes(data)
    if not data.startswith(JPEG_SOI):
        raise ValueError("not a JPEG: no start-of-image marker")
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise ValueError(f"not a JPEG: no marker at byte {pos}")
        marker, length = data[pos + 1], int.from_bytes(data[pos + 2:pos + 4], "big")
        if length < 2:
            raise ValueError(f"not a JPEG: segment of length {length} at byte {pos}")
        pos += 2 + length
        if marker == 0xDA:  # start of scan: the header ends with its segment
            if pos > len(data):
                break
            return data[:pos]
    raise ValueError("not a JPEG: no start-of-scan segment")


def png_modes(out: np.ndarray) -> tuple[str, ...]:
    """Pillow modes a PNG may open in to fill ``out`` (one frame): RGB, ``"L"``, or 16-bit grayscale.

    A 16-bit grayscale PNG opens as ``"I;16"`` in current Pillow and as ``"I"`` (int32) in older ones.
    """
    if out.ndim == 3 and out.shape[2] == 3:
        return ("RGB",)
    return ("L",) if out.dtype == np.uint8 else ("I;16", "I;16B", "I")


def decode_into(data: bytes | memoryview, out: np.ndarray, fmt: str = "JPEG") -> None:
    """Decode one frame into ``out`` (C-contiguous, written in place): uint8 ``(H, W, 3)`` for
    JPEG; for PNG also uint8 or uint16 ``(H, W)`` / ``(H, W, 1)``.

    Raises:
        FormatError: the bytes do not decode, or decode to another size or colour mode.
    """
    h, w = out.shape[:2]
    try:
        if fmt == "JPEG":
            import simplejpeg

            got = simplejpeg.decode_jpeg(data, colorspace="RGB", buffer=out).shape  # libjpeg writes into out
        else:
            from PIL import Image

            with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
                modes = png_modes(out)
                if img.mode not in modes or img.size != (w, h):
                    raise FormatError(f"PNG frame is {img.mode} {img.size[0]}x{img.size[1]}, "
                                      f"expected {modes[0]} {w}x{h}")
                out[...] = np.asarray(img).reshape(out.shape)  # "I" (int32) holds 16-bit values
                got = out.shape
    except FormatError:
        raise
    except Exception as exc:  # corrupt bytes: the codecs raise ValueError / OSError / RuntimeError
        raise FormatError(f"cannot decode a {fmt} frame of {len(data)} bytes: {exc}") from exc
    if tuple(got) != out.shape:
        raise FormatError(f"{fmt} frame decoded to shape {tuple(got)}, expected {out.shape}")


# -- batches on the shared pool ------------------------------------------------------------------
def _executor() -> ThreadPoolExecutor:
    """The shared pool, created on first use and again in a forked child (its threads do not survive fork)."""
    global _pool, _pool_pid
    pid = os.getpid()
    if _pool is None or _pool_pid != pid:
        with _pool_lock:
            if _pool is None or _pool_pid != pid:
                _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="trajstore-codec")
                _pool_pid = pid
    return _pool


def pool_pays(nbytes: int) -> bool:
    """Whether a batch of frames holding ``nbytes`` bytes (decoded) goes to the pool: it is at least
    :data:`POOL_MIN_BYTES` and the 1-minute load average is below :data:`CPUS` (where the platform
    has one)."""
    if nbytes < POOL_MIN_BYTES or WORKERS < 2 or CPUS < 2:
        return False
    try:
        return os.getloadavg()[0] < CPUS
    except (AttributeError, OSError):  # no load average (Windows): the pool, as before
        return True


def _run_split(n: int, work: Callable[[int, int], None], nbytes: int) -> None:
    """Run ``work(start, stop)`` over ``range(n)``: in up to :data:`WORKERS` contiguous parts on the pool
    when :func:`pool_pays` for ``nbytes`` (the frames' bytes), else at once on this thread."""
    if n <= 1 or not pool_pays(nbytes):
        work(0, n)
        return
    bounds = np.linspace(0, n, min(n, WORKERS) + 1).astype(int)
    futures = [_executor().submit(work, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    for f in futures:
        f.result()  # re-raises a worker's exception here


def encode_batch(frames: np.ndarray, fmt: str = "JPEG", quality: int = JPEG_QUALITY,
                 subsampling: str = JPEG_SUBSAMPLING) -> list[bytes]:
    """Encode frames ``(N, H, W, 3)`` uint8 (or, for PNG, ``(N, H, W[, 1])`` uint8 / uint16) -> ``N``
    payloads (bytes), on the shared pool (see :func:`encode`)."""
    frames = np.asarray(frames)
    frames = np.ascontiguousarray(frames, dtype=frames.dtype.newbyteorder("="))  # Pillow reads native order
    out: list[bytes] = [b""] * len(frames)

    def work(a: int, b: int) -> None:
        for i in range(a, b):
            out[i] = encode(frames[i], fmt, quality, subsampling)

    _run_split(len(frames), work, frames.nbytes)
    return out


def decode_batch(payloads: Sequence[bytes | memoryview], out: np.ndarray, fmt: str = "JPEG",
                 where: Callable[[int], str] | None = None, rows: np.ndarray | None = None) -> None:
    """Decode ``N`` payloads into ``out`` (C-contiguous; shapes and dtypes as :func:`decode_into`, with
    a leading axis ``N``), on the shared pool. ``rows`` (int ``(N,)``, distinct, within ``out``): payload
    ``i`` goes to ``out[rows[i]]`` instead of ``out[i]`` (``out`` may have more rows; the others are left
    as they are).

    ``where(i)`` says where payload ``i`` came from (file, offset, slot); it starts the message of a
    payload that does not decode. The batch goes to the pool when :func:`pool_pays`.

    Raises:
        ValueError: ``len(payloads) != len(out)`` (``len(rows)`` when given) or ``out`` is not a C-contiguous
            uint8 / uint16 array.
        FormatError: a payload does not decode to a frame of ``out``'s shape and mode.
    """
    n = len(out) if rows is None else len(rows)
    if len(payloads) != n or out.dtype not in (np.uint8, np.uint16) or not out.flags.c_contiguous:
        raise ValueError(f"decode_batch needs a C-contiguous uint8/uint16 out with one row per payload, got "
                         f"{len(payloads)} payloads and out {out.dtype} {out.shape}")

    dst: Sequence[int] = range(n) if rows is None else np.asarray(rows).tolist()

    def work(a: int, b: int) -> None:
        if fmt == "JPEG":  # the tight loop: libjpeg writes each frame into its row; checked after
            import simplejpeg

            decode, shape = simplejpeg.decode_jpeg, out.shape[1:]
            i = a
            try:
                for i in range(a, b):
                    if decode(payloads[i], "RGB", buffer=out[dst[i]]).shape != shape:
                        break
                else:
                    return
            except Exception:  # noqa: BLE001  # decode_into below says what is wrong with frame i
                pass
            a = i
        for i in range(a, b):
            try:
                decode_into(payloads[i], out[dst[i]], fmt)
            except FormatError as exc:
                if where is None:
                    raise
                raise FormatError(f"{where(i)}: {exc}") from exc

    _run_split(n, work, out[0].nbytes * n if n else 0)
