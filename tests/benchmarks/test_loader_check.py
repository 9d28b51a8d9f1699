"""The check of the training-loader benchmark (benchmarks/training/_loader_common.check_batch).

A throughput figure is only worth its check: a correct batch (also after JPEG coding, also as LeRobot's
float CHW frames) must pass, and batches wrong in the ways a loader can get them wrong must fail,
naming the key and the sample.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

TRAINING = Path(__file__).resolve().parents[2] / "benchmarks" / "training"
sys.path.insert(0, str(TRAINING))

import _data  # noqa: E402
import _loader_common as lc  # noqa: E402


@pytest.fixture(scope="module")
def aloha(tmp_path_factory):
    data = _data.generate(tmp_path_factory.mktemp("loader") / "aloha", "aloha", episodes=3, episode_len=20)
    return lc.load_truth(data)


def window_batch(truth, anchors):
    """The batch a correct loader returns for ``anchors``, built from DATA/raw."""
    raw = truth.data / "raw"
    first, last = truth.episode_bounds(anchors)
    batch = {lc.INDEX_KEY: np.asarray(anchors, np.int64)}
    for key, offsets in truth.offsets().items():
        steps = np.clip(anchors[:, None] + np.array(offsets)[None], first[:, None], last[:, None])
        source = np.load(raw / lc.leaf_file(key), mmap_mode="r")
        batch[key] = np.asarray(source[steps.reshape(-1)]).reshape(*steps.shape, *source.shape[1:])
    return batch


ANCHORS = np.array([0, 19, 20, 21, 39, 5, 59, 40])  # first and last steps of episodes, and inner ones


def test_a_correct_batch_passes_and_counts_its_samples(aloha):
    assert aloha.cameras[1] == "observation/images/cam_low"
    assert lc.check_batch(window_batch(aloha, ANCHORS), aloha) == len(ANCHORS)


def test_jpeg_coded_frames_and_float_chw_frames_pass(aloha):
    from PIL import Image

    batch = window_batch(aloha, ANCHORS)
    cam = aloha.cameras[0]
    coded = np.empty_like(batch[cam])
    for idx in np.ndindex(*batch[cam].shape[:2]):
        buf = io.BytesIO()
        Image.fromarray(batch[cam][idx]).save(buf, format="JPEG", quality=50)
        coded[idx] = np.asarray(Image.open(buf))
    assert not np.array_equal(coded, batch[cam])
    batch[cam] = coded
    batch[aloha.cameras[1]] = np.moveaxis(batch[aloha.cameras[1]], -1, -3).astype(np.float32) / 255
    assert lc.check_batch(batch, aloha) == len(ANCHORS)


def corrupt(batch, truth, how):
    cams = truth.cameras
    if how == "action one step late":
        batch["action"][3, 5] = lc.action_values(np.array([ANCHORS[3] + 6]), 14)[0]
    elif how == "frame of the next step":
        batch[cams[2]][1, 1] = batch[cams[2]][2, 1]  # sample 1 (step 19) shows step 20, another episode's
    elif how == "no edge padding":
        batch[lc.STATE_KEY][2, 0] = lc.state_values(np.array([19]), 14)[0]  # anchor 20 reaching into episode 0
    elif how == "cameras swapped":
        batch[cams[0]], batch[cams[1]] = batch[cams[1]], batch[cams[0]]
    elif how == "BGR frames":
        batch[cams[3]] = np.ascontiguousarray(batch[cams[3]][..., ::-1])
    elif how == "CHW uint8 frames":
        batch[cams[0]] = np.ascontiguousarray(np.moveaxis(batch[cams[0]], -1, -3))
    elif how == "wrong index":
        batch[lc.INDEX_KEY][4] = 38  # the windows are those of anchor 39
    elif how == "no index":
        del batch[lc.INDEX_KEY]
    elif how == "float64 state":
        batch[lc.STATE_KEY] = batch[lc.STATE_KEY].astype(np.float64)
    return batch


@pytest.mark.parametrize("how, message", [
    ("action one step late", r"action: sample 3 \(anchor 21\) offset 5"),
    ("frame of the next step", r"cam_left_wrist: sample 1 \(anchor 19\) offset 0: frame of step 20 camera 2, want step 19"),
    ("no edge padding", r"observation/state: sample 2 \(anchor 20\) offset -1"),
    ("cameras swapped", r"cam_high: sample 0 \(anchor 0\) offset -1: frame of step 0 camera 1, want step 0 camera 0"),
    ("BGR frames", r"cam_right_wrist: sample 0 \(anchor 0\) offset -1: unreadable frame code"),
    ("CHW uint8 frames", r"cam_high: want uint8\(8, 2, 480, 640, 3\), got uint8\(8, 2, 3, 480, 640\)"),
    ("wrong index", r"cam_high: sample 4 \(anchor 38\) offset -1: frame of step 38 camera 0, want step 37"),
    ("no index", r"no key 'index'"),
    ("float64 state", r"observation/state: want float32\(8, 2, 14\), got float64"),
])
def test_a_wrong_batch_fails_naming_the_key_and_the_sample(aloha, how, message):
    with pytest.raises(AssertionError, match=message):
        lc.check_batch(corrupt(window_batch(aloha, ANCHORS), aloha, how), aloha)


def test_the_frame_code_reads_every_step_and_camera_of_the_raw_frames(aloha):
    for c, key in enumerate(aloha.cameras):
        step, cam, ok = lc.decode_frames(np.load(aloha.data / "raw" / lc.leaf_file(key), mmap_mode="r"))
        assert ok.all() and step.tolist() == list(range(aloha.steps)) and (cam == c).all()


def with_pad_flags(truth, batch):
    """``batch`` plus the true ``<key>_is_pad`` flags of every windowed key."""
    index = batch[lc.INDEX_KEY]
    first, last = truth.episode_bounds(index)
    for key, offsets in truth.offsets().items():
        steps = index[:, None] + np.array(offsets)[None]
        batch[key + lc.PAD_SUFFIX] = (steps < first[:, None]) | (steps > last[:, None])
    return batch


def test_true_padding_flags_pass_and_are_listed(aloha):
    batch = with_pad_flags(aloha, window_batch(aloha, ANCHORS))
    # anchor 0 pads offset -1; anchor 19 (last of episode 0) pads action offsets 1..15
    assert batch[lc.STATE_KEY + lc.PAD_SUFFIX][0].tolist() == [True, False]
    assert batch["action" + lc.PAD_SUFFIX][1].sum() == 15
    assert lc.check_batch(batch, aloha) == len(ANCHORS)
    assert lc.pad_keys(batch) == sorted(aloha.offsets())


@pytest.mark.parametrize("how, message", [
    ("flag missing at the episode start", r"observation/state_is_pad: sample 0 \(anchor 0\) offset -1: is_pad False, want True"),
    ("flag set inside the episode", r"action_is_pad: sample 3 \(anchor 21\) offset 2: is_pad True, want False"),
    ("flags of the wrong length", r"cam_high_is_pad: want bool\(8, 2\), got bool\(8, 3\)"),
    ("flags as integers", r"action_is_pad: want bool\(8, 16\), got int64"),
    ("flags of an unknown key", r"observation/velocity_is_pad: padding flags of a key"),
])
def test_wrong_padding_flags_fail_naming_the_key_and_the_sample(aloha, how, message):
    batch = with_pad_flags(aloha, window_batch(aloha, ANCHORS))
    cam = aloha.cameras[0]
    if how == "flag missing at the episode start":
        batch[lc.STATE_KEY + lc.PAD_SUFFIX][0, 0] = False
    elif how == "flag set inside the episode":
        batch["action" + lc.PAD_SUFFIX][3, 2] = True
    elif how == "flags of the wrong length":
        batch[cam + lc.PAD_SUFFIX] = np.zeros((8, 3), bool)
    elif how == "flags as integers":
        batch["action" + lc.PAD_SUFFIX] = batch["action" + lc.PAD_SUFFIX].astype(np.int64)
    elif how == "flags of an unknown key":
        batch["observation/velocity" + lc.PAD_SUFFIX] = np.zeros((8, 2), bool)
    with pytest.raises(AssertionError, match=message):
        lc.check_batch(batch, aloha)


def _sleep(seconds):
    import time
    time.sleep(seconds)


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_workers_are_found_also_under_a_fork_server(method):
    import multiprocessing as mp
    import os

    ctx = mp.get_context(method)
    procs = [ctx.Process(target=_sleep, args=(30,)) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        found = lc.children()
        mine = sorted(p.pid for p in procs)
        # other tests of the session may leave processes of their own (a DataLoader's workers being reaped)
        assert set(mine) <= set(found), (mine, found)
        ppids = [int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in mine]
        if method == "forkserver":  # the workers are the fork server's children, not this process's
            assert os.getpid() not in ppids and len(set(ppids)) == 1
            assert ppids[0] not in found  # the fork server itself is no worker
    finally:
        for p in procs:
            p.kill()
            p.join()
