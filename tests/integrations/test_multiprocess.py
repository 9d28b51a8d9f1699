"""Many processes: DataLoader workers (fork and spawn) and readers of a live writer.

Every step's values are a function of its step number, so any process can check that
what it read at an index is what was written there.
"""

import multiprocessing as mp

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from trajstore.training.torch import ReplayBufferDataset  # noqa: E402

H = W = 32


def space():
    return DictSpace({
        "camera": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 20}),
        "step_id": BoxSpace(0, 2**40, (), np.int64),
        "state": BoxSpace(-np.inf, np.inf, (3,), np.float32),
    })


def frame_color(i):
    return np.array([(i * 7) % 200 + 20, (i * 13) % 200 + 20, (i * 29) % 200 + 20], np.float64)


def state_of(ids):
    ids = np.asarray(ids, np.int64)
    return np.stack([ids * 0.5, -ids, ids % 3], 1).astype(np.float32)


def steps(start, n):
    ids = np.arange(start, start + n, dtype=np.int64)
    cam = np.empty((n, H, W, 3), np.uint8)
    cam[:] = np.stack([frame_color(i) for i in ids]).astype(np.uint8)[:, None, None, :]
    return {"camera": cam, "step_id": ids, "state": state_of(ids)}


def check_steps(ids, cam, state):
    """The values read at step ids ``ids`` (non-empty) are the ones written there (frames within 4 levels)."""
    np.testing.assert_array_equal(np.asarray(state), state_of(ids))
    means = np.asarray(cam, np.float64).reshape(len(ids), -1, 3).mean(axis=1)
    expected = np.stack([frame_color(i) for i in ids])
    assert np.abs(means - expected).max() <= 4, "a frame does not match its step"


def make_buffer(path, layout, n=96, capacity=None, multiprocessing=True):
    routing = {"kind_storage_cls": {"image": _video_cls()}} if layout == "video" else {}
    rb = ReplayBuffer.create(DictStorage, space(), cache_path=path, capacity=capacity,
                             multiprocessing=multiprocessing, **dict_storage_kwargs_from_space(space(), **routing))
    for start in range(0, n, 32):
        rb.extend(steps(start, min(32, n - start)))
        rb.end_episode()
    return rb


def _video_cls():
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage

    return VideoStorage


@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes")
@pytest.mark.parametrize("layout", ["jpeg", "video"])
@pytest.mark.parametrize("start_method,workers", [("fork", 2), ("fork", 4), ("spawn", 2), ("spawn", 4)])
def test_dataloader_workers_read_every_index_once(tmp_path, layout, start_method, workers):
    rb = make_buffer(tmp_path / "rb", layout)
    rb.flush()
    single = rb[:]  # the single-process read, from the writer itself
    dataset = ReplayBufferDataset(rb)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=workers,
                        multiprocessing_context=start_method, generator=torch.Generator().manual_seed(0))
    seen_ids, seen_cam, seen_state = [], [], []
    for batch in loader:
        seen_ids.append(batch["step_id"].numpy())
        seen_cam.append(batch["camera"].numpy())
        seen_state.append(batch["state"].numpy())
    ids = np.concatenate(seen_ids)
    assert sorted(ids.tolist()) == list(range(len(rb)))  # every index exactly once
    order = np.argsort(ids)
    np.testing.assert_array_equal(np.concatenate(seen_cam)[order], single["camera"])
    np.testing.assert_array_equal(np.concatenate(seen_state)[order], single["state"])
    rb.close()


def test_dataset_from_path_and_transform(tmp_path):
    make_buffer(tmp_path / "rb", "jpeg", n=10).close()
    ds = ReplayBufferDataset(tmp_path / "rb", transform=lambda s: s["state"].sum())
    assert len(ds) == 10
    assert float(ds[3]) == pytest.approx(3 * 0.5 - 3 + 0)
    item = ReplayBufferDataset(tmp_path / "rb")[-1]
    assert item["camera"].dtype == torch.uint8 and tuple(item["camera"].shape) == (H, W, 3)
    assert item["step_id"].item() == 9


def _writer(path, layout, total, ready, capacity=None):
    rb = make_buffer(path, layout, n=32, capacity=capacity)
    ready.set()
    for start in range(32, total, 16):
        rb.extend(steps(start, 16))
        rb.end_episode()  # flushes: readers may now see these steps
    rb.close()


def _reader(path, total, seed, out, ring=False):
    rng = np.random.default_rng(seed)
    rb = ReplayBuffer.load_from(path, read_only=True, multiprocessing=True)
    reads = 0
    lengths = []
    try:
        while True:
            rb.refresh()
            n = len(rb)
            if ring:  # the view moves: check each step is whole, whatever step it is
                got = rb.sample(16, rng=rng)
                check_steps(got["step_id"], got["camera"], got["state"])
                reads += 1
                if rb.total_steps >= total:
                    break
                continue
            lengths.append(n)
            idx = rng.integers(0, n, size=16)
            got = rb[idx]
            np.testing.assert_array_equal(got["step_id"], idx)  # unbounded: logical index == step id
            check_steps(idx, got["camera"], got["state"])
            reads += 1
            if n >= total:
                break
        out.put(("ok", reads, lengths == sorted(lengths)))
    except BaseException as exc:  # report, do not hang the parent
        out.put(("error", repr(exc), False))
    finally:
        rb.close()


@pytest.mark.parametrize("layout,capacity", [("jpeg", None), ("video", None), ("jpeg", 24), ("video", 24)])
def test_readers_of_a_live_writer_only_see_written_values(tmp_path, layout, capacity):
    """Unbounded: index i is step i. Ring (slots overwritten while read): every step read is whole."""
    if layout == "video":
        _video_cls()
    ctx = mp.get_context("spawn")
    total = 32 + 16 * (12 if capacity is None else 40)
    ready, out = ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_writer, args=(tmp_path / "rb", layout, total, ready, capacity))
    writer.start()
    assert ready.wait(60), "writer did not start"
    readers = [ctx.Process(target=_reader, args=(tmp_path / "rb", total, seed, out, capacity is not None))
               for seed in (1, 2)]
    for r in readers:
        r.start()
    results = [out.get(timeout=120) for _ in readers]
    writer.join(60)
    for r in readers:
        r.join(30)
    assert writer.exitcode == 0
    for status, reads, monotone in results:
        assert status == "ok", reads
        assert reads >= 1 and monotone


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_writer_with_unflushed_steps_handed_to_workers(tmp_path, start_method):
    rb = make_buffer(tmp_path / "rb", "jpeg", n=16, multiprocessing=False)
    rb.extend(steps(16, 5))  # not flushed: len(dataset) flushes, or workers would not see them
    loader = DataLoader(ReplayBufferDataset(rb), batch_size=7, num_workers=2, multiprocessing_context=start_method)
    ids = np.concatenate([b["step_id"].numpy() for b in loader])
    assert ids.tolist() == list(range(21))
    rb.close()
