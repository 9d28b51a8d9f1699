"""A full disk, for real (a small tmpfs), in every layout: after a write error no later
``end_episode``/``flush``/``close`` returns ok unless what it covers is on disk, and the episode
that hit the full disk has the same fate everywhere: held, written and committed once space is
freed (the retried ``end_episode`` commits it with its data).

Needs ``mount -t tmpfs`` (root); skipped where mounting is not permitted.
"""

from __future__ import annotations

import errno
import os
import subprocess

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

LAYOUTS = ["hdf5", "jpeg", "png", "video"]


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs at ``tmp_path / "disk"`` (unmounted afterwards); skips if mounting is not permitted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=60)


def _layout(layout):
    """(space, routing keywords, frame side): HDF5 holds the camera itself; small frames keep its statistics small."""
    side = 16 if layout == "hdf5" else 48
    meta = {} if layout == "hdf5" else {"kind": "image", "fps": 10}
    space = DictSpace({"cam": BoxSpace(0, 255, (side, side, 3), np.uint8, metadata=meta),
                       "k": BoxSpace(0, 1e9, (), np.int64)})
    if layout == "video":
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        routing = {"kind_storage_cls": {"image": VideoStorage}}
    else:
        routing = {"png": {"kind_kwargs": {"image": {"format": "PNG"}}}}.get(layout, {})
    return space, routing, side


