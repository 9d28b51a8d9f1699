"""end_episode(final_observation=obs): stored like the observation leaves, read back by final_observation(k)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.replay_buffer.log_backdoor import committed_records
from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.final_observations import FINAL_DIR
from trajstore.ops.info import describe
from trajstore.replay_buffer.metadata import META_FILE
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, MemmapStorage, dict_storage_kwargs_from_space
from trajstore.testing import moving_scene, psnr

H, W = 24, 32


def space():
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
            "state": BoxSpace(-1e6, 1e6, (3,), np.float32),
            "contact": BinarySpace(),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float32),
    })


FRAMES = moving_scene(64, H, W, seed=3)


def obs(g):
    """The observation at global step ``g`` (its frame encodes ``g``)."""
    return {"pixels": FRAMES[g % 64], "state": np.array([g, -g, g / 2], np.float32), "contact": g % 3 == 0}


def steps(lo, n):
    return {"observation": {"pixels": FRAMES[[g % 64 for g in range(lo, lo + n)]],
                            "state": np.stack([obs(g)["state"] for g in range(lo, lo + n)]),
                            "contact": np.array([obs(g)["contact"] for g in range(lo, lo + n)])},
            "action": np.zeros((n, 2), np.float32)}


def make(tmp_path, capacity=None, **routing):
    s = space()
    return ReplayBuffer.create(DictStorage, s, cache_path=tmp_path / "rb", capacity=capacity,
                               **dict_storage_kwargs_from_space(s, **routing))


def record(rb, lengths, with_final=lambda k: True):
    """Episodes of the given lengths; episode k's final observation is obs(its stop step)."""
    g = rb.total_steps
    for k, n in enumerate(lengths):
        rb.extend(steps(g, n))
        g += n
        if with_final(k):
            rb.end_episode(final_observation=obs(g), k=k)
        else:
            rb.end_episode(k=k)


def check_final(got, g, exact):
    assert got["pixels"].shape == (H, W, 3) and got["pixels"].dtype == np.uint8
    assert got["state"].dtype == np.float32 and got["contact"].dtype == bool and got["contact"].shape == ()
    np.testing.assert_array_equal(got["state"], obs(g)["state"])
    assert bool(got["contact"]) == obs(g)["contact"]
    if exact:
        np.testing.assert_array_equal(got["pixels"], obs(g)["pixels"])
    else:  # JPEG quality 95, the image storage's bound
        err = np.abs(got["pixels"].astype(int) - obs(g)["pixels"])
        assert err.mean() <= 2 and err.max() <= 16 and psnr(got["pixels"][None], obs(g)["pixels"][None])[0] >= 35


READ_FINALS = """
import sys, json, numpy as np
from trajstore.replay_buffer import ReplayBuffer
with ReplayBuffer.load_from(sys.argv[1]) as rb:
    out = []
    for k in range(rb.num_episodes):
        f = rb.final_observation(k)
        out.append(None if f is None else [int(f["pixels"].astype(np.int64).sum()), f["state"].tolist()])
    print(json.dumps(out))
"""


