"""HDF5Storage under ``kill -9``: a writer killed at any moment leaves a file that opens read-only
and for writing, with every row written before its last flush intact; the writer then goes on.

The writers run in subprocesses (``python -c WRITER ...``) and are killed with SIGKILL. The value
of every row is a function of its write number, so the parent knows what each slot must hold.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import trajstore.storages.hdf5._rewrite as hdf5_module
from trajstore.spaces import BoxSpace, DictSpace, TextSpace
from trajstore.storages import HDF5Storage, SpaceStorage
from trajstore.storages.hdf5 import _recovery as _hdf5_recovery
from trajstore.storages.hdf5._recovery import status_flags as _status_flags
from trajstore.storages.hdf5 import DATA_FILE

# -- the space and the value of write number w (shared with the writer scripts) ------------------
COMMON = r"""
import numpy as np
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace

def make_space():
    return DictSpace({
        "obs": DictSpace({"state": BoxSpace(-1e9, 1e9, (3,), np.float32),
                          "img": BoxSpace(0, 255, (4, 4, 3), np.uint8)}),
        "reward": BoxSpace(-1e9, 1e9, (), np.float32),
        "step": BoxSpace(0, 2**62, (), np.int64),
        "done": BinarySpace(),
        "note": TextSpace(10),
    })

def values(ws):
    ws = np.asarray(ws, dtype=np.int64)
    return {"obs": {"state": np.stack([ws, -ws, ws * 0.5], 1).astype(np.float32),
                    "img": ((ws[:, None, None, None] * 7 + np.arange(48).reshape(4, 4, 3)) % 256).astype(np.uint8)},
            "reward": (ws * 0.25).astype(np.float32), "step": ws, "done": ws % 3 == 0,
            "note": np.array([f"é{w}🍎" for w in ws.tolist()], dtype="<U10")}
"""
namespace: dict = {}
exec(COMMON, namespace)
make_space, values = namespace["make_space"], namespace["values"]


def assert_rows(storage, slots, ws, what):
    """Slots ``slots`` of ``storage`` hold the values of write numbers ``ws``."""
    if len(slots) == 0:
        return
    got, want = storage.get(np.asarray(slots)), values(ws)
    for key in ("reward", "step", "done", "note"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{what}: {key}")
    for key in ("state", "img"):
        np.testing.assert_array_equal(got["obs"][key], want["obs"][key], err_msg=f"{what}: obs/{key}")


# -- the kill -9 campaign -------------------------------------------------------------------------
# Writes numbered w = start, start + 1, ... go to slot w (unbounded) or w % capacity (fixed). Batches
# of 1..MAX_BATCH writes; a flush after a batch with probability 1/4, or once LIMIT writes are
# unflushed. After each flush the writer prints "F <writes so far>". So after a kill, the writes
# since the last printed flush are fewer than LIMIT + MAX_BATCH: only their slots are uncertain.
WRITER = COMMON + r"""
import os, random, sys
import trajstore.storages.hdf5._layout as layout_module
import trajstore.storages.hdf5._rewrite as hdf5_module
from trajstore.storages import HDF5Storage, SpaceStorage

path, capacity, compression, start, seed = sys.argv[1:6]
capacity = None if capacity == "none" else int(capacity)
compression = None if compression == "none" else compression
start, seed = int(start), int(seed)
max_batch, limit = (8, 24) if capacity else (40, 200)
hdf5_module.COMPACT_SLACK = 0  # compact as soon as leaked chunk copies outweigh live ones
# Like a file far bigger than HDF5's caches: chunks and metadata get evicted (written) between flushes.
layout_module.COMPRESSED_CACHE_BYTES = 0

def small_metadata_cache(s):
    config = s._file.id.get_mdc_config()
    config.set_initial_size, config.incr_mode, config.flash_incr_mode, config.decr_mode = True, 0, 0, 0
    config.initial_size = config.min_size = config.max_size = 4096
    s._file.id.set_mdc_config(config)

