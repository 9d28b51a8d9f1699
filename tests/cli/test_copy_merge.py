"""copy_episodes / merge_buffers and `trajstore copy|merge`: every step, episode data, final observation
and interrupted flag kept; the source's layout and options kept; rings compacted; errors before writing."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.cli.buffers import DATA, LENGTHS, make_buffer, step_space
from trajstore.cli.main import app
from trajstore.errors import InvalidValueError, SelectionWarning, StorageExistsError
from trajstore.ops import copy_episodes, merge_buffers
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.copy import first_difference
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.testing import psnr


def assert_same_tree(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same_tree(a[k], b[k])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def episodes_of(path):
    """Every episode as (steps, data, interrupted, done, final observation), read back."""
    with ReplayBuffer.load_from(path) as rb:
        return [(rb.get_episode(k), e.data, e.interrupted, e.done, rb.final_observation(k))
                for k, e in enumerate(rb.episodes)]


def assert_same_episodes(got, want):
    assert len(got) == len(want)
    for (steps, data, interrupted, done, final), (w_steps, w_data, w_int, w_done, w_final) in zip(got, want):
        assert_same_tree(steps, w_steps)  # every leaf of every step, exactly (PNG and HDF5 are lossless)
        assert (data, interrupted, done) == (w_data, w_int, w_done)
        assert_same_tree(final, w_final)


def test_copy_keeps_every_step_and_episode_fields_exactly(tmp_path):
    src = make_buffer(tmp_path / "src", depth=True)
    summary = copy_episodes(src, tmp_path / "dst")
    assert (summary.episodes, summary.steps) == (4, sum(LENGTHS))
    assert_same_episodes(episodes_of(tmp_path / "dst"), episodes_of(src))
    with ReplayBuffer.load_from(tmp_path / "dst") as rb:
        assert [e.data for e in rb.episodes] == DATA and [e.interrupted for e in rb.episodes] == [0, 0, 1, 0]
        assert rb.capacity is None


def test_copy_keeps_the_layout_and_storage_options(tmp_path):
    src = make_buffer(tmp_path / "src", depth=True)
    copy_episodes(src, tmp_path / "dst")
    for sub in ("observation.pixels", "observation.depth", "@rest"):
        a = json.loads((src / "storage" / sub / "storage.json").read_text())
        b = json.loads((tmp_path / "dst" / "storage" / sub / "storage.json").read_text())
        assert (a["type"], a["config"], a["space"]) == (b["type"], b["config"], b["space"]), sub
    assert json.loads((src / "storage/observation.depth/storage.json").read_text())["config"]["format"] == "PNG"


def test_copy_selects_by_ids_and_by_expression(tmp_path):
    src = make_buffer(tmp_path / "src")
    every = episodes_of(src)
    copy_episodes(src, tmp_path / "ids", episodes=[1, 3])
    assert_same_episodes(episodes_of(tmp_path / "ids"), [every[1], every[3]])
    copy_episodes(src, tmp_path / "expr", episodes='task == "stack" and not interrupted')
    assert_same_episodes(episodes_of(tmp_path / "expr"), [every[3]])
    copy_episodes(src, tmp_path / "text_ids", episodes="0,2-3")
    assert_same_episodes(episodes_of(tmp_path / "text_ids"), [every[0], every[2], every[3]])


def test_copy_compacts_a_ring_and_keeps_the_open_fragment_as_interrupted(tmp_path):
    src = make_buffer(tmp_path / "ring", capacity=20, open_steps=3)  # 30 steps appended, 20 held
    with ReplayBuffer.load_from(src) as rb:
        held = [(e.id, len(e), e.overwritten) for e in rb.episodes]
        steps = rb[:]
    assert held == [(1, 2, True), (2, 9, False), (3, 6, False), (4, 3, False)]
    copy_episodes(src, tmp_path / "dst")
    with ReplayBuffer.load_from(tmp_path / "dst") as rb:
        assert rb.capacity is None and len(rb) == 20
        assert [len(e) for e in rb.episodes] == [2, 9, 6, 3]
        assert [e.interrupted for e in rb.episodes] == [False, True, False, True]  # the open fragment
        assert [e.id for e in rb.episodes] == [0, 1, 2, 3]
        assert_same_tree(rb[:], steps)
    copy_episodes(src, tmp_path / "small_ring", capacity=10)
    with ReplayBuffer.load_from(tmp_path / "small_ring") as rb:
        assert rb.capacity == 10 and len(rb) == 10
        assert_same_tree(rb[:], {k: v for k, v in _tail(steps, 10).items()})


def _tail(tree, n):
    return {k: _tail(v, n) if isinstance(v, dict) else v[-n:] for k, v in tree.items()}


def test_jpeg_and_video_leaves_are_re_encoded_within_their_bound(tmp_path):
    for camera in ("JPEG", "video"):
        if camera == "video":
            pytest.importorskip("av")
        src = make_buffer(tmp_path / camera, camera=camera)
        copy_episodes(src, tmp_path / f"{camera}-copy")
        with ReplayBuffer.load_from(src) as a, ReplayBuffer.load_from(tmp_path / f"{camera}-copy") as b:
            assert type(a.storage.storages["observation/pixels"]) is type(b.storage.storages["observation/pixels"])
            x, y = a[:], b[:]
            assert_same_tree(x["action"], y["action"])
            assert psnr(y["observation"]["pixels"], x["observation"]["pixels"]).min() > 30
            assert not np.array_equal(y["observation"]["pixels"], x["observation"]["pixels"])  # re-encoded


def test_merge_keeps_every_episode_in_order(tmp_path):
    a = make_buffer(tmp_path / "a")
    b = make_buffer(tmp_path / "b", lengths=[4, 3], data=[{"task": "b0"}, {"task": "b1"}], interrupted=(True, False))
    summary = merge_buffers([a, b], tmp_path / "out")
    assert summary.source_episodes == [(str(a), 0), (str(a), 1), (str(a), 2), (str(a), 3), (str(b), 0), (str(b), 1)]
    assert_same_episodes(episodes_of(tmp_path / "out"), episodes_of(a) + episodes_of(b))


def test_merge_refuses_different_spaces_naming_the_leaf_before_writing(tmp_path):
    a = make_buffer(tmp_path / "a")
    space = step_space(fps=15)  # the camera's metadata differs
    ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "b",
                        **dict_storage_kwargs_from_space(space)).close()
    with pytest.raises(InvalidValueError, match=r"step spaces differ: leaf 'observation/pixels' differs"):
        merge_buffers([a, tmp_path / "b"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_first_difference_names_missing_leaves():
    a = DictSpace({"x": BoxSpace(0, 1, (2,), np.float32), "y": BoxSpace(0, 1, (), np.float32)})
    b = DictSpace({"x": BoxSpace(0, 1, (3,), np.float32)})
    assert first_difference(a, a) is None
    assert "leaf 'x' differs" in first_difference(a, b)
    assert first_difference(b, DictSpace({"x": BoxSpace(0, 1, (3,), np.float32), "z": BoxSpace(0, 1, (),
                                                                                                np.float32)})) \
        == "leaf 'z' is missing from the first space"


def test_errors_come_before_anything_is_written(tmp_path):
    src = make_buffer(tmp_path / "src")
    with pytest.raises(ValueError, match="are not held"):
        copy_episodes(src, tmp_path / "dst", episodes=[0, 42])
    with pytest.raises(ValueError, match="episode selection"):
        copy_episodes(src, tmp_path / "dst", episodes="success ==")
    assert not (tmp_path / "dst").exists()
    with pytest.raises(StorageExistsError):
        copy_episodes(src, src)


def test_a_failed_copy_removes_what_it_wrote(tmp_path, monkeypatch):
    src = make_buffer(tmp_path / "src")
    calls = []

    def boom(n):
        calls.append(n)
        if len(calls) == 2:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        copy_episodes(src, tmp_path / "dst", progress=boom)
    assert not (tmp_path / "dst").exists()


def test_cli_copy_and_merge(tmp_path):
    runner = CliRunner()
    src = make_buffer(tmp_path / "src")
    result = runner.invoke(app, ["copy", str(src), str(tmp_path / "ok"), "--episodes", "success == true",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "3 episodes, 22 steps" in result.output
    assert [e[1] for e in episodes_of(tmp_path / "ok")] == [DATA[0], DATA[2], DATA[3]]
    result = runner.invoke(app, ["copy", str(src), str(tmp_path / "bad"), "--episodes", "success = 1"])
    assert result.exit_code == 2 and "unexpected character '='" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["merge", str(src), str(tmp_path / "ok"), str(tmp_path / "merged"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert len(episodes_of(tmp_path / "merged")) == 7
    result = runner.invoke(app, ["merge", str(src), str(tmp_path / "nope"), str(tmp_path / "m2")])
    assert result.exit_code == 2 and str(tmp_path / "nope") in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_selection_that_selects_nothing_is_refused_unless_asked(tmp_path):
    src = make_buffer(tmp_path / "src")
    with pytest.warns(SelectionWarning, match="'sucess'"):
        with pytest.raises(InvalidValueError, match=r"'sucess == true' selects no episode of the 4 held in .*no held "
                                                    r"episode has the data key 'sucess' \(did you mean 'success'\?\).*"
                                                    r"allow_empty=True"):
            copy_episodes(src, tmp_path / "dst", episodes="sucess == true")
    with pytest.raises(InvalidValueError, match="the episode list given selects no episode"):
        copy_episodes(src, tmp_path / "dst", episodes=[])
    assert not (tmp_path / "dst").exists()
    with pytest.warns(SelectionWarning, match="did you mean 'success'"):
        summary = copy_episodes(src, tmp_path / "dst", episodes="sucess == true", allow_empty=True)
    assert (summary.episodes, summary.steps) == (0, 0) and episodes_of(tmp_path / "dst") == []


def test_cli_copy_refuses_hostile_and_empty_selections_in_one_line(tmp_path):
    runner = CliRunner()
    src = make_buffer(tmp_path / "src")
    for text, message in [("(" * 5000 + "success" + ")" * 5000, "nest deeper than 64 levels"),
                          ("not " * 5000 + "success", "nest deeper than 64 levels"),
                          ("0-1000000000000", r"episodes [4, 5, 6, 7, 8] and 999999999992 more are not held"),
                          ("sucess == true", "did you mean 'success'?)"),
                          ("99999999999999999999999", "below 2**63")]:
        result = runner.invoke(app, ["copy", str(src), str(tmp_path / "dst"), "--episodes", text, "--no-progress"])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1 and message in " ".join(result.output.split())
        assert "Traceback" not in result.output and not (tmp_path / "dst").exists()
    result = runner.invoke(app, ["copy", str(src), str(tmp_path / "dst"), "--episodes", "sucess == true",
                                 "--allow-empty", "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("warning:") and "did you mean 'success'?" in lines[0]
    assert "0 episodes" in lines[1] and episodes_of(tmp_path / "dst") == []
