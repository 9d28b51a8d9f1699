"""What a script needs to run lerobot-lancedb 0.3.1 in the ``lancedb`` peer venv (see ``_venvs``), offline.

lerobot-lancedb 0.3.1 (``lerobot_lancedb.convert`` and ``lerobot_lancedb.reader.LanceDBDataset``)
declares ``lerobot>=0.6``; lerobot 0.6 needs Python >= 3.12 and a torch < 2.12, neither of which
this machine has as a CPU build. The venv therefore holds LeRobot 0.4.4 (Python 3.11, torch 2.13.0
CPU), and :func:`install` supplies, before ``lerobot_lancedb`` is imported, what the package takes
from lerobot 0.6 that 0.4.4 lacks or keeps elsewhere:

* ``lerobot.datasets.dataset_metadata.LeRobotDatasetMetadata``: 0.4.4's class (same v3.0 ``meta/``
  reader) with ``depth_keys == []`` (0.4.4 has no depth features) and a no-op ``rescale_depth_stats``.
* ``lerobot.datasets.feature_utils.{check_delta_timestamps, get_delta_indices}``: 0.4.4's
  functions from ``lerobot.datasets.utils`` (same code).
* ``lerobot.datasets.language.LANGUAGE_COLUMNS``: empty (0.4.4 datasets have no language columns).
* ``lerobot.configs.video`` / ``lerobot.datasets.depth_utils``: depth-only names; calling them raises.
* ``lerobot.utils.import_utils.require_package``: raises ImportError if the package is missing.
* ``torchcodec.decoders.VideoDecoder``: the reader decodes RGB video with torchcodec, which needs
  FFmpeg shared libraries this machine does not have (and the reference notes say torchcodec does
  not load beside torch 2.13 CPU). :class:`PyAVVideoDecoder` is a PyAV stand-in with the part of
  torchcodec's API the reader calls (``metadata.average_fps/height/width``,
  ``get_frames_at(indices=...)`` -> ``.data`` uint8 ``(N, 3, H, W)``, ``.pts_seconds`` float64 ``(N,)``).
  It reads through the reader's own file-like source, so Lance's blob range fetches are unchanged;
  only the decoder library differs (PyAV's FFmpeg instead of torchcodec's).

Also the torchvision op placeholders and offline Hugging Face of ``benchmarks/peers/_lerobot_compat``
(LeRobot 0.4.4 imports torchvision). Import this module and call :func:`install` at the top of the
script, before anything imports lerobot: with ``forkserver``/``spawn`` DataLoader workers the script
is imported again in the worker processes, so its top level must do this too.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

_PEERS = Path(__file__).resolve().parent.parent / "peers"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, mod)
    return mod


def _depth_unsupported(*_args: Any, **_kwargs: Any) -> Any:
    raise NotImplementedError("depth video features need lerobot >= 0.6 (not installable here)")


class _FrameBatch:
    """torchcodec's ``FrameBatch`` as the reader uses it: ``data`` uint8 (N, 3, H, W), ``pts_seconds`` float64 (N,)."""

    def __init__(self, data: Any, pts_seconds: Any):
        self.data = data
        self.pts_seconds = pts_seconds