@pytest.mark.parametrize("image_format", ["JPEG", "PNG"])
def test_final_observations_round_trip_with_the_observation_routing(tmp_path, image_format):
    rb = make(tmp_path, kind_kwargs={"image": {"format": image_format}})
    record(rb, [3, 2, 4], with_final=lambda k: k != 1)
    rb.extend(steps(9, 2))  # open: no final observation yet
    assert [e.has_final_observation for e in rb.episodes] == [True, False, True, False]
    assert rb.final_observation(1) is None and rb.final_observation(-1) is None
    check_final(rb.final_observation(0), 3, image_format == "PNG")
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        check_final(rb.final_observation(0), 3, image_format == "PNG")
        check_final(rb.final_observation(2), 9, image_format == "PNG")
        step = rb[0]["observation"]  # same nesting and dtypes as a step's observation
        final = rb.final_observation(0)
        assert {k: (v.dtype, v.shape) for k, v in final.items()} == {k: (v.dtype, v.shape) for k, v in step.items()}
        # the same routing as the buffer's observation subtree
        layout = {k: (type(s), s.get_config()) for k, s in rb.final_observation_storage.storages.items()}
        assert layout == {"pixels": (ImageStorage, rb.storage.storages["observation/pixels"].get_config()),
                          "*": (HDF5Storage, rb.storage.storages["*"].get_config())}
    info = describe(tmp_path / "rb")
    assert info.final_observations == 2 and [s.key for s in info.final_observation_storages] == ["pixels", "*"]
    assert info.nbytes > sum(s.nbytes for s in info.storages)
    meta = json.loads((tmp_path / "rb" / META_FILE).read_text())
    assert meta["final_observations"] == {"type": "dict", "dir": FINAL_DIR}
    assert [r["final"] for r in committed_records(tmp_path / "rb")] == [0, -1, 1]
    assert meta["episodes"]["final_count"] == 2
    out = subprocess.run([sys.executable, "-c", READ_FINALS, str(tmp_path / "rb")], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)  # a fresh process reads them from the folder alone
    assert got[1] is None and got[3] is None
    assert got[0][1] == obs(3)["state"].tolist() and got[2][1] == obs(9)["state"].tolist()
    if image_format == "PNG":
        assert got[0][0] == int(obs(3)["pixels"].astype(np.int64).sum())


def test_a_ring_keeps_at_most_capacity_final_observations(tmp_path):
    rb = make(tmp_path, capacity=5, kind_kwargs={"image": {"format": "PNG"}},
              key_storage_cls={"observation/state": MemmapStorage})
    lengths = [1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 1, 2]
    record(rb, lengths)
    stops = np.cumsum(lengths)
    assert rb.final_observation_storage.capacity == 5 and len(rb.final_observation_storage) == 5
    held = rb.episodes
    assert len(held) <= 5
    for k, ep in enumerate(held):
        check_final(rb.final_observation(k), int(stops[ep.id]), exact=True)
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:
        record(rb, [1, 1, 1])
        stops = np.cumsum(lengths + [1, 1, 1])
        for k, ep in enumerate(rb.episodes):
            check_final(rb.final_observation(k), int(stops[ep.id]), exact=True)
            assert ep.data == {"k": ep.id if ep.id < len(lengths) else ep.id - len(lengths)}
        assert type(rb.final_observation_storage.storages["state"]) is MemmapStorage


def test_video_leaves_get_jpeg_final_frames(tmp_path):
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage

    with make(tmp_path, kind_storage_cls={"image": VideoStorage}) as rb:
        record(rb, [2, 3])
        assert type(rb.final_observation_storage.storages["pixels"]) is ImageStorage
        check_final(rb.final_observation(1), 5, exact=False)