print("START", flush=True)
if not os.path.exists(path):
    s = HDF5Storage.create(make_space(), capacity=capacity, cache_path=path, compression=compression, chunk_rows=16)
    print("F 0", flush=True)
else:
    s = SpaceStorage.load_from(path, read_only=False)
small_metadata_cache(s)
rng = random.Random(seed)
w, unflushed = start, 0
while True:
    n = rng.randint(1, max_batch)
    ws = np.arange(w, w + n)
    if capacity:
        s.set(ws % capacity, values(ws))
    else:
        reuse = max(0, min(n, len(s) - w))  # slots a crashed writer appended past the last flush
        if reuse:
            s.set(slice(w, w + reuse), values(ws[:reuse]))
        if reuse < n:
            s.extend(values(ws[reuse:]))
    w += n
    unflushed += n
    if rng.random() < 0.25 or unflushed >= limit:
        s.flush()
        unflushed = 0
        print("F", w, flush=True)
"""


def run_until_killed(args, delay):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "START", proc.stderr.read()
        time.sleep(delay)
        out = kill_and_collect(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("F ")]


def kill_and_collect(proc):
    """SIGKILL the writer and return its stdout, checking it died of the signal and not of an error."""
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    return out


def committed_slots(capacity, flushed):
    """(slots, write numbers) certain to hold the value of their last write after a kill."""
    if capacity is None:
        ws = np.arange(flushed)
        return ws, ws
    uncertain = {w % capacity for w in range(flushed, flushed + 24 + 8)}
    last = {w % capacity: w for w in range(max(0, flushed - capacity), flushed)}
    slots = np.array(sorted(set(last) - uncertain), dtype=np.int64)
    return slots, np.array([last[s] for s in slots.tolist()], dtype=np.int64)


@pytest.mark.slow
@pytest.mark.parametrize("capacity,compression", [(None, None), (64, "gzip")], ids=["unbounded", "ring-gzip"])
def test_kill_9_at_random_moments(tmp_path, capacity, compression):
    path = tmp_path / "s"
    rng = random.Random(20240611 + (capacity or 0))
    flushed = 0  # writes that a flush made durable, as the writers reported
    budget = time.monotonic() + 28  # two campaigns well within a minute
    kills = 0
    while kills < 10 and (kills < 4 or time.monotonic() < budget):
        reports = run_until_killed([path, capacity or "none", compression or "none", flushed, rng.randrange(1 << 30)],
                                   delay=rng.uniform(0.0, 0.5))
        kills += 1
        flushed = max([flushed, *reports])
        if not (path / "storage.json").exists():
            assert kills == 1 and flushed == 0  # killed inside create: there is no storage yet
            shutil.rmtree(path, ignore_errors=True)
            continue
        what = f"kill {kills}, {flushed} writes flushed"
        slots, ws = committed_slots(capacity, flushed)
        with SpaceStorage.load_from(path) as reader:  # read-only: SWMR, whatever the flags say
            assert capacity is not None or len(reader) >= flushed, what
            assert_rows(reader, slots, ws, what + " (read-only)")
        writer = SpaceStorage.load_from(path, read_only=False)  # clears a dead writer's flags
        assert_rows(writer, slots, ws, what + " (writable)")
        writer.close()
        assert _status_flags(path / DATA_FILE) == 0
    # a last writer, not killed: continue, close, and everything reads back
    with SpaceStorage.load_from(path, read_only=False) as writer:
        n = 100 if capacity is None else capacity
        ws = np.arange(flushed, flushed + n)
        if capacity is None:
            writer.set(slice(flushed, min(len(writer), flushed + n)), values(ws[:max(0, len(writer) - flushed)]))
            if len(writer) < flushed + n:
                writer.extend(values(ws[len(writer) - flushed:]))
        else:
            writer.set(ws % capacity, values(ws))
    with SpaceStorage.load_from(path) as reader:
        slots = ws if capacity is None else ws % capacity
        assert_rows(reader, slots, ws, "after the last writer")
        if capacity is None:
            assert_rows(reader, np.arange(flushed), np.arange(flushed), "after the last writer")


# -- the two cases of the reproducer, deterministically --------------------------------------------
KILL_AFTER = COMMON + r"""
import os, signal, sys
from trajstore.storages import HDF5Storage
path, case = sys.argv[1], sys.argv[2]
s = HDF5Storage.create(make_space(), capacity=None, cache_path=path)
if case == "flushed":
    s.extend(values(np.arange(7)))
    s.flush()
