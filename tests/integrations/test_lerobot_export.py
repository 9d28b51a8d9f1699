"""export_lerobot: the files are typed as LeRobot 0.4.4 writes them (its own files in
shared/fixtures/lerobot_v3_sim are the model), low-dim values are exact, frames are within codec loss at
the right timestamp of the right episode, statistics are right, bad input writes nothing."""

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
av = pytest.importorskip("av")
import pyarrow.parquet as pq  # noqa: E402

from trajstore.errors import InvalidValueError, StorageExistsError, UnsupportedSpaceError  # noqa: E402
from trajstore.interop.lerobot import export as export_module  # noqa: E402
from trajstore.interop.lerobot import export_lerobot  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402

# Written by lerobot 0.4.4 itself (a copy kept in the repository, see its README).
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot_v3_sim"
needs_fixture = pytest.mark.skipif(not (FIXTURE / "meta/info.json").exists(), reason=f"no LeRobot fixture at {FIXTURE}")
FPS = 10
LENGTHS = (12, 9, 15)
TASKS = ("push the T into the target", "stack the red block", None)
CAM = {"kind": "image", "layout": "HWC", "fps": FPS}
DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


def step_space(front=(48, 64, 3)):
    return DictSpace({
        "observation": DictSpace({
            "images": DictSpace({"front": BoxSpace(0, 255, front, np.uint8, metadata=CAM),
                                 "wrist": BoxSpace(0, 255, (32, 32, 3), np.uint8, metadata=CAM)}),
            "state": BoxSpace(-1e6, 1e6, (4,), np.float32, metadata={"names": ["ep", "i", "code", "half"]}),
        }),
        "action": BoxSpace(-100, 100, (2,), np.float32, metadata={"names": ["a0", "a1"]}),
        "reward": BoxSpace(-10, 10, (), np.float64),
        "done": BinarySpace(),
        "count": BoxSpace(0, 10_000, (), np.int32),
    })


def front_frame(e, i, shape=(48, 64, 3)):
    """A flat level that changes with i, and a red square whose column says the episode."""
    frame = np.full(shape, 20 + 12 * i, np.uint8)
    frame[4:12, 8 * e:8 * e + 8, 0] = 250
    return frame


def wrist_frame(e, i):
    frame = np.full((32, 32, 3), 200 - 10 * i, np.uint8)
    frame[0:8, 8 * e:8 * e + 8] = 0  # the episode's mark
    return frame


def make_buffer(path, lengths=LENGTHS, tasks=TASKS, front=(48, 64, 3), open_tail=0):
    space = step_space(front)
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path,  # PNG: the buffer's frames are exact
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))
    rng = np.random.default_rng(1)
    steps = []
    for e, (n, task) in enumerate(zip(lengths, tasks)):
        for i in range(n):
            step = {"observation": {"images": {"front": front_frame(e, i, front),
                                               "wrist": wrist_frame(e, i)},
                                    "state": np.array([e, i, 100 * e + i, 0.5], np.float32)},
                    "action": rng.normal(size=2).astype(np.float32), "reward": float(rng.normal()) / 3,
                    "done": i == n - 1, "count": 1000 * e + i}
            rb.append(step)
            steps.append(step)
        rb.end_episode(**({"task": task} if task else {}))
    for i in range(open_tail):  # an episode still being recorded
        rb.append(steps[i])
    rb.flush()
    return rb, steps


@pytest.fixture
def buffer(tmp_path):
    rb, steps = make_buffer(tmp_path / "rb")
    yield rb, steps
    rb.close()


def column(steps, get):
    return np.stack([np.asarray(get(s)) for s in steps])


