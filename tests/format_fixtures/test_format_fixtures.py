"""Every committed on-disk format version still opens and reads back what was written.

The fixtures were written once by ``make_fixtures.py`` of their version; never regenerate them.
"""

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.format_fixtures.make_fixtures import (COMMIT_NUMBER_SINCE, EPISODE_INDEX_SINCE, INTERRUPTED_TAIL, LAYOUTS, SHARED_JPEG_HEADER_SINCE,
                                                 checks_bounds, expected_episode_data, expected_step,
                                                 has_episode_features)
from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer

HERE = Path(__file__).parent
VERSIONS = sorted(p.name for p in HERE.iterdir() if p.is_dir() and p.name.startswith("v"))
CASES = [(v, layout) for v in VERSIONS for layout in LAYOUTS if (HERE / v / layout).is_dir()]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return np.inf if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def test_there_is_a_fixture_of_every_layout():
    assert VERSIONS and len(CASES) == len(VERSIONS) * len(LAYOUTS)


@pytest.mark.parametrize("version,layout", CASES)
def test_fixture_reads_back(tmp_path, version, layout):
    if layout.startswith("video"):
        pytest.importorskip("av")
    folder = tmp_path / layout
    shutil.copytree(HERE / version / layout, folder)  # reading must work without touching the original
    capacity, _, episodes = LAYOUTS[layout]
    features = has_episode_features(version)
    total = sum(episodes) + (INTERRUPTED_TAIL if features else 0)
    if layout.startswith("jpeg"):  # the fixture holds the JPEG format it claims to
        camera = json.loads((folder / "storage" / "observation.camera" / "storage.json").read_text())
        shared = int(version.lstrip("v")) >= SHARED_JPEG_HEADER_SINCE
        assert ("jpeg_header" in camera["config"]) == shared and camera.get("format_version", 1) == 1 + shared
    meta = json.loads((folder / "trajstore.json").read_text())
    numbered = int(version.lstrip("v")) >= COMMIT_NUMBER_SINCE
    assert ("commit" in meta) == numbered and (not numbered or next(iter(meta)) == "commit")
    indexed = int(version.lstrip("v")) >= EPISODE_INDEX_SINCE  # the episode index, beside the log
    index = meta["episodes"].get("log", {}).get("index") if isinstance(meta["episodes"].get("log"), dict) else None
    assert (index is not None) == indexed and (not indexed or (folder / index).is_file())
    assert indexed or not list(folder.glob("episodes.*.idx"))
    if indexed:  # the crc32 of the committed index bytes (its 32-byte header and 56-byte records)
        log_entry = meta["episodes"]["log"]
        committed = (folder / index).read_bytes()[:32 + 56 * log_entry["records"]]
        assert log_entry["index_crc32"] == zlib.crc32(committed)
    with ReplayBuffer.load_from(folder) as rb:
        assert rb.capacity == capacity and rb.total_steps == total
        assert len(rb) == (min(total, capacity) if capacity else total)
        first = total - len(rb)
        data = rb[:]
        for i in range(len(rb)):
            want = expected_step(first + i)
            got = {k: (v[i] if not isinstance(v, dict) else {kk: vv[i] for kk, vv in v.items()}) for k, v in data.items()}
            np.testing.assert_array_equal(got["observation"]["joints"], want["observation"]["joints"])
            np.testing.assert_array_equal(got["action"], want["action"])
            assert got["reward"] == want["reward"] and bool(got["done"]) == want["done"] and got["task"] == want["task"]
            frame = got["observation"]["camera"]
            if layout.startswith("png"):
                np.testing.assert_array_equal(frame, want["observation"]["camera"])
            else:
                assert psnr(frame, want["observation"]["camera"]) >= 30
        lengths = episodes + ([INTERRUPTED_TAIL] if features else [])
        stops = np.cumsum(lengths)
        expected_eps = [(k, max(s - e, first) - first, s - first) for k, (s, e) in enumerate(zip(stops, lengths))
                        if s > first]
        assert [(e.id, e.start, e.stop) for e in rb.episodes] == expected_eps
        for k, ep in zip([k for k, _, _ in expected_eps], rb.episodes):
            ended = features and k < len(episodes)
            assert ep.data == (expected_episode_data(k) if ended else {})
            assert (ep.done, ep.interrupted, ep.has_final_observation) == (ended or not features, not ended and features,
                                                                         ended)
            final = rb.final_observation(rb.episodes.index(ep))
            if not ended:
                assert final is None
                continue
            want = expected_step(int(stops[k]))["observation"]
            np.testing.assert_array_equal(final["joints"], want["joints"])
            assert final["camera"].dtype == np.uint8 and final["camera"].shape == want["camera"].shape
            if layout.startswith("png"):
                np.testing.assert_array_equal(final["camera"], want["camera"])
            else:
                assert psnr(final["camera"], want["camera"]) >= 30
    # A writer can reopen an old folder and go on appending. The fixtures' joints leave the space's
    # bounds [-10, 10] after step 10 (versions 1 and 2 were written before bounds were checked, and
    # check them now; later versions were made with check_bounds=False).
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        assert rb.check_bounds == checks_bounds(version)
        if total > 10 and rb.check_bounds:
            with pytest.raises(InvalidValueError, match="observation/joints"):
                rb.append(expected_step(total))
        rb.append(in_bounds(expected_step(total)))
        rb.end_episode(final_observation=in_bounds(expected_step(total + 1))["observation"], task="appended")
    # The writer numbers its commits from the folder's last one (0 for a folder without the number).
    after = json.loads((folder / "trajstore.json").read_text())
    assert after["commit"] > meta.get("commit", 0)
    assert (folder / after["episodes"]["log"]["index"]).is_file()  # an older folder got its index
    with ReplayBuffer.load_from(folder) as rb:
        np.testing.assert_array_equal(rb[-1]["observation"]["joints"],
                                      in_bounds(expected_step(total))["observation"]["joints"])
        assert rb.episode(-1).data == {"task": "appended"} and rb.episode(-2).interrupted == features
        np.testing.assert_array_equal(rb.final_observation(-1)["joints"],
                                      in_bounds(expected_step(total + 1))["observation"]["joints"])


def in_bounds(step: dict) -> dict:
    """``step`` with its joints clipped to the fixture space's bounds [-10, 10]."""
    return {**step, "observation": {**step["observation"],
                                    "joints": np.clip(step["observation"]["joints"], -10, 10)}}
