"""The check of the peer benchmarks' Diffusion-Policy-shaped batch (benchmarks/peers/_windows.py).

A benchmark figure is only worth its check: these tests feed the check trajstore's own windows and
then windows broken in the ways a contender could get them wrong, and require each to be caught.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

PEERS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS))

import _windows as win  # noqa: E402
import _workload as wl  # noqa: E402
import run_trajstore  # noqa: E402

EPISODE_LEN = 32


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("windows")
    wl.generate(folder / "workload", steps=4 * EPISODE_LEN, episode_len=EPISODE_LEN)
    data, episode_len = wl.load(folder / "workload")
    windows = run_trajstore.Windows()
    windows.prepare(str(folder / "buffer"), data, episode_len, "png")
    sample = windows.open(str(folder / "buffer"), "png")
    batch = windows.normalize(sample(np.random.default_rng(0)))
    return data, batch


def copy(batch):
    leaves, masks = batch
    return {k: np.array(v) for k, v in leaves.items()}, {k: np.array(v) for k, v in masks.items()}


def test_expected_steps_clamp_into_the_episode_and_flag_the_clamped_offsets():
    steps, pad = win.expected_steps(np.array([0, 31, 40]), (-1, 0, 2), EPISODE_LEN)
    assert steps.tolist() == [[0, 0, 2], [30, 31, 31], [39, 40, 42]]
    assert pad.tolist() == [[True, False, False], [False, False, True], [False, False, False]]


def test_trajstore_windows_pass_with_every_png_frame_nearest_its_own_step(recorded):
    data, batch = recorded
    out = win.check(*batch, data, EPISODE_LEN)
    assert out["ok"], out["problems"]
    assert out["windows"] == win.BATCH
    assert out["frames_nearest_own"] == [2 * win.BATCH, 2 * win.BATCH]
    assert out["psnr_min"] == float("inf")  # PNG is lossless


def test_a_wrong_mask_is_caught(recorded):
    data, batch = recorded
    leaves, masks = copy(batch)
    masks["action"][0, 0] = ~masks["action"][0, 0]
    out = win.check(leaves, masks, data, EPISODE_LEN)
    assert not out["ok"] and any(p.startswith("action: mask differs at 1") for p in out["problems"])


def test_zero_padding_instead_of_the_edge_step_is_caught(recorded):
    data, batch = recorded
    leaves, masks = copy(batch)
    padded = masks["action"]
    assert padded.any(), "the seeded batch has windows padded at an episode's end"
    leaves["action"][padded] = 0
    out = win.check(leaves, masks, data, EPISODE_LEN)
    assert not out["ok"]
    assert f"action: {int(padded.sum())} entries are not the expected step's value" in out["problems"]


def test_a_frame_from_three_steps_away_is_caught(recorded):
    data, batch = recorded
    leaves, masks = copy(batch)
    frames = data[wl.FRAME_KEY]
    anchor = int(np.flatnonzero((data["observation/joint_pos"] == leaves["observation/joint_pos"][0, 1]).all(1))[0])
    leaves[wl.FRAME_KEY][0, 1] = frames[anchor + 3 if anchor + 3 < len(frames) else anchor - 3]
    out = win.check(leaves, masks, data, EPISODE_LEN)
    assert not out["ok"] and any("observation/camera: 1 frames" in p for p in out["problems"])


def test_a_state_no_step_has_is_caught(recorded):
    data, batch = recorded
    leaves, masks = copy(batch)
    leaves["observation/joint_vel"][:, 1] += 1000
    out = win.check(leaves, masks, data, EPISODE_LEN)
    assert out == {"ok": False, "problems": [f"{win.BATCH} windows hold a state no step has"]}
