"""An open for writing that is refused because the buffer's writer holds the folder leaves no file
behind: not in the buffer, its storage, a sub-storage or the final observations, neither while the
writer is open nor after it closed. The writer may be in this process or in another one."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trajstore.errors import LockedError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, SpaceStorage, dict_storage_kwargs_from_space

ROUTINGS = {"jpeg": {}, "png": {"kind_kwargs": {"image": {"format": "PNG"}}}, "video": "video"}


def _space():
    return DictSpace({"observation": DictSpace({
        "cam": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image", "fps": 10}),
        "pos": BoxSpace(-1, 1, (2,), np.float32)}), "action": BoxSpace(-1, 1, (2,), np.float32)})


def _routing(name):
    if ROUTINGS[name] == "video":
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        return {"kind_storage_cls": {"image": VideoStorage}}
    return ROUTINGS[name]


def _listing(folder):
    return sorted(os.path.relpath(os.path.join(root, f), folder) for root, _, files in os.walk(folder) for f in files)


def _sub_folders(rb_path):
    """Every folder below the buffer that holds a storage.json (the storage, its parts, the final observations)."""
    return sorted(os.path.relpath(root, rb_path) for root, _, files in os.walk(rb_path) if "storage.json" in files)


def _refused_everywhere(rb_path):
    subs = _sub_folders(rb_path)
    assert "storage" in subs and "storage/@rest" in subs and "storage/observation.cam" in subs, subs
    assert any(s.startswith("final_observations") for s in subs), subs
    for sub in subs:
        for cls in (SpaceStorage, DictStorage, HDF5Storage, ImageStorage):
            with pytest.raises(Exception) as refused:
                cls.load_from(rb_path / sub, read_only=False)
            if cls is SpaceStorage:
                assert isinstance(refused.value, LockedError), (sub, refused.value)
    with pytest.raises(LockedError):
        ReplayBuffer.load_from(rb_path, read_only=False)


def _record(path, routing):
    space = _space()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                             **dict_storage_kwargs_from_space(space, **routing))
    rb.extend(space.sample(np.random.default_rng(0), batch_size=5))
    rb.end_episode(final_observation=space["observation"].sample(np.random.default_rng(1)))
    return rb


@pytest.mark.parametrize("layout", sorted(ROUTINGS))
def test_refused_opens_in_this_process_leave_no_file(tmp_path, layout):
    rb = _record(tmp_path / "rb", _routing(layout))
    before = _listing(tmp_path / "rb")
    _refused_everywhere(tmp_path / "rb")
    assert _listing(tmp_path / "rb") == before
    rb.close()
    assert _listing(tmp_path / "rb") == before


HOLDER = """
import sys, numpy as np
from trajstore.replay_buffer import ReplayBuffer
rb = ReplayBuffer.load_from(sys.argv[1], read_only=False)
print("open", flush=True)
sys.stdin.readline()
rb.close()
"""


def test_refused_opens_while_another_process_writes_leave_no_file(tmp_path):
    _record(tmp_path / "rb", _routing("png")).close()
    before = _listing(tmp_path / "rb")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "rb")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        _refused_everywhere(tmp_path / "rb")
        assert _listing(tmp_path / "rb") == before
    finally:
        holder.communicate("\n", timeout=120)
    assert holder.returncode == 0
    assert _listing(tmp_path / "rb") == before
