"""Which steps, times and leaves a preview shows (trajstore.ops.preview_data)."""

import numpy as np
import pytest

from tests.ops.preview_buffers import DATA, FPS, H, W, steps
from trajstore.ops.preview_data import choose_steps, gather, plottable_leaves, to_rgb
from trajstore.replay_buffer import ReplayBuffer


def test_frames_are_evenly_spaced_with_first_and_last():
    assert choose_steps(300).tolist() == [0, 20, 40, 60, 80, 100, 120, 140, 159, 179, 199, 219, 239, 259, 279, 299]
    assert choose_steps(300, frames=4).tolist() == [0, 100, 199, 299]
    assert choose_steps(17, frames=16).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16]
    assert choose_steps(10).tolist() == list(range(10))  # shorter than 16: every step
    assert choose_steps(300, frames=1).tolist() == [0]
    for n, k in [(300, 16), (31, 30), (1000, 7)]:
        s = choose_steps(n, frames=k)
        assert len(s) == k and s[0] == 0 and s[-1] == n - 1 and (np.diff(s) > 0).all()
        gaps = np.diff(s)
        assert gaps.max() - gaps.min() <= 1  # even spacing


def test_every_nth_step():
    assert choose_steps(300, every=50).tolist() == [0, 50, 100, 150, 200, 250]
    assert choose_steps(7, every=3).tolist() == [0, 3, 6]
    assert choose_steps(300, every=1).tolist() == list(range(300))


@pytest.mark.parametrize("kwargs, message", [
    ({"frames": 0}, "frames must be an int >= 1, got 0"),
    ({"every": -2}, "every must be an int >= 1, got -2"),
    ({"frames": 2.5}, "frames must be an int >= 1, got 2.5"),
    ({"frames": True}, "frames must be an int >= 1, got True"),
    ({"frames": 4, "every": 2}, "give frames or every, not both (got frames=4, every=2)"),
])
def test_bad_choices_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError) as e:
        choose_steps(300, **kwargs)
    assert str(e.value) == message


def test_plottable_leaves_and_why_the_others_are_not(buffer300):
    with ReplayBuffer.load_from(buffer300) as rb:
        names, skipped = plottable_leaves(rb)
    assert names == ["observation/state", "action", "reward", "done"]
    assert skipped == {"observation/wide": "32 dims, more than 16", "note": "text"}


def test_gather_reads_the_chosen_frames_and_every_step_of_the_series(buffer300):
    with ReplayBuffer.load_from(buffer300) as rb:
        ep = gather(rb, 1, ["observation/pixels"], frames=5)
        held = rb.get_at(np.arange(rb.episode(1).start, rb.episode(1).stop))
    assert (ep.id, len(ep), ep.data, ep.interrupted) == (1, 40, DATA[1], False)
    assert ep.steps.tolist() == [0, 10, 20, 29, 39]
    np.testing.assert_allclose(ep.times, np.array([0, 10, 20, 29, 39]) / FPS)
    assert ep.time_source == "10 fps (metadata of observation/pixels)"
    assert ep.frames["observation/pixels"].shape == (5, H, W, 3)
    np.testing.assert_array_equal(ep.frames["observation/pixels"], held["observation"]["pixels"][ep.steps])
    want = steps(300, 40)
    np.testing.assert_array_equal(ep.series["observation/state"], want["observation"]["state"])
    np.testing.assert_array_equal(ep.series["reward"], want["reward"][:, None])
    assert ep.series["done"][:, 0].tolist() == [0.0] * 39 + [1.0]
    assert ep.units == {"observation/state": "m"}


def test_times_come_from_a_timestamp_leaf_first(stamped):
    with ReplayBuffer.load_from(stamped) as rb:
        ep = gather(rb, 0, [], frames=4)
        names, skipped = plottable_leaves(rb)
    assert ep.steps.tolist() == [0, 10, 19, 29]
    np.testing.assert_allclose(ep.times, [0.0, 0.4, 0.76, 1.16])  # 25 Hz clock, not 10 fps
    assert ep.time_source == "leaf timestamp" and "timestamp" not in names
    assert skipped["timestamp"] == "the time of the frame labels"


def test_episode_out_of_range_names_the_held_ids(buffer300):
    with ReplayBuffer.load_from(buffer300) as rb, pytest.raises(IndexError) as e:
        gather(rb, 5, [])
    assert str(e.value) == "episode 5 is not held (the buffer holds ids 0..1)"


def test_to_rgb_gray_and_chw():
    depth = np.arange(2 * 3 * 4, dtype=np.uint16).reshape(2, 3, 4) * 10
    rgb = to_rgb(depth)
    assert rgb.shape == (2, 3, 4, 3) and rgb.dtype == np.uint8
    assert rgb[0, 0, 0].tolist() == [0, 0, 0] and rgb[1, 2, 3].tolist() == [255, 255, 255]
    chw = np.random.default_rng(0).integers(0, 256, (2, 3, 5, 6), dtype=np.uint8)
    np.testing.assert_array_equal(to_rgb(chw, "CHW"), chw.transpose(0, 2, 3, 1))
