"""read_trajstore: Ray Data rows (steps or windows) equal a direct read of the buffer, with a local Ray."""

import numpy as np
import pytest

from trajstore.errors import FormatError, StaleReadError, UnknownLeafError
from trajstore.training._ray_rows import episode_starts, make_request, read_rows, split_rows
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

ray = pytest.importorskip("ray", reason="ray is not installed (pip install trajstore[ray]; CI installs it)")
from trajstore.training.ray import TrajstoreDatasource, read_trajstore  # noqa: E402

CAMERA = {"kind": "image", "layout": "HWC", "fps": 10}
SPACE = DictSpace({
    "observation": DictSpace({"pixels": BoxSpace(0, 255, (6, 8, 3), np.uint8, metadata=CAMERA),
                              "pos": BoxSpace(-1e6, 1e6, (2,), np.float32)}),
    "action": BoxSpace(-1e6, 1e6, (2,), np.float32),
    "step_id": BoxSpace(0, 2**40, (), np.int64),
    "task": TextSpace(12),
})
LENGTHS = [5, 9, 3, 12, 7]
WINDOW = {"observation/pixels": [-1, 0], "action": range(3)}


def steps(first, n):
    ids = np.arange(first, first + n, dtype=np.int64)
    frames = (ids[:, None, None, None] * 7 + np.arange(6 * 8 * 3).reshape(6, 8, 3)) % 251
    return {"observation": {"pixels": frames.astype(np.uint8), "pos": np.stack([ids, 2 * ids], 1).astype(np.float32)},
            "action": np.stack([ids, -ids], 1).astype(np.float32), "step_id": ids,
            "task": np.array([f"task {i % 3}" for i in ids])}


def record(path, capacity=None, lengths=LENGTHS):
    kwargs = dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"format": "PNG"}})  # exact frames
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, capacity=capacity, **kwargs)
    first = 0
    for k, n in enumerate(lengths):
        rb.extend(steps(first, n))
        rb.end_episode(success=k % 2 == 0)
        first += n
    rb.close()
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return record(tmp_path_factory.mktemp("ray") / "rb")


def direct_rows(path, window=None, pad=True, episodes=None):
    """The rows as a direct read gives them: flat columns, in step order; ``index``, ``episode`` and
    ``step`` from the anchors and the buffer's episode table."""
    with ReplayBuffer.load_from(path) as rb:
        count = rb.count_anchors(window, pad=pad, episodes=episodes)
        numbers = np.arange(count)
        anchors = rb.anchors_at(numbers, window, pad=pad, episodes=episodes)
        if window is None:
            data, is_pad = rb[anchors], {}
        else:
            data, is_pad = rb.windows_at(numbers, window, pad=pad, episodes=episodes)
        owners = [next(e for e in rb.episodes if e.start <= a < e.stop) for a in anchors]
    flat = {"index": anchors, "episode": np.array([e.id for e in owners], np.int64),
            "step": np.array([a - e.start for a, e in zip(anchors, owners)], np.int64),
            "observation/pixels": data["observation"]["pixels"], "observation/pos": data["observation"]["pos"],
            "action": data["action"], "step_id": data["step_id"], "task": data["task"]}
    flat.update({f"is_pad/{name}": mask for name, mask in is_pad.items()})
    return flat


def ray_rows(ds):
    """Every row of ``ds`` as flat columns, sorted by the anchor's ``step_id`` (Ray may reorder blocks)."""
    batches = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    columns = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    order = np.argsort(columns["step_id"], kind="stable")
    return {k: v[order] for k, v in columns.items()}


