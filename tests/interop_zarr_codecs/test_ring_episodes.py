"""export_zarr leaves out an episode whose first steps the ring overwrote (``Episode.overwritten``), as the
LeRobot export does: by default and in an expression selection it is skipped, named by id it is a
ValueError; the whole episodes it writes are the buffer's values, step by step."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("zarr")
import zarr  # noqa: E402

from tests.integrations.zarr_helpers import step_space, steps  # noqa: E402
from trajstore.interop.zarr import export_zarr  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402

LENGTHS = (5, 5, 5, 5, 3)
CAPACITY = 12  # the last 12 of 23 steps: episode 2 loses its first step, 3 and 4 are whole


def ring_buffer(path):
    space = step_space()
    data = steps(sum(LENGTHS))
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=CAPACITY,
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))
    start = 0
    for k, n in enumerate(LENGTHS):
        rb.extend({"observation": {key: v[start:start + n] for key, v in data["observation"].items()},
                   **{key: v[start:start + n] for key, v in data.items() if key != "observation"}})
        rb.end_episode(seed=k)
        start += n
    rb.close()
    return data


def test_the_ring_truncated_episode_is_left_out(tmp_path):
    data = ring_buffer(tmp_path / "rb")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [(e.id, len(e), e.overwritten) for e in rb.episodes] == [(2, 4, True), (3, 5, False), (4, 3, False)]
    for out, episodes in (("all", None), ("expr", "seed >= 0")):
        summary = export_zarr(tmp_path / "rb", tmp_path / out, compressor=None, episodes=episodes)
        assert (summary.episodes, summary.steps) == (2, 8)
        g = zarr.open_group(str(tmp_path / out), mode="r")
        assert g["meta/episode_ends"][:].tolist() == [5, 8]
        np.testing.assert_array_equal(g["data/action"][:], data["action"][15:23])  # episodes 3 and 4, whole
        np.testing.assert_array_equal(g["data/count"][:], data["count"][15:23])


@pytest.mark.parametrize("episodes", [[2], [2, 3], "2-4"])
def test_naming_the_ring_truncated_episode_is_refused(tmp_path, episodes):
    ring_buffer(tmp_path / "rb")
    with pytest.raises(ValueError, match="episode id 2 lost its first steps to the ring; it cannot be exported whole"):
        export_zarr(tmp_path / "rb", tmp_path / "z", compressor=None, episodes=episodes)
    assert not (tmp_path / "z").exists()
