"""``end_episode``'s flag arguments must be bools (a truthy ``"no"`` would set them); a draw with
``on_damaged="skip"`` whose selected episodes are all damaged says so, naming them."""

import warnings

import numpy as np
import pytest

from tests.replay_buffer.test_damaged_payload import build, damaged_steps
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def small(path):
    space = DictSpace({"observation": BoxSpace(-1, 1, (2,), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32)})
    return ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space)), space


@pytest.mark.parametrize("kwargs, name", [({"interrupted": "no"}, "interrupted"), ({"flush": "no"}, "flush"),
                                          ({"interrupted": 0}, "interrupted"), ({"flush": None}, "flush")])
def test_end_episode_flags_must_be_bool(tmp_path, kwargs, name):
    rb, space = small(tmp_path / "rb")
    with rb:
        rb.extend(space.sample(batch_size=3))
        with pytest.raises(InvalidValueError, match=f"end_episode: {name} must be a bool"):
            rb.end_episode(task="x", **kwargs)
        assert [(e.done, e.interrupted, e.data) for e in rb.episodes] == [(False, False, {})]  # still open, unchanged
        rb.end_episode(interrupted=np.False_, flush=np.True_, task="x")
        assert [(len(e), e.interrupted, e.data) for e in rb.episodes] == [(3, False, {"task": "x"})]
    with ReplayBuffer.load_from(tmp_path / "rb") as back:
        assert [(len(e), e.interrupted) for e in back.episodes] == [(3, False)]


def test_skip_with_every_selected_episode_damaged_names_them(tmp_path):
    path = tmp_path / "rb"
    build(path, "PNG")
    damaged_steps(path, "PNG")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedBufferWarning)
        rb = ReplayBuffer.load_from(path)
    with rb:
        for draw in (lambda: rb.sample(5, episodes=[1], on_damaged="skip"),
                     lambda: rb.sample_windows(5, window=3, episodes=[1], on_damaged="skip")):
            with pytest.raises(DamagedDataError, match=r"every selected episode is damaged \(\[1\]\)"):
                draw()
        assert rb.sample(4, episodes=[0, 1], on_damaged="skip")["reward"].shape == (4,)