def test_steps_equal_a_direct_read(local_ray, folder):
    assert len(TrajstoreDatasource(folder, min_task_rows=4).get_read_tasks(3)) == 3
    ds = read_trajstore(folder, override_num_blocks=3, min_task_rows=4)
    want = direct_rows(folder)
    assert ds.count() == sum(LENGTHS) == len(want["step_id"])
    got = ray_rows(ds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got["observation/pixels"].dtype == np.uint8 and got["observation/pixels"].shape[1:] == (6, 8, 3)
    pixel_sum = int(want["observation/pixels"].astype(np.int64).sum())
    assert int(got["observation/pixels"].astype(np.int64).sum()) == pixel_sum
    assert float(ds.sum("step_id")) == sum(range(sum(LENGTHS)))


@pytest.mark.parametrize("pad", [True, False])
def test_windows_of_selected_episodes_equal_a_direct_read(local_ray, folder, pad):
    ds = read_trajstore(folder, window=WINDOW, pad=pad, episodes="success == true",
                        columns=["observation/pixels", "action", "step_id"], override_num_blocks=2, min_task_rows=4)
    want = direct_rows(folder, WINDOW, pad, episodes=[0, 2, 4])
    got = ray_rows(ds)
    assert set(got) == {"index", "episode", "step", "observation/pixels", "action", "step_id",
                        "is_pad/observation/pixels", "is_pad/action"}
    assert ds.count() == len(want["step_id"]) == (sum(LENGTHS[0::2]) if pad else (5 - 3) + (3 - 3) + (7 - 3))
    for name in got:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got["action"].shape[1:] == (3, 2) and got["is_pad/action"].dtype == bool
    assert got["is_pad/action"].any() == pad  # pad=False keeps only windows inside their episode


def test_under_rays_default_order_the_index_column_puts_rows_back_in_step_order(local_ray, folder):
    from ray.data import DataContext

    assert DataContext.get_current().execution_options.preserve_order is False  # Ray's default
    ds = read_trajstore(folder, override_num_blocks=4, min_task_rows=4)
    batches = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    got = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    order = np.argsort(got["index"])
    got = {k: v[order] for k, v in got.items()}
    assert {k: got[k].dtype for k in ("index", "episode", "step")} == dict.fromkeys(("index", "episode", "step"),
                                                                                   np.dtype(np.int64))
    with ReplayBuffer.load_from(folder) as rb:
        assert got["index"].tolist() == list(range(len(rb)))
        want = rb[np.arange(len(rb))]
        for name, values in [("observation/pixels", want["observation"]["pixels"]), ("action", want["action"]),
                             ("observation/pos", want["observation"]["pos"]), ("step_id", want["step_id"]),
                             ("task", want["task"])]:
            np.testing.assert_array_equal(got[name], values, err_msg=name)
        for e in rb.episodes:
            assert got["episode"][e.start:e.stop].tolist() == [e.id] * len(e)
            assert got["step"][e.start:e.stop].tolist() == list(range(len(e)))
    assert got["episode"].tolist() == [k for k, n in enumerate(LENGTHS) for _ in range(n)]


def test_a_top_level_key_named_like_a_row_column_is_refused_before_reading(tmp_path):
    space = DictSpace({"episode": BoxSpace(0, 9, (), np.int64), "action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"episode": np.zeros(3, np.int64), "action": np.zeros((3, 2), np.float32)})
        rb.end_episode()
    with pytest.raises(ValueError, match="top-level key 'episode'.*index_columns=False"):
        TrajstoreDatasource(tmp_path / "rb")
    source = TrajstoreDatasource(tmp_path / "rb", index_columns=False)
    with source.request.open() as rb:
        assert sorted(read_rows(rb, source.request, 0, 3)) == ["action", "episode"]


def test_a_selection_of_no_episode_is_an_empty_dataset(local_ray, folder):
    ds = read_trajstore(folder, episodes="success == 42")
    assert ds.count() == 0 and ds.take_all() == []


def test_a_wrapped_ring_reads_its_held_steps(local_ray, tmp_path):
    path = record(tmp_path / "ring", capacity=20)
    with ReplayBuffer.load_from(path) as rb:
        assert rb.episodes[0].overwritten and rb.total_steps > len(rb)
        held = rb[np.arange(len(rb))]["step_id"]
    ds = read_trajstore(path, columns=["step_id", "action"], window={"action": [0, 1]})
    got = ray_rows(ds)
    np.testing.assert_array_equal(got["step_id"], held)
    for name, values in direct_rows(path, {"action": [0, 1]}).items():
        if name in got:
            np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_bad_requests_fail_before_any_task(tmp_path, folder):
    with pytest.raises(UnknownLeafError, match="observation/depth"):
        TrajstoreDatasource(folder, columns=["observation/depth"])
    with pytest.raises(TypeError, match="pad goes with window"):
        TrajstoreDatasource(folder, pad=False)
    with pytest.raises(ValueError, match=r"\[42\]"):
        TrajstoreDatasource(folder, episodes=[42])
    with pytest.raises(ValueError, match="delta_indices"):
        TrajstoreDatasource(folder, window={"action": []})
    with pytest.raises(ValueError, match="episode selection"):
        TrajstoreDatasource(folder, episodes="success ==")
    with pytest.raises(FormatError):
        TrajstoreDatasource(tmp_path / "nothing")
    with pytest.raises(ValueError, match="min_task_rows"):
        TrajstoreDatasource(folder, min_task_rows=0)
    for empty in ("", "/"):  # parsed to the root: it read every leaf
        with pytest.raises(ValueError, match="names no leaf"):
            TrajstoreDatasource(folder, columns=["action", empty])


def test_split_rows_balances_rows_and_cuts_at_episode_starts(folder):
    with ReplayBuffer.load_from(folder) as rb:
        request = make_request(rb, str(folder), storage_options=None, columns=None, episodes=None,
                               window=None, pad=None)
        starts = episode_starts(rb, request)
        windows = make_request(rb, str(folder), storage_options=None, columns=None, episodes=[1, 3],
                               window={"action": range(4)}, pad=False)
        assert episode_starts(rb, windows).tolist() == [0, 6]  # 9 - 3 anchors, then 12 - 3
    assert request.total == 36 and starts.tolist() == [0, 5, 14, 17, 29]
    ranges = split_rows(36, starts, 3, min_rows=1)  # ideal cuts 12 and 24: 14 is near, 24 is inside a 12-step episode
    assert ranges == [(0, 14), (14, 24), (24, 36)]
    assert split_rows(36, starts, 1, min_rows=1) == [(0, 36)]
    many = split_rows(36, starts, 100, min_rows=1)  # at most one row per range
    assert len(many) == 36 and many[0] == (0, 1) and many[-1] == (35, 36)
    assert split_rows(36, starts, 100, min_rows=10) == [(0, 14), (14, 24), (24, 36)]  # 36 // 10 = 3 ranges
    assert split_rows(36, starts, 100) == [(0, 36)]  # fewer rows than MIN_TASK_ROWS: one task
    assert split_rows(0, starts[:0], 4) == []
    assert TrajstoreDatasource(folder, min_task_rows=10).default_num_tasks() == 3  # what read_trajstore asks Ray for
    assert TrajstoreDatasource(folder).default_num_tasks() == 1


def test_a_read_after_the_ring_moved_is_refused(tmp_path):
    path = record(tmp_path / "ring", capacity=30, lengths=[10, 10])
    with ReplayBuffer.load_from(path) as rb:
        request = make_request(rb, str(path), storage_options=None, columns=["step_id"], episodes=None,
                               window=None, pad=None)
    with ReplayBuffer.load_from(path, read_only=False) as writer:
        writer.extend(steps(20, 15))  # overwrites the oldest steps
        writer.end_episode()
    with ReplayBuffer.load_from(path) as rb:
        with pytest.raises(StaleReadError, match="changed while it was read"):
            read_rows(rb, request, 0, 5)


def test_storage_options_reach_load_from_only_when_given(monkeypatch, folder):
    seen = []
    real = ReplayBuffer.load_from.__func__

    def spy(cls, path, **kwargs):
        seen.append(sorted(kwargs))
        kwargs.pop("storage_options", None)
        return real(cls, path, **kwargs)

    monkeypatch.setattr(ReplayBuffer, "load_from", classmethod(spy))
    TrajstoreDatasource(folder)
    source = TrajstoreDatasource(folder, storage_options={"anon": True})
    source.request.open().close()
    assert seen == [["read_only"], ["read_only", "storage_options"], ["read_only", "storage_options"]]
