"""Hostile or broken input is refused with a FormatError (or FileNotFoundError) naming the file, before
anything is allocated for a declared size and before anything is written; the CLI prints one line, exit 2."""

import io
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
from PIL import Image  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError, StorageExistsError  # noqa: E402
from trajstore.interop.rosbag import import_rosbag  # noqa: E402
from trajstore.interop.rosbag import _source  # noqa: E402

from .bags import T, T0, header, image, write_bag  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rosbag2_mcap"


def nothing_made(tmp_path):
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def copy_bag(tmp_path, b=0):
    bag = Path(shutil.copytree(FIXTURE / f"episode_{b}", tmp_path / "bag"))
    for p in bag.iterdir():
        p.chmod(0o644)
    return bag, bag / f"episode_{b}.mcap"


def first_chunk_offset(data: bytes) -> int:
    """Offset of the first record after the MCAP header record (rosbags writes a chunk there)."""
    (hlen,) = struct.unpack_from("<Q", data, 9)
    return 8 + 9 + hlen


def refused(tmp_path, bags, match, exc=FormatError):
    with pytest.raises(exc, match=match):
        import_rosbag(bags, tmp_path / "out")
    nothing_made(tmp_path)


def test_bad_paths(tmp_path):
    refused(tmp_path, tmp_path / "missing", "missing: no such bag", FileNotFoundError)
    (tmp_path / "notes.txt").write_text("hello")
    refused(tmp_path, tmp_path / "notes.txt", r"notes.txt: not a ROS 2 bag \(expected a rosbag2 folder")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.txt").write_text("x")
    refused(tmp_path, tmp_path / "folder", "folder: not a ROS 2 bag folder")
    with pytest.raises(ValueError, match="at least one bag"):
        import_rosbag([], tmp_path / "out")


def test_not_bags(tmp_path):
    (tmp_path / "x.mcap").write_bytes(b"PK\x03\x04" + bytes(100))
    refused(tmp_path, tmp_path / "x.mcap", "x.mcap: not an MCAP file")
    (tmp_path / "x.db3").write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    refused(tmp_path, tmp_path / "x.db3", "x.db3: not a readable ROS 2 bag")
    bag, _ = copy_bag(tmp_path)
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information: [unclosed")
    refused(tmp_path, bag, "metadata.yaml: not a rosbag2 metadata.yaml")


def test_metadata_paths_stay_in_the_folder_and_size_is_bounded(tmp_path, monkeypatch):
    bag, _ = copy_bag(tmp_path)
    meta = bag / "metadata.yaml"
    text = meta.read_text()
    (tmp_path / "outside.mcap").write_bytes((FIXTURE / "episode_0" / "episode_0.mcap").read_bytes())
    meta.write_text(text.replace("- episode_0.mcap", "- ../outside.mcap"))
    refused(tmp_path, bag, r"lists storage files that are not in the folder: \[.*bag/outside.mcap'\]")
    meta.write_text(text)
    monkeypatch.setattr(_source, "MAX_METADATA_BYTES", 1000)
    refused(tmp_path, bag, r"metadata.yaml: \d+ bytes; a rosbag2 metadata.yaml of at most 1000 bytes")


def test_huge_declared_chunk_sizes(tmp_path):
    bag, mcap = copy_bag(tmp_path)
    data = bytearray(mcap.read_bytes())
    at = first_chunk_offset(data)
    assert data[at] == 0x06
    struct.pack_into("<Q", data, at + 9 + 16, 1 << 40)  # uncompressed_size of the chunk
    mcap.write_bytes(bytes(data))
    refused(tmp_path, bag, r"episode_0.mcap \(record at offset \d+\): a chunk declares .*1099511627776 "
                           "uncompressed\\) .* at most 1073741824")


def test_huge_declared_size_in_the_chunk_index(tmp_path):
    bag, mcap = copy_bag(tmp_path)
    data = bytearray(mcap.read_bytes())
    (summary_start,) = struct.unpack_from("<Q", data, len(data) - 8 - 20)
    at = data.index(bytes([0x08]), summary_start)  # the first chunk index record of the summary
    while data[at] != 0x08 or struct.unpack_from("<Q", data, at + 1 + 8 + 16)[0] != first_chunk_offset(data):
        at = data.index(bytes([0x08]), at + 1)
    body = at + 9
    (nmap,) = struct.unpack_from("<I", data, body + 32)
    p = body + 36 + nmap + 8
    (clen,) = struct.unpack_from("<I", data, p)
    struct.pack_into("<Q", data, p + 4 + clen, 1 << 50)  # compressed_size
    mcap.write_bytes(bytes(data))
    refused(tmp_path, bag, r"a chunk index declares a chunk of 1125899906842624 bytes")


def test_huge_record_length_reads_only_what_the_file_holds(tmp_path):
    """A chunk record declaring 2**62 bytes is taken as cut short: its readable messages are imported (here
    all of them: the whole chunk is still in the file, and metadata.yaml counts no more)."""
    bag, mcap = copy_bag(tmp_path)
    data = bytearray(mcap.read_bytes())
    struct.pack_into("<Q", data, first_chunk_offset(data) + 1, 1 << 62)
    mcap.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="episode_0.mcap ends without its MCAP summary .*every message was read"):
        summary = import_rosbag(bag, tmp_path / "out")
    assert summary.samples["imu"] == 400 and summary.lost == {}