def _steps(first, n, side):
    """Steps ``first .. first+n-1``: ``k`` is the step number; frames are blocky noise (lossy codecs keep them),
    the same for a step number in any batch."""
    small = np.stack([np.random.default_rng(k).integers(0, 256, (side // 4, side // 4, 3), dtype=np.uint8)
                      for k in range(first, first + n)])
    return {"cam": np.repeat(np.repeat(small, 4, axis=1), 4, axis=2), "k": np.arange(first, first + n)}


def _fill(disk, leave):
    """Fill the disk with a filler file, then give back ``leave`` bytes; returns the filler."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        block = b"\xff" * (1 << 16)
        try:
            while True:
                f.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            used = f.tell()
    with open(filler, "r+b") as f:
        f.truncate(max(0, used - leave))
    return filler


def _psnr(a, b):
    err = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if err == 0 else 10 * np.log10(255.0 ** 2 / err)


def _check(rb, expected, lossless):
    """``rb`` holds exactly the episodes of ``expected`` ({episode: (first, n)}), with their steps."""
    assert [(e.start, e.stop, e.data) for e in rb.episodes] == \
        [(first, first + n, {"ep": ep}) for ep, (first, n) in expected.items()]
    for first, n in expected.values():
        _check_steps(rb, first, n, lossless)


def _check_steps(rb, first, n, lossless):
    """Steps ``first .. first+n-1`` of ``rb`` are those :func:`_steps` made (written in batches of any size)."""
    side = rb.space["cam"].shape[0]
    got = rb[np.arange(first, first + n)]
    np.testing.assert_array_equal(got["k"], np.arange(first, first + n))
    want = _steps(first, n, side)["cam"]
    if lossless:
        np.testing.assert_array_equal(got["cam"], want)
    else:  # lossy: each frame is the one of its step (another step's frame is ~8 dB off)
        assert min(_psnr(g, w) for g, w in zip(got["cam"], want)) > 20


def _refuses(call, what):
    with pytest.raises(OSError) as failure:
        call()
    assert failure.value.errno in (errno.ENOSPC, None), f"{what}: {failure.value!r}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_full_disk_no_call_returns_ok_until_the_episode_is_on_disk(small_disk, layout):
    space, routing, side = _layout(layout)
    lossless = layout in ("hdf5", "png")
    path = small_disk / "rb"
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                             **dict_storage_kwargs_from_space(space, **routing))
    n = 600 if layout == "hdf5" else 120  # one episode's data is several times the room left below
    rb.extend(_steps(0, n, side))
    rb.end_episode(ep=0)
    committed = {0: (0, n)}
    # Room for the metadata of a commit (the statistics file is rewritten whole), not for the frames.
    leave = 2 * os.path.getsize(path / "stats.json") + (32 << 10)
    filler = _fill(small_disk, leave)

    first = n
    for ep in range(1, 50):  # record until end_episode hits the full disk
        rb.extend(_steps(first, n, side))
        try:
            rb.end_episode(ep=ep)
        except OSError as exc:
            assert exc.errno in (errno.ENOSPC, None), repr(exc)
            break
        committed[ep] = (first, n)
        first += n
    else:
        raise AssertionError("the disk never filled up")
    failed = ep

    # The disk is still full: no durability point may return ok.
    _refuses(rb.end_episode, "end_episode()")
    _refuses(lambda: rb.end_episode(ep=failed), "end_episode again")
    _refuses(rb.flush, "flush")
    _refuses(rb.close, "close")
    _refuses(lambda: rb.extend(_steps(first + n, 1, side)), "extend")  # not appended: nothing staged
    with ReplayBuffer.load_from(path) as reader:  # only what a call returned ok for
        _check(reader, committed, lossless)

    filler.unlink()  # space freed: the retry writes and commits the held steps
    rb.end_episode(ep=failed)
    committed[failed] = (first, n)
    _check(rb, committed, lossless)
    rb.extend(_steps(first + n, 5, side))  # and recording goes on
    rb.end_episode(ep=failed + 1)
    committed[failed + 1] = (first + n, 5)
    rb.close()
    with ReplayBuffer.load_from(path) as reopened:
        assert reopened.total_steps == first + n + 5
        _check(reopened, committed, lossless)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_full_disk_flush_and_close_commit_the_open_episode_once_space_is_freed(small_disk, layout):
    """The other retry: ``flush`` (then ``close``) instead of ``end_episode``; the episode stays open."""
    space, routing, side = _layout(layout)
    lossless = layout in ("hdf5", "png")
    path = small_disk / "rb"
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                             **dict_storage_kwargs_from_space(space, **routing))
    n = 600 if layout == "hdf5" else 120
    rb.extend(_steps(0, n, side))
    rb.end_episode(ep=0)
    filler = _fill(small_disk, 2 * os.path.getsize(path / "stats.json") + (32 << 10))
    rb.extend(_steps(n, 3 * n, side))
    _refuses(rb.flush, "flush")
    _refuses(rb.close, "close")
    assert not rb.closed and len(rb) == 4 * n  # held, not dropped
    filler.unlink()
    rb.close()
    with ReplayBuffer.load_from(path) as reopened:
        assert reopened.total_steps == 4 * n
        # The open episode was committed open; a reopened writer would close it as interrupted.
        assert [(e.start, e.stop, e.data) for e in reopened.episodes] == [(0, n, {"ep": 0}), (n, 4 * n, {})]
        _check_steps(reopened, 0, 4 * n, lossless)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_full_disk_ring_keeps_the_held_steps_and_commits_them_once_space_is_freed(small_disk, layout):
    """A ring (whose writes overwrite slots of committed steps) at the full disk: the same rules."""
    space, routing, side = _layout(layout)
    lossless = layout in ("hdf5", "png")
    path = small_disk / "rb"
    n = 600 if layout == "hdf5" else 120
    capacity = 2 * n
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=capacity,
                             **dict_storage_kwargs_from_space(space, **routing))
    for ep in range(3):  # the ring is full and has overwritten one episode
        rb.extend(_steps(ep * n, n, side))
        rb.end_episode(ep=ep)
    # A ring in HDF5 overwrites in place and never needs room for data: there the commit hits the full disk.
    filler = _fill(small_disk, 0 if layout == "hdf5" else 2 * os.path.getsize(path / "stats.json") + (32 << 10))
    total = 3 * n
    for ep in range(3, 60):
        staged = False
        try:
            rb.extend(_steps(total, n, side))  # may raise: the commit before overwriting (nothing staged then)
            staged = True
            rb.end_episode(ep=ep)
        except OSError:
            break
        total += n
    else:
        raise AssertionError("the disk never filled up")
    for call in (rb.end_episode, rb.flush, rb.close):
        _refuses(call, call.__name__)
    assert rb.total_steps == total + (n if staged else 0)  # held, or (a refused extend) never appended
    with ReplayBuffer.load_from(path) as reader:  # whole steps only, and none past the last ok commit
        assert reader.total_steps == total
        held = len(reader)
        assert 0 < held <= capacity
        np.testing.assert_array_equal(reader[:]["k"], np.arange(total - held, total))
    filler.unlink()
    if not staged:
        rb.extend(_steps(total, n, side))
    rb.end_episode(ep=ep)
    total += n
    rb.close()
    with ReplayBuffer.load_from(path) as reopened:
        assert reopened.total_steps == total and len(reopened) == capacity
        assert reopened.episodes[-1].data == {"ep": ep} and reopened.episodes[-1].stop == capacity  # logical
        got = reopened[:]
        np.testing.assert_array_equal(got["k"], np.arange(total - capacity, total))
        want = _steps(total - capacity, capacity, side)["cam"]
        if lossless:
            np.testing.assert_array_equal(got["cam"], want)
        else:
            assert min(_psnr(g, w) for g, w in zip(got["cam"], want)) > 20
