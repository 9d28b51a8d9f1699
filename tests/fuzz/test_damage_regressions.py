"""One deterministic case per kind of fault the damaged-file fuzz found (test_damaged_files.py).

Each damages one file of the fuzz buffer at a place found from the file's own bytes, reads
everything in a child process with a timeout (a regression may hang or crash), and checks the
exact outcome: a FormatError whose message names the damaged file.
"""

import json

import h5py
import numpy as np
import pytest

from tests.fuzz.damage import Mutation, build_buffer, have_video
from tests.fuzz.runner import run_cases
from trajstore.errors import FormatError, StaleReadError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages.frames._slot_index import HEADER_BYTES, RECORD_BYTES


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_buffer(tmp_path_factory.mktemp("regress") / "rb")


def outcome(folder, mutation, timeout=20.0, mode="read"):
    (result,) = run_cases(folder, [mutation], timeout=timeout, mode=mode)
    assert result.outcome == "error", (str(mutation), result.outcome, result.detail)
    return result.detail


def assert_format_error(detail, *names):
    assert detail["format_error"], detail
    for name in names:
        assert name in detail["message"], detail["message"]


def slot_record(folder, rel):
    """Index of the last record of ``rel`` (an index.log) that points a slot at a file (a live one)."""
    raw = (folder / rel).read_bytes()
    rec = np.frombuffer(raw, "<i8", offset=HEADER_BYTES).reshape(-1, 4)
    return int(np.flatnonzero((rec[:, 0] >= 0) & (rec[:, 1] >= 0))[-1])


H5 = "storage/@rest/data.h5"


def test_hdf5_bad_metadata_checksum_fails_fast_in_swmr_mode(folder):
    # A byte inside the root group's object header (after its signature): its checksum fails.
    # HDF5's SWMR readers retried with doubling sleeps: the read never ended (>10 min measured).
    offset = (folder / H5).read_bytes().index(b"OHDR") + 12
    detail = outcome(folder, Mutation(H5, "flip", offset, 1), timeout=30.0)
    assert_format_error(detail, H5, "checksum")


def test_hdf5_bad_metadata_checksum_fails_fast_for_a_writer(folder):
    # The same damage met by a writer: h5py's `f.swmr_mode = True` switched HDF5 to 100 doubling
    # read attempts whatever the file-access list said: the writer hung (measured, > 20 s) at an object
    # header it loads after that switch (a dataset's; the root group's is read before it).
    offset = (folder / H5).read_bytes().rindex(b"OHDR") + 12
    detail = outcome(folder, Mutation(H5, "flip", offset, 1), timeout=30.0, mode="write")
    assert_format_error(detail, H5, "checksum")
    assert detail["lost"] is False  # a reader gets what it got before the writer tried


def test_hdf5_short_superblock_is_a_format_error(folder):
    # Was a RuntimeError from h5py ("Can't decode file superblock prefix").
    assert_format_error(outcome(folder, Mutation(H5, "truncate", 8)), H5)


def compressed_chunk_middle(folder):
    """File offset of the middle byte of the first chunk of a gzip-compressed dataset in data.h5."""
    found = []
    with h5py.File(folder / H5, "r") as f:
        f.visititems(lambda name, obj: found.append(obj) if isinstance(obj, h5py.Dataset)
                     and obj.compression == "gzip" and obj.id.get_num_chunks() else None)
        info = found[0].id.get_chunk_info(0)
        return info.byte_offset + info.size // 2


def test_hdf5_damaged_compressed_chunk_names_the_file_and_dataset(folder):
    # Was an OSError at read ("filter returned failure during read"); zlib's checksum catches the flip.
    detail = outcome(folder, Mutation(H5, "flip", compressed_chunk_middle(folder), 7))
    assert_format_error(detail, H5, "dataset")


def test_a_writer_meeting_a_damaged_compressed_chunk_names_the_file_and_dataset(folder):
    # A write into a partly filled chunk reads it first: h5py's OSError ("filter returned failure
    # during read") left the writer as it was, not as a FormatError.
    detail = outcome(folder, Mutation(H5, "flip", compressed_chunk_middle(folder), 7), mode="write")
    assert_format_error(detail, H5, "dataset")
    assert detail["lost"] is False


