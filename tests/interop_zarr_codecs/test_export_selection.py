"""export_zarr takes a selection text for episodes; its summary line says how plain zarr reads the frames."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("zarr")
import zarr  # noqa: E402

from tests.integrations.zarr_helpers import make_buffer  # noqa: E402
from trajstore.errors import InvalidValueError  # noqa: E402
from trajstore.interop.zarr import codecs, export_zarr, import_zarr  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402


def test_selection_text_exports_the_chosen_ended_episodes(tmp_path):
    data = make_buffer(tmp_path / "rb")  # lengths 5, 9, 4; episode 1 interrupted (no seed)
    summary = export_zarr(tmp_path / "rb", tmp_path / "z", compressor=None, episodes="seed == 2")
    assert (summary.episodes, summary.steps, summary.frame_codec) == (1, 4, None)
    g = zarr.open_group(str(tmp_path / "z"), mode="r")
    assert g["meta/episode_ends"][:].tolist() == [4]
    np.testing.assert_array_equal(g["data/action"][:], data["action"][14:18])
    summary = export_zarr(tmp_path / "rb", tmp_path / "z2", compressor=None, episodes="1-2")
    assert (summary.episodes, summary.steps) == (2, 13)
    import_zarr(tmp_path / "z2", tmp_path / "back", camera="png")
    with ReplayBuffer.load_from(tmp_path / "back") as rb:
        assert [e.interrupted for e in rb.episodes] == [True, False]
        np.testing.assert_array_equal(rb.get_at(slice(0, 13))["observation"]["pixels"],
                                      data["observation"]["pixels"][5:18])


def test_bad_selections_write_nothing(tmp_path):
    make_buffer(tmp_path / "rb")
    with pytest.raises(InvalidValueError, match=r"episodes \[3\] are not held .*being recorded"):
        export_zarr(tmp_path / "rb", tmp_path / "z", episodes="2-3")
    with pytest.raises(InvalidValueError, match="selects none of the 3 ended episodes"):
        export_zarr(tmp_path / "rb", tmp_path / "z", episodes="seed > 10")
    with pytest.raises(InvalidValueError):
        export_zarr(tmp_path / "rb", tmp_path / "z", episodes="success ==")
    assert not (tmp_path / "z").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["rb"]


def test_summary_line_names_the_codec_and_the_reading_call(tmp_path, monkeypatch):
    make_buffer(tmp_path / "rb")
    summary = export_zarr(tmp_path / "rb", tmp_path / "z", compressor="jpegxl")
    assert summary.frame_codec == "imagecodecs_jpegxl"
    line = summary.line()
    assert line.startswith(f"exported 3 episodes (18 steps, 5 arrays, {summary.nbytes:,} bytes) to {tmp_path / 'z'}; ")
    if not codecs.entry_point_installed("imagecodecs_jpegxl"):
        assert line.endswith("frames are imagecodecs_jpegxl: to read them with plain zarr, run "
                             "`import imagecodecs.numcodecs; imagecodecs.numcodecs.register_codecs()` first")
    monkeypatch.setattr(codecs, "entry_point_installed", lambda codec_id: True)
    assert "plain zarr reads them here" in summary.line() and "where trajstore is not installed" in summary.line()
    raw = export_zarr(tmp_path / "rb", tmp_path / "raw", compressor=None)
    assert raw.frame_codec is None and "frames" not in raw.line()
    no_frames = export_zarr(tmp_path / "rb", tmp_path / "lowdim", exclude=["observation/pixels"])
    assert no_frames.frame_codec is None and no_frames.line().endswith(str(tmp_path / "lowdim"))
