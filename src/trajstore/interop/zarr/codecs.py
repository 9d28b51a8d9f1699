"""Frame codecs for zarr arrays in Diffusion Policy's layout: JPEG 2000 and JPEG XL, one frame per chunk.

Diffusion Policy (real-stanford/diffusion_policy, ``diffusion_policy/codecs/imagecodecs_numcodecs.py``)
keeps its own copy of imagecodecs' numcodecs classes and registers them under imagecodecs' ids,
``imagecodecs_jpeg2k`` and ``imagecodecs_jpegxl``. Its real-world and robomimic conversions compress
camera frames with ``Jpeg2k(level=50)``; its default image compressor is JPEG XL with effort 3,
distance 0.3 and decoding speed 1. Those classes rebuild a codec from the array's ``.zarray`` with
``cls(**config)``, so a config key they do not know (newer imagecodecs writes ``planar``, ``mct``,
``squeeze``) makes the array unreadable there. The codecs here write only the keys both
Diffusion Policy's copy and current imagecodecs accept, and read any config (unknown keys ignored:
decoding needs none of them). The pixel work is imagecodecs' (``jpeg2k_encode``/``jpegxl_encode``).

Reading in plain zarr. numcodecs has no image codec of its own, and imagecodecs (2026.3) declares no
entry points: in a fresh interpreter ``zarr.open(...)["data/img"][0]`` fails with "codec not
available: 'imagecodecs_jpeg2k'" until someone registers one. trajstore declares the entry points of
:data:`NUMCODECS_ENTRY_POINTS` (group ``numcodecs.codecs``), pointing at imagecodecs' own classes, so
where trajstore is installed numcodecs loads imagecodecs' codec on first use, with nothing to call.
A codec registered explicitly (``register_codec``: Diffusion Policy's ``register_codecs()``, or
:func:`register_codecs` here) takes precedence over an entry point, so Diffusion Policy keeps its own
classes. Elsewhere ``imagecodecs.numcodecs.register_codecs()`` is the one call needed
(:func:`reading_note` says so in an export's summary line).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: numcodecs entry points (group ``numcodecs.codecs``) trajstore's package metadata declares: id -> the
#: imagecodecs class that decodes frames of that id (``pyproject.toml``, ``[project.entry-points."numcodecs.codecs"]``).
NUMCODECS_ENTRY_POINTS = {"imagecodecs_jpeg2k": "imagecodecs.numcodecs:Jpeg2k",
                          "imagecodecs_jpegxl": "imagecodecs.numcodecs:Jpegxl"}
#: The one line that lets plain zarr read frames where trajstore's entry points are not installed.
REGISTER_LINE = "import imagecodecs.numcodecs; imagecodecs.numcodecs.register_codecs()"

#: ``compressor=`` values of :func:`~trajstore.interop.zarr.export_zarr` (None: raw frames).
FRAME_COMPRESSORS = ("jpeg2k", "jpegxl")

#: JPEG 2000 target PSNR (dB) of lossy frames: Diffusion Policy's ``Jpeg2k(level=50)``.
JPEG2K_LEVEL = 50
#: JPEG XL settings of lossy frames: Diffusion Policy's default image compressor (distance 0.3 is
#: near-lossless; its comment reports a libjxl bug with a decoding speed above 1).
JPEGXL_LOSSY = {"effort": 3, "distance": 0.3, "decodingspeed": 1}


def _imagecodecs() -> Any:
    try:
        import imagecodecs
    except ImportError:
        raise ImportError("zarr frame codecs need imagecodecs: pip install 'trajstore[zarr]'") from None
    return imagecodecs


def _one_frame(buf: Any) -> np.ndarray:
    """The frame of a one-frame chunk: ``(1, H, W, C)`` -> ``(H, W, C)``."""
    frame = np.asarray(buf)
    while frame.ndim > 3 and frame.shape[0] == 1:
        frame = frame[0]
    return frame


def _decoded_into(frame: np.ndarray, out: Any) -> Any:
    if out is None:
        return frame
    np.copyto(np.asarray(out).reshape(frame.shape), frame)
    return out


def _codec_base() -> type:
    from numcodecs.abc import Codec

    return Codec


class _FrameCodec:
    """Shared config handling: keep the known keys, drop the rest (see the module docstring)."""

    codec_id = ""
    config_keys: tuple[str, ...] = ()

    def __init__(self, **config: Any):
        for key in self.config_keys:
            setattr(self, key, config.get(key))

    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, **{key: getattr(self, key) for key in self.config_keys}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        return cls(**{k: v for k, v in config.items() if k != "id"})

    def __repr__(self) -> str:
        set_keys = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.config_keys if getattr(self, k) is not None)
        return f"{type(self).__name__}({set_keys})"


def _make_codec_classes() -> tuple[type, type]:
    Codec = _codec_base()

    class Jpeg2kFrames(_FrameCodec, Codec):
        """JPEG 2000 frames (``reversible=True``: lossless; ``level``: target PSNR in dB)."""

        codec_id = "imagecodecs_jpeg2k"
        # The keyword arguments of Diffusion Policy's Jpeg2k, all accepted by imagecodecs' Jpeg2k.
        config_keys = ("level", "codecformat", "colorspace", "tile", "reversible", "bitspersample",
                       "resolutions", "numthreads", "verbose")

        def encode(self, buf: Any) -> bytes:
            return _imagecodecs().jpeg2k_encode(_one_frame(buf), level=self.level, reversible=self.reversible,
                                                numthreads=self.numthreads)

        def decode(self, buf: Any, out: Any = None) -> Any:
            return _decoded_into(_imagecodecs().jpeg2k_decode(bytes(buf), numthreads=self.numthreads), out)

    class JpegXlFrames(_FrameCodec, Codec):
        """JPEG XL frames (``lossless=True``, or lossy at butteraugli ``distance``)."""

        codec_id = "imagecodecs_jpegxl"
        # The keyword arguments of Diffusion Policy's JpegXl, all accepted by imagecodecs' Jpegxl.
        config_keys = ("level", "effort", "distance", "lossless", "decodingspeed", "photometric", "planar",
                       "usecontainer", "index", "keeporientation", "numthreads")

        def encode(self, buf: Any) -> bytes:
            return _imagecodecs().jpegxl_encode(_one_frame(buf), level=self.level, effort=self.effort,
                                                distance=self.distance, lossless=self.lossless,
                                                decodingspeed=self.decodingspeed, numthreads=self.numthreads)

        def decode(self, buf: Any, out: Any = None) -> Any:
            return _decoded_into(_imagecodecs().jpegxl_decode(bytes(buf), numthreads=self.numthreads), out)

    return Jpeg2kFrames, JpegXlFrames


_CLASSES: tuple[type, type] | None = None


def codec_classes() -> tuple[type, type]:
    """``(Jpeg2kFrames, JpegXlFrames)``, numcodecs codecs (made on first use: numcodecs is optional)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _make_codec_classes()
    return _CLASSES


