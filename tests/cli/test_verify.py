"""verify_buffer and `trajstore verify PATH`: damage is found, named and reported (exit 1), never a traceback."""

import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.cli.buffers import make_buffer
from trajstore.cli.main import app
from trajstore.errors import FormatError
from trajstore.ops import verify_buffer

runner = CliRunner()


def chunk_files(folder):
    return sorted((folder / "storage" / "observation.pixels" / "chunks").glob("*.bin"))


@pytest.fixture
def buffer(tmp_path):
    # Small chunks: the frames spread over several chunk files.
    path = make_buffer(tmp_path / "rb", depth=True)
    return path


def test_a_whole_buffer_is_ok_and_every_step_was_decoded(buffer):
    report = verify_buffer(buffer)
    assert report.ok, report.problems
    assert (report.steps, report.episodes, report.final_observations) == (27, 4, 4)
    by_folder = {os.path.relpath(s.folder, buffer): s.steps_read for s in report.storages}
    assert by_folder == {"storage/observation.pixels": 27, "storage/observation.depth": 27, "storage/@rest": 27,
                         "final_observations/pixels": 4, "final_observations/depth": 4,
                         "final_observations/@rest": 4}


def test_a_deleted_chunk_file_is_found(buffer):
    chunks = chunk_files(buffer)
    assert chunks
    chunks[0].unlink()
    report = verify_buffer(buffer)
    assert not report.ok
    assert any(str(chunks[0]) in p.line() and "missing" in p.what for p in report.problems), report.problems
    # The other storages were still checked in full.
    assert {os.path.relpath(s.folder, buffer): s.steps_read for s in report.storages}["storage/@rest"] == 27


def test_a_truncated_chunk_file_is_found(buffer):
    chunk = chunk_files(buffer)[-1]
    size = chunk.stat().st_size
    os.truncate(chunk, size // 2)
    report = verify_buffer(buffer)
    assert not report.ok
    assert any("truncated" in p.what for p in report.problems), report.problems


@pytest.mark.parametrize("keep, message", [(0.5, "data.h5 is truncated"), (0.01, "data.h5 is truncated")])
def test_a_truncated_hdf5_file_is_found(buffer, keep, message):
    h5 = buffer / "storage" / "@rest" / "data.h5"
    os.truncate(h5, int(h5.stat().st_size * keep))
    report = verify_buffer(buffer)
    assert not report.ok
    assert any(p.where == str(buffer / "storage" / "@rest") and message in p.what
               for p in report.problems), report.problems


def test_garbage_in_a_frame_is_found(buffer):
    chunk = chunk_files(buffer)[0]
    data = bytearray(chunk.read_bytes())
    data[8:64] = b"\x00" * 56  # inside the first PNG's header and first chunk
    chunk.write_bytes(bytes(data))
    report = verify_buffer(buffer)
    assert not report.ok and any("cannot be read" in p.what for p in report.problems), report.problems


def test_a_lost_index_record_is_found(buffer):
    index = buffer / "storage" / "observation.depth" / "index.log"
    os.truncate(index, index.stat().st_size - 32 * 3)  # the last three records: those steps would read as zeros
    report = verify_buffer(buffer)
    assert any("holds 24 slots but the metadata commits 27 steps" in p.what for p in report.problems), \
        report.problems


def test_an_unwritten_ring_slot_is_found(tmp_path):
    path = make_buffer(tmp_path / "rb", capacity=40)  # 27 of 40 slots held
    index = path / "storage" / "observation.pixels" / "index.log"
    with open(index, "ab") as f:  # mark held slot 5 unwritten again: (slot, file_id=-1, 0, 0)
        f.write(np.array([5, -1, 0, 0], "<i8").tobytes())
    report = verify_buffer(path)
    assert any("steps 0..26: 1 held step(s) are missing from its index" in p.what for p in report.problems), \
        report.problems


def test_an_episode_table_past_the_steps_is_found(buffer):
    from tests.replay_buffer.log_backdoor import rewrite_last_record

    rewrite_last_record(buffer, stop=lambda stop: stop + 5)
    report = verify_buffer(buffer)
    assert any("past the 27 steps appended" in p.what for p in report.problems), report.problems


def test_a_deleted_video_segment_is_found(tmp_path):
    pytest.importorskip("av")
    path = make_buffer(tmp_path / "rb", camera="video")
    segments = sorted((path / "storage" / "observation.pixels" / "segments").glob("*.mp4"))
    assert len(segments) >= 2
    segments[1].unlink()
    report = verify_buffer(path)
    assert any(str(segments[1]) in p.line() for p in report.problems), report.problems
    assert verify_buffer(make_buffer(tmp_path / "whole", camera="video")).ok


def test_not_a_buffer_folder_raises(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(FormatError, match="is not a trajstore buffer folder: it is a file"):
        verify_buffer(tmp_path / "file.txt")
    with pytest.raises(FormatError, match="has no trajstore.json .* does not exist"):
        verify_buffer(tmp_path)


def test_cli_exit_codes_and_report(buffer, tmp_path):
    result = runner.invoke(app, ["verify", str(buffer), "--no-progress"])
    assert result.exit_code == 0 and "no damage found" in result.output, result.output
    result = runner.invoke(app, ["verify", str(buffer), "--json", "--no-progress"])
    assert result.exit_code == 0 and json.loads(result.output)["ok"] is True
    chunk_files(buffer)[0].unlink()
    result = runner.invoke(app, ["verify", str(buffer), "--no-progress"])
    assert result.exit_code == 1 and "DAMAGED" in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    result = runner.invoke(app, ["verify", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and result.output.strip() == f"error: {tmp_path / 'nowhere'} is not a trajstore " \
                                                              "buffer folder: it does not exist"
