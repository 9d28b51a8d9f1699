"""Many trainers: two ranks (torch.distributed, gloo on CPU) each read their DistributedSampler shard of
a ReplayBufferDataset of steps or windows; together they read every anchor exactly once per epoch."""

import socket

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as torch_mp  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from trajstore.training.torch import ReplayBufferDataset  # noqa: E402

SPACE = DictSpace({"step_id": BoxSpace(0, 2**40, (), np.int64), "action": BoxSpace(-1e6, 1e6, (2,), np.float32)})
LENGTHS = [5, 9, 3, 12, 6]  # 35 steps
DELTA = {"action": range(4)}
WORLD = 2
EPOCHS = 2
# (windows, pad, drop_last): 35 steps, or 35 anchors with pad=True (odd: DistributedSampler repeats one,
# or drops one with drop_last); 2 + 6 + 0 + 9 + 3 = 20 anchors with pad=False (even: split exactly).
CASES = [(False, None, False), (True, True, False), (True, True, True), (True, False, False)]


def record(path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, **dict_storage_kwargs_from_space(SPACE))
    first = 0
    for n in LENGTHS:
        ids = np.arange(first, first + n, dtype=np.int64)
        rb.extend({"step_id": ids, "action": np.stack([ids, -ids], 1).astype(np.float32)})
        rb.end_episode()
        first += n
    rb.close()


def rank_main(rank, path, port, out):
    """One trainer: read its shard of every case for every epoch; rank 0 saves what all ranks read."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        gathered = {}
        for windows, pad, drop_last in CASES:
            dataset = ReplayBufferDataset(path, delta_indices=DELTA if windows else None, pad=pad)
            sampler = DistributedSampler(dataset, shuffle=True, seed=3, drop_last=drop_last)  # rank, world from dist
            loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0)
            for epoch in range(EPOCHS):
                sampler.set_epoch(epoch)
                anchors = [int(a) for batch in loader for a in batch["step_id"]]  # a leaf no window names: the anchor
                everyone = [None] * WORLD
                dist.all_gather_object(everyone, anchors)
                gathered[(windows, pad, drop_last, epoch)] = everyone
        if rank == 0:
            torch.save(gathered, out)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_read_every_anchor_once_per_epoch(tmp_path):
    record(tmp_path / "rb")
    out = tmp_path / "gathered.pt"
    torch_mp.spawn(rank_main, args=(str(tmp_path / "rb"), free_port(), str(out)), nprocs=WORLD, join=True)
    gathered = torch.load(out)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        for windows, pad, drop_last in CASES:
            delta = DELTA if windows else None
            count = rb.count_anchors(delta, pad=pad is not False)
            expected = rb[rb.anchors_at(np.arange(count), delta, pad=pad is not False)]["step_id"].tolist()
            assert count == (20 if pad is False else 35)
            orders = []
            for epoch in range(EPOCHS):
                ranks = gathered[(windows, pad, drop_last, epoch)]
                read = ranks[0] + ranks[1]
                assert len(ranks[0]) == len(ranks[1])  # every rank takes the same number of steps
                if count % WORLD == 0:  # disjoint and complete: every anchor exactly once
                    assert sorted(read) == expected
                elif drop_last:  # the odd anchor out is dropped: disjoint, one short
                    assert len(read) == count - 1 and len(set(read)) == count - 1 and set(read) < set(expected)
                else:  # padded by repeating the permutation's first anchor: every anchor once, plus one repeat
                    assert len(read) == count + 1 and sorted(set(read)) == expected
                    assert len(read) - len(set(read)) == 1
                orders.append(read)
            assert orders[0] != orders[1]  # set_epoch reshuffles
