"""Two commit hazards found by trying the viewer: statistics that overflow JSON (finite values whose sum is
inf) must not make the steps uncommittable, and two threads replacing one JSON file must not collide on
one temp file."""

import threading

import numpy as np

from trajstore._fs import read_json, write_json_atomic
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def test_steps_whose_statistics_overflow_are_committed(tmp_path):
    sp = DictSpace({"x": BoxSpace(-np.inf, np.inf, (2,), np.float64)})
    rb = ReplayBuffer.create(DictStorage, sp, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(sp))
    rb.extend({"x": np.full((3, 2), 1e308)})
    rb.end_episode(task="huge")
    rb.extend({"x": np.ones((2, 2))})
    rb.end_episode(task="small")
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as back:
        assert len(back) == 5 and [e.data["task"] for e in back.episodes] == ["huge", "small"]
        np.testing.assert_array_equal(back[:3]["x"], np.full((3, 2), 1e308))
        stats = back.stats()["x"]  # computed from the data: the max is exact, the mean overflowed
        assert (stats.max == 1e308).all() and np.isinf(stats.mean).all()


def test_threads_replacing_one_file_do_not_collide(tmp_path):
    path = tmp_path / "meta.json"
    errors = []

    def write(k):
        try:
            for i in range(200):
                write_json_atomic(path, {"writer": k, "i": i}, sync_folder=False)
        except Exception as exc:  # noqa: BLE001 - the test reports any
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert read_json(path, "meta")["i"] == 199
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]  # no temp file left