def register_codecs() -> None:
    """Make zarr able to read frames written by Diffusion Policy or by :func:`frame_compressor`.

    Registers :func:`codec_classes` under their ids unless a codec is registered there already
    (the user's own, or imagecodecs'; either decodes these frames), then imagecodecs' other
    numcodecs codecs for ids still free. Safe to call more than once.

    Raises:
        ImportError: numcodecs or imagecodecs is not installed (the ``zarr`` extra).
    """
    _imagecodecs()
    from numcodecs.registry import codec_registry, register_codec

    for cls in codec_classes():
        if cls.codec_id not in codec_registry:
            register_codec(cls)
    import imagecodecs.numcodecs

    imagecodecs.numcodecs.register_codecs(force=False, verbose=False)


def entry_point_installed(codec_id: str) -> bool:
    """Whether an installed package declares a numcodecs entry point for ``codec_id`` (trajstore's
    :data:`NUMCODECS_ENTRY_POINTS`, or another's): then plain zarr finds that codec by itself."""
    from importlib.metadata import entry_points

    return any(ep.name == codec_id for ep in entry_points(group="numcodecs.codecs"))


def reading_note(codec_id: str) -> str:
    """How to read frames of numcodecs id ``codec_id`` with plain zarr, for an export's summary line."""
    if entry_point_installed(codec_id):
        return (f"frames are {codec_id}: plain zarr reads them here (an installed entry point gives numcodecs "
                f"imagecodecs' codec); where trajstore is not installed, run `{REGISTER_LINE}` first")
    return f"frames are {codec_id}: to read them with plain zarr, run `{REGISTER_LINE}` first"


def frame_compressor(name: str | None, *, lossless: bool = False) -> Any:
    """The numcodecs codec for one ``(1, H, W, 3)`` uint8 frame chunk, or None for raw frames.

    Args:
        name: ``"jpeg2k"`` (Diffusion Policy's choice for its converted data), ``"jpegxl"``, or None.
        lossless: JPEG 2000 reversible wavelet / JPEG XL lossless mode (frames read back exactly);
            otherwise :data:`JPEG2K_LEVEL` or :data:`JPEGXL_LOSSY`.

    Raises:
        ValueError: another name.
        ImportError: imagecodecs is missing, or was built without that codec.
    """
    if name is None:
        return None
    if name not in FRAME_COMPRESSORS:
        raise ValueError(f"compressor must be one of {FRAME_COMPRESSORS} or None, got {name!r}")
    codecs = _imagecodecs()
    available = codecs.JPEG2K.available if name == "jpeg2k" else codecs.JPEGXL.available
    if not available:
        raise ImportError(f"this imagecodecs build has no {name} codec")
    Jpeg2kFrames, JpegXlFrames = codec_classes()
    if name == "jpeg2k":
        return Jpeg2kFrames(reversible=True) if lossless else Jpeg2kFrames(level=JPEG2K_LEVEL)
    return JpegXlFrames(lossless=True, effort=JPEGXL_LOSSY["effort"]) if lossless else JpegXlFrames(**JPEGXL_LOSSY)
