"""end_episode(**data): JSON per-episode data, committed with the episode, refused before any change."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.replay_buffer.log_backdoor import committed_records
from tests.replay_buffer.test_replay_buffer import batch, make
from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.metadata import META_FILE

READ_DATA = """
import sys, json
from trajstore.replay_buffer import ReplayBuffer
with ReplayBuffer.load_from(sys.argv[1]) as rb:
    print(json.dumps([[e.id, e.start, e.stop, e.done, e.data] for e in rb.episodes]))
"""


def read_in_fresh_process(path):
    out = subprocess.run([sys.executable, "-c", READ_DATA, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_data_round_trips_through_a_reopen_in_a_fresh_process(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(3, 1))
        rb.end_episode(task="push the T", success=True, seed=7, info={"cams": [1, 2.5, None], "tags": ("a", "b")})
        rb.extend(batch(2, 2))
        rb.end_episode()  # no data
        rb.extend(batch(4, 3))
        rb.end_episode(seed=np.int64(9), success=np.bool_(False), score=np.float32(0.5))
        rb.extend(batch(1, 4))  # still open at close
    assert read_in_fresh_process(tmp_path / "rb") == [
        [0, 0, 3, True, {"task": "push the T", "success": True, "seed": 7,
                         "info": {"cams": [1, 2.5, None], "tags": ["a", "b"]}}],
        [1, 3, 5, True, {}],
        [2, 5, 9, True, {"seed": 9, "success": False, "score": 0.5}],
        [3, 9, 10, False, {}],
    ]
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        ep = rb.episode(2)
        assert type(ep.data["seed"]) is int and type(ep.data["success"]) is bool
        ep.data["seed"] = 0  # a copy: the table is not changed through it
        assert rb.episode(2).data["seed"] == 9
        assert "data={'seed': 9" in repr(ep)


@pytest.mark.parametrize("value, where", [
    (np.zeros(3), "'pose'.*ndarray.*tolist"),
    (float("nan"), "'pose'.*NaN"),
    ({"a": [1, object()]}, "'pose/a/1'.*object"),
    ({1: "x"}, "'pose'.*key 1"),
    (b"bytes", "'pose'.*bytes"),
])
def test_non_json_data_is_refused_naming_the_key_before_anything_changes(tmp_path, value, where):
    rb = make(tmp_path)
    rb.extend(batch(3, 5))
    rb.flush()
    before = (tmp_path / "rb" / META_FILE).read_bytes()
    with pytest.raises(InvalidValueError, match=where):
        rb.end_episode(task="ok", pose=value)
    assert (tmp_path / "rb" / META_FILE).read_bytes() == before
    assert [(e.start, e.stop, e.done) for e in rb.episodes] == [(0, 3, False)]  # still open, no data
    rb.end_episode(task="ok")
    assert rb.episode(0).data == {"task": "ok"} and rb.episode(0).done
    rb.close()


def test_a_self_referencing_value_is_refused(tmp_path):
    loop: list = []
    loop.append(loop)
    with make(tmp_path) as rb:
        rb.extend(batch(1, 6))
        with pytest.raises(InvalidValueError, match="deeper than"):
            rb.end_episode(loop=loop)


def test_data_without_an_open_episode_is_refused(tmp_path):
    with make(tmp_path) as rb:
        with pytest.raises(ValueError, match="no episode to end"):
            rb.end_episode(task="nothing recorded")
        rb.extend(batch(2, 7))
        rb.end_episode(task="a")
        rb.end_episode()  # twice in a row without data: nothing more, as before
        with pytest.raises(ValueError, match="no episode to end"):
            rb.end_episode(task="again")
        assert [e.data for e in rb.episodes] == [{"task": "a"}]


def test_a_ring_drops_the_data_of_dropped_episodes_and_keeps_that_of_overwritten_ones(tmp_path):
    with make(tmp_path, capacity=6) as rb:
        for k, n in enumerate([3, 3, 4]):
            rb.extend(batch(n, 10 + k))
            rb.end_episode(k=k)
        assert [(e.id, e.overwritten, e.data) for e in rb.episodes] == [(1, True, {"k": 1}), (2, False, {"k": 2})]
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [e.data for e in rb.episodes] == [{"k": 1}, {"k": 2}]
        meta = json.loads((tmp_path / "rb" / META_FILE).read_text())
        assert meta["format_version"] == 3 and [r["data"] for r in committed_records(tmp_path / "rb")] == [
            {"k": 1}, {"k": 2}]
