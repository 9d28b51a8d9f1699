"""The main job: PushT episodes through the routing, read back in another process; the CLI's exit codes."""

import numpy as np
import pytest

pytest.importorskip("gym_pusht")

from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.recording import compare_to_reference, record_pusht  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.ops.info import describe  # noqa: E402


def test_record_routes_pixels_to_images_and_reads_back(tmp_path):
    record_pusht(tmp_path / "rb", 2, max_steps=25, reference=tmp_path / "ref.npz", progress=False)
    info = describe(tmp_path / "rb")
    storage = {leaf.key: leaf.storage for leaf in info.leaves}
    assert storage == {"observation/pixels": "ImageStorage", "observation/agent_pos": "HDF5Storage",
                       "action": "HDF5Storage", "reward": "HDF5Storage", "terminated": "HDF5Storage",
                       "truncated": "HDF5Storage"}
    assert info.steps == 50 and info.episodes == 2 and info.complete_episodes == 2
    checks = compare_to_reference(tmp_path / "rb", tmp_path / "ref.npz")
    assert all(c.ok for c in checks), checks
    by_key = {c.key: c for c in checks}
    assert by_key["action"].exact and by_key["action"].max_abs_error == 0
    assert not by_key["observation/pixels"].exact and by_key["observation/pixels"].min_psnr_db >= 30
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [len(e) for e in rb.episodes] == [25, 25]
        assert [e.data for e in rb.episodes] == [{"seed": 0, "success": False}, {"seed": 1, "success": False}]  # from is_success
        assert rb[24]["truncated"] and not rb[23]["truncated"]
        actions = rb[:]["action"]
        assert np.abs(np.diff(actions[:25], axis=0)).max() < 60  # a planner: smooth, not uniform noise


def test_verify_catches_a_changed_step(tmp_path):
    record_pusht(tmp_path / "rb", 1, max_steps=10, reference=tmp_path / "ref.npz", progress=False)
    ref = dict(np.load(tmp_path / "ref.npz"))
    ref["action"] = ref["action"].copy()
    ref["action"][3, 0] += 1.0
    np.savez(tmp_path / "bad.npz", **ref)
    checks = {c.key: c for c in compare_to_reference(tmp_path / "rb", tmp_path / "bad.npz")}
    assert not checks["action"].ok and checks["action"].max_abs_error == pytest.approx(1.0)
    assert checks["observation/pixels"].ok


def test_cli_record_info_verify(tmp_path):
    runner = CliRunner()
    out = tmp_path / "rb"
    result = runner.invoke(app, ["record", "--episodes", "1", "--max-steps", "8", "--out", str(out),
                                 "--reference", str(tmp_path / "ref.npz"), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", str(out)])
    assert result.exit_code == 0 and "ImageStorage" in result.output and "HDF5Storage" in result.output
    result = runner.invoke(app, ["verify", str(out), "--reference", str(tmp_path / "ref.npz")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["record", "--episodes", "1", "--out", str(out)])  # exists
    assert result.exit_code == 2 and "already exists" in result.output
    result = runner.invoke(app, ["info", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_record_video_and_ring(tmp_path):
    pytest.importorskip("av")
    record_pusht(tmp_path / "rb", 3, camera="video", capacity=30, max_steps=15, reference=tmp_path / "ref.npz",
                 progress=False)
    info = describe(tmp_path / "rb")
    assert {leaf.key: leaf.storage for leaf in info.leaves}["observation/pixels"] == "VideoStorage"
    assert info.steps == 30 and info.total_steps == 45 and info.capacity == 30
    assert info.episodes == 2  # the first episode was overwritten whole
    checks = compare_to_reference(tmp_path / "rb", tmp_path / "ref.npz")  # the reference keeps the newest 30 steps
    assert all(c.ok for c in checks), checks


def test_png_frames_are_verified_exactly(tmp_path):
    record_pusht(tmp_path / "rb", 1, max_steps=6, camera="png", reference=tmp_path / "ref.npz", progress=False)
    pixels = {c.key: c for c in compare_to_reference(tmp_path / "rb", tmp_path / "ref.npz")}["observation/pixels"]
    assert pixels.exact and pixels.ok and pixels.max_abs_error == 0