def test_hostile_messages(tmp_path):
    ns = T0
    big = T["sensor_msgs/msg/Image"](header=header(ns), height=100_000, width=100_000, encoding="rgb8",
                                      is_bigendian=0, step=300_000, data=np.zeros(10, np.uint8))
    bag = write_bag(tmp_path / "big", [("/cam", "sensor_msgs/msg/Image", ns, big)])
    refused(tmp_path, bag, r"topic /cam: first message: a frame of 100000 x 100000 pixels")

    short = image(ns, 4, 4, "rgb8", np.zeros((4, 4, 3), np.uint8))
    short.step = 100
    bag = write_bag(tmp_path / "short", [("/cam", "sensor_msgs/msg/Image", ns, short)])
    refused(tmp_path, bag, r"needs 4 rows of >= 12 bytes; the message has step 100 and 48 bytes")

    bayer = image(ns, 4, 4, "bayer_rggb8", np.zeros((4, 4), np.uint8))
    bag = write_bag(tmp_path / "bayer", [("/cam", "sensor_msgs/msg/Image", ns, bayer)])
    refused(tmp_path, bag, r"image encoding 'bayer_rggb8' is not imported")

    junk = T["sensor_msgs/msg/CompressedImage"](header=header(ns), format="jpeg", data=np.arange(50, dtype=np.uint8))
    bag = write_bag(tmp_path / "junk", [("/c", "sensor_msgs/msg/CompressedImage", ns, junk)])
    refused(tmp_path, bag, r"compressed image \('jpeg'\) cannot be decoded")


def huge_png() -> np.ndarray:
    """A 1x1 PNG whose header says 9000 x 9000 (CRC fixed): decoding it would take 243 MB."""
    buf = io.BytesIO()
    Image.fromarray(np.zeros((1, 1, 3), np.uint8)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    struct.pack_into(">II", data, 16, 9000, 9000)
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    return np.frombuffer(bytes(data), np.uint8)


def test_compressed_image_declaring_a_huge_size(tmp_path):
    msg = T["sensor_msgs/msg/CompressedImage"](header=header(T0), format="png", data=huge_png())
    bag = write_bag(tmp_path / "bomb", [("/c", "sensor_msgs/msg/CompressedImage", T0, msg)])
    refused(tmp_path, bag, r"a frame of 9000 x 9000 pixels; 1 to 67108864 pixels are imported")


def test_garbage_message_bytes(tmp_path):
    from rosbags.rosbag2 import Writer

    from .bags import TS

    with Writer(tmp_path / "garbage", version=9) as writer:
        conn = writer.add_connection("/j", "sensor_msgs/msg/JointState", typestore=TS)
        writer.write(conn, T0, b"\x00\x01\x00\x00" + b"\xff" * 12)
    refused(tmp_path, tmp_path / "garbage", r"topic /j: cannot deserialize a sensor_msgs/msg/JointState")


def test_existing_out_is_left_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(StorageExistsError):
        import_rosbag(FIXTURE / "episode_0", out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_cli(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["import", "rosbag", str(tmp_path / "nope"), str(tmp_path / "out")])
    assert result.exit_code == 2 and "error:" in result.output and "no such bag" in result.output
    result = runner.invoke(app, ["import", "rosbag", str(FIXTURE / "episode_0"), str(FIXTURE / "episode_1"),
                                 str(tmp_path / "out"), "--topic", "/camera/image_raw=wrist", "--topic", "/cmd",
                                 "--only", "--stamp", "log", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "imported 2 bags (2 streams, 318 samples)" in result.output
    result = runner.invoke(app, ["import", "rosbag", str(FIXTURE / "episode_0"), str(tmp_path / "out2"),
                                 "--topic", "=x"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["import", "rosbag", str(FIXTURE / "episode_0")])
    assert result.exit_code == 2 and "at least one BAG and the OUT folder" in result.output


def test_zstd_chunk_expanding_beyond_its_declared_size(tmp_path):
    """Bag 1's chunk is zstd: a frame declaring more than the chunk says is refused before rosbags
    decompresses it (what it would allocate)."""
    from backports import zstd

    bag, mcap = copy_bag(tmp_path, 1)
    data = bytearray(mcap.read_bytes())
    at = first_chunk_offset(data)
    body = at + 9
    (usize,) = struct.unpack_from("<Q", data, body + 16)
    (clen,) = struct.unpack_from("<I", data, body + 28)
    start = body + 32 + clen + 8
    assert zstd.get_frame_info(bytes(data[start:start + 18])).decompressed_size == usize
    struct.pack_into("<Q", data, body + 16, usize // 2)  # the chunk now declares half of what its frame holds
    mcap.write_bytes(bytes(data))
    refused(tmp_path, bag, rf"a zstd chunk whose frame holds {usize} bytes, while the chunk declares {usize // 2}")
