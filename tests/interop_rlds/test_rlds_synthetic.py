"""Datasets written here from the wire format up: JPEG cameras, grey and 16-bit depth images, integer
tensors, per-step text, several splits and a custom shard template."""

import io
import json

import numpy as np
import pytest
from PIL import Image

from trajstore.errors import FormatError
from trajstore.interop.rlds import import_rlds
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, TextSpace

from tests.interop_rlds.records import as_dict, example, payloads, record

P = "tensorflow_datasets.core.features."


def tensor(dtype, *dims, cls="tensor_feature.Tensor"):
    return {"pythonClassName": P + cls, "tensor": {"dtype": dtype, "encoding": "none",
                                                   "shape": {"dimensions": [str(d) for d in dims]} if dims else {}}}


def image(dtype, h, w, c, fmt):
    return {"pythonClassName": P + "image_feature.Image",
            "image": {"dtype": dtype, "encodingFormat": fmt, "shape": {"dimensions": [str(h), str(w), str(c)]}}}


def fdict(children):
    return {"pythonClassName": P + "features_dict.FeaturesDict", "featuresDict": {"features": children}}


FEATURES = fdict({
    "steps": {"pythonClassName": P + "dataset_feature.Dataset", "sequence": {"length": "-1", "feature": fdict({
        "is_first": tensor("bool", cls="scalar.Scalar"), "is_last": tensor("bool", cls="scalar.Scalar"),
        "observation": fdict({"rgb": image("uint8", 8, 6, 3, "jpeg"), "grey": image("uint8", 8, 6, 1, "png"),
                              "depth": image("uint16", 8, 6, 1, "png"), "joints": tensor("int32", 2, 3)}),
        "count": tensor("uint8", cls="scalar.Scalar"),
        "note": {"pythonClassName": P + "text_feature.Text", "text": {}},
    })}},
    "episode_metadata": fdict({"success": tensor("bool", cls="scalar.Scalar"), "score": tensor("float32"),
                               "ids": tensor("int64", 2)}),
})


def encode(arr, fmt):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return buf.getvalue()


def rgb(e, t):
    return np.full((8, 6, 3), (10 * e + 20 * t) % 256, np.uint8)


def grey(e, t):
    return (np.arange(48, dtype=np.uint8).reshape(8, 6) + e + t)


def depth(e, t):
    return (np.arange(48, dtype=np.uint16).reshape(8, 6) * 1000 + e * 7 + t)


def episode(e, T):
    return example({
        "steps/is_first": ("int64", [1] + [0] * (T - 1)), "steps/is_last": ("int64", [0] * (T - 1) + [1]),
        "steps/observation/rgb": ("bytes", [encode(rgb(e, t), "JPEG") for t in range(T)]),
        "steps/observation/grey": ("bytes", [encode(grey(e, t), "PNG") for t in range(T)]),
        "steps/observation/depth": ("bytes", [encode(depth(e, t), "PNG") for t in range(T)]),
        "steps/observation/joints": ("int64", [(-1) ** t * (e * 100 + t * 6 + j) for t in range(T) for j in range(6)]),
        "steps/count": ("int64", [t * 50 % 256 for t in range(T)]),
        "steps/note": ("bytes", [("é" * (t % 3)).encode() for t in range(T)]),
        "episode_metadata/success": ("int64", [e % 2]),
        "episode_metadata/score": ("float", [e / 2]),
        "episode_metadata/ids": ("int64", [e, -e]),
    })


def write(root, splits, template=None):
    root.mkdir(parents=True)
    info = {"name": "syn", "version": "0.1.0", "fileFormat": "tfrecord", "splits": []}
    for split, shards in splits.items():
        entry = {"name": split, "shardLengths": [str(len(s)) for s in shards]}
        if template:
            entry["filepathTemplate"] = template
        info["splits"].append(entry)
        for i, eps in enumerate(shards):
            name = (template or "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}").format(
                DATASET="syn", SPLIT=split, FILEFORMAT="tfrecord", SHARD_X_OF_Y=f"{i:05d}-of-{len(shards):05d}",
                SHARD_INDEX=f"{i:05d}", NUM_SHARDS=f"{len(shards):05d}")
            (root / name).write_bytes(b"".join(record(episode(e, T)) for e, T in eps))
    (root / "dataset_info.json").write_text(json.dumps(info))
    (root / "features.json").write_text(json.dumps(FEATURES))
    return root


def test_other_images_tensors_text_and_splits(tmp_path):
    write(tmp_path / "syn" / "0.1.0", {"train": [[(0, 3), (1, 5)]], "val": [[(2, 4)], [(3, 2)]]},
          template="{DATASET}_{SPLIT}_{SHARD_INDEX}_of_{NUM_SHARDS}.{FILEFORMAT}")
    s = import_rlds(tmp_path / "syn", tmp_path / "rb", split="val", progress=True)
    assert (s.episodes, s.steps) == (2, 6)
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    sp = rb.space
    assert dict(sp.metadata) == {"rlds": {"name": "syn", "version": "0.1.0", "split": "val"}}
    assert dict(sp["observation"]["rgb"].metadata) == {"kind": "image", "layout": "HWC", "fps": 10}
    assert sp["observation"]["grey"].shape == (8, 6, 1) and "kind" not in dict(sp["observation"]["grey"].metadata)
    assert sp["observation"]["depth"].dtype == np.uint16
    assert isinstance(sp["count"], BoxSpace) and sp["count"].dtype == np.uint8 and sp["count"].shape == ()
    assert isinstance(sp["note"], TextSpace) and sp["note"].max_length == 2
    assert sp["observation"]["joints"].dtype == np.int32 and sp["observation"]["joints"].shape == (2, 3)
    assert "is_first" not in sp.spaces and "is_last" not in sp.spaces
    for k, (e, T) in enumerate([(2, 4), (3, 2)]):
        ep = rb.episode(k)
        assert ep.data == {"success": bool(e % 2), "score": e / 2, "ids": [e, -e], "rlds_index": k}
        b = rb[ep.start:ep.stop]
        for t in range(T):
            assert np.abs(b["observation"]["rgb"][t].astype(int) - rgb(e, t)).max() <= 3
            assert np.array_equal(b["observation"]["grey"][t][..., 0], grey(e, t))
            assert np.array_equal(b["observation"]["depth"][t][..., 0], depth(e, t))
            assert b["observation"]["joints"][t].ravel().tolist() == [(-1) ** t * (e * 100 + t * 6 + j)
                                                                      for j in range(6)]
            assert b["count"][t] == t * 50 % 256 and b["note"][t] == "é" * (t % 3)
            # no is_terminal declared: never terminated; is_last alone marks a time-limit end
            assert not b["terminated"][t] and bool(b["truncated"][t]) is (t == T - 1)


def test_integer_outside_its_dtype(tmp_path):
    root = write(tmp_path / "syn" / "0.1.0", {"train": [[(0, 2)]]})
    shard = next(root.glob("syn-train*"))
    f = as_dict(payloads(shard)[0])
    f["steps/count"] = ("int64", [0, 256])
    shard.write_bytes(record(example(f)))
    with pytest.raises(FormatError, match=r"'steps/count' holds 256, outside uint8"):
        import_rlds(root, tmp_path / "rb")
    assert not (tmp_path / "rb").exists()
