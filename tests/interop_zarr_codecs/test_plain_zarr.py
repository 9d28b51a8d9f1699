"""A zarr export opens in plain zarr: a fresh interpreter (nothing registered by hand) reads its frames
through the numcodecs entry points trajstore declares, or after the one line the summary prints; a codec
registered as Diffusion Policy registers its own still wins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("zarr")
pytest.importorskip("imagecodecs")

from tests.integrations.zarr_helpers import EPISODE_LENGTHS, make_buffer  # noqa: E402
from trajstore.interop.zarr import export_zarr, import_zarr  # noqa: E402
from trajstore.interop.zarr.codecs import NUMCODECS_ENTRY_POINTS, REGISTER_LINE  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def entry_point_dir(tmp_path: Path) -> Path:
    """A folder holding package metadata with exactly the entry points trajstore's pyproject declares
    (what ``pip install trajstore`` puts in site-packages), for a child's PYTHONPATH."""
    dist = tmp_path / "eps" / "trajstore_codec_eps-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trajstore-codec-eps\nVersion: 0\n")
    lines = ["[numcodecs.codecs]"] + [f"{k} = {v}" for k, v in NUMCODECS_ENTRY_POINTS.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return dist.parent


def read_in_child(tmp_path: Path, group: Path, key: str, *, prelude: str = "", pythonpath: Path | None = None,
                  ) -> tuple[np.ndarray, np.ndarray, str]:
    """Run a fresh ``python -c`` that opens ``group`` with plain zarr and saves ``data/<key>[:]`` and
    ``data/<key>[3]``; returns both and the child's stdout."""
    out_all, out_one = tmp_path / "all.npy", tmp_path / "one.npy"
    code = prelude + textwrap.dedent(f"""
        import numpy, zarr
        a = zarr.open({str(group)!r}, mode="r")["data/{key}"]
        numpy.save({str(out_all)!r}, a[:])
        numpy.save({str(out_one)!r}, a[3])
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return np.load(out_all), np.load(out_one), done.stdout


@pytest.mark.parametrize("compressor", ["jpeg2k", "jpegxl"])
def test_plain_zarr_reads_lossless_frames_through_the_declared_entry_points(tmp_path, compressor):
    data = make_buffer(tmp_path / "rb")
    export_zarr(tmp_path / "rb", tmp_path / "z", compressor=compressor, lossless=True)
    frames, third, _ = read_in_child(tmp_path, tmp_path / "z", "observation.pixels",
                                     pythonpath=entry_point_dir(tmp_path))
    assert frames.shape == (sum(EPISODE_LENGTHS), 24, 32, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames, data["observation"]["pixels"])
    np.testing.assert_array_equal(third, data["observation"]["pixels"][3])
    action, _, _ = read_in_child(tmp_path, tmp_path / "z", "action", pythonpath=entry_point_dir(tmp_path / "2"))
    np.testing.assert_array_equal(action, data["action"])


def test_plain_zarr_reads_lossy_frames_after_the_printed_line(tmp_path):
    data = make_buffer(tmp_path / "rb")
    summary = export_zarr(tmp_path / "rb", tmp_path / "z")  # JPEG 2000 at 50 dB
    assert summary.frame_codec == "imagecodecs_jpeg2k"
    frames, third, _ = read_in_child(tmp_path, tmp_path / "z", "observation.pixels", prelude=REGISTER_LINE + "\n")
    import_zarr(tmp_path / "z", tmp_path / "back", camera="png")
    with ReplayBuffer.load_from(tmp_path / "back") as rb:
        ours = rb.get_at(slice(0, len(rb)))["observation"]["pixels"]
    np.testing.assert_array_equal(frames, ours)  # the same decoder, the same pixels
    np.testing.assert_array_equal(third, ours[3])
    error = np.abs(frames.astype(int) - data["observation"]["pixels"])
    assert error.mean() < 2 and error.max() <= 40  # lossy at 50 dB PSNR: close to the source


def test_a_codec_registered_as_diffusion_policy_does_wins_over_the_entry_point(tmp_path):
    data = make_buffer(tmp_path / "rb")
    export_zarr(tmp_path / "rb", tmp_path / "z", compressor="jpeg2k", lossless=True)
    # Diffusion Policy's own copy of the codec: built with cls(**config) from exactly its keyword arguments,
    # registered with numcodecs.registry.register_codec.
    prelude = textwrap.dedent("""
        import atexit, imagecodecs
        from numcodecs.abc import Codec
        CALLS = []
        atexit.register(lambda: print("dp-decodes", len(CALLS)))
        from numcodecs.registry import register_codec
        class Jpeg2k(Codec):
            codec_id = "imagecodecs_jpeg2k"
            def __init__(self, level=None, codecformat=None, colorspace=None, tile=None, reversible=None,
                         bitspersample=None, resolutions=None, numthreads=None, verbose=0):
                self.level, self.reversible = level, reversible
            def encode(self, buf):
                return imagecodecs.jpeg2k_encode(buf, level=self.level, reversible=self.reversible)
            def decode(self, buf, out=None):
                CALLS.append(1)
                return imagecodecs.jpeg2k_decode(buf, out=out)
        register_codec(Jpeg2k)
    """)
    frames, _, stdout = read_in_child(tmp_path, tmp_path / "z", "observation.pixels", prelude=prelude,
                                      pythonpath=entry_point_dir(tmp_path))
    assert stdout.split() == ["dp-decodes", str(sum(EPISODE_LENGTHS) + 1)]  # every frame of a[:], then a[3]
    np.testing.assert_array_equal(frames, data["observation"]["pixels"])


def test_entry_points_name_imagecodecs_classes_that_decode_our_frames():
    import importlib

    from trajstore.interop.zarr.codecs import frame_compressor

    frame = np.random.default_rng(0).integers(0, 256, (1, 8, 12, 3), dtype=np.uint8)
    for name in ("jpeg2k", "jpegxl"):
        ours = frame_compressor(name, lossless=True)
        module, _, attr = NUMCODECS_ENTRY_POINTS[ours.codec_id].partition(":")
        theirs = getattr(importlib.import_module(module), attr)
        assert theirs.codec_id == ours.codec_id
        config = {k: v for k, v in ours.get_config().items() if k != "id"}
        decoded = theirs.from_config(config).decode(ours.encode(frame))
        np.testing.assert_array_equal(np.asarray(decoded).reshape(frame.shape), frame)


def test_pyproject_declares_the_entry_points():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project.get("entry-points", {}).get("numcodecs.codecs")
    assert declared == NUMCODECS_ENTRY_POINTS, (
        "pyproject.toml needs [project.entry-points.\"numcodecs.codecs\"] with "
        + ", ".join(f'{k} = "{v}"' for k, v in NUMCODECS_ENTRY_POINTS.items()))
