"""Sampling (steps, windows, transitions) and statistics, checked against the ring model: the third
group of :class:`~trajstore.testing.buffer.BufferTests`.

A drawn value must be an actual step of the buffer: a step drawn with ``return_indices`` is the
model's step at that index; one drawn without is recognised by its serial and must then carry the
values written for that serial; a window's steps are consecutive held steps of one episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.testing._buffer_case import BufferCase
from trajstore.testing.ring_model import HeldEpisode, RingModel
from trajstore.testing.values import flatten_value, leaves_of

#: Draws per sampling check.
BATCH = 24
#: Offsets of the ``delta_indices`` checks: before, at and after the anchor.
DELTAS = {"observation": [-2, 0], "action": [0, 1, 2]}
STEP_KEYS = ("observation", "action", "reward", "terminated", "truncated")


def _episode_of(model: RingModel, logical: int) -> HeldEpisode:
    return next(e for e in model.episodes() if e.start <= logical < e.stop)


def check_samplers(case: BufferCase, rb: Any, model: RingModel, rng: np.random.Generator, batch: int = 8) -> None:
    """``sample``, ``sample_windows(B, 2)`` and ``sample_transitions(n_step=1)`` of ``rb`` against
    ``model``: the steps they give are the model's, and they refuse (``ValueError``) exactly when the
    model has no valid step, window or transition."""
    held = np.array(model.held, np.int64)
    if not len(held):
        with pytest.raises(ValueError):
            rb.sample(batch, rng=rng)
        return
    got, idx = rb.sample(batch, rng=rng, return_indices=True)
    case.check_steps(rb, got, held[idx], what="sample")
    episodes = model.episodes()
    if any(e.stop - e.start >= 2 for e in episodes):
        serials = case.serials_of(rb.sample_windows(batch, 2, rng=rng))
        for first, second in serials.tolist():
            i = model.held.index(first)
            assert i + 1 < _episode_of(model, i).stop and model.held[i + 1] == second, f"window {[first, second]}"
    else:
        with pytest.raises(ValueError):
            rb.sample_windows(batch, 2, rng=rng)
    if not all(k in getattr(rb.space, "spaces", {}) for k in STEP_KEYS):
        return
    if any(e.stop - e.start >= 2 or e.final_serial is not None for e in episodes):
        out = rb.sample_transitions(batch, n_step=1, rng=rng)
        following = []
        for t in out["index"].tolist():
            ep = _episode_of(model, t)
            assert t + 1 < ep.stop or ep.final_serial is not None, f"step {t} of episode {ep.id} has no successor"
            following.append(model.held[t + 1] if t + 1 < ep.stop else ep.final_serial)
        case.check_steps(rb, out["observation"], held[out["index"]], subtree="observation", what="transition")
        case.check_steps(rb, out["next_observation"], np.array(following), subtree="observation",
                         what="next_observation")
    else:
        with pytest.raises(ValueError):
            rb.sample_transitions(batch, n_step=1, rng=rng)


def check_stats(case: BufferCase, rb: Any, model: RingModel) -> dict[str, Any]:
    """``rb.stats()`` against NumPy over the values of the held steps; returns them.

    Lossless leaves: count exact, min/max/mean/std to float64 rounding, q50 within ``quantile_error``.
    Lossy leaves (statistics of decoded frames once a ring dropped steps): count exact, mean and std
    within the RMS error that ``case.min_psnr_db`` allows. Text and bool leaves have none.
    """
    stats = rb.stats()
    lossless = case.lossless_leaves(rb)
    flat = flatten_value(rb.space, case.step_values(np.array(model.held, np.int64)))
    for name, _ in leaves_of(rb.space):
        x = np.asarray(flat[name])
        if x.dtype.kind not in "iuf":
            assert name not in stats, f"{name!r} ({x.dtype}) has no statistics, got {stats.get(name)}"
            continue
        s = stats[name]
        if s.reduction == "per_channel":  # the channel axis last, as rows of one channel value each
            x = np.moveaxis(x, x.ndim - len(s.broadcast_shape), -1).reshape(-1, *s.shape)
        elif s.reduction == "whole":
            x = x.reshape(-1)
        x = x.astype(np.float64).reshape(len(x), *s.shape)
        assert np.all(s.count == len(x)), f"{name!r}: count {s.count}, expected {len(x)}"
        if not len(x):
            continue
        if lossless[name]:
            for field, want in (("min", x.min(0)), ("max", x.max(0)), ("mean", x.mean(0)), ("std", x.std(0))):
                np.testing.assert_allclose(getattr(s, field), want, rtol=1e-6, atol=1e-9, err_msg=f"{name!r} {field}")
            err = s.quantile_error + 1e-9 * np.abs(x).max()
            assert np.all(np.abs(s.q50 - np.quantile(x, 0.5, axis=0)) <= err), f"{name!r} q50"
        else:
            rms = 255.0 * 10 ** (-case.min_psnr_db / 20)
            np.testing.assert_allclose(s.mean, x.mean(0), atol=rms, err_msg=f"{name!r} mean")
            np.testing.assert_allclose(s.std, x.std(0), atol=rms, err_msg=f"{name!r} std")
    return stats


class SamplingTests(BufferCase):
    """Samplers and statistics; see :mod:`trajstore.testing.buffer`."""

    def test_sample_with_indices_reads_those_steps(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        batch, idx = rb.sample(BATCH, rng=np.random.default_rng(0), return_indices=True)
        assert idx.dtype == np.int64 and idx.shape == (BATCH,)
        assert idx.min() >= 0 and idx.max() < len(model.held)
        self.check_steps(rb, batch, np.array(model.held)[idx], what="sample")
        ep = model.episodes()[1]
        batch, idx = rb.sample(BATCH, rng=np.random.default_rng(1), return_indices=True, episodes=[ep.id])
        assert np.all((idx >= ep.start) & (idx < ep.stop)), f"steps outside episode {ep.id}: {idx}"
        self.check_steps(rb, batch, np.array(model.held)[idx], what="sample(episodes=...)")
        rb.close()

    def test_sample_returns_held_steps(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        batch = rb.sample(BATCH, rng=np.random.default_rng(2))
        serials = self.serials_of(batch)
        assert set(serials.tolist()) <= set(model.held), f"drawn steps {serials} are not all held {model.held}"
        self.check_steps(rb, batch, serials, what="sample")
        with pytest.raises(ValueError):
            rb.sample(0)
        rb.close()

    def test_sample_windows_stay_inside_an_episode(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        window = 4
        got = rb.sample_windows(BATCH, window, rng=np.random.default_rng(3))
        serials = self.serials_of(got)
        assert serials.shape == (BATCH, window)
        for row in serials.tolist():
            i = model.held.index(row[0])
            assert row == model.held[i:i + window], f"window {row} is not consecutive held steps"
            ep = _episode_of(model, i)
            assert i + window <= ep.stop, f"window {row} crosses the end of episode {ep.id}"
        self.check_steps(rb, got, serials, what="sample_windows")
        ep = max(model.episodes(), key=lambda e: e.stop - e.start)
        got = rb.sample_windows(BATCH, window, rng=np.random.default_rng(6), episodes=[ep.id])
        first = np.array([model.held.index(s) for s in self.serials_of(got)[:, 0].tolist()])
        assert np.all((first >= ep.start) & (first + window <= ep.stop)), f"windows outside episode {ep.id}"
        with pytest.raises(ValueError):
            rb.sample_windows(BATCH, ep.stop - ep.start + 1, episodes=[ep.id])  # longer than the episode
        rb.close()

    @pytest.mark.parametrize("pad", [True, False])
    def test_sample_windows_with_delta_indices(self, tmp_path: Path, pad: bool) -> None:
        if not all(k in getattr(self.make_space(), "spaces", {}) for k in DELTAS):
            pytest.skip(f"the step space has no {list(DELTAS)} keys")
        rb, model = self.recorded(tmp_path)
        data, is_pad = rb.sample_windows(3 * BATCH, delta_indices=DELTAS, pad=pad, rng=np.random.default_rng(4))
        anchors = np.array([model.held.index(s) for s in self.serials_of(data).tolist()])  # "step": at the anchor
        held = np.array(model.held)
        for name, offsets in DELTAS.items():
            logical = anchors[:, None] + np.array(offsets)
            bounds = np.array([(e.start, e.stop) for e in (_episode_of(model, int(a)) for a in anchors)])
            outside = (logical < bounds[:, :1]) | (logical >= bounds[:, 1:])
            np.testing.assert_array_equal(is_pad[name], outside, err_msg=f"is_pad[{name!r}]", strict=True)
            if not pad:
                assert not outside.any(), f"pad=False drew anchors whose {name!r} offsets leave their episode"
            else:  # 72 anchors over episodes of 5 to 9 steps: some are padded (all but certain)
                assert outside.any(), f"no anchor of {anchors.tolist()} needed padding for {name!r}"
            clamped = np.clip(logical, bounds[:, :1], bounds[:, 1:] - 1)
            if name == "observation":
                self.check_steps(rb, data[name], held[clamped], subtree=name, what=f"window {name!r}")
            else:
                self._check_leaf(rb, name, data[name], held[clamped])
        rb.close()

    def test_sample_transitions(self, tmp_path: Path) -> None:
        space = self.make_space()
        if not all(k in getattr(space, "spaces", {}) for k in STEP_KEYS):
            pytest.skip(f"the step space has no {list(STEP_KEYS)} keys")
        rb, model = self.recorded(tmp_path)
        n_step, gamma = 2, 0.5
        got = rb.sample_transitions(BATCH, n_step=n_step, gamma=gamma, rng=np.random.default_rng(5))
        held = np.array(model.held)
        idx = got["index"]
        values = self.step_values(held)  # oracle by logical index
        following = np.empty(BATCH, np.int64)  # serial of each next_observation
        for b, t in enumerate(idx.tolist()):
            ep = _episode_of(model, t)
            k = min(n_step, ep.stop - t)
            want_reward = sum(gamma ** i * float(values["reward"][t + i]) for i in range(k))
            assert np.isclose(got["reward"][b], want_reward, rtol=1e-5), f"transition {b} (step {t}): reward"
            assert np.isclose(got["discount"][b], gamma ** k), f"transition {b} (step {t}): discount"
            for key in ("terminated", "truncated"):
                assert got[key][b] == values[key][t + k - 1], f"transition {b} (step {t}): {key}"
            if t + n_step < ep.stop:
                following[b] = held[t + n_step]
            else:
                assert ep.final_serial is not None, f"step {t} drawn but its episode {ep.id} has no final observation"
                following[b] = ep.final_serial
        self.check_steps(rb, got["next_observation"], following, subtree="observation", what="next_observation")
        self.check_steps(rb, got["observation"], held[idx], subtree="observation", what="transition observation")
        self._check_leaf(rb, "action", got["action"], held[idx])
        ep = model.episodes()[-1]
        got = rb.sample_transitions(BATCH, n_step=1, rng=np.random.default_rng(7), episodes=[ep.id])
        assert np.all((got["index"] >= ep.start) & (got["index"] < ep.stop)), f"transitions outside episode {ep.id}"
        rb.close()

    def test_stats_match_numpy(self, tmp_path: Path) -> None:
        rb, model = self.recorded(tmp_path)
        stats = check_stats(self, rb, model)
        rb.close()
        with ReplayBuffer.load_from(rb.cache_path) as reader:  # what the writer committed
            got = reader.stats()
            assert set(got) == set(stats), f"a reader's statistics are of {sorted(got)}, the writer's {sorted(stats)}"
            for name, s in got.items():
                for field in ("count", "min", "max", "mean", "std", "q50"):
                    np.testing.assert_array_equal(getattr(s, field), getattr(stats[name], field),
                                                  err_msg=f"a reader's {name!r} {field}")

    def test_stats_follow_set_at(self, tmp_path: Path) -> None:
        """Statistics are of the steps held: after ``set_at`` rewrote some, of the new values."""
        rb, model = self.recorded(tmp_path)
        check_stats(self, rb, model)  # statistics the writer now holds (a ring computes them here)
        at = np.array([1, len(model.held) - 2])
        serials = [s + 1000 for s in model.new_serials(len(at))]  # far from the others: every moment moves
        rb.set_at(at, self.step_values(serials))
        for i, serial in zip(at.tolist(), serials):
            model.held[i] = serial
        rb.flush()
        check_stats(self, rb, model)
        rb.close()
        with ReplayBuffer.load_from(rb.cache_path) as reader:
            check_stats(self, reader, model)

    # -- helpers -----------------------------------------------------------------------------
    def _check_leaf(self, rb: Any, name: str, got: np.ndarray, serials: np.ndarray) -> None:
        """One top-level leaf ``name`` read at ``serials`` (any shape)."""
        want = self.step_values(serials.reshape(-1))[name]
        value = np.asarray(got)
        assert value.shape[:serials.ndim] == serials.shape, f"{name!r}: shape {value.shape}"
        rows = value.reshape(-1, *value.shape[serials.ndim:])
        if self.lossless_leaves(rb).get(name, True):
            np.testing.assert_array_equal(rows, want, err_msg=f"leaf {name!r}", strict=True)
        else:
            self.assert_close(name, rows, want)

