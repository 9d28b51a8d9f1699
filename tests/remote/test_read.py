"""Reading a buffer from the S3 endpoint equals reading it from local disk, for every storage kind."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from trajstore.errors import FormatError, ReadOnlyError
from trajstore.remote import push
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages import DictStorage

from tests.remote.conftest import STEP_SPACE, assert_same, make_buffer, storage_kwargs


@pytest.fixture(params=[None, 40], ids=["unbounded", "ring-wrapped"])
def published(request, tmp_path, bucket_url, storage_options):
    """(local buffer, remote buffer) of the same folder; the ring has wrapped (60 steps into 40)."""
    with make_buffer(tmp_path / "rb", capacity=request.param) as rb:
        assert rb.total_steps == 60
    push(tmp_path / "rb", bucket_url, storage_options)
    local = ReplayBuffer.load_from(tmp_path / "rb")
    remote = ReplayBuffer.load_from(bucket_url, storage_options=storage_options)
    yield local, remote
    local.close()
    remote.close()


def test_every_step_and_episode_equal(published):
    local, remote = published
    assert len(remote) == len(local) == (60 if local.capacity is None else 40)
    assert_same(local[:], remote[:])
    assert [(e.id, e.start, e.stop, e.data, e.interrupted) for e in remote.episodes] == \
           [(e.id, e.start, e.stop, e.data, e.interrupted) for e in local.episodes]
    for k in range(len(local.episodes)):
        assert_same(local.final_observation(k), remote.final_observation(k))
    idx = np.array([len(local) - 1, 3, 3, 17, 0])
    assert_same(local[idx], remote[idx])
    # A real check of the data, not only of equality: step numbers come back from the HDF5 leaf.
    assert remote[0]["observation"]["joints"][0] == local[0]["observation"]["joints"][0]


def test_sampling_windows_transitions_stats_equal(published):
    local, remote = published
    for seed in range(3):
        assert_same(local.sample(32, rng=np.random.default_rng(seed)),
                    remote.sample(32, rng=np.random.default_rng(seed)))
        assert_same(local.sample_windows(8, delta_indices={"observation": [-1, 0], "action": range(4)},
                                         rng=np.random.default_rng(seed)),
                    remote.sample_windows(8, delta_indices={"observation": [-1, 0], "action": range(4)},
                                          rng=np.random.default_rng(seed)))
        assert_same(local.sample_transitions(16, n_step=2, rng=np.random.default_rng(seed)),
                    remote.sample_transitions(16, n_step=2, rng=np.random.default_rng(seed)))
    ls, rs = local.stats(), remote.stats()
    assert ls.keys() == rs.keys()
    for k in ls:
        assert np.array_equal(ls[k].mean, rs[k].mean) and np.array_equal(ls[k].max, rs[k].max)


def test_torch_dataset_with_two_workers(published):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    local, remote = published
    loader = DataLoader(ReplayBufferDataset(remote), batch_size=8, shuffle=False, num_workers=2,
                        multiprocessing_context="spawn")
    seen = torch.cat([b["observation"]["rgb"] for b in loader])
    assert np.array_equal(seen.numpy(), local[:]["observation"]["rgb"])
    depth = torch.cat([b["observation"]["depth"] for b in DataLoader(ReplayBufferDataset(remote), batch_size=16,
                                                                   num_workers=2)])  # fork
    assert np.array_equal(depth.numpy(), local[:]["observation"]["depth"])


def test_pickled_copy_reads_the_same(published):
    local, remote = published
    copy = pickle.loads(pickle.dumps(remote))
    try:
        assert_same(local[:], copy[:])
    finally:
        copy.close()


def test_a_random_frame_is_one_ranged_get_of_its_bytes(tmp_path, bucket_url, storage_options):
    """Counted at the s3fs client: each GET of an object goes through its ``cat_file`` once."""
    with make_buffer(tmp_path / "rb", chunk_bytes=2**20):  # all frames of a camera in one chunk
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        files = remote._remote.payload.manifest.files
        object_of = {e.key: p for p, e in files.items()}
        fs, _ = remote._remote.payload._client()
        calls = []
        real = fs._cat_file

        async def counting(path, start=None, end=None, **kw):
            calls.append((object_of[path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]], start, end))
            return await real(path, start=start, end=end, **kw)

        def counting_sync(path, start=None, end=None, **kw):  # fsspec's sync cat_file is bound at creation
            calls.append((object_of[path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]], start, end))
            return real_sync(path, start=start, end=end, **kw)

        real_sync = fs.cat_file
        fs._cat_file, fs.cat_file = counting, counting_sync
        step = remote[37]
        by_file = {}
        for rel, start, end in calls:
            by_file.setdefault(rel.split("/")[1], []).append((rel, start, end))
        assert sorted(by_file) == ["observation.depth", "observation.rgb", "observation.wrist"]
        for leaf in ("observation.rgb", "observation.depth"):  # one ranged GET of the frame's bytes
            (rel, start, end), = by_file[leaf]
            assert rel.endswith("chunks/000000.bin") and 0 < end - start < files[rel].size / 20
        (rel, start, end), = by_file["observation.wrist"]  # a video segment: fetched whole, once
        assert rel.endswith(".mp4") and start is None
        assert step["observation"]["rgb"].shape == (24, 32, 3)
        calls.clear()
        remote[np.arange(0, 60, 2)]  # 30 frames 2 apart in one chunk: merged into one GET per camera chunk
        assert sorted(rel.split("/")[1] for rel, _, _ in calls if not rel.endswith(".mp4")) == \
            ["observation.depth", "observation.rgb"]


def test_write_refused_before_anything_is_made(tmp_path, bucket_url, storage_options, s3):
    with pytest.raises(ReadOnlyError, match="read-only"):
        ReplayBuffer.create(DictStorage, STEP_SPACE, cache_path=bucket_url, **storage_kwargs())
    assert not s3.exists(bucket_url)
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    with pytest.raises(ReadOnlyError, match="pull it into a local folder"):
        ReplayBuffer.load_from(bucket_url, read_only=False, storage_options=storage_options)


def test_not_a_published_buffer(bucket_url, storage_options):
    with pytest.raises(FormatError, match="not a published trajstore buffer"):
        ReplayBuffer.load_from(bucket_url, storage_options=storage_options)


def test_cache_dir_keeps_the_mirror_for_later_opens(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", episodes=2) as rb:
        data = rb[:]
    push(tmp_path / "rb", bucket_url, storage_options)
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options, cache_dir=tmp_path / "cache") as first:
        mirror = first._remote.path
        assert_same(data, first[:])
    assert mirror.parent == tmp_path / "cache" and (mirror / "trajstore.json").is_file()  # kept after close
    stamp = (mirror / "trajstore.json").stat().st_mtime_ns
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options, cache_dir=tmp_path / "cache") as again:
        assert again._remote.path == mirror and (mirror / "trajstore.json").stat().st_mtime_ns == stamp
        assert_same(data, again[:])
    # Without cache_dir the mirror is a temporary folder, removed at close.
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as temporary:
        gone = temporary._remote.path
        assert gone.is_dir()
    assert not gone.exists()


def test_video_segment_cache_is_bounded(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", episodes=4) as rb:  # 48 steps: 3+ segments of 16 frames
        wrist = rb[:]["observation"]["wrist"]
    push(tmp_path / "rb", bucket_url, storage_options)
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        source = remote._remote.payload
        source.cache_bytes = 1  # keep one segment at a time
        video = remote.storage.storages[next(k for k in remote.storage.storages if k.endswith("wrist"))]
        for i in range(0, 48, 5):
            video._readers = video._new_reader_cache()  # drop open decoders: every read goes to the cache
            assert np.array_equal(remote[i]["observation"]["wrist"], wrist[i])
            cached = list(source._cache_folder().iterdir())
            assert len(cached) == 1 and cached[0].name.endswith(".mp4")
        assert source.requests >= 3  # segments were fetched again after eviction