def test_a_single_leaf_observation(tmp_path):
    s = DictSpace({"observation": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image"}),
                   "action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, s, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(s, kind_kwargs={"image": {"format": "PNG"}})) as rb:
        rb.append({"observation": FRAMES[0], "action": np.zeros(2, np.float32)})
        rb.end_episode(final_observation=FRAMES[1])
        assert type(rb.final_observation_storage) is ImageStorage
        np.testing.assert_array_equal(rb.final_observation(0), FRAMES[1])
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        np.testing.assert_array_equal(rb.final_observation(0), FRAMES[1])


def test_in_memory_buffer():
    s = DictSpace({"observation": BoxSpace(-1, 1, (3,), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, s, **dict_storage_kwargs_from_space(s)) as rb:
        rb.append(s.sample(np.random.default_rng(0)))
        rb.end_episode(final_observation=np.array([0.5, 0, -0.5], np.float32))
        np.testing.assert_array_equal(rb.final_observation(0), [0.5, 0, -0.5])


def test_a_space_without_observation_refuses_final_observation_before_writing(tmp_path):
    s = DictSpace({"state": BoxSpace(-1, 1, (3,), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, s, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(s)) as rb:
        rb.append(s.sample(np.random.default_rng(0)))
        rb.flush()
        before = (tmp_path / "rb" / META_FILE).read_bytes()
        with pytest.raises(ValueError, match="'observation' key"):
            rb.end_episode(final_observation={"state": np.zeros(3, np.float32)}, task="x")
        assert (tmp_path / "rb" / META_FILE).read_bytes() == before and not (tmp_path / "rb" / FINAL_DIR).exists()
        assert not rb.episode(0).done
        rb.end_episode(task="x")
        assert rb.final_observation(0) is None


@pytest.mark.parametrize("bad, match", [
    ({"pixels": np.zeros((H, W), np.uint8)}, "final_observation/pixels"),
    ("not a dict", "expected a dict"),
])
def test_a_bad_final_observation_writes_nothing(tmp_path, bad, match):
    rb = make(tmp_path)
    rb.extend(steps(0, 2))
    rb.flush()
    before = (tmp_path / "rb" / META_FILE).read_bytes()
    value = {**obs(2), **bad} if isinstance(bad, dict) else bad
    with pytest.raises(InvalidValueError, match=match):
        rb.end_episode(final_observation=value, task="x")
    assert (tmp_path / "rb" / META_FILE).read_bytes() == before and not (tmp_path / "rb" / FINAL_DIR).exists()
    assert [(e.done, e.data) for e in rb.episodes] == [(False, {})]
    with pytest.raises(ValueError, match="no episode to end"):
        rb.end_episode()  # fine: ends it
        rb.end_episode(final_observation=obs(2))
    rb.close()


def test_a_folder_left_by_a_writer_that_died_before_committing_is_replaced(tmp_path):
    rb = make(tmp_path)
    (tmp_path / "rb" / FINAL_DIR / "pixels").mkdir(parents=True)  # half-made; no metadata names it
    (tmp_path / "rb" / FINAL_DIR / "pixels" / "junk").write_bytes(b"x")
    rb.extend(steps(0, 2))
    rb.end_episode(final_observation=obs(2))
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        check_final(rb.final_observation(0), 2, exact=False)
        assert not (tmp_path / "rb" / FINAL_DIR / "pixels" / "junk").exists()


def test_a_reader_sees_final_observations_stored_after_it_opened(tmp_path):
    s = space()
    writer = ReplayBuffer.create(DictStorage, s, cache_path=tmp_path / "rb", multiprocessing=True,
                                 **dict_storage_kwargs_from_space(s, kind_kwargs={"image": {"format": "PNG"}}))
    record(writer, [2], with_final=lambda k: False)
    reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
    record(writer, [3, 1])  # the first final observation makes the storage
    assert reader.refresh()
    check_final(reader.final_observation(1), 5, exact=True)
    check_final(reader.final_observation(2), 6, exact=True)
    reader.close()
    writer.close()


def test_a_missing_final_observation_storage_is_a_format_error(tmp_path):
    import shutil

    from trajstore.errors import FormatError

    with make(tmp_path) as rb:
        record(rb, [2])
    shutil.rmtree(tmp_path / "rb" / FINAL_DIR)
    for read_only in (True, False, False):  # a failed writable open releases the lock
        with pytest.raises(FormatError):
            ReplayBuffer.load_from(tmp_path / "rb", read_only=read_only)


def test_a_ring_reader_racing_the_reuse_of_a_final_observation_slot_gets_a_stale_read(tmp_path):
    from trajstore.errors import StaleReadError

    s = space()
    writer = ReplayBuffer.create(DictStorage, s, cache_path=tmp_path / "rb", capacity=3, multiprocessing=True,
                                 **dict_storage_kwargs_from_space(s, kind_kwargs={"image": {"format": "PNG"}}))
    record(writer, [1, 1, 1])
    reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
    assert [e.id for e in reader.episodes] == [0, 1, 2]
    record(writer, [1])  # episode 3's final observation takes episode 0's slot
    with pytest.raises(StaleReadError, match="index again"):
        reader.final_observation(0)
    assert [e.id for e in reader.episodes] == [1, 2, 3]
    check_final(reader.final_observation(0), 2, exact=True)
    check_final(reader.final_observation(2), 4, exact=True)
    reader.close()
    writer.close()
