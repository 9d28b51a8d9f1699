"""Publishing to the S3 endpoint: incremental pushes, a reader during a push, pull, the CLI."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from trajstore.errors import FormatError, StorageExistsError
from trajstore.remote import pull, push
from trajstore.remote.layout import MANIFEST, OBJECTS
from trajstore.remote.manifest import Manifest
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.verify import verify_buffer

from tests.remote.conftest import assert_same, make_buffer, record


def objects(s3, url):
    return set(s3.find(f"{url}/{OBJECTS}"))


def manifest(s3, url) -> Manifest:
    return Manifest.from_bytes(s3.cat_file(f"{url}/{MANIFEST}"), url)


def keys(m: Manifest) -> set[str]:
    return {e.key for e in m.files.values()}


def test_incremental_push(tmp_path, bucket_url, storage_options, s3):
    rb = make_buffer(tmp_path / "rb", episodes=3)
    rb.flush()
    first = push(tmp_path / "rb", bucket_url, storage_options)
    assert first.generation == 1 and first.uploaded_files > 0 and first.skipped_files == 0 and first.steps == 36
    gen1 = manifest(s3, bucket_url)
    bucket = objects(s3, bucket_url)
    assert {o.split("/", 2)[-1] for o in bucket} == keys(gen1) and len(bucket) == first.uploaded_files

    again = push(tmp_path / "rb", bucket_url, storage_options)  # nothing changed: nothing uploaded, nor a manifest
    assert (again.generation, again.uploaded_files, again.uploaded_bytes, again.unchanged) == (1, 0, 0, True)
    assert again.skipped_files == again.files and objects(s3, bucket_url) == bucket
    assert manifest(s3, bucket_url).to_bytes() == gen1.to_bytes()

    record(rb, 3, 3)  # three more episodes
    rb.flush()
    third = push(tmp_path / "rb", bucket_url, storage_options)
    gen3 = manifest(s3, bucket_url)
    assert third.steps == 72 and third.generation == 2 and not third.unchanged
    # Exactly the objects of the new manifest that the bucket lacked went up ...
    added = {o.split("/", 2)[-1] for o in objects(s3, bucket_url) - bucket}
    assert added == keys(gen3) - keys(gen1) and third.uploaded_files == len(added)
    # ... and the closed video segments of the first episodes were not among them.
    segments = [p for p in gen1.files if p.endswith(".mp4")]
    assert len(segments) >= 2 and all(gen3.files[p] == gen1.files[p] for p in segments)
    assert third.skipped_files >= len(segments)
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        assert len(remote) == 72 and len(remote.episodes) == 6
        assert_same(rb[:], remote[:])
        assert remote.episode(5).data == {"task": "task 5", "success": False}

    # Without retention, the bucket keeps the objects of the newest manifest and of the one before it.
    record(rb, 6, 1)
    rb.close()
    fourth = push(tmp_path / "rb", bucket_url, storage_options, retain_seconds=0)
    gen4 = manifest(s3, bucket_url)
    assert {o.split("/", 2)[-1] for o in objects(s3, bucket_url)} == keys(gen4) | keys(gen3)
    assert fourth.deleted_objects == len(keys(gen1) - keys(gen3) - keys(gen4)) > 0
    assert sorted(p.rsplit("/", 1)[-1] for p in s3.find(f"{bucket_url}/manifests")) == ["00000002.json",
                                                                                        "00000003.json"]


def test_retention_keeps_what_recent_snapshots_name(tmp_path, bucket_url, storage_options, s3):
    """With the default retention (an hour), objects of every snapshot replaced within it stay."""
    rb = make_buffer(tmp_path / "rb", episodes=1)
    rb.flush()
    generations = []
    for k in range(3):
        push(tmp_path / "rb", bucket_url, storage_options)
        generations.append(manifest(s3, bucket_url))
        record(rb, 1 + k, 1)
        rb.flush()
    rb.close()
    last = push(tmp_path / "rb", bucket_url, storage_options)
    assert last.deleted_objects == 0
    named = set().union(*(keys(m) for m in generations), keys(manifest(s3, bucket_url)))
    assert {o.split("/", 2)[-1] for o in objects(s3, bucket_url)} == named


def test_reader_during_a_push_sees_one_whole_snapshot(tmp_path, bucket_url, storage_options):
    """A writer records while pushes run in a thread; every open of the URL sees a committed state
    (36 steps or more, a multiple of 12: whole episodes here) whose steps equal the writer's."""
    rb = make_buffer(tmp_path / "rb", episodes=3)
    rb.flush()
    push(tmp_path / "rb", bucket_url, storage_options)
    reference = rb[:]
    done = threading.Event()
    errors = []

    def pusher():
        try:
            for k in range(4):
                record(rb, 3 + k, 1)  # live buffer: an episode is committed between pushes
                push(tmp_path / "rb", bucket_url, storage_options)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=pusher)
    thread.start()
    seen = set()
    while not done.is_set() or len(seen) < 2:
        with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
            n = len(remote)
            assert n % 12 == 0 and 36 <= n <= 84
            got = remote[np.array([0, 35, n - 1])]
            assert_same({k: v[:2] for k, v in got["observation"].items()},
                        {k: v[[0, 35]] for k, v in reference["observation"].items()})
            last = remote[n - 1]
            assert last["observation"]["joints"][0] == np.float32(((n // 12 - 1) * 100 + 11) % 50 / 10)
            seen.add(n)
        if done.is_set():
            break
    thread.join()
    assert not errors, errors
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        assert len(remote) == 84
    rb.close()


def test_push_of_a_wrapped_ring_and_pull(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", capacity=40, episodes=6) as rb:  # 72 steps into 40: overwritten chunks
        data = rb[:]
    push(tmp_path / "rb", bucket_url, storage_options)
    report = pull(bucket_url, tmp_path / "copy", storage_options)
    assert report.files > 10
    assert verify_buffer(tmp_path / "copy").problems == []
    with ReplayBuffer.load_from(tmp_path / "copy") as copy:
        assert_same(data, copy[:])
        assert copy.episode(-1).data == {"task": "task 5", "success": False}
    with pytest.raises(StorageExistsError):
        pull(bucket_url, tmp_path / "copy", storage_options)


def test_push_to_a_local_folder_opens_like_a_bucket(tmp_path):
    with make_buffer(tmp_path / "rb", episodes=2) as rb:
        data = rb[:]
    push(tmp_path / "rb", str(tmp_path / "published"))
    assert (tmp_path / "published" / MANIFEST).is_file()
    with ReplayBuffer.load_from(tmp_path / "published") as copy:
        assert_same(data, copy[:])
    with ReplayBuffer.load_from(f"file://{tmp_path / 'rb'}") as same:  # file:// is the local folder
        assert same.cache_path == tmp_path / "rb"


def test_push_of_a_non_buffer_makes_nothing(tmp_path, bucket_url, storage_options, s3):
    with pytest.raises(FormatError, match="not a trajstore buffer folder"):
        push(tmp_path / "nothing", bucket_url, storage_options)
    assert not s3.exists(bucket_url)
    with pytest.raises(FormatError, match="not a published trajstore buffer"):
        pull(bucket_url, tmp_path / "copy", storage_options)
    assert not (tmp_path / "copy").exists()


def test_cli_push_and_pull(tmp_path, bucket_url, storage_options):
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    with make_buffer(tmp_path / "rb", episodes=2):
        pass
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    opts = ["-o", "key=test", "-o", "secret=test", "-o", f"client_kwargs.endpoint_url={endpoint}",
            "-o", "client_kwargs.region_name=eu-west-1"]
    runner = CliRunner()
    out = runner.invoke(app, ["push", str(tmp_path / "rb"), bucket_url, *opts])
    assert out.exit_code == 0, out.output
    assert "pushed 24 steps" in out.output and "0 already there" in out.output
    out = runner.invoke(app, ["push", str(tmp_path / "rb"), bucket_url, *opts])
    assert out.exit_code == 0 and out.stdout.startswith(f"unchanged: {bucket_url} already holds these 24 steps "
                                                         "(generation 1 kept, "), out.output
    out = runner.invoke(app, ["pull", bucket_url, str(tmp_path / "copy"), *opts])
    assert out.exit_code == 0 and "pulled" in out.output
    assert verify_buffer(tmp_path / "copy").steps == 24
    out = runner.invoke(app, ["pull", bucket_url, str(tmp_path / "copy"), *opts])
    assert out.exit_code == 2 and out.output.startswith("error:") and "Traceback" not in out.output
    out = runner.invoke(app, ["push", str(tmp_path / "rb"), bucket_url, "-o", "nonsense"])
    assert out.exit_code == 2 and "KEY=VALUE" in out.output


def test_push_of_a_live_ring_while_the_writer_records(tmp_path, bucket_url, storage_options):
    """A writer thread keeps recording into a ring that wraps while pushes run: each published
    snapshot is one committed state. Every step's leaves must belong to the same step number (decoded
    from the lossless depth frame), and consecutive steps of an episode must be consecutive numbers:
    a copy that mixed files from before and after a ring overwrite would break both."""
    from tests.remote.conftest import frame

    rb = make_buffer(tmp_path / "rb", capacity=120, episodes=2)  # drops 15 steps ahead of each overwrite
    rb.flush()
    stop = threading.Event()
    recorded = []

    def writer():
        e = 2
        while not stop.is_set() and e < 60:
            record(rb, e, 1)  # 12 steps, committed by end_episode
            recorded.append(e)
            e += 1
            time.sleep(0.02)

    thread = threading.Thread(target=writer)
    thread.start()
    wrapped = pushes = 0
    try:
        signature = {frame(e * 100 + t, 0, np.uint16)[0, :8].tobytes(): e * 100 + t
                     for e in range(61) for t in range(13)}
        while pushes < 3 or (not wrapped and thread.is_alive()):
            push(tmp_path / "rb", bucket_url, storage_options)
            pushes += 1
            with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
                steps = remote[:]
                numbers = np.array([signature[d[0, :8].tobytes()] for d in steps["observation"]["depth"]])
                np.testing.assert_array_equal(steps["action"], np.stack([np.sin(numbers), np.cos(numbers)], 1)
                                              .astype(np.float32))
                np.testing.assert_array_equal(steps["observation"]["joints"][:, 0],
                                              ((numbers % 50) / 10).astype(np.float32))
                for ep in remote.episodes:  # logical [start, stop): step numbers follow each other
                    run = numbers[ep.start:ep.stop]
                    assert len(run) == ep.stop - ep.start and np.all(np.diff(run) == 1), (ep, run)
                    assert not ep.done or run[-1] == ep.id * 100 + 11, (ep, run)  # its own steps, to its last
                wrapped = wrapped or remote.total_steps > 120
    finally:
        stop.set()
        thread.join()
        rb.close()
    assert wrapped and pushes >= 3


def test_push_to_a_missing_bucket_says_so(tmp_path, storage_options):
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    with pytest.raises(OSError) as info:
        push(tmp_path / "rb", "s3://no-such-bucket-here/rb", storage_options)
    assert not isinstance(info.value, FormatError) and "bucket" in str(info.value).lower()


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_every_format_version_publishes_and_reads_back(tmp_path, version):
    """The committed fixture folders of each on-disk format (HDF5 files before SWMR-always included)."""
    import shutil
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "format_fixtures" / version
    for folder in sorted(p for p in fixtures.iterdir() if p.is_dir()):
        source = tmp_path / version / folder.name
        shutil.copytree(folder, source)
        push(source, str(tmp_path / "published" / folder.name))
        with ReplayBuffer.load_from(source) as local, \
                ReplayBuffer.load_from(tmp_path / "published" / folder.name) as remote:
            assert len(remote) == len(local) > 0
            assert_same(local[:], remote[:])
