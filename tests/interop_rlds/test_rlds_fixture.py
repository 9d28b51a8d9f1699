"""import_rlds on the rlds_sim fixture (written by tensorflow_datasets 4.9.10), checked value by value
against the rules of tests/fixtures/rlds_sim/README.md."""

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from trajstore.errors import InvalidValueError
from trajstore.interop.rlds import import_rlds
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, TextSpace

from tests.interop_rlds.records import BUILDER, FIXTURE, LENGTHS, ORDER


def expected_image(e, t):
    img = np.empty((64, 64, 3), np.uint8)
    img[..., 0] = (e * 40 + t) % 256
    img[..., 1] = (t * 5) % 256
    img[..., 2] = (4 * np.arange(64))[:, None]
    return img


def check_episode(rb, k, e, *, exact_images=True):
    ep = rb.episode(k)
    T = LENGTHS[e]
    assert ep.stop - ep.start == T and ep.done and not ep.interrupted and not ep.has_final_observation
    assert ep.data == {"file_path": f"synthetic/episode_{e}.npz", "task": f"task {e}", "rlds_index": ORDER.index(e)}
    b = rb[ep.start:ep.stop]
    for t in range(T):
        assert b["observation"]["state"][t].tolist() == [e, t, 1000 * e + t, t / 4, -t, 0.5, e / 8, 1.0]
        assert b["action"][t].tolist() == [t, -t, e, t / 2, 0, 0, 1 if t % 2 == 0 else 0]
        assert b["reward"][t] == np.float32(t / 10)
        assert b["discount"][t] == 1.0
        assert bool(b["terminated"][t]) is (t == T - 1 and e != 1)
        assert bool(b["truncated"][t]) is (t == T - 1 and e == 1)  # episode 1 ends on a time limit
        img = b["observation"]["image"][t]
        if exact_images:
            assert np.array_equal(img, expected_image(e, t))
        else:  # JPEG: lossy, close
            assert np.abs(img.astype(int) - expected_image(e, t)).mean() < 3
    assert b["reward"].dtype == np.float32 and b["reward"].shape == (T,)
    assert b["terminated"].dtype == bool and b["terminated"].shape == (T,)


def test_png_import_every_value(tmp_path):
    s = import_rlds(BUILDER, tmp_path / "rb", camera="png")
    assert (s.episodes, s.steps) == (3, 39)
    assert s.leaves == {"steps/action": "action", "steps/discount": "discount", "steps/is_terminal": "terminated",
                        "steps/observation/image": "observation/image",
                        "steps/observation/state": "observation/state", "steps/reward": "reward"}
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    assert len(rb) == 39
    sp = rb.space
    assert dict(sp.metadata) == {"rlds": {"name": "rlds_sim", "version": "1.0.0", "split": "train"}}
    assert set(sp.spaces) == {"action", "discount", "terminated", "truncated", "observation", "reward"}
    img = sp["observation"]["image"]
    assert isinstance(img, BoxSpace) and img.shape == (64, 64, 3) and img.dtype == np.uint8
    assert dict(img.metadata) == {"kind": "image", "layout": "HWC", "fps": 10}
    assert sp["observation"]["state"].shape == (8,) and sp["observation"]["state"].dtype == np.float32
    assert sp["action"].shape == (7,) and sp["reward"].shape == () and sp["discount"].shape == ()
    assert isinstance(sp["terminated"], BinarySpace) and sp["terminated"].shape == ()
    assert isinstance(sp["truncated"], BinarySpace) and sp["truncated"].shape == ()
    for k, e in enumerate(ORDER):
        check_episode(rb, k, e)


def test_sample_transitions_on_an_import(tmp_path):
    import_rlds(BUILDER, tmp_path / "rb", camera="png")
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    batch = rb.sample_transitions(16, rng=np.random.default_rng(0))
    assert batch["terminated"].shape == (16,) and batch["truncated"].shape == (16,)


def test_default_jpeg_parent_folder_and_fps(tmp_path):
    s = import_rlds(FIXTURE, tmp_path / "rb", fps=15)  # the parent of 1.0.0: one version
    assert (s.episodes, s.steps) == (3, 39)
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    assert rb.space["observation"]["image"].metadata["fps"] == 15
    for k, e in enumerate(ORDER):
        check_episode(rb, k, e, exact_images=False)


def test_selection_by_metadata_ids_and_list(tmp_path):
    s = import_rlds(BUILDER, tmp_path / "a", episodes='file_path == "synthetic/episode_0.npz"', camera="png")
    assert (s.episodes, s.steps) == (1, 12)
    check_episode(ReplayBuffer.load_from(tmp_path / "a"), 0, 0)
    s = import_rlds(BUILDER, tmp_path / "b", episodes="1-2", camera="png")  # stored positions 1, 2: e = 2, 0
    rb = ReplayBuffer.load_from(tmp_path / "b")
    check_episode(rb, 0, 2)
    check_episode(rb, 1, 0)
    s = import_rlds(BUILDER, tmp_path / "c", episodes=[2, 0], camera="png")  # in the order given
    rb = ReplayBuffer.load_from(tmp_path / "c")
    check_episode(rb, 0, 0)
    check_episode(rb, 1, 1)
    s = import_rlds(BUILDER, tmp_path / "d", episodes='task == "task 2" or steps > 15', camera="png")
    assert [ReplayBuffer.load_from(tmp_path / "d").episode(k).data["file_path"] for k in range(2)] == [
        "synthetic/episode_1.npz", "synthetic/episode_2.npz"]
    with pytest.raises(InvalidValueError, match="selects none"):
        import_rlds(BUILDER, tmp_path / "e", episodes='file_path == "nope"')
    with pytest.raises(InvalidValueError, match=r"episodes \[3\] are not in the source"):
        import_rlds(BUILDER, tmp_path / "e", episodes=[3])
    assert not (tmp_path / "e").exists()