class PyAVVideoDecoder:
    """PyAV stand-in for ``torchcodec.decoders.VideoDecoder(source, seek_mode="approximate")``.

    ``source``: a seekable binary file-like object (the reader's ``_SparseBlobSource``) or a path.
    ``get_frames_at(indices)`` decodes the frames whose index ``round(pts_s * fps)`` is in
    ``indices`` (frame index = position in the file at its constant frame rate, as torchcodec's
    approximate mode computes it): seek to the keyframe at or before the first, decode forward to
    the last. Raises ``IndexError`` naming the index if the file has no such frame. One container per
    decoder; calls are serialized by a lock (the reader decodes each file from one thread at a time).
    """

    def __init__(self, source: Any, seek_mode: str = "approximate"):
        import av

        if hasattr(source, "seek"):
            source.seek(0)
        self._container = av.open(source if hasattr(source, "read") else str(source), mode="r")
        self._stream = self._container.streams.video[0]
        ctx = self._stream.codec_context
        ctx.thread_count = 1  # torchcodec's default (num_ffmpeg_threads=1); the reader runs files in threads
        self._fps = float(self._stream.average_rate)
        self._tb = float(self._stream.time_base)
        self.metadata = types.SimpleNamespace(average_fps=self._fps, height=ctx.height, width=ctx.width)
        self._lock = threading.Lock()

    def get_frames_at(self, indices: list[int]) -> _FrameBatch:
        import numpy as np
        import torch

        wanted = sorted({int(i) for i in indices})
        found: dict[int, tuple[np.ndarray, float]] = {}
        with self._lock:
            self._container.seek(max(0, int(round(wanted[0] / self._fps / self._tb)) - 1), stream=self._stream,
                                 backward=True, any_frame=False)
            for frame in self._container.decode(self._stream):
                if frame.pts is None:
                    continue
                t = float(frame.pts * self._tb)
                k = int(round(t * self._fps))
                if k in wanted and k not in found:
                    found[k] = (frame.to_ndarray(format="rgb24"), t)
                if k >= wanted[-1]:
                    break
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexError(f"video has no frame at index {missing[0]} (fps {self._fps})")
        data = np.stack([found[int(i)][0] for i in indices])
        pts = torch.tensor([found[int(i)][1] for i in indices], dtype=torch.float64)
        return _FrameBatch(torch.from_numpy(data).permute(0, 3, 1, 2).contiguous(), pts)


_INSTALLED = False


def install(cache_dir: str | Path) -> None:
    """Offline Hugging Face (caches under ``cache_dir``), torchvision placeholders, and the modules above.

    Idempotent. Must run before ``lerobot`` or ``lerobot_lancedb`` is imported.
    """
    global _INSTALLED
    if _INSTALLED:
        return
    if str(_PEERS) not in sys.path:
        sys.path.insert(0, str(_PEERS))
    import _lerobot_compat

    _lerobot_compat.setup(cache_dir)

    import lerobot.configs
    import lerobot.datasets  # noqa: F401 - the package, before its submodules are patched
    import lerobot.datasets.utils as lr_utils
    import lerobot.utils.import_utils as import_utils
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata as _Meta040

    class LeRobotDatasetMetadata(_Meta040):
        """LeRobot 0.4.4's metadata reader with lerobot 0.6's depth attributes (no depth features)."""

        @property
        def depth_keys(self) -> list[str]:
            return []

        def rescale_depth_stats(self, unit: str) -> None:
            return None

    # picklable as ``_lancedb_compat.LeRobotDatasetMetadata`` (the dataset goes to DataLoader workers)
    LeRobotDatasetMetadata.__module__, LeRobotDatasetMetadata.__qualname__ = __name__, "LeRobotDatasetMetadata"
    globals()["LeRobotDatasetMetadata"] = LeRobotDatasetMetadata
    _module("lerobot.datasets.dataset_metadata", LeRobotDatasetMetadata=LeRobotDatasetMetadata)
    _module("lerobot.datasets.feature_utils", check_delta_timestamps=lr_utils.check_delta_timestamps,
            get_delta_indices=lr_utils.get_delta_indices)
    _module("lerobot.datasets.language", LANGUAGE_COLUMNS=())
    _module("lerobot.datasets.depth_utils", dequantize_depth=_depth_unsupported)
    _module("lerobot.configs.video", DEFAULT_DEPTH_UNIT="mm",
            DepthEncoderConfig=types.SimpleNamespace(from_video_info=_depth_unsupported))
    if not hasattr(import_utils, "require_package"):
        def require_package(name: str, extra: str | None = None) -> None:
            if not import_utils.is_package_available(name):
                raise ImportError(f"package {name!r} is required (pip install lerobot[{extra}])")
        import_utils.require_package = require_package

    _module("torchcodec")
    _module("torchcodec.decoders", VideoDecoder=PyAVVideoDecoder)
    _INSTALLED = True


def __getattr__(name: str) -> Any:
    """``LeRobotDatasetMetadata`` exists once :func:`install` has run (a worker unpickling may ask first)."""
    if name == "LeRobotDatasetMetadata":
        install(Path(tempfile.gettempdir()) / "trajstore-peers-lancedb-hf")
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