def test_hdf5_truncated_file_is_a_format_error_in_swmr_mode(folder):
    # A SWMR reader skips HDF5's end-of-file check: the missing chunks were read as zeros, silently.
    size = (folder / H5).stat().st_size
    assert_format_error(outcome(folder, Mutation(H5, "truncate", size * 2 // 3)), H5, "truncated")


def test_a_writer_after_a_huge_reserved_file_id_keeps_the_folder_readable(folder):
    # Bit 38 of a reservation's file id: readers ignore it, but a writer's next file got id 2**38 + 1
    # and the live count per file id, a dense array, asked for 2 TiB: a MemoryError after the record
    # was logged, so readers then failed too. Counts are sparse now: the writer's steps read back.
    log = "storage/observation.jpeg/index.log"
    rec = np.frombuffer((folder / log).read_bytes(), "<i8", offset=HEADER_BYTES).reshape(-1, 4)
    reservation = int(np.flatnonzero(rec[:, 0] == -1)[0])
    offset = HEADER_BYTES + reservation * RECORD_BYTES + 8 + 4  # byte 4 of the file id field
    (result,) = run_cases(folder, [Mutation(log, "flip", offset, 6)], mode="write")
    assert result.outcome == "ok" and result.detail["bad_write"] is False, result.detail


def test_a_writer_meeting_bad_episode_counters_names_trajstore_json(folder):
    # final_count 6 -> 4: a writer's check of the episode table fails; its error named only the folder.
    raw = (folder / "trajstore.json").read_bytes()
    offset = raw.index(b'"final_count": 6') + len(b'"final_count": ')
    detail = outcome(folder, Mutation("trajstore.json", "flip", offset, 1), mode="write")
    assert_format_error(detail, "trajstore.json", "final")
    assert detail["lost"] is False


def test_slot_index_with_a_huge_slot_number_is_refused(folder):
    # A high bit of a slot field: was a MemoryError (a 768 TiB table).
    log = "storage/observation.depth/index.log"
    offset = HEADER_BYTES + slot_record(folder, log) * RECORD_BYTES + 5
    assert_format_error(outcome(folder, Mutation(log, "flip", offset, 5)), log, "record")


def test_slot_index_with_a_huge_frame_length_is_refused_before_reading(folder):
    # A high bit of a length field: pread would allocate that many bytes.
    log = "storage/observation.jpeg/index.log"
    offset = HEADER_BYTES + slot_record(folder, log) * RECORD_BYTES + 3 * 8 + 4
    assert_format_error(outcome(folder, Mutation(log, "flip", offset, 6)), "storage/observation.jpeg/chunks/")


@pytest.mark.parametrize("camera", ["jpeg", "png"])
def test_undecodable_frame_names_chunk_file_and_slot(folder, camera):
    # The message said "cannot decode a JPEG frame of N bytes": no file, no slot.
    chunks = sorted((folder / f"storage/observation.{camera}/chunks").iterdir())
    rel = str(chunks[-1].relative_to(folder))
    # PNG: byte 1 of the signature. JPEG frames are stored without their shared header (image storage
    # format 2), so the chunk starts with entropy-coded data, where a flipped bit only changes pixels:
    # break the first frame's end-of-image marker instead (the first FF D9 of the chunk is its EOI).
    offset = (chunks[-1].read_bytes().index(b"\xff\xd9") + 1) if camera == "jpeg" else 1
    detail = outcome(folder, Mutation(rel, "flip", offset, 3))
    assert_format_error(detail, rel, "slot", "offset 0")


@pytest.mark.skipif(not have_video(), reason="needs PyAV")
@pytest.mark.parametrize("mutation", ["truncate", "flip"])
def test_damaged_video_segment_names_the_segment(folder, mutation):
    # Was av.error.InvalidDataError (at open, or while decoding).
    segments = sorted((folder / "storage/observation.video/segments").iterdir())
    rel = str(segments[-1].relative_to(folder))
    detail = outcome(folder, Mutation(rel, mutation, 0 if mutation == "truncate" else 48, 3))
    assert_format_error(detail, rel)


def test_short_memmap_file_is_a_format_error(folder):
    # Was "ValueError: mmap length is greater than file size" wrapped without the file's name.
    rel = "storage/observation.joints/data.bin"
    assert_format_error(outcome(folder, Mutation(rel, "truncate", 32)), rel, "truncated")


def test_storage_json_with_a_broken_space_names_the_file(folder):
    # "type" -> "txpe" in the stored space: was "a space's JSON form needs a 'type' field", no file.
    rel = "storage/observation.png/storage.json"
    raw = (folder / rel).read_bytes()
    offset = raw.index(b'"type"', raw.index(b'"space"')) + 2
    assert_format_error(outcome(folder, Mutation(rel, "flip", offset, 0)), rel)


def test_metadata_space_that_differs_from_the_storage_names_trajstore_json(folder):
    # A changed key of the space in trajstore.json: was named only as the buffer folder.
    raw = (folder / "trajstore.json").read_bytes()
    offset = raw.index(b'"joints"') + 1
    assert_format_error(outcome(folder, Mutation("trajstore.json", "flip", offset, 1)), "trajstore.json")


def test_episode_past_the_last_step_is_a_format_error(folder, tmp_path):
    import shutil

    copy = tmp_path / "rb"
    shutil.copytree(folder, copy)
    from tests.replay_buffer.log_backdoor import rewrite_last_record

    total = json.loads((copy / "trajstore.json").read_text())["ring"]["total"]
    rewrite_last_record(copy, stop=total + 5)  # the episode table lives in the log (format 3)
    with pytest.raises(FormatError, match="trajstore.json.*inconsistent episode table"):
        ReplayBuffer.load_from(copy)


def test_stats_file_that_does_not_fit_names_stats_json(folder, tmp_path):
    import shutil

    copy = tmp_path / "rb"
    shutil.copytree(folder, copy)
    stats = json.loads((copy / "stats.json").read_text())
    stats["leaves"] = {}
    (copy / "stats.json").write_text(json.dumps(stats))
    with ReplayBuffer.load_from(copy) as rb, pytest.raises(FormatError, match="stats.json"):
        rb.stats()


def test_a_damaged_file_is_not_retried_as_a_race(folder, tmp_path, monkeypatch):
    # sample() draws again only after a StaleReadError; a damaged file must fail on the first read.
    import shutil

    copy = tmp_path / "rb"
    shutil.copytree(folder, copy)
    for chunk in (copy / "storage/observation.jpeg/chunks").iterdir():
        chunk.write_bytes(b"\0" * chunk.stat().st_size)
    with ReplayBuffer.load_from(copy) as rb:
        reads = []
        read = rb.storage.read
        monkeypatch.setattr(rb.storage, "read", lambda sel: reads.append(sel) or read(sel))
        with pytest.raises(FormatError, match="observation.jpeg/chunks/.*slot"):
            rb.sample(4, rng=np.random.default_rng(0))
        assert len(reads) == 1


def test_damage_seen_while_the_writer_overwrote_the_steps_is_a_stale_read(tmp_path):
    # A reader whose read failed while the writer reused those slots gets StaleReadError (index again).
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"x": BoxSpace(-1e9, 1e9, (), np.float32)})
    writer = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacity=8,
                                 **dict_storage_kwargs_from_space(space))
    writer.extend({"x": np.arange(8, dtype=np.float32)})
    writer.flush()
    reader = ReplayBuffer.load_from(tmp_path / "rb")

    def torn(sel):  # the writer overwrites the oldest steps while this read is under way
        writer.extend({"x": np.arange(8, 12, dtype=np.float32)})
        writer.flush()
        raise FormatError("looks damaged")

    reader.storage.read = torn
    with pytest.raises(StaleReadError) as info:
        reader[0]
    assert isinstance(info.value.__cause__, FormatError)
    reader.storage.read = lambda sel: (_ for _ in ()).throw(FormatError("really damaged"))
    with pytest.raises(FormatError, match="really damaged"):
        reader[0]  # nothing moved: damage, not a race
    reader.close()
    writer.close()