# -- schemas ----------------------------------------------------------------------------------
@needs_fixture
def test_parquet_schemas_are_lerobots(buffer, tmp_path):
    rb, _ = buffer
    export_lerobot(rb, tmp_path / "out")
    export_lerobot(rb, tmp_path / "png", camera="image")
    for name in (DATA, EPISODES, "meta/tasks.parquet"):
        theirs = pq.read_schema(FIXTURE / name)
        for out in ("out", "png"):
            ours = pq.read_schema(tmp_path / out / name)
            common = [f.name for f in theirs if f.name in ours.names]
            # the same columns LeRobot writes for the same kinds of feature, same types, same order
            assert [ours.field(n).type for n in common] == [theirs.field(n).type for n in common], (name, out)
            assert [n for n in ours.names if n in common] == common
    video = pq.read_schema(tmp_path / "out" / DATA)
    assert video.names == ["observation.state", "action", "reward", "done", "count", "timestamp", "frame_index",
                           "episode_index", "index", "task_index"]  # video features have no column
    assert [str(video.field(n).type) for n in ("reward", "done", "count")] == ["double", "bool", "int32"]
    png = pq.read_schema(tmp_path / "png" / DATA)
    assert png.field("observation.images.front").type == pq.read_schema(FIXTURE / DATA).field(
        "observation.images.wrist").type
    assert json.loads(video.metadata[b"huggingface"])["info"]["features"]["observation.state"] == \
        json.loads(pq.read_schema(FIXTURE / DATA).metadata[b"huggingface"])["info"]["features"]["observation.state"]
    tasks = pq.read_schema(tmp_path / "out" / "meta/tasks.parquet")
    assert json.loads(tasks.metadata[b"pandas"])["index_columns"] == ["__index_level_0__"]
    episodes = pq.read_schema(tmp_path / "out" / EPISODES)
    assert [n for n in episodes.names if n.startswith("videos/")] == [
        f"videos/observation.images.{cam}/{k}" for cam in ("front", "wrist")
        for k in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")]
    assert pq.read_metadata(tmp_path / "out" / DATA).num_row_groups == len(LENGTHS)  # one per episode, as LeRobot


@needs_fixture
def test_info_json_is_lerobots(buffer, tmp_path):
    rb, _ = buffer
    export_lerobot(rb, tmp_path / "out", robot_type="sim")
    ours = json.loads((tmp_path / "out/meta/info.json").read_text())
    theirs = json.loads((FIXTURE / "meta/info.json").read_text())
    assert [k for k in ours if k != "trajstore"] == list(theirs)
    for key in ("codebase_version", "chunks_size", "data_files_size_in_mb", "video_files_size_in_mb", "fps",
                "data_path", "video_path", "robot_type"):
        assert ours[key] == theirs[key], key
    assert (ours["total_episodes"], ours["total_frames"], ours["total_tasks"]) == (3, 36, 3)
    assert ours["splits"] == {"train": "0:3"}
    for key in ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert ours["features"][key] == theirs["features"][key], key
    front = dict(theirs["features"]["observation.images.front"], info=dict(
        theirs["features"]["observation.images.front"]["info"], **{"video.codec": "h264"}))
    assert ours["features"]["observation.images.front"] == front
    assert ours["features"]["reward"] == {"dtype": "float64", "shape": [1], "names": None}
    assert ours["features"]["done"]["dtype"] == "bool" and ours["features"]["count"]["dtype"] == "int32"


# -- values -----------------------------------------------------------------------------------
def test_low_dim_values_and_index_columns_are_exact(buffer, tmp_path):
    rb, steps = buffer
    result = export_lerobot(rb, tmp_path / "out")
    data = pq.read_table(tmp_path / "out" / DATA)
    np.testing.assert_array_equal(np.array(data["observation.state"].to_pylist(), np.float32),
                                  column(steps, lambda s: s["observation"]["state"]))
    np.testing.assert_array_equal(np.array(data["action"].to_pylist(), np.float32), column(steps, lambda s: s["action"]))
    assert data["reward"].to_pylist() == [s["reward"] for s in steps]  # float64 kept bit for bit
    assert data["done"].to_pylist() == [s["done"] for s in steps]
    assert data["count"].to_pylist() == [s["count"] for s in steps]
    frame_index = np.concatenate([np.arange(n) for n in LENGTHS])
    assert data["frame_index"].to_pylist() == frame_index.tolist()
    np.testing.assert_array_equal(data["timestamp"].to_numpy(), (frame_index / FPS).astype(np.float32))
    assert data["episode_index"].to_pylist() == np.repeat(np.arange(3), LENGTHS).tolist()
    assert data["index"].to_pylist() == list(range(36))
    assert data["task_index"].to_pylist() == np.repeat([0, 1, 2], LENGTHS).tolist()
    assert pq.read_table(tmp_path / "out/meta/tasks.parquet").to_pydict() == {
        "task_index": [0, 1, 2], "__index_level_0__": ["push the T into the target", "stack the red block", ""]}
    assert result.tasks == ["push the T into the target", "stack the red block", ""]
    ep = pq.read_table(tmp_path / "out" / EPISODES).to_pydict()
    assert ep["episode_index"] == [0, 1, 2] and ep["length"] == list(LENGTHS)
    assert ep["tasks"] == [["push the T into the target"], ["stack the red block"], [""]]
    assert ep["dataset_from_index"] == [0, 12, 21] and ep["dataset_to_index"] == [12, 21, 36]
    # the fixture's figures for the same episode lengths
    assert ep["videos/observation.images.front/from_timestamp"] == [0.0, 1.2, 2.1]
    assert ep["videos/observation.images.front/to_timestamp"] == [1.2, 2.1, 3.6]


def decode_all(path):
    """Every frame of an mp4 as (time in s, (H, W, 3) uint8)."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return [(float(f.pts * s.time_base), f.to_ndarray(format="rgb24")) for f in c.decode(s)]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return np.inf if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def check_video(out, steps, key="front", lengths=LENGTHS, min_psnr=35.0):
    """Each episode's frame i is at from_timestamp + i / fps in its file, within codec loss, and is
    nearer its own frame than any other frame of the buffer (right episode, right time)."""
    ep = pq.read_table(out / EPISODES).to_pydict()
    info = json.loads((out / "meta/info.json").read_text())
    name = f"observation.images.{key}"
    truth = column(steps, lambda s: s["observation"]["images"][key]).astype(np.float64)
    start = 0
    for e, n in enumerate(lengths):
        path = out / info["video_path"].format(video_key=name, chunk_index=ep[f"videos/{name}/chunk_index"][e],
                                               file_index=ep[f"videos/{name}/file_index"][e])
        frames = decode_all(path)
        t0 = ep[f"videos/{name}/from_timestamp"][e]
        assert ep[f"videos/{name}/to_timestamp"][e] == pytest.approx(t0 + n / FPS)
        for i in range(n):
            t, frame = min(frames, key=lambda tf: abs(tf[0] - (t0 + i / FPS)))
            assert abs(t - (t0 + i / FPS)) < 1e-4, (e, i)  # LeRobot's default tolerance_s
            assert psnr(frame, truth[start + i]) >= min_psnr, (e, i)
            assert np.argmin(np.abs(truth - frame).mean(axis=(1, 2, 3))) == start + i, (e, i)
        start += n


@pytest.mark.parametrize("vcodec, min_psnr", [("h264", 35.0), ("libsvtav1", 30.0)])
def test_video_frames_at_their_timestamps(buffer, tmp_path, vcodec, min_psnr):
    rb, steps = buffer
    export_lerobot(rb, tmp_path / "out", vcodec=vcodec)
    info = json.loads((tmp_path / "out/meta/info.json").read_text())
    assert info["features"]["observation.images.front"]["info"]["video.codec"] == {"h264": "h264",
                                                                                   "libsvtav1": "av1"}[vcodec]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # SVT-AV1 left no real-time scheduling behind
    check_video(tmp_path / "out", steps, "front", min_psnr=min_psnr)
    check_video(tmp_path / "out", steps, "wrist", min_psnr=min_psnr)
    assert len(decode_all(tmp_path / "out/videos/observation.images.front/chunk-000/file-000.mp4")) == 36


def test_image_features_are_exact_pngs(buffer, tmp_path):
    from PIL import Image

    rb, steps = buffer
    export_lerobot(rb, tmp_path / "out", camera="image")
    data = pq.read_table(tmp_path / "out" / DATA)
    cells = data["observation.images.front"].to_pylist()
    got = np.stack([np.asarray(Image.open(io.BytesIO(c["bytes"]))) for c in cells])
    np.testing.assert_array_equal(got, column(steps, lambda s: s["observation"]["images"]["front"]))
    assert cells[12]["path"] == "frame-000000.png" and cells[13]["path"] == "frame-000001.png"
    assert not (tmp_path / "out/videos").exists()
    info = json.loads((tmp_path / "out/meta/info.json").read_text())
    assert info["features"]["observation.images.front"]["dtype"] == "image" and info["video_path"] is None


def test_statistics(buffer, tmp_path):
    rb, steps = buffer
    export_lerobot(rb, tmp_path / "out")
    ep = pq.read_table(tmp_path / "out" / EPISODES).to_pydict()
    action = column(steps, lambda s: s["action"]).astype(np.float64)
    state = column(steps, lambda s: s["observation"]["state"]).astype(np.float64)
    front = column(steps, lambda s: s["observation"]["images"]["front"]) / 255.0
    start = 0
    for e, n in enumerate(LENGTHS):
        a = action[start:start + n]
        np.testing.assert_array_equal(ep["stats/action/min"][e], a.min(0))
        np.testing.assert_allclose(ep["stats/action/mean"][e], a.mean(0), rtol=1e-12)
        np.testing.assert_allclose(ep["stats/action/std"][e], a.std(0), rtol=1e-12)
        np.testing.assert_allclose(ep["stats/observation.state/q90"][e], np.quantile(state[start:start + n], 0.9, axis=0))
        assert ep["stats/action/count"][e] == [n]
        f = front[start:start + n]
        np.testing.assert_allclose(np.array(ep["stats/observation.images.front/mean"][e]).reshape(3), f.mean((0, 1, 2)))
        np.testing.assert_allclose(np.array(ep["stats/observation.images.front/q50"][e]).reshape(3),
                                   np.quantile(f.reshape(-1, 3), 0.5, axis=0))
        assert ep["stats/frame_index/max"][e] == [n - 1]  # ints keep an int64 min/max, as LeRobot's
        start += n
    stats = json.loads((tmp_path / "out/meta/stats.json").read_text())
    np.testing.assert_array_equal(stats["action"]["max"], action.max(0))
    np.testing.assert_allclose(stats["action"]["mean"], action.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats["action"]["std"], action.std(0), rtol=1e-12)
    np.testing.assert_allclose(np.array(stats["observation.images.front"]["std"]).reshape(3),
                               front.reshape(-1, 3).std(0), rtol=1e-9)
    assert stats["index"]["count"] == [36] and stats["index"]["max"] == [35]


# -- files, selection, determinism --------------------------------------------------------------
def test_files_roll_over_by_size_and_chunk(buffer, tmp_path):
    rb, steps = buffer
    export_lerobot(rb, tmp_path / "out", chunks_size=2, data_file_size_mb=1e-6, video_file_size_mb=1e-6)
    ep = pq.read_table(tmp_path / "out" / EPISODES).to_pydict()
    # every file is full after one episode: files 0, 1 in chunk 0, then file 0 of chunk 1
    assert list(zip(ep["data/chunk_index"], ep["data/file_index"])) == [(0, 0), (0, 1), (1, 0)]
    key = "videos/observation.images.front"
    assert list(zip(ep[f"{key}/chunk_index"], ep[f"{key}/file_index"])) == [(0, 0), (0, 1), (1, 0)]
    assert ep[f"{key}/from_timestamp"] == [0.0, 0.0, 0.0]
    assert (tmp_path / "out/data/chunk-001/file-000.parquet").exists()
    assert pq.read_table(tmp_path / "out/data/chunk-000/file-001.parquet")["index"].to_pylist() == list(range(12, 21))
    check_video(tmp_path / "out", steps)


def test_episode_selection_and_open_episode(tmp_path):
    rb, steps = make_buffer(tmp_path / "rb", open_tail=5)
    try:
        assert export_lerobot(rb, tmp_path / "all").episodes == [0, 1, 2]  # the open one is left out
        result = export_lerobot(rb, tmp_path / "some", episodes=[2, 0])
        assert result.episodes == [2, 0] and result.frames == 27
        data = pq.read_table(tmp_path / "some" / DATA)
        assert data["episode_index"].to_pylist() == [0] * 15 + [1] * 12
        assert data["count"].to_pylist() == [2000 + i for i in range(15)] + list(range(12))
        with pytest.raises(ValueError, match="episode id 3 is still being recorded"):
            export_lerobot(rb, tmp_path / "bad", episodes=[3])
        with pytest.raises(ValueError, match="episode id 9 is not held"):
            export_lerobot(rb, tmp_path / "bad", episodes=[9])
    finally:
        rb.close()
    assert not (tmp_path / "bad").exists()


def test_from_a_path_and_deterministic(buffer, tmp_path):
    rb, _ = buffer
    rb.close()
    # the card names the repo id and the folder's name (LeRobotDataset(..., root="x")): same for both
    export_lerobot(tmp_path / "rb", tmp_path / "a" / "x", repo_id="me/rb")
    export_lerobot(tmp_path / "rb", tmp_path / "b" / "x", repo_id="me/rb")
    files = sorted(p.relative_to(tmp_path / "a/x") for p in (tmp_path / "a/x").rglob("*") if p.is_file())
    assert len(files) == 8 and Path("README.md") in files  # the dataset card too
    for f in files:
        assert (tmp_path / "a/x" / f).read_bytes() == (tmp_path / "b/x" / f).read_bytes(), f


# -- bad input ----------------------------------------------------------------------------------
def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("leaf, match", [
    (BoxSpace(0, 1, (2, 2), np.float32), "leaf 'x/grid': shape \\(2, 2\\) is not exported"),
    (BoxSpace(0, 255, (8, 8), np.uint8, metadata={"kind": "image"}), "leaf 'x/grid': a camera exported to LeRobot"),
    (BoxSpace(0, 1, (3,), np.float32, metadata={"names": ["a", "b"]}), "leaf 'x/grid': metadata 'names' must be"),
])
@pytest.mark.filterwarnings("ignore::trajstore.errors.RoutingWarning")  # the 2-D camera goes to HDF5
def test_unexportable_leaf_raises_before_writing(tmp_path, leaf, match):
    space = DictSpace({"x": DictSpace({"grid": leaf}), "t": TextSpace(8)})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(space))
    rb.append(space.sample())
    rb.end_episode()
    with pytest.raises(UnsupportedSpaceError, match=match):
        export_lerobot(rb, tmp_path / "out", fps=10)
    rb.close()
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_key_clashes_and_reserved_names(tmp_path):
    for i, (space, match) in enumerate([
        (DictSpace({"a.b": BoxSpace(0, 1, (), np.float32), "a": DictSpace({"b": BoxSpace(0, 1, (), np.float32)})}),
         "both become LeRobot feature 'a.b'"),
        (DictSpace({"timestamp": BoxSpace(0, 1, (), np.float32)}), "'timestamp' is a column LeRobot adds"),
    ]):
        rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / f"rb{i}",
                                 **dict_storage_kwargs_from_space(space))
        rb.append(space.sample())
        rb.end_episode()
        with pytest.raises(UnsupportedSpaceError, match=match):
            export_lerobot(rb, tmp_path / "out", fps=10)
        rb.close()
    assert not (tmp_path / "out").exists()


def test_other_bad_input_writes_nothing(tmp_path):
    rb, _ = make_buffer(tmp_path / "rb", lengths=(3, 2), tasks=("a", None), front=(9, 11, 3))
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("keep")
    try:
        with pytest.raises(StorageExistsError, match="full"):
            export_lerobot(rb, tmp_path / "full")
        assert (tmp_path / "full/x").read_text() == "keep"
        with pytest.raises(UnsupportedSpaceError, match="observation.images.front.*9x11.*even"):
            export_lerobot(rb, tmp_path / "out", vcodec="libsvtav1")
        with pytest.raises(ValueError, match="vcodec must be one of"):
            export_lerobot(rb, tmp_path / "out", vcodec="mpeg2")
        with pytest.raises(ValueError, match="fps must be a positive"):
            export_lerobot(rb, tmp_path / "out", fps=0)
        rb.close()
        rb = ReplayBuffer.load_from(tmp_path / "rb", read_only=False)
        rb.append(rb[0])
        rb.end_episode(task=3)
        with pytest.raises(InvalidValueError, match="episode id 2: data 'task' must be a string"):
            export_lerobot(rb, tmp_path / "out")
        # odd frames go to H.264 as yuv444p
        export_lerobot(rb, tmp_path / "odd", episodes=[0, 1])
        info = json.loads((tmp_path / "odd/meta/info.json").read_text())
        assert info["features"]["observation.images.front"]["info"]["video.pix_fmt"] == "yuv444p"
    finally:
        rb.close()
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_failed_write_leaves_nothing(buffer, tmp_path, monkeypatch):
    rb, _ = buffer
    calls = []

    def failing_encode(self, frames):
        calls.append(len(frames))
        if len(calls) == 3:
            raise OSError("disk full")

    monkeypatch.setattr(export_module.ExportVideo, "encode", failing_encode)
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="disk full"):
        export_lerobot(rb, tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == [] and leftovers(tmp_path) == []


def test_cli(buffer, tmp_path):
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    rb, _ = buffer
    rb.close()
    runner = CliRunner()
    ok = runner.invoke(app, ["export", "lerobot", str(tmp_path / "rb"), str(tmp_path / "out"), "--repo-id", "me/pusht",
                             "--episode", "1", "--images"])
    assert ok.exit_code == 0, ok.output
    assert "exported 1 episode, 9 frames at 10 fps" in ok.output and "me/pusht" in ok.output
    assert json.loads((tmp_path / "out/meta/info.json").read_text())["total_frames"] == 9
    bad = runner.invoke(app, ["export", "lerobot", str(tmp_path / "rb"), str(tmp_path / "out")])
    assert bad.exit_code == 2 and "already exists" in bad.output and "Traceback" not in bad.output


def test_import_of_the_export_gives_the_buffer_back(buffer, tmp_path):
    """import(export(x)) == x: PNG image features and every low-dim leaf exact, episodes and tasks kept."""
    from trajstore.interop.lerobot import import_lerobot

    rb, steps = buffer
    export_lerobot(rb, tmp_path / "lr", camera="image")
    import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as back:
        assert len(back) == len(steps)
        assert [e.stop - e.start for e in back.episodes] == list(LENGTHS)
        assert [e.data.get("task") for e in back.episodes][:2] == list(TASKS[:2])
        got = back[:]
        for k, step in enumerate(steps):
            obs = got["observation"]
            np.testing.assert_array_equal(obs["images"]["front"][k], step["observation"]["images"]["front"])
            np.testing.assert_array_equal(obs["images"]["wrist"][k], step["observation"]["images"]["wrist"])
            np.testing.assert_array_equal(obs["state"][k], step["observation"]["state"])
            np.testing.assert_array_equal(got["action"][k], step["action"])
            assert np.asarray(got["count"][k]).reshape(()) == step["count"]
            assert bool(np.asarray(got["done"][k]).reshape(())) == step["done"]
            assert np.asarray(got["reward"][k]).reshape(()) == np.float64(step["reward"])
        assert list(back.space["observation"]["state"].metadata["names"]) == ["ep", "i", "code", "half"]
