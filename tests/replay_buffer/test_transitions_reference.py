"""sample_transitions against a plain reference: a per-sample Python loop over ``rb[i]``.

Random buffers (rings, final observations, interrupted and open episodes, ``episodes=``), a nested
observation with a small leaf and one over ``SMALL_LEAF_BYTES`` (read at ``t`` and ``t + n`` only),
an integer reward, ``n_step`` 1..5: every field of every sampled transition equals the reference, and
the drawn steps are exactly the valid ones.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

BIG = 80  # (80,) float32: 320 bytes a step, over SMALL_LEAF_BYTES


def space(int_reward):
    reward = BoxSpace(-10**6, 10**6, (), np.int32) if int_reward else BoxSpace(-1e6, 1e6, (), np.float32)
    return DictSpace({"observation": DictSpace({"state": BoxSpace(-1e9, 1e9, (3,), np.float64),
                                                "big": BoxSpace(-1e9, 1e9, (BIG,), np.float32)}),
                      "action": BoxSpace(-1e9, 1e9, (2,), np.float32), "reward": reward,
                      "terminated": BinarySpace(), "truncated": BinarySpace()})


def steps(first, n, int_reward, rng):
    x = np.arange(first, first + n, dtype=np.float64)
    reward = rng.integers(-50, 50, n).astype(np.int32) if int_reward else rng.standard_normal(n).astype(np.float32)
    obs = {"state": np.stack([x, -x, x * 0.5], 1), "big": np.repeat(x[:, None], BIG, 1).astype(np.float32)}
    return {"observation": obs,
            "action": np.stack([x + 0.25, x - 0.25], 1).astype(np.float32), "reward": reward,
            "terminated": rng.random(n) < 0.3, "truncated": rng.random(n) < 0.3}


def final(value):
    return {"state": np.array([value, -value, value * 0.5]), "big": np.full(BIG, value, np.float32)}


def reference(rb, t, n, gamma):
    """The transition at logical step ``t``, from ``rb[i]`` step by step; ``None`` if ``t`` is not valid."""
    k_ep, ep = next((k, e) for k, e in enumerate(rb.episodes) if e.start <= t < e.stop)
    if t + n < ep.stop:
        nxt = rb[t + n]["observation"]
    elif ep.done and ep.has_final_observation:
        nxt = rb.final_observation(k_ep)
    else:
        return None
    k = min(n, ep.stop - t)
    ret = sum(gamma ** i * float(rb[t + i]["reward"]) for i in range(k))
    step = rb[t]
    return {"observation": step["observation"], "action": step["action"], "reward": ret, "next_observation": nxt,
            "terminated": rb[t + k - 1]["terminated"], "truncated": rb[t + k - 1]["truncated"],
            "discount": gamma ** k, "episode": ep.id}


@settings(max_examples=40, deadline=None)
@pytest.mark.slow
@given(seed=st.integers(0, 2**31), capacity=st.one_of(st.none(), st.integers(4, 40)),
       ends=st.lists(st.tuples(st.integers(1, 9), st.sampled_from(["final", "none", "interrupted"])), min_size=1,
                     max_size=7),
       open_len=st.integers(0, 5), n=st.integers(1, 5), gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
       int_reward=st.booleans(), on_disk=st.booleans(), subset=st.booleans())
def test_every_field_matches_the_reference(tmp_path_factory, seed, capacity, ends, open_len, n, gamma, int_reward,
                                           on_disk, subset):
    rng = np.random.default_rng(seed)
    sp = space(int_reward)
    path = tmp_path_factory.mktemp("rb") / "rb" if on_disk else None
    rb = ReplayBuffer.create(DictStorage, sp, capacity=capacity, cache_path=path, **dict_storage_kwargs_from_space(sp))
    first = 0
    for length, how in ends:
        rb.extend(steps(first, length, int_reward, rng))
        first += length
        if how == "final":
            rb.end_episode(final_observation=final(1000.0 + first))
        else:
            rb.end_episode(interrupted=how == "interrupted")
    if open_len:
        rb.extend(steps(first, open_len, int_reward, rng))
    ids = [e.id for e in rb.episodes]
    chosen = sorted(rng.choice(ids, size=max(1, len(ids) // 2), replace=False).tolist()) if subset else None
    valid = {t for t in range(len(rb)) if reference(rb, t, n, gamma) is not None
             and (chosen is None or reference(rb, t, n, gamma)["episode"] in chosen)}
    if not valid:
        with pytest.raises(ValueError):
            rb.sample_transitions(8, n_step=n, gamma=gamma, episodes=chosen)
        rb.close()
        return
    batch = 300
    out = rb.sample_transitions(batch, n_step=n, gamma=gamma, episodes=chosen, rng=np.random.default_rng(seed))
    dtype = np.float32
    assert out["reward"].dtype == dtype and out["discount"].dtype == dtype and out["index"].dtype == np.int64
    assert out["observation"]["big"].shape == (batch, BIG) and out["next_observation"]["state"].shape == (batch, 3)
    assert out["terminated"].dtype == bool and out["terminated"].shape == (batch,)
    drawn = set(out["index"].tolist())
    assert drawn <= valid
    if len(valid) <= 12:
        assert drawn == valid
    for i, t in enumerate(out["index"].tolist()):
        ref = reference(rb, t, n, gamma)
        for key in ("observation", "next_observation"):
            for leaf in ("state", "big"):
                np.testing.assert_array_equal(out[key][leaf][i], ref[key][leaf], err_msg=f"{key}/{leaf} at {t}")
        np.testing.assert_array_equal(out["action"][i], ref["action"])
        assert out["terminated"][i] == ref["terminated"] and out["truncated"][i] == ref["truncated"]
        assert out["reward"][i] == pytest.approx(ref["reward"], rel=1e-5, abs=1e-5)
        assert out["discount"][i] == np.float32(ref["discount"])
    for key in ("observation", "next_observation"):  # leaves are their own C-contiguous arrays (as_torch)
        assert all(v.flags.c_contiguous and v.flags.writeable for v in out[key].values())
    rb.close()