def test_unknown_split_names_the_splits(tmp_path):
    with pytest.raises(InvalidValueError, match=r"no split 'test'; it holds train"):
        import_rlds(BUILDER, tmp_path / "rb", split="test")
    assert not (tmp_path / "rb").exists()


def test_key_map_renames_and_keeps_boundaries(tmp_path):
    s = import_rlds(BUILDER, tmp_path / "rb", camera="png", episodes=[2], key_map={
        "observation/image": "observation/images/front", "is_last": "last", "language_instruction": "lang"})
    assert s.leaves["steps/observation/image"] == "observation/images/front"
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    b = rb[0:12]
    assert np.array_equal(b["observation"]["images"]["front"][3], expected_image(0, 3))
    assert b["last"].tolist() == [False] * 11 + [True]
    assert isinstance(rb.space["lang"], TextSpace) and b["lang"].tolist() == ["task 0"] * 12
    with pytest.raises(InvalidValueError, match=r"key_map names 'obs', .*its step features: action, "):
        import_rlds(BUILDER, tmp_path / "x", key_map={"obs": "a"})
    s = import_rlds(BUILDER, tmp_path / "y", episodes=[0], key_map={"steps/action": "act"})  # record keys too
    assert s.leaves["steps/action"] == "act"
    assert ReplayBuffer.load_from(tmp_path / "y")[2]["act"].tolist() == [2, -2, 1, 1, 0, 0, 1]
    with pytest.raises(InvalidValueError, match="two source features go to one leaf"):
        import_rlds(BUILDER, tmp_path / "x", key_map={"action": "reward"})
    with pytest.raises(InvalidValueError, match="lies inside another leaf"):
        import_rlds(BUILDER, tmp_path / "x", key_map={"action": "reward/a"})
    with pytest.raises(InvalidValueError, match="is not a leaf path"):
        import_rlds(BUILDER, tmp_path / "x", key_map={"action": "a//b"})
    assert not (tmp_path / "x").exists()


def test_bad_fps_and_camera(tmp_path):
    for fps in (0, -1, float("nan"), True):
        with pytest.raises(ValueError, match="fps must be"):
            import_rlds(BUILDER, tmp_path / "rb", fps=fps)
    with pytest.raises(ValueError, match="camera must be"):
        import_rlds(BUILDER, tmp_path / "rb", camera="gif")
    assert not (tmp_path / "rb").exists()


def _app():
    from trajstore.cli.rlds import import_rlds_command

    app = typer.Typer()
    sub = typer.Typer()
    sub.command("rlds")(import_rlds_command)
    app.add_typer(sub, name="import")
    return app


def test_cli(tmp_path):
    runner = CliRunner()
    out = tmp_path / "rb"
    r = runner.invoke(_app(), ["import", "rlds", str(FIXTURE), str(out), "--no-progress", "--camera", "png",
                               "--episodes", 'file_path == "synthetic/episode_0.npz"', "--fps", "5",
                               "--key", "observation/state=observation/proprio", "--split", "train"])
    assert r.exit_code == 0, r.output
    assert f"imported 1 episode (12 steps, 6 leaves) into {out}" in " ".join(r.output.split())
    rb = ReplayBuffer.load_from(out)
    assert rb[3]["observation"]["proprio"].tolist() == [0, 3, 3, 0.75, -3, 0.5, 0, 1.0]
    assert rb.space["observation"]["image"].metadata["fps"] == 5
    r = runner.invoke(_app(), ["import", "rlds", str(BUILDER), str(tmp_path / "x"), "--split", "validation"])
    assert r.exit_code != 0 and "no split 'validation'; it holds train" in " ".join(r.output.split())
    r = runner.invoke(_app(), ["import", "rlds", str(BUILDER), str(tmp_path / "x"), "--key", "action"])
    assert r.exit_code != 0 and "NAME=TARGET" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "x").exists()


def test_blocks_of_one_step_give_the_same_values(tmp_path, monkeypatch):
    """Episodes are appended in blocks bounded by decoded bytes; a 1-step block changes nothing."""
    from trajstore.interop.rlds import import_ as module

    monkeypatch.setattr(module, "BLOCK_BYTES", 100)
    import_rlds(BUILDER, tmp_path / "rb", camera="png", episodes=[1])
    check_episode(ReplayBuffer.load_from(tmp_path / "rb"), 0, 2)