if case in ("appended", "flushed"):
    s.extend(values(np.arange(7, 12)))  # never flushed
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("case", ["created", "appended", "flushed"])
def test_killed_right_after_create_or_unflushed_appends(tmp_path, case):
    path = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER, str(path), case], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]
    committed = 7 if case == "flushed" else 0
    with SpaceStorage.load_from(path) as reader:
        assert len(reader) >= committed
        assert_rows(reader, np.arange(committed), np.arange(committed), case)
    writer = SpaceStorage.load_from(path, read_only=False)
    assert_rows(writer, np.arange(committed), np.arange(committed), case)
    if len(writer) > committed:  # rows appended after the last flush: there, but not trusted
        writer.set(slice(committed, len(writer)), values(np.arange(committed, len(writer))))
    writer.extend(values(np.arange(len(writer), 20)))
    writer.close()
    with SpaceStorage.load_from(path) as reader:
        assert len(reader) == 20
        assert_rows(reader, np.arange(20), np.arange(20), case)


def test_a_flagged_file_is_only_cleared_under_the_folder_lock(tmp_path):
    path = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER, str(path), "flushed"], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert _status_flags(path / DATA_FILE)  # the dead writer's flags
    # Bypassing load_from (no folder lock): the flagged writer might be alive, so nothing is touched.
    desc = json.loads((path / "storage.json").read_text())
    before = (path / DATA_FILE).read_bytes()
    with pytest.raises(BlockingIOError, match="marked as open by a writer"):
        HDF5Storage._open(path, make_space(), capacity=None, config=desc["config"], read_only=False,
                          multiprocessing=False)
    assert (path / DATA_FILE).read_bytes() == before


def test_recovery_by_copy_where_h5clear_calls_are_unavailable(tmp_path, monkeypatch):
    path = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER, str(path), "flushed"], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL

    def unavailable(path):
        raise _hdf5_recovery.NoH5Clear("no ctypes here")

    monkeypatch.setattr(_hdf5_recovery, "clear_status_flags", unavailable)
    inode = os.stat(path / DATA_FILE).st_ino
    writer = SpaceStorage.load_from(path, read_only=False)
    assert os.stat(path / DATA_FILE).st_ino != inode  # a fresh copy replaced the file
    assert_rows(writer, np.arange(7), np.arange(7), "copied")
    writer.extend(values(np.arange(len(writer), len(writer) + 3)))
    writer.close()
    assert not (path / hdf5_module.TEMP_FILE).exists()
    with SpaceStorage.load_from(path) as reader:
        assert_rows(reader, np.arange(7), np.arange(7), "copied")


# -- compressed files: SWMR leaks rewritten chunks, flush compacts ---------------------------------
def test_compressed_ring_stays_bounded_and_readers_follow_the_compaction(tmp_path, monkeypatch):
    monkeypatch.setattr(hdf5_module, "COMPACT_SLACK", 64 << 10)
    space = DictSpace({"x": BoxSpace(-1e9, 1e9, (64,), np.float32), "t": TextSpace(4)})
    writer = HDF5Storage.create(space, capacity=512, cache_path=tmp_path / "s", compression="gzip", chunk_rows=32)
    reader = HDF5Storage.load_from(tmp_path / "s", multiprocessing=True)
    rng = np.random.default_rng(0)
    oracle = np.zeros((512, 64), np.float32)
    sizes = []
    for rnd in range(12):
        for start in range(0, 512, 16):
            rows = rng.normal(size=(16, 64)).astype(np.float32)
            writer.set(slice(start, start + 16), {"x": rows, "t": np.array(["ab"] * 16)})
            oracle[start:start + 16] = rows
            if start % 128 == 0:
                writer.flush()
        writer.flush()
        sizes.append(os.path.getsize(tmp_path / "s" / DATA_FILE))
        reader.refresh()
        np.testing.assert_array_equal(reader.get(slice(None))["x"], oracle)
    live = sum(ds.id.get_storage_size() for ds in writer._datasets)
    assert max(sizes[4:]) <= 2 * live + hdf5_module.COMPACT_SLACK + (256 << 10), sizes  # without compaction: 12x
    reader.close()
    writer.close()
    again = HDF5Storage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(again.get(slice(None))["x"], oracle)
    again.close()


