"""Hostile RLDS datasets found by testers: decompression bombs, JSON paths that are not files, JSON values of
the wrong type, absurd shard lists, unpacked number lists, wide text, odd numbers. Each is refused with a
FormatError naming the file / record / key before the buffer folder appears, or imported exactly."""

import json
import os
import struct
import tracemalloc
import zlib

import numpy as np
import pytest

from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.interop.rlds import import_rlds
from trajstore.interop.rlds._example import parse_example
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import TextSpace

from tests.interop_rlds.records import SHARDS, copy_fixture, field, rewrite
from tests.interop_rlds.test_rlds_hostile import refused


def edit_json(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def step_features(doc):
    return doc["featuresDict"]["features"]["steps"]["sequence"]["feature"]["featuresDict"]["features"]


def image_entry(doc):
    return step_features(doc)["observation"]["featuresDict"]["features"]["image"]["image"]


def png_header(w, h):
    """A PNG of only a signature, an IHDR declaring w x h RGB and an IEND: a bomb's header, no pixels."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IEND", b"")


# 1. images: a per-frame bound on the declared shape, the header checked before decoding, Pillow's errors

def test_declared_image_beyond_the_frame_bound(tmp_path):
    b = copy_fixture(tmp_path)
    edit_json(b / "features.json", lambda d: image_entry(d)["shape"].__setitem__("dimensions", ["5000", "5000", "3"]))
    refused(b, tmp_path, r"features.json: 'steps/observation/image': an Image of shape \(5000, 5000, 3\) \(uint8\) "
                         r"is 75000000 bytes decoded, more than the 67108864")


def test_bomb_header_refused_unread(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 1, lambda f: f["steps/observation/image"][1].__setitem__(4, png_header(30000, 30000)))
    refused(b, tmp_path, rf"{SHARDS[0]}: record 1: 'steps/observation/image' step 4: an image that cannot be "
                         r"read: .*decompression bomb")


def test_uint16_image_message_names_the_place_once(tmp_path):
    b = copy_fixture(tmp_path)
    edit_json(b / "features.json", lambda d: image_entry(d).__setitem__("dtype", "uint16"))
    with pytest.raises(FormatError, match=r"step 0: a RGB image, a 16-bit grey image expected") as info:
        import_rlds(b, tmp_path / "out", camera="png")
    assert str(info.value).count(": record ") == 1 and str(info.value).count("step 0") == 1
    assert not (tmp_path / "out").exists()
    b = copy_fixture(tmp_path / "2")
    edit_json(b / "features.json", lambda d: image_entry(d).update(dtype="uint16", encodingFormat="jpeg"))
    refused(b, tmp_path / "2", r"a uint16 Image encoded as jpeg", exc=UnsupportedSpaceError)


# 2. every JSON / shard path must be a regular file

@pytest.mark.parametrize("what", ["folder", "fifo"])
def test_features_json_not_a_regular_file(tmp_path, what):
    b = copy_fixture(tmp_path)
    (b / "features.json").unlink()
    (b / "features.json").mkdir() if what == "folder" else os.mkfifo(b / "features.json")
    refused(b, tmp_path, r"features.json is not a regular file")


def test_shard_not_a_regular_file(tmp_path):
    b = copy_fixture(tmp_path)
    (b / SHARDS[1]).unlink()
    (b / SHARDS[1]).mkdir()
    refused(b, tmp_path, rf"{SHARDS[1]} is not a regular file \(shard 1 of split 'train'\)")


# 4, 5. dataset_info.json and features.json values of the wrong type; shard lists

def _info(b, **entry):
    edit_json(b / "dataset_info.json", lambda d: d["splits"][0].update(entry))


@pytest.mark.parametrize("lengths, said", [
    ("21", r"shardLengths '21' is not a list of integers"),
    ([2.7, 1.2], r"a shardLengths entry 2.7 is not an integer"),
    ([True, True], r"a shardLengths entry True is not an integer"),
    (["2", 10 ** 30], r"a shardLengths entry 1000000000000000000000000000000 is not an integer"),
    ([0, 0], r"holds no episode"),
    ([], r"shardLengths lists 0 shards"),
])
def test_shard_lengths_of_the_wrong_type(tmp_path, lengths, said):
    b = copy_fixture(tmp_path)
    _info(b, shardLengths=lengths)
    refused(b, tmp_path, r"dataset_info.json: split 'train':? " + said)


def test_shard_length_infinity(tmp_path):
    b = copy_fixture(tmp_path)
    text = (b / "dataset_info.json").read_text()
    (b / "dataset_info.json").write_text(text.replace('"2",', "Infinity,"))
    refused(b, tmp_path, r"split 'train': a shardLengths entry inf is not an integer")


def test_too_many_or_repeated_shards_and_split_twice(tmp_path):
    b = copy_fixture(tmp_path)
    (b / "empty").write_bytes(b"")
    _info(b, shardLengths=[0] * 100_001, filepathTemplate="empty")
    refused(b, tmp_path, r"shardLengths lists 100001 shards \(1 to 100000 expected\)")
    b = copy_fixture(tmp_path / "2")
    _info(b, filepathTemplate="{DATASET}-{SPLIT}.{FILEFORMAT}-00000-of-00002")
    refused(b, tmp_path / "2", r"names one file for several of its 2 shards")
    b = copy_fixture(tmp_path / "3")
    edit_json(b / "dataset_info.json", lambda d: d["splits"].append(dict(d["splits"][0])))
    refused(b, tmp_path / "3", r"dataset_info.json: split 'train' is listed twice")


@pytest.mark.parametrize("change, said", [
    (lambda d: step_features(d)["action"].__setitem__("tensor", []), r"'steps/action': 'tensor' is a list"),
    (lambda d: step_features(d)["observation"]["featuresDict"]["features"]["image"].__setitem__("image", "x"),
     r"'steps/observation/image': 'image' is a str, an object expected"),
    (lambda d: step_features(d)["action"]["tensor"]["shape"].__setitem__("dimensions", [10 ** 30]),
     r"'steps/action': a dimension 1000000000000000000000000000000 is not an integer"),
    (lambda d: step_features(d)["action"]["tensor"]["shape"].__setitem__("dimensions", ["7.0"]),
     r"'steps/action': a dimension '7.0' is not an integer"),
    (lambda d: step_features(d)["action"]["tensor"].__setitem__("dtype", 3), r"'steps/action': dtype 3 is not"),
])
def test_features_json_values_of_the_wrong_type(tmp_path, change, said):
    b = copy_fixture(tmp_path)
    edit_json(b / "features.json", change)
    refused(b, tmp_path, r"features.json: " + said)


def test_dimension_infinity(tmp_path):
    b = copy_fixture(tmp_path)
    edit_json(b / "features.json", lambda d: step_features(d)["action"]["tensor"]["shape"].__setitem__(
        "dimensions", ["INF"]))
    (b / "features.json").write_text((b / "features.json").read_text().replace('"INF"', "Infinity"))
    refused(b, tmp_path, r"features.json: 'steps/action': a dimension inf is not an integer")


# 3. unpacked number lists: the values, without an object per value

def _unpacked(n):
    ints = field(3, 2, b"".join(field(1, 0, v) for v in [3, 2 ** 64 - 1] * (n // 2))
                 + field(1, 2, bytes([5, 0x80, 0x01])))  # a packed chunk after unpacked values: 5, 128
    floats = field(2, 2, b"".join(field(1, 5, struct.pack("<f", v)) for v in [0.5, -2.0] * (n // 2))
                   + field(1, 2, struct.pack("<2f", 7.0, 8.0)))
    entries = b"".join(field(1, 2, field(1, 2, k) + field(2, 2, v)) for k, v in ((b"i", ints), (b"f", floats)))
    return field(1, 2, entries)


def test_unpacked_lists_values():
    n = 1000
    parsed = parse_example(_unpacked(n), "test")
    assert parsed["i"].values.tolist() == [3, -1] * (n // 2) + [5, 128]
    assert parsed["f"].values.tolist() == [0.5, -2.0] * (n // 2) + [7.0, 8.0]
    assert parsed["i"].values.dtype == np.int64 and parsed["f"].values.dtype == np.float32


@pytest.mark.slow
@pytest.mark.parametrize("kind, value, bound", [(3, (0, 0), 12), (2, (5, b"\0\0\0\0"), 12), (1, (2, b"ab"), 6)])
def test_unpacked_lists_parse_in_bounded_memory(kind, value, bound):
    """Peak memory per byte of the record: the int64 result is 4x of 2-byte varints, 8 bytes per bytes value
    of 4 bytes 2x; an array or a bytes object per value cost more than 10x."""
    n = 200_000
    values = field(kind, 2, b"".join(field(1, *value) for _ in range(n)))
    payload = field(1, 2, field(1, 2, field(1, 2, b"x") + field(2, 2, values)))
    tracemalloc.start()
    try:
        parsed = parse_example(payload, "test")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(parsed["x"]) == n
    assert list(parsed["x"].values[:: n // 4]) == ([b"ab"] if kind == 1 else [0]) * 4
    assert peak < bound * len(payload)


# 6. text: the leaf as wide as the imported episodes' texts

def test_text_width_from_the_imported_episodes(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 0, lambda f: f["steps/language_instruction"][1].__setitem__(1, b"x" * 3000))  # episode 1
    rewrite(b, 1, 0, lambda f: f["steps/language_instruction"][1].__setitem__(1, b"turn"))  # episode 0
    import_rlds(b, tmp_path / "rb", episodes=[1, 2], camera="png")  # stored 1, 2: episodes 2 and 0
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    leaf = rb.space["language_instruction"]
    assert isinstance(leaf, TextSpace) and leaf.max_length == len("task 2")
    ep = rb.episode(1)
    assert rb[ep.start:ep.stop]["language_instruction"].tolist() == ["task 0", "turn"] + ["task 0"] * 10
    assert ep.data["task"] == ["task 0", "turn"]


# 7. boundaries that are not bools, float16 overflow, NaN found before anything is written

@pytest.mark.parametrize("value", [-1, 2])
def test_is_first_not_a_bool(tmp_path, value):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 0, lambda f: f["steps/is_first"][1].__setitem__(0, value))
    refused(b, tmp_path, rf"record 0: 'steps/is_first' holds {value} at step 0 \(a bool: 0 or 1 expected\)")


def test_float16_overflow_refused(tmp_path):
    b = copy_fixture(tmp_path)
    edit_json(b / "features.json", lambda d: step_features(d)["reward"]["tensor"].__setitem__("dtype", "float16"))
    rewrite(b, 0, 1, lambda f: f["steps/reward"][1].__setitem__(3, 1e30))
    refused(b, tmp_path, r"record 1: 'steps/reward' holds 1.0000000150474662e\+30 \(value 3\), beyond the range "
                         r"of its dtype float16")


def test_nan_step_value_found_in_the_check_pass(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 1, 0, lambda f: f["steps/observation/state"][1].__setitem__(8 * 5 + 2, float("nan")))
    refused(b, tmp_path, rf"{SHARDS[1]}: record 0: 'steps/observation/state' is NaN at step 5")
