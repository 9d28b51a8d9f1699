"""Damaged and hostile RLDS datasets are refused (FormatError naming the file, record and key) before the
buffer folder appears; odd but valid content (nested metadata, a changing instruction) imports."""

import io
import shutil
import json

import numpy as np
import pytest
from PIL import Image

from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.interop.rlds import import_rlds
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import TextSpace

from tests.interop_rlds.records import SHARDS, copy_fixture, payloads, record, rewrite


P = "tensorflow_datasets.core.features."


def refused(builder, tmp_path, match, exc=FormatError, **kw):
    out = tmp_path / "out"
    with pytest.raises(exc, match=match):
        import_rlds(builder, out, **kw)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no staging left


def png(w, h):
    buf = io.BytesIO()
    Image.fromarray(np.zeros((h, w, 3), np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def test_record_longer_than_the_file(tmp_path):
    b = copy_fixture(tmp_path)
    shard = b / SHARDS[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    refused(b, tmp_path, rf"{SHARDS[0]}: record 1: declares \d+ payload bytes, the file has \d+ left")


def test_bad_payload_crc(tmp_path):
    b = copy_fixture(tmp_path)
    shard = b / SHARDS[1]
    data = bytearray(shard.read_bytes())
    data[40] ^= 0xFF
    shard.write_bytes(bytes(data))
    refused(b, tmp_path, rf"{SHARDS[1]}: record 0: the payload's CRC32C does not match")


def test_bad_protobuf_length(tmp_path):
    b = copy_fixture(tmp_path)
    payload = payloads(b / SHARDS[1])[0]
    (b / SHARDS[1]).write_bytes(record(payload[:2] + b"\xff\xff\xff\x0f" + payload[6:]))
    refused(b, tmp_path, rf"{SHARDS[1]}: record 0.*(declares|runs past)")


def test_count_disagrees_with_steps(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 0, lambda f: f["steps/action"][1].pop())
    refused(b, tmp_path, r"record 0: 'steps/action' holds 139 values, 20 steps x 7 \(140\) expected")


def test_text_count_disagrees(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 1, lambda f: f["steps/language_instruction"][1].append(b"x"))
    refused(b, tmp_path, r"record 1: 'steps/language_instruction' holds 8 values, one text per step \(7\)")


@pytest.mark.parametrize("key, at, said", [("steps/is_first", 5, r"'steps/is_first' is true at steps \[0, 5\]"),
                                           ("steps/is_last", 3, r"'steps/is_last' is true at steps \[3, 19\]")])
def test_boundaries_elsewhere(tmp_path, key, at, said):
    b = copy_fixture(tmp_path)

    def change(f):
        f[key][1][at] = 1

    rewrite(b, 0, 0, change)
    refused(b, tmp_path, said)


def test_image_of_another_size(tmp_path):
    b = copy_fixture(tmp_path)

    def change(f):
        f["steps/observation/image"][1][4] = png(32, 64)

    rewrite(b, 0, 1, change)
    refused(b, tmp_path, r"record 1: 'steps/observation/image' step 4: a 32x64 \(WxH\) image, features.json "
                         r"declares 64x64")


def test_not_an_image(tmp_path):
    b = copy_fixture(tmp_path)

    def change(f):
        f["steps/observation/image"][1][0] = b"GIF89a not really"

    rewrite(b, 1, 0, change)
    refused(b, tmp_path, r"record 0: 'steps/observation/image' step 0: an image that cannot be read")


def test_undecodable_pixels_found_while_copying(tmp_path):
    b = copy_fixture(tmp_path)

    def change(f):
        good = f["steps/observation/image"][1][2]
        f["steps/observation/image"][1][2] = good[:60] + b"\0" * 40  # header intact, data broken

    rewrite(b, 1, 0, change)
    refused(b, tmp_path, r"step 2: an image that cannot be decoded", camera="png")


def test_wrong_list_kind_missing_feature_bad_bool(tmp_path):
    b = copy_fixture(tmp_path)
    rewrite(b, 0, 0, lambda f: f.__setitem__("steps/action", ("int64", [0] * 140)))
    refused(b, tmp_path, r"'steps/action' is stored as int64_list, a tensor of float32 as float_list")
    b = copy_fixture(tmp_path / "2")
    rewrite(b, 0, 0, lambda f: f.pop("steps/reward"))
    refused(b, tmp_path / "2", r"record 0: has no feature 'steps/reward'")
    b = copy_fixture(tmp_path / "3")
    rewrite(b, 0, 0, lambda f: f["steps/is_terminal"][1].__setitem__(3, 2))
    refused(b, tmp_path / "3", r"'steps/is_terminal' is bool, holds 2 \(0 or 1 expected\)")
    b = copy_fixture(tmp_path / "4")
    rewrite(b, 0, 0, lambda f: f.pop("steps/is_first"))
    refused(b, tmp_path / "4", r"'steps/is_first' is missing")


def test_missing_shard_and_record_count(tmp_path):
    b = copy_fixture(tmp_path)
    (b / SHARDS[1]).unlink()
    refused(b, tmp_path, rf"shard {SHARDS[1]} of split 'train' is missing \(2 shards declared\)")
    b = copy_fixture(tmp_path / "2")
    (b / SHARDS[1]).write_bytes((b / SHARDS[0]).read_bytes())
    refused(b, tmp_path / "2", rf"{SHARDS[1]}: holds more than the 1 records")
    b = copy_fixture(tmp_path / "3")
    (b / SHARDS[0]).write_bytes(record(payloads(b / SHARDS[0])[0]))
    refused(b, tmp_path / "3", rf"{SHARDS[0]}: holds 1 records, dataset_info.json declares 2")


def _edit_json(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_shard_path_outside_src(tmp_path):
    b = copy_fixture(tmp_path)
    (tmp_path / "rlds_sim" / "rlds_sim-train.tfrecord-00000-of-00002").write_bytes(b"")
    _edit_json(b / "dataset_info.json",
               lambda d: d["splits"][0].__setitem__("filepathTemplate", "../{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"))
    refused(b, tmp_path, r"the path '\.\./rlds_sim-train.tfrecord-00000-of-00002' leads outside")
    _edit_json(b / "dataset_info.json", lambda d: d["splits"][0].__setitem__("filepathTemplate", "{OTHER}"))
    refused(b, tmp_path, r"filepathTemplate '\{OTHER\}' uses \{OTHER\}")


def test_not_a_dataset_and_several_versions(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match="no dataset_info.json"):
        import_rlds(tmp_path / "empty", tmp_path / "out")
    copy_fixture(tmp_path)

    shutil.copytree(tmp_path / "rlds_sim" / "1.0.0", tmp_path / "rlds_sim" / "1.1.0")
    with pytest.raises(FormatError, match=r"holds 2 versions \(1.0.0, 1.1.0\); give one of them"):
        import_rlds(tmp_path / "rlds_sim", tmp_path / "out")
    with pytest.raises(FileNotFoundError):
        import_rlds(tmp_path / "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_features_json_refusals(tmp_path):
    b = copy_fixture(tmp_path)
    steps = ["featuresDict", "features", "steps", "sequence", "feature", "featuresDict", "features"]

    def at(doc):
        for k in steps:
            doc = doc[k]
        return doc

    _edit_json(b / "features.json", lambda d: at(d)["action"]["tensor"]["shape"].__setitem__("dimensions", ["-1"]))
    refused(b, tmp_path, r"'steps/action': has a dynamic shape", exc=UnsupportedSpaceError)
    b = copy_fixture(tmp_path / "2")
    _edit_json(b / "features.json", lambda d: at(d)["action"].__setitem__(
        "pythonClassName", "tensorflow_datasets.core.features.class_label_feature.ClassLabel"))
    refused(b, tmp_path / "2", r"'steps/action': a ClassLabel feature", exc=UnsupportedSpaceError)
    b = copy_fixture(tmp_path / "3")
    _edit_json(b / "features.json", lambda d: d["featuresDict"]["features"].pop("steps"))
    refused(b, tmp_path / "3", r"no 'steps' feature")

    def deep(d):
        node = at(d)
        for _ in range(20):
            node["x"] = {"pythonClassName": "FeaturesDict", "featuresDict": {"features": {}}}
            node = node["x"]["featuresDict"]["features"]

    b = copy_fixture(tmp_path / "4")
    _edit_json(b / "features.json", deep)
    refused(b, tmp_path / "4", r"nested deeper than 16 levels")


def _add_nested_metadata(b, ids):
    _edit_json(b / "features.json", lambda d: d["featuresDict"]["features"]["episode_metadata"]["featuresDict"][
        "features"].__setitem__("extra", {
            "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": {"id": {
                "pythonClassName": "tensorflow_datasets.core.features.scalar.Scalar",
                "tensor": {"dtype": "int64", "encoding": "none", "shape": {}}}}}}))
    for (shard, number), value in ids.items():
        rewrite(b, shard, number, lambda f, v=value: f.__setitem__("episode_metadata/extra/id", ("int64", [v])))


def test_nested_metadata_is_nested_episode_data_and_selectable(tmp_path):
    b = copy_fixture(tmp_path)
    _add_nested_metadata(b, {(0, 0): 7, (0, 1): -3, (1, 0): 2**40})
    import_rlds(b, tmp_path / "rb", episodes="extra.id >= 0")
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    assert [rb.episode(k).data for k in range(2)] == [
        {"file_path": "synthetic/episode_1.npz", "extra": {"id": 7}, "task": "task 1", "rlds_index": 0},
        {"file_path": "synthetic/episode_0.npz", "extra": {"id": 2**40}, "task": "task 0", "rlds_index": 2}]


def test_metadata_named_like_an_import_key(tmp_path):
    b = copy_fixture(tmp_path)
    _edit_json(b / "features.json", lambda d: d["featuresDict"]["features"]["episode_metadata"]["featuresDict"][
        "features"].__setitem__("task", {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                                         "text": {}}))
    for shard, number in ((0, 0), (0, 1), (1, 0)):
        rewrite(b, shard, number, lambda f: f.__setitem__("episode_metadata/task", ("bytes", [b"t"])))
    refused(b, tmp_path, r"episode metadata 'task' has the name of an episode data key the import sets")


def test_changing_instruction_becomes_a_text_leaf(tmp_path):
    b = copy_fixture(tmp_path)

    def change(f):
        f["steps/language_instruction"][1][5:] = [b"then lift it"] * 15

    rewrite(b, 0, 0, change)
    import_rlds(b, tmp_path / "rb", camera="png")
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    sp = rb.space["language_instruction"]
    assert isinstance(sp, TextSpace) and sp.max_length == len("then lift it")
    assert rb.episode(0).data["task"] == ["task 1", "then lift it"]
    assert rb.episode(1).data["task"] == "task 2"
    assert rb[0:20]["language_instruction"].tolist() == ["task 1"] * 5 + ["then lift it"] * 15
    assert rb[20:27]["language_instruction"].tolist() == ["task 2"] * 7


def test_metadata_not_json_and_too_long_text(tmp_path):
    b = copy_fixture(tmp_path)
    _edit_json(b / "features.json", lambda d: d["featuresDict"]["features"]["episode_metadata"]["featuresDict"][
        "features"].__setitem__("score", {"pythonClassName": P + "scalar.Scalar",
                                          "tensor": {"dtype": "float32", "encoding": "none", "shape": {}}}))
    for shard, number in ((0, 0), (0, 1), (1, 0)):
        rewrite(b, shard, number, lambda f: f.__setitem__("episode_metadata/score", ("float", [float("nan")])))
    refused(b, tmp_path, r"record 0: episode metadata: cannot be written as JSON")
    b = copy_fixture(tmp_path / "2")
    rewrite(b, 1, 0, lambda f: f["steps/language_instruction"][1].__setitem__(3, b"x" * 4097))
    refused(b, tmp_path / "2", r"record 0: 'steps/language_instruction' step 3 holds a text of 4097 characters, "
                               r"more than the 4096 a per-step text leaf takes")


def test_image_in_episode_metadata_is_unsupported(tmp_path):
    b = copy_fixture(tmp_path)
    _edit_json(b / "features.json", lambda d: d["featuresDict"]["features"]["episode_metadata"]["featuresDict"][
        "features"].__setitem__("thumb", {"pythonClassName": P + "image_feature.Image", "image": {
            "dtype": "uint8", "encodingFormat": "png", "shape": {"dimensions": ["4", "4", "3"]}}}))
    refused(b, tmp_path, r"'episode_metadata/thumb' is an image per episode", exc=UnsupportedSpaceError)


def test_features_json_symlinked_outside(tmp_path):
    b = copy_fixture(tmp_path)
    outside = tmp_path / "elsewhere.json"
    outside.write_text((b / "features.json").read_text())
    (b / "features.json").unlink()
    (b / "features.json").symlink_to(outside)
    refused(b, tmp_path, r"RLDS features: the path 'features.json' leads outside .* through a symlink")