# -- the replay buffer: JPEG + HDF5, killed mid-recording ------------------------------------------
BUFFER_WRITER = r"""
import sys
import numpy as np
from trajstore.spaces import BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.replay_buffer import ReplayBuffer

def step(g):
    return {"obs": {"rgb": np.full((16, 16, 3), (g * 37) % 200 + 20, np.uint8),
                    "joints": np.array([g, -g], np.float32)},
            "step": np.int64(g), "task": f"t{g}"}

def space():
    return DictSpace({"obs": DictSpace({"rgb": BoxSpace(0, 255, (16, 16, 3), np.uint8, metadata={"kind": "image"}),
                                        "joints": BoxSpace(-1e9, 1e9, (2,), np.float32)}),
                      "step": BoxSpace(0, 2**62, (), np.int64), "task": TextSpace(8)})

if __name__ == "__main__":
    path, capacity = sys.argv[1], None if sys.argv[2] == "none" else int(sys.argv[2])
    rb = ReplayBuffer.create(DictStorage, space(), cache_path=path, capacity=capacity,
                             **dict_storage_kwargs_from_space(space()))
    print("START", flush=True)
    g = 0
    while True:
        for _ in range(3 + g % 5):
            rb.append(step(g))
            g += 1
        rb.end_episode()  # flushes: storage first, then trajstore.json
        print("C", g, flush=True)
"""


@pytest.mark.parametrize("capacity", [None, 40])
def test_replay_buffer_killed_mid_recording(tmp_path, capacity):
    from trajstore.replay_buffer import ReplayBuffer

    ns: dict = {"__name__": "buffer_writer"}
    exec(BUFFER_WRITER, ns)
    path = tmp_path / "rb"
    proc = subprocess.Popen([sys.executable, "-c", BUFFER_WRITER, str(path), str(capacity or "none")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "START", proc.stderr.read()
        committed = 0
        while committed < 60:  # mid-recording, with several episodes committed
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            committed = int(line.split()[1])
        out = kill_and_collect(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    committed = max([committed] + [int(x.split()[1]) for x in out.splitlines() if x.startswith("C ")])

    def check(rb):
        assert rb.total_steps >= committed
        first = rb.total_steps - len(rb)
        data = rb[:]
        gs = np.arange(first, rb.total_steps)
        np.testing.assert_array_equal(data["step"], gs)
        np.testing.assert_array_equal(data["obs"]["joints"], np.stack([gs, -gs], 1).astype(np.float32))
        assert list(data["task"]) == [f"t{g}" for g in gs]
        expected_rgb = ((gs * 37) % 200 + 20)[:, None, None, None]
        assert np.abs(data["obs"]["rgb"].astype(int) - expected_rgb).max() <= 6  # JPEG

    with ReplayBuffer.load_from(path) as rb:
        check(rb)
    with ReplayBuffer.load_from(path, read_only=False) as rb:
        check(rb)
        total = rb.total_steps
        for g in range(total, total + 5):
            rb.append(ns["step"](g))
        rb.end_episode()
    with ReplayBuffer.load_from(path) as rb:
        assert rb.total_steps == total + 5
        check(rb)
