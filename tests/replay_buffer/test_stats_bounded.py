"""Statistics of bounded size: the reduction rule (per element for small leaves, per channel for
image-like or marked leaves, else of the whole leaf), ``stats.json`` small for large leaves, values
against NumPy within the documented quantile bound, and version-1 stats files."""

import json

import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer._histogram import MAX_LEAF_BINS
from trajstore.replay_buffer.leaf_stats import LeafAccumulator
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

QUANTILES = {"q01": .01, "q10": .1, "q50": .5, "q90": .9, "q99": .99}
DEPTH = BoxSpace(0, 10, (240, 320), np.float32, metadata={"kind": "depth", "units": "m"})
WIDE = BoxSpace(0, 255, (240, 1280), np.uint8)  # not a camera: no kind


def create(path, space, **kwargs):
    return ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space), **kwargs)


def check_against_numpy(s, x, bins, old=False):
    """``s`` (LeafStats) against ``x`` (float64 rows ``(M, *s.shape)``): moments to float rounding, quantiles
    within ``quantile_error``, which is within the documented ``2 (max - min) / (bins - 2)`` (histograms
    of a version-1 file, ``old``: the ``4 (max - min) / bins`` of their doubling ranges)."""
    assert (s.count == len(x)).all()
    np.testing.assert_array_equal(s.min, x.min(0))
    np.testing.assert_array_equal(s.max, x.max(0))
    np.testing.assert_allclose(s.mean, x.mean(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.std, x.std(0), rtol=1e-8, atol=1e-12)
    for key, p in QUANTILES.items():
        err = np.abs(getattr(s, key) - np.quantile(x, p, axis=0))
        assert (err <= s.quantile_error * (1 + 1e-9) + 1e-12).all(), (s.name, key, err, s.quantile_error)
    bound = 4 * (x.max(0) - x.min(0)) / bins if old else 2 * (x.max(0) - x.min(0)) / (bins - 2)
    assert (s.quantile_error <= bound + 1e-12).all(), s.quantile_error


def test_depth_map_and_wide_uint8_leaf_in_hdf5_keep_stats_json_small_and_correct(tmp_path):
    space = DictSpace({"depth": DEPTH, "wide": WIDE, "joints": BoxSpace(-5, 5, (7,), np.float32)})
    rb = create(tmp_path / "rb", space)
    rng = np.random.default_rng(0)
    episodes = []
    for k in range(3):  # 30 steps; the depth range grows from episode to episode
        ep = {"depth": rng.uniform(0.3, 2.0 + k, (10, 240, 320)).astype(np.float32),
              "wide": rng.integers(0, 256, (10, 240, 1280), dtype=np.uint8),
              "joints": rng.uniform(-5, 5, (10, 7)).astype(np.float32)}
        ep["depth"][:, :8] = 0.0  # an invalid-depth border, as depth cameras give
        rb.extend(ep)
        rb.end_episode()
        episodes.append(ep)
    size = (tmp_path / "rb" / "stats.json").stat().st_size
    episode_bytes = sum(v.nbytes for v in episodes[-1].values())
    assert size < 1 << 20 and size < episode_bytes // 100, (size, episode_bytes)  # the commit's stats work
    data = json.loads((tmp_path / "rb" / "stats.json").read_text())
    assert data["version"] == 2  # trajstore before the rule kept these leaves per element: not its file
    for name, cells, bins in (("depth", 1, 1024), ("wide", 1, 256), ("joints", 7, 1024)):
        leaf = data["leaves"][name]
        assert len(leaf["moments"]["n"]) == cells and len(leaf["histogram"]["low"]) == cells
        assert leaf["histogram"]["bins"] == bins and len(leaf["histogram"]["counts"]) <= cells * bins
    stats = rb.stats()
    rb.close()
    depth = np.concatenate([e["depth"] for e in episodes]).astype(np.float64)
    wide = np.concatenate([e["wide"] for e in episodes]).astype(np.float64)
    joints = np.concatenate([e["joints"] for e in episodes]).astype(np.float64)
    assert (stats["depth"].shape, stats["depth"].reduction, stats["depth"].per_channel) == ((), "whole", False)
    assert (stats["wide"].shape, stats["wide"].reduction) == ((), "whole")
    assert (stats["joints"].shape, stats["joints"].reduction) == ((7,), "per_element")
    check_against_numpy(stats["depth"], depth.reshape(-1), 1024)
    check_against_numpy(stats["wide"], wide.reshape(-1), 256)
    assert (stats["wide"].quantile_error == 0).all()  # one bin per byte value: exact
    check_against_numpy(stats["joints"], joints, 1024)
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:  # the committed statistics, as the writer had them
        theirs = reader.stats()
        assert {k: v.to_json() for k, v in theirs.items()} == {k: v.to_json() for k, v in stats.items()}


@pytest.mark.parametrize("leaf,shape,broadcast,reduction", [
    (BoxSpace(0, 1, (8, 6, 3), np.float32, metadata={"kind": "image", "layout": "HWC"}), (3,), (3,), "per_channel"),
    (BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image"}), (3,), (3,), "per_channel"),
    (BoxSpace(0, 1, (2, 8, 6), np.float32, metadata={"kind": "image", "layout": "CHW"}), (2,), (2, 1, 1),
     "per_channel"),
    (BoxSpace(0, 9, (8, 6), np.uint16, metadata={"kind": "depth"}), (), (), "whole"),
    (BoxSpace(0, 1, (8, 6, 1), np.float32, metadata={"kind": "depth", "layout": "HWC"}), (1,), (1,), "per_channel"),
    (BoxSpace(0, 1, (8, 6), np.float32, metadata={"kind": "image", "layout": "HW"}), (), (), "whole"),
    (BoxSpace(-1, 1, (5, 7, 4), np.float32, metadata={"stats": "per_channel"}), (4,), (4,), "per_channel"),
    (BoxSpace(-1, 1, (3,), np.float32, metadata={"stats": "whole"}), (), (), "whole"),
    (BoxSpace(-1, 1, (20, 20), np.float32, metadata={"stats": "per_element"}), (20, 20), (20, 20), "per_element"),
    (BoxSpace(-1, 1, (16, 16), np.float32), (16, 16), (16, 16), "per_element"),  # 256 elements: the limit
    (BoxSpace(-1, 1, (257,), np.float32), (), (), "whole"),
])
def test_reduction_rule_and_shapes_match_numpy(leaf, shape, broadcast, reduction):
    rng = np.random.default_rng(3)
    acc = LeafAccumulator(leaf)
    parts = []
    for scale in (1.0, 3.0, 0.5):
        x = rng.uniform(leaf.low.min(), leaf.high.max(), (6, *leaf.shape)) * (scale if leaf.dtype.kind == "f" else 1)
        parts.append(x.astype(leaf.dtype))
        acc.add(parts[-1])
    s = acc.result("x")
    assert (s.shape, s.broadcast_shape, s.reduction, s.per_channel) == (shape, broadcast, reduction,
                                                                        reduction == "per_channel")
    x = np.concatenate(parts).astype(np.float64)
    if reduction == "per_channel":  # values of one channel per row, as np.moveaxis lays them out
        x = np.moveaxis(x, x.ndim - len(broadcast), -1).reshape(-1, *shape)
    elif reduction == "whole":
        x = x.reshape(-1)
    check_against_numpy(s, x, acc.hist.bins)
    assert acc.hist.counts.size <= MAX_LEAF_BINS
    json.dumps(s.to_json())


@pytest.mark.parametrize("metadata,match", [
    ({"stats": "per_pixel"}, "must be"),
    ({"stats": "per_element"}, "at most 4096 elements"),
    ({"stats": "per_channel", "layout": "HW"}, "needs a channel axis"),
    ({"kind": "image", "layout": "HWC"}, "at most 4096 channels"),
])
@pytest.mark.filterwarnings("ignore::trajstore.errors.RoutingWarning")
def test_bad_stats_marks_are_refused_before_the_folder_is_made(tmp_path, metadata, match):
    shape = (80, 5000) if metadata.get("layout") != "HWC" else (2, 2, 5000)
    space = DictSpace({"obs": DictSpace({"grid": BoxSpace(0, 1, shape, np.float32, metadata=metadata)})})
    with pytest.raises(InvalidValueError, match=f"'obs/grid'.*{match}"):
        create(tmp_path / "rb", space)
    assert not (tmp_path / "rb").exists()


def test_a_widened_range_keeps_the_narrowest_width():
    """Growing the range down after growing it up: the width is the narrowest power of two holding the
    values, so the quantile error stays within 2 (max - min) / (bins - 2)."""
    rng = np.random.default_rng(1)
    acc = LeafAccumulator(BoxSpace(-np.inf, np.inf, (2,), np.float64))
    parts = [rng.uniform(0.75, 1.0, (500, 2)), np.full((1, 2), 1.01), np.full((1, 2), 0.74),
             rng.uniform(0.74, 1.01, (500, 2))]
    for p in parts:
        acc.add(p)
    check_against_numpy(acc.result("x"), np.concatenate(parts), 1024)


def test_normalizer_broadcasts_per_channel_chw_and_whole_leaf_stats():
    torch = pytest.importorskip("torch")
    from trajstore.replay_buffer.stats_keeper import RangeStats
    from trajstore.spaces import tree
    from trajstore.training.torch import Normalizer

    space = DictSpace({"cam": BoxSpace(0, 255, (2, 4, 6), np.uint8, metadata={"kind": "image", "layout": "CHW"}),
                       "depth": BoxSpace(0, 10, (24, 32), np.float32, metadata={"kind": "depth"})})
    rng = np.random.default_rng(0)
    data = {"cam": rng.integers(0, 256, (50, 2, 4, 6), dtype=np.uint8),
            "depth": rng.uniform(0, 10, (50, 24, 32)).astype(np.float32)}
    data["cam"][:, 1] //= 4  # the two channels differ
    ranged = RangeStats(space, 0, 0)
    ranged.add(tree.flatten(space, data), 50, [0, 1])
    stats = {k: v.result(k) for k, v in ranged.leaves.items()}
    out = Normalizer(stats).normalize({k: torch.as_tensor(v) for k, v in data.items()})
    cam = out["cam"].double().numpy()
    np.testing.assert_allclose(cam.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(cam.std(axis=(0, 2, 3)), 1, atol=1e-5)
    depth = out["depth"].double().numpy()
    assert depth.shape == (50, 24, 32)
    np.testing.assert_allclose([depth.mean(), depth.std()], [0, 1], atol=1e-5)


def test_version_1_file_of_another_reduction_is_recomputed(tmp_path):
    """A stats file of trajstore before the rule (version 1) kept a (20, 20) leaf per element: it no longer
    fits, so the statistics are computed from the data; one that fits (the camera, the action) would be read."""
    space = DictSpace({"grid": BoxSpace(-1, 1, (20, 20), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32)})
    rb = create(tmp_path / "rb", space)
    rng = np.random.default_rng(2)
    values = {"grid": rng.uniform(-1, 1, (40, 20, 20)).astype(np.float32),
              "action": rng.uniform(-1, 1, (40, 2)).astype(np.float32)}
    rb.extend(values)
    rb.close()
    path = tmp_path / "rb" / "stats.json"
    data = json.loads(path.read_text())
    old = LeafAccumulator(BoxSpace(-1, 1, (20, 20), np.float32, metadata={"stats": "per_element"}))
    old.add(values["grid"])
    data["version"], data["leaves"]["grid"] = 1, old.to_json()  # as trajstore before the rule wrote it
    path.write_text(json.dumps(data))
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        s = reader.stats()
    assert s["grid"].shape == () and s["grid"].reduction == "whole"
    check_against_numpy(s["grid"], values["grid"].astype(np.float64).reshape(-1), 1024)
    check_against_numpy(s["action"], values["action"].astype(np.float64), 1024)
    data["leaves"]["grid"] = {"moments": {"n": [1]}}  # a version-2 file that does not fit is damage
    data["version"] = 2
    path.write_text(json.dumps(data))
    from trajstore.errors import FormatError
    with ReplayBuffer.load_from(tmp_path / "rb") as reader, pytest.raises(FormatError, match="stats.json"):
        reader.stats()


@pytest.mark.parametrize("version", ["v3", "v4", "v5"])
def test_version_1_files_of_the_format_fixtures_are_read_as_they_are(tmp_path, version):
    """The fixtures' stats files (version 1: a camera, small vectors) fit the rule: read, not recomputed."""
    import shutil
    from pathlib import Path

    from tests.format_fixtures.make_fixtures import expected_step

    fixture = Path(__file__).parents[1] / "format_fixtures" / version / "jpeg_hdf5"
    shutil.copytree(fixture, tmp_path / "rb")
    assert json.loads((tmp_path / "rb" / "stats.json").read_text())["version"] == 1
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
        assert reader._stats.keeper.load(tmp_path / "rb", meta, reader._views.current().ring) is not None
        stats, n = reader.stats(), len(reader)
    steps = [expected_step(i) for i in range(n)]  # the values appended (the statistics are of those frames)
    data = {"observation": {k: np.stack([s["observation"][k] for s in steps]) for k in ("camera", "joints")},
            "action": np.stack([s["action"] for s in steps])}
    cam = stats["observation/camera"]
    assert cam.shape == (3,) and cam.reduction == "per_channel"
    check_against_numpy(cam, data["observation"]["camera"].reshape(-1, 3).astype(np.float64), 256)
    check_against_numpy(stats["observation/joints"], data["observation"]["joints"].astype(np.float64), 1024, old=True)
    check_against_numpy(stats["action"], data["action"].astype(np.float64), 1024, old=True)


def test_a_buffer_whose_leaves_keep_their_version_1_cells_writes_a_version_1_file(tmp_path):
    """A camera and small vectors have the cells they had before the rule: the file stays version 1, which
    an older trajstore reads."""
    space = DictSpace({"cam": BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
                       "joints": BoxSpace(-1, 1, (7,), np.float32), "reward": BoxSpace(-1, 1, (), np.float32)})
    rb = create(tmp_path / "rb", space)
    rb.extend(space.sample(np.random.default_rng(0), batch_size=12))
    rb.end_episode()
    rb.close()
    data = json.loads((tmp_path / "rb" / "stats.json").read_text())
    assert data["version"] == 1 and [len(v["moments"]["n"]) for v in data["leaves"].values()] == [3, 7, 1]
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
        assert reader._stats.keeper.load(tmp_path / "rb", meta, reader._views.current().ring) is not None


@pytest.mark.slow
def test_byte_counts_of_a_batch_of_large_frames():
    # 300 frames of 480x640 RGB in one extend: one row of 92 M pixels made Pillow raise MemoryError.
    from trajstore.replay_buffer._histogram import _uint8_counts

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (300 * 480 * 640, 3), dtype=np.uint8)
    counts = _uint8_counts(x)
    assert counts.shape == (3, 256) and counts.sum(axis=1).tolist() == [x.shape[0]] * 3
    for band in range(3):
        np.testing.assert_array_equal(counts[band], np.bincount(x[:, band], minlength=256))
