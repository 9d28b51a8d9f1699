"""LeRobot v3.0 import: the dataset LeRobot 0.4.4 wrote (tests/fixtures/lerobot_v3_sim, its README gives
every value), a hand-made variation (lerobot_handmade.py), and bad input refused before anything is written."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("av")
import pyarrow.parquet as pq  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError, StorageExistsError  # noqa: E402
from trajstore.interop.lerobot import import_lerobot  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BinarySpace  # noqa: E402

from . import lerobot_handmade  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot_v3_sim"
LENGTHS = (12, 9, 15)
TASKS = ("push the T into the target", "stack the red block", "push the T into the target")
#: Codec loss allowed on the front camera's flat background: AV1 in the fixture, then JPEG q90 or H.264.
FRONT_TOLERANCE = {"png": 4, "jpeg": 5, "video": 6}


def run(src, out, **kwargs):
    return import_lerobot(src, out, progress=False, **kwargs)


def check_front(frames: np.ndarray, e: int, tolerance: float) -> None:
    """Frame i of episode e: background 20 + 12 i, red square at rows 4..11, columns 8e..8e+7 (README)."""
    assert frames.shape == (LENGTHS[e], 48, 64, 3) and frames.dtype == np.uint8
    for i, frame in enumerate(frames.astype(int)):
        background = frame[16:, :, :]
        assert abs(background.mean() - (20 + 12 * i)) <= tolerance, (e, i, background.mean())
        red_by_block = [frame[5:11, 8 * b + 1:8 * b + 7, 0].mean() for b in range(3)]
        assert red_by_block[e] >= 220, (e, i, red_by_block)
        assert all(abs(r - (20 + 12 * i)) <= tolerance + 4 for b, r in enumerate(red_by_block) if b != e), (e, i)


@pytest.mark.parametrize("camera", ["png", "jpeg", "video"])
def test_fixture_values(tmp_path, camera):
    summary = run(FIXTURE, tmp_path / "rb", camera=camera)
    assert (summary.episodes, summary.steps) == (3, 36)
    assert summary.leaves == {"observation.images.front": "observation/images/front",
                              "observation.images.wrist": "observation/images/wrist",
                              "observation.state": "observation/state", "action": "action"}
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [(e.start, e.stop) for e in rb.episodes] == [(0, 12), (12, 21), (21, 36)]
        assert all(e.done and not e.interrupted for e in rb.episodes)
        assert [rb.episode(k).data for k in range(3)] == [
            {"task": TASKS[e], "lerobot_episode_index": e} for e in range(3)]
        assert set(rb.space.spaces) == {"observation", "action"}  # no timestamp, frame_index, ... leaves
        assert set(rb.space["observation"].spaces) == {"images", "state"}
        for e in range(3):
            steps, i = rb.get_episode(e), np.arange(LENGTHS[e], dtype=np.float32)
            check_front(steps["observation"]["images"]["front"], e, FRONT_TOLERANCE[camera])
            wrist = steps["observation"]["images"]["wrist"]
            expected_wrist = np.broadcast_to((200 - 10 * i).astype(np.uint8)[:, None, None, None], (len(i), 32, 32, 3))
            if camera == "png":
                np.testing.assert_array_equal(wrist, expected_wrist)
            else:
                assert np.abs(wrist.astype(int) - expected_wrist).max() <= 6
            np.testing.assert_array_equal(steps["observation"]["state"],
                                          np.stack([np.full_like(i, e), i, 100 * e + i, np.full_like(i, 0.5)], 1))
            np.testing.assert_array_equal(steps["action"], np.stack([i, -i], 1))
            assert steps["action"].dtype == np.float32


def test_fixture_leaf_metadata(tmp_path):
    run(FIXTURE, tmp_path / "rb", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        front = rb.space["observation"]["images"]["front"]
        assert front.metadata.to_json() == {"kind": "image", "layout": "HWC", "fps": 10,
                                            "names": ["height", "width", "channels"]}
        assert rb.space["observation"]["state"].metadata.to_json() == {"names": ["ep", "i", "code", "half"]}
        assert rb.space["action"].metadata.to_json() == {"names": ["a0", "a1"]}
        assert type(rb.storage.storages["observation/images/front"]).__name__ == "ImageStorage"


def test_selected_episodes_in_the_given_order(tmp_path):
    run(FIXTURE, tmp_path / "rb", camera="png", episodes=[2, 0])
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [(e.stop - e.start, e.data["lerobot_episode_index"]) for e in rb.episodes] == [(15, 2), (12, 0)]
        check_front(rb.get_episode(0)["observation"]["images"]["front"], 2, FRONT_TOLERANCE["png"])
        assert rb.get_episode(1)["observation"]["state"][3].tolist() == [0, 3, 3, 0.5]


def test_handmade_variation(tmp_path):
    """Two data files, two meta/episodes files, a video holding the episodes out of order after
    filler frames, a channels-first camera, 2-D / int / bool features, an episode with two tasks."""
    src = lerobot_handmade.write(tmp_path / "src")
    run(src, tmp_path / "rb", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        image = rb.space["observation"]["image"]
        assert image.shape == (16, 16, 3) and image.metadata["names"] == ("height", "width", "channels")
        assert rb.space["observation"]["state"].dtype == np.float64 and rb.space["count"].dtype == np.int64
        assert isinstance(rb.space["flag"], BinarySpace)
        assert [rb.episode(k).data["task"] for k in range(3)] == ["reach", ["grasp", "reach"], "grasp"]
        for e, n in enumerate(lerobot_handmade.LENGTHS):
            steps, i = rb.get_episode(e), np.arange(n)
            assert steps["observation"]["image"].shape == (n, 16, 16, 3)
            pixels = steps["observation"]["image"].reshape(n, -1).astype(int)
            expected = np.array([lerobot_handmade.pixel(e, k) for k in i])
            assert np.abs(pixels - expected[:, None]).max() <= 4, (e, pixels.mean(1))
            np.testing.assert_array_equal(steps["observation"]["state"][:, 0, :2], np.stack([np.full(n, e), i], 1))
            np.testing.assert_array_equal(steps["observation"]["state"][:, 1], np.tile([1.0, 2.0, 3.0], (n, 1)))
            np.testing.assert_array_equal(steps["count"][:, 0], 10 * e + i)
            np.testing.assert_array_equal(steps["flag"][:, 0], i % 2 == 1)


def copy_fixture(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "src"))


def edit_episodes(src: Path, column: str, values: list) -> None:
    path = src / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    i = table.column_names.index(column)
    pq.write_table(table.set_column(i, column, pa.array(values, table.schema.field(column).type)), path)


def test_v2_dataset_refused_before_writing(tmp_path):
    src = copy_fixture(tmp_path)
    info = json.loads((src / "meta/info.json").read_text())
    (src / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(FormatError, match=r"info\.json: codebase_version 'v2\.1' is not supported"):
        run(src, tmp_path / "rb")
    assert not (tmp_path / "rb").exists()


def test_missing_video_file(tmp_path):
    src = copy_fixture(tmp_path)
    (src / "videos/observation.images.front/chunk-000/file-000.mp4").unlink()
    with pytest.raises(FormatError, match=r"videos/observation\.images\.front/chunk-000/file-000\.mp4 does not exist"):
        run(src, tmp_path / "rb")
    assert not (tmp_path / "rb").exists()


def test_missing_tasks_and_unknown_episode(tmp_path):
    with pytest.raises(FormatError, match=r"no episode \[7\]"):
        run(FIXTURE, tmp_path / "rb", episodes=[0, 7])
    src = copy_fixture(tmp_path)
    (src / "meta/tasks.parquet").unlink()
    with pytest.raises(FormatError, match=r"tasks\.parquet does not exist"):
        run(src, tmp_path / "rb")


def test_existing_out_is_refused(tmp_path):
    (tmp_path / "rb").mkdir()
    (tmp_path / "rb" / "keep.txt").write_text("mine")
    with pytest.raises(StorageExistsError, match="already exists"):
        run(FIXTURE, tmp_path / "rb")
    assert [p.name for p in (tmp_path / "rb").iterdir()] == ["keep.txt"]


def test_episode_timestamps_past_the_video_fail_and_leave_nothing(tmp_path):
    """Episode 2 claimed to start at 3.0 s: its frames 6.. have no frame near them (the file ends at 3.5 s).
    Episodes 0 and 1 were already copied: the half-made buffer is removed."""
    src = copy_fixture(tmp_path)
    edit_episodes(src, "videos/observation.images.front/from_timestamp", [0.0, 1.2, 3.0])
    with pytest.raises(FormatError, match=r"no frame within half a frame period of frame 6 \(t = 3\.6000 s\)"):
        run(src, tmp_path / "rb")
    assert list(tmp_path.iterdir()) == [src]


def test_frames_are_picked_by_timestamp(tmp_path):
    """Frames come from from_timestamp + i / fps, nearest within half a period: a start moved by a third
    of a period still gives episode 1's frames; one moved by a whole period gives episode 2's frames 1..14."""
    src = copy_fixture(tmp_path)
    edit_episodes(src, "videos/observation.images.front/from_timestamp", [0.0, 1.2 + 1 / 30, 2.1 + 0.1])
    edit_episodes(src, "length", [12, 9, 14])
    table = pq.read_table(src / "data/chunk-000/file-000.parquet")
    keep = [k for k in range(36) if k != 35]  # episode 2 loses its last frame, as its video span does
    pq.write_table(table.take(keep), src / "data/chunk-000/file-000.parquet")
    run(src, tmp_path / "rb", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        check_front(rb.get_episode(1)["observation"]["images"]["front"], 1, FRONT_TOLERANCE["png"])
        shifted = rb.get_episode(2)["observation"]["images"]["front"].astype(int)
        assert [round((f[16:].mean() - 20) / 12) for f in shifted] == list(range(1, 15))


def test_cli(tmp_path):
    runner = CliRunner()
    ok = runner.invoke(app, ["import", "lerobot", str(FIXTURE), str(tmp_path / "rb"), "--camera", "png",
                             "-e", "1", "--no-progress"])
    assert ok.exit_code == 0, ok.output
    assert "imported 1 episode (9 steps, 4 leaves)" in ok.output
    again = runner.invoke(app, ["import", "lerobot", str(FIXTURE), str(tmp_path / "rb"), "--no-progress"])
    assert again.exit_code == 2 and again.output.startswith("error:") and "already exists" in again.output
    assert "Traceback" not in again.output


def test_nearest_frame_rule():
    """_nearest on bare timestamps: the nearest frame within half a period wins (frames every 0.05 s for
    targets every 0.1 s); a first frame past the window (a seek that landed late) decodes again from the start."""
    from fractions import Fraction
    from types import SimpleNamespace

    from trajstore.interop.lerobot._frames import _nearest
    from trajstore.interop.lerobot._source import Feature

    def frames(pts):
        return iter([SimpleNamespace(pts=p, time_base=Fraction(1, 100)) for p in pts])

    feature = Feature("cam", ("cam",), "video", (4, 4, 3))
    targets = 0.3 + np.arange(3) / 10
    picked = _nearest(frames(range(0, 100, 5)), targets, 0.05, "here", feature, None)
    assert [f.pts for f in picked] == [30, 40, 50]
    picked = _nearest(frames([32, 41, 52]), targets, 0.05, "here", feature, None)
    assert [f.pts for f in picked] == [32, 41, 52]
    late = _nearest(frames([60, 70]), targets, 0.05, "here", feature, lambda: frames(range(0, 100, 10)))
    assert [f.pts for f in late] == [30, 40, 50]
    with pytest.raises(FormatError, match=r"here: video 'cam' has no frame .* of frame 1 \(t = 0\.4000 s\)"):
        list(_nearest(frames([30, 50, 60]), targets, 0.05, "here", feature, None))
