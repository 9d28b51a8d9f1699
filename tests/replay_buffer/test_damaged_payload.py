"""A missing payload file (an image chunk, a video segment) makes only the steps it held unreadable.

Three episodes; the payload file holding part of episode 1 is deleted. A read-only open works and
warns, ``rb.damaged`` names the file, the part, episode 1 and its step count; episodes 0 and 2 read
back as before; a read of a damaged step raises ``FormatError`` naming the file; samplers and the
torch dataset skip episode 1 or raise, as ``on_damaged=`` says; a writer refuses the folder with the
same report; ``trajstore verify`` exits 1 listing episode 1; ``trajstore copy --skip-damaged`` copies
episodes 0 and 2.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from trajstore.cli.main import app
from trajstore.damage import DamagedBufferWarning
from trajstore.errors import FormatError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space
from trajstore.storages.frames._slot_index import SlotIndex
from trajstore.testing import moving_scene

H, W = 16, 24
LENGTHS = (6, 6, 6)
FRAMES = moving_scene(sum(LENGTHS) + 3, H, W, seed=3)
LAYOUTS = ["JPEG", "PNG", "video"]
PIXELS = "observation/pixels"


def space():
    return DictSpace({"observation": DictSpace({
        "pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 10}),
        "state": BoxSpace(-1e3, 1e3, (2,), np.float32)}),
        "action": BoxSpace(-1e3, 1e3, (2,), np.float32), "reward": BoxSpace(-1e3, 1e3, (), np.float32),
        "terminated": BinarySpace(), "truncated": BinarySpace()})


def steps(g0, n):
    g = np.arange(g0, g0 + n)
    return {"observation": {"pixels": FRAMES[g], "state": np.stack([g, -g], 1).astype(np.float32)},
            "action": np.stack([g / 2, g * 2.0], 1).astype(np.float32), "reward": g.astype(np.float32),
            "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool)}


def build(path, layout):
    """Episodes of LENGTHS steps; image chunks of one frame each, video segments of 4 frames."""
    if layout == "video":
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        cls, kwargs = VideoStorage, {"segment_frames": 4}
    else:
        cls, kwargs = ImageStorage, {"format": layout, "chunk_bytes": 1}
    s = space()
    rb = ReplayBuffer.create(DictStorage, s, cache_path=path, **dict_storage_kwargs_from_space(
        s, kind_storage_cls={"image": cls}, kind_kwargs={"image": kwargs}))
    g = 0
    for k, n in enumerate(LENGTHS):
        rb.extend(steps(g, n))
        g += n
        rb.end_episode({"pixels": FRAMES[g], "state": np.array([g, -g], np.float32)}, k=k)
    with_data = [rb.get_episode(k) for k in range(len(LENGTHS))]  # what the codec gives back
    rb.close()
    return with_data


def file_of(path, layout, slot):
    """The payload file holding the frame of ``slot`` of the pixels storage."""
    folder = path / "storage" / "observation.pixels"
    index = SlotIndex.open(folder)
    try:
        fid = int(index.lookup(np.array([slot]))[0, 0])
    finally:
        index.close()
    return folder / (f"segments/{fid:08d}.mp4" if layout == "video" else f"chunks/{fid:06d}.bin")


def damaged_steps(path, layout):
    """Delete the file holding step 2 of episode 1 (logical 8); the logical steps whose frames it held."""
    target = file_of(path, layout, LENGTHS[0] + 2)
    held = [i for i in range(sum(LENGTHS)) if file_of(path, layout, i) == target]
    target.unlink()
    return target, held


@pytest.fixture(params=LAYOUTS)
def damaged(request, tmp_path):
    path = tmp_path / "rb"
    written = build(path, request.param)
    target, held = damaged_steps(path, request.param)
    assert held and all(LENGTHS[0] <= i < LENGTHS[0] + LENGTHS[1] for i in held)
    return path, written, target, held


def open_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedBufferWarning)
        return ReplayBuffer.load_from(path)


def assert_equal(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_equal(a[k], b[k])
    else:
        np.testing.assert_array_equal(a, b)


def test_a_read_only_open_warns_and_reports_the_damage(damaged):
    path, _, target, held = damaged
    with pytest.warns(DamagedBufferWarning, match=rf"{len(held)} step\(s\) of 1 episode\(s\) \[1\]") as caught:
        rb = ReplayBuffer.load_from(path)
    assert str(target) in str(caught[0].message)
    with rb:
        damage = rb.damaged
        assert damage and damage.episodes == (1,) and damage.steps == len(held)
        assert damage.files == [str(target)]
        (part,) = damage.parts
        assert (part.part, part.problem, part.episodes, part.steps) == (PIXELS, "missing", (1,), len(held))


def test_healthy_episodes_read_as_written_and_a_damaged_step_names_the_file(damaged):
    path, written, target, held = damaged
    with open_quietly(path) as rb:
        assert [e.id for e in rb.episodes] == [0, 1, 2]
        for k in (0, 2):
            assert_equal(rb.get_episode(k), written[k])
            assert_equal(rb.final_observation(k), rb.final_observation(k))
        for i in held:
            with pytest.raises(FormatError, match=str(target)):
                rb[i]
        with pytest.raises(FormatError, match="payload file is missing"):
            rb.get_episode(1)
        healthy = [i for i in range(sum(LENGTHS)) if i not in held]
        assert_equal(rb[np.array(healthy)]["action"], steps(0, sum(LENGTHS))["action"][healthy])


def test_samplers_skip_damaged_episodes_or_raise(damaged):
    path, _, target, held = damaged
    ep1 = range(LENGTHS[0], LENGTHS[0] + LENGTHS[1])
    rng = np.random.default_rng(0)
    with open_quietly(path) as rb:
        with pytest.raises(FormatError, match=r"on_damaged='skip'"):
            rb.sample(8, rng=rng)
        with pytest.raises(FormatError, match=str(target)):
            rb.sample_windows(4, 3, rng=rng)
        with pytest.raises(FormatError, match="damaged episode"):
            rb.sample_transitions(4, rng=rng)
        with pytest.raises(ValueError, match="on_damaged"):
            rb.sample(4, on_damaged="ignore")
        # episodes= that leaves the damaged one out needs no choice
        _, idx = rb.sample(16, rng=rng, episodes=[0, 2], return_indices=True)
        assert not set(idx.tolist()) & set(ep1)
        _, idx = rb.sample(2000, rng=rng, return_indices=True, on_damaged="skip")
        assert set(idx.tolist()) == set(range(sum(LENGTHS))) - set(ep1)
        windows = rb.sample_windows(500, 2, rng=rng, on_damaged="skip")
        assert not set(windows["action"][:, :, 0].reshape(-1).tolist()) & {i / 2 for i in ep1}
        data, _ = rb.sample_windows(500, delta_indices={"action": [-1, 0, 1]}, rng=rng, on_damaged="skip")
        assert not set(data["action"][:, :, 0].reshape(-1).tolist()) & {i / 2 for i in ep1}
        t = rb.sample_transitions(500, rng=rng, on_damaged="skip")
        assert not set(t["index"].tolist()) & set(ep1)
        assert rb.count_anchors(on_damaged="skip") == LENGTHS[0] + LENGTHS[2]
        assert rb.checked_episode_ids(None, on_damaged="skip") == (0, 2)


def test_the_torch_dataset_skips_damaged_episodes_or_raises(damaged):
    pytest.importorskip("torch")
    from trajstore.training.torch import ReplayBufferDataset

    path, _, target, _ = damaged
    ep1 = {float(i) for i in range(LENGTHS[0], LENGTHS[0] + LENGTHS[1])}
    with open_quietly(path) as rb:
        with pytest.raises(FormatError, match=str(target)):
            ReplayBufferDataset(rb)
        ds = ReplayBufferDataset(rb, on_damaged="skip")
        assert len(ds) == LENGTHS[0] + LENGTHS[2]
        seen = {float(ds[i]["observation"]["state"][0]) for i in range(len(ds))}
        assert seen == set(map(float, range(sum(LENGTHS)))) - ep1
        win = ReplayBufferDataset(rb, delta_indices={"observation/state": [-2, 0, 2]}, on_damaged="skip")
        values = {float(v) for i in range(len(win)) for v in win[i]["observation"]["state"][:, 0]}
        assert values and not values & ep1


def test_a_writer_refuses_the_damaged_folder_with_the_report(damaged):
    path, _, target, held = damaged
    before = sorted(p.relative_to(path) for p in path.rglob("*"))
    with pytest.raises(FormatError, match=rf"{len(held)} step\(s\) of 1 episode\(s\) \[1\].*writer refuses") as exc:
        ReplayBuffer.load_from(path, read_only=False)
    assert str(target) in str(exc.value)
    assert sorted(p.relative_to(path) for p in path.rglob("*")) == before  # nothing written or deleted
    with open_quietly(path) as rb:  # and the lock was let go
        assert rb.damaged.episodes == (1,)


def test_verify_lists_the_damaged_episode(damaged):
    path, _, target, held = damaged
    from trajstore.ops import verify_buffer

    report = verify_buffer(path)
    assert not report.ok
    assert report.damaged_episodes == [1] and report.damaged_steps == len(held)
    by_folder = {s.folder: s.steps_read for s in report.storages}
    assert by_folder[str(path / "storage" / "observation.pixels")] == sum(LENGTHS) - len(held)
    result = CliRunner().invoke(app, ["verify", str(path), "--no-progress"])
    assert result.exit_code == 1, result.output
    assert "damaged episodes: [1]" in result.output
    assert str(target.name) in result.output


def test_copy_skip_damaged_salvages_the_other_episodes(damaged, tmp_path):
    path, _, _, _ = damaged
    dst = tmp_path / "salvaged"
    refused = CliRunner().invoke(app, ["copy", str(path), str(dst), "--no-progress"])
    assert refused.exit_code == 1 and "--skip-damaged" in refused.output, refused.output
    assert refused.output.count("\n") == 1  # one line
    assert not dst.exists()
    result = CliRunner().invoke(app, ["copy", str(path), str(dst), "--skip-damaged", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 damaged episode" in result.output
    with open_quietly(path) as src, ReplayBuffer.load_from(dst) as out:
        assert not out.damaged
        assert [e.data for e in out.episodes] == [{"k": 0}, {"k": 2}]
        lossless = src.storage.lossless
        for k_src, k_out in ((0, 0), (2, 1)):
            a, b = src.get_episode(k_src), out.get_episode(k_out)
            assert_equal(a["action"], b["action"])
            assert_equal(a["observation"]["state"], b["observation"]["state"])
            if lossless:
                assert_equal(a, b)
            else:  # re-encoded once more: one more generation of codec loss (measured: JPEG ~1, video ~3.6)
                err = np.abs(a["observation"]["pixels"].astype(int) - b["observation"]["pixels"].astype(int))
                assert err.mean() <= 6


def test_a_ring_maps_the_damaged_slots_to_its_held_steps(tmp_path):
    path = tmp_path / "ring"
    s = space()
    rb = ReplayBuffer.create(DictStorage, s, cache_path=path, capacity=14, **dict_storage_kwargs_from_space(
        s, kind_storage_cls={"image": ImageStorage}, kind_kwargs={"image": {"format": "PNG", "chunk_bytes": 1}}))
    for k, g in enumerate(range(0, 18, 6)):
        rb.extend(steps(g, 6))
        rb.end_episode(k=k)
    rb.close()
    target = file_of(path, "PNG", 8 % 14)  # global step 8: episode 1, logical 8 - 4 = 4 (4 were overwritten)
    target.unlink()
    with open_quietly(path) as rb:
        assert [len(e) for e in rb.episodes] == [2, 6, 6]
        assert (rb.damaged.episodes, rb.damaged.steps, rb.damaged.files) == ((1,), 1, [str(target)])
        with pytest.raises(FormatError, match=str(target)):
            rb[4]
        assert_equal(rb[np.array([0, 1, 3, 5, 13])]["action"], steps(0, 18)["action"][[4, 5, 7, 9, 17]])
        _, idx = rb.sample(1000, rng=np.random.default_rng(1), return_indices=True, on_damaged="skip")
        assert set(idx.tolist()) == {0, 1, *range(8, 14)}


def test_a_missing_final_observation_file_damages_its_episode(tmp_path):
    path = tmp_path / "rb"
    build(path, "PNG")
    finals = path / "final_observations" / "pixels"
    index = SlotIndex.open(finals)
    fid = int(index.lookup(np.array([1]))[0, 0])  # final observation 1: episode 1's
    index.close()
    target = finals / f"chunks/{fid:06d}.bin"
    target.unlink()
    with pytest.warns(DamagedBufferWarning, match=r"episode\(s\) \[1\]"):
        rb = ReplayBuffer.load_from(path)
    with rb:
        (part,) = rb.damaged.parts
        assert (part.part, part.path, part.episodes, part.steps) == ("final_observations/pixels", str(target), (1,), 0)
        assert rb.damaged.steps == 0
        assert len(rb.get_episode(1)["action"]) == LENGTHS[1]  # its steps are whole
        with pytest.raises(FormatError, match=str(target)):
            rb.final_observation(1)
        rb.final_observation(2)
        t = rb.sample_transitions(500, rng=np.random.default_rng(2), on_damaged="skip")
        assert not set(t["index"].tolist()) & set(range(LENGTHS[0], LENGTHS[0] + LENGTHS[1]))
    with pytest.raises(FormatError, match="writer refuses"):
        ReplayBuffer.load_from(path, read_only=False)


def test_an_overwritten_chunk_is_found_when_read_and_verify_and_copy_name_its_episode(tmp_path):
    path = tmp_path / "rb"
    written = build(path, "PNG")
    target = file_of(path, "PNG", LENGTHS[0] + 2)
    target.write_bytes(bytes(len(target.read_bytes())))  # as long as the index needs: known only when read
    with ReplayBuffer.load_from(path) as rb:
        assert not rb.damaged
        with pytest.raises(FormatError, match=str(target)):
            rb[LENGTHS[0] + 2]
    from trajstore.ops import copy_episodes, verify_buffer

    report = verify_buffer(path)
    assert (report.damaged_episodes, report.damaged_steps) == ([1], 1)
    summary = copy_episodes(path, tmp_path / "out", skip_damaged=True)
    assert (summary.episodes, summary.skipped) == (2, [(str(path), 1)])
    with ReplayBuffer.load_from(tmp_path / "out") as out:
        assert [e.data for e in out.episodes] == [{"k": 0}, {"k": 2}]
        assert_equal(out.get_episode(0), written[0])
        assert_equal(out.get_episode(1), written[2])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_storage_lists_its_missing_files_and_a_writer_refuses_them(tmp_path, layout):
    from trajstore.storages import SpaceStorage

    path = tmp_path / "rb"
    build(path, layout)
    target, held = damaged_steps(path, layout)
    folder = path / "storage" / "observation.pixels"
    before = sorted(folder.rglob("*"))
    with pytest.raises(FormatError,
                       match=rf"1 payload file\(s\) are missing or truncated \({len(held)} slot\(s\).*{target}"):
        SpaceStorage.load_from(folder, read_only=False)
    assert sorted(p for p in folder.rglob("*") if p.name != "writer.lock") == before  # the lock is taken first
    with SpaceStorage.load_from(folder) as storage:
        (file,) = storage.damaged_files()
        assert (file.path, file.problem, file.slots.tolist()) == (str(target), "missing", held)
        with pytest.raises(FormatError, match=str(target)):
            storage[held[0]]
        storage[0]
    with SpaceStorage.load_from(path / "storage") as whole:  # a composite lists those of its parts
        assert [f.path for f in whole.damaged_files()] == [str(target)]


def test_damage_errors_are_damaged_data_errors(damaged):
    from trajstore.damage import DamagedDataError

    path, _, _, held = damaged
    with open_quietly(path) as rb:
        with pytest.raises(DamagedDataError):
            rb[held[0]]
        with pytest.raises(DamagedDataError):
            rb.sample(2)
    with pytest.raises(DamagedDataError):
        ReplayBuffer.load_from(path, read_only=False)
