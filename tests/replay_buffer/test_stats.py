"""rb.stats(): float64 moments and histogram quantiles checked against NumPy over random append /
extend / flush / discard sequences, rings, reopening in a fresh process, older folders, the CLI."""

import json
import subprocess
import sys

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.leaf_stats import LeafAccumulator
from trajstore.spaces import BoxSpace, DictSpace, map_leaves

from tests.replay_buffer.test_replay_buffer import batch, make, step_space

NUMERIC = {"observation/pixels": ("observation", "pixels"), "observation/state": ("observation", "state"),
           "action": ("action",), "reward": ("reward",)}


def reference(data):
    """name -> float64 rows (M, E) as the statistics reduce them (images per channel)."""
    out = {}
    for name, path in NUMERIC.items():
        v = data
        for k in path:
            v = v[k]
        v = np.asarray(v, np.float64)
        out[name] = v.reshape(-1, 3) if name == "observation/pixels" else v.reshape(len(v), -1)
    return out


def assert_matches(stats, data):
    for name, x in reference(data).items():
        s = stats[name]
        flat = lambda a: np.asarray(a).reshape(-1)  # noqa: E731
        assert (flat(s.count) == len(x)).all()
        np.testing.assert_array_equal(flat(s.min), x.min(0))
        np.testing.assert_array_equal(flat(s.max), x.max(0))
        np.testing.assert_allclose(flat(s.mean), x.mean(0), rtol=1e-12, atol=1e-12 * np.abs(x).max())
        np.testing.assert_allclose(flat(s.std), x.std(0), rtol=1e-10, atol=1e-12 * np.abs(x).max())
        for key, p in {"q01": .01, "q10": .1, "q50": .5, "q90": .9, "q99": .99}.items():
            err = np.abs(flat(getattr(s, key)) - np.quantile(x, p, axis=0))
            assert (err <= flat(s.quantile_error) * (1 + 1e-9) + 1e-9 * np.abs(x).max()).all(), (name, key, err)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_appends_extends_flushes_match_numpy(tmp_path, seed):
    rng = np.random.default_rng(seed)
    rb = make(tmp_path)
    for _ in range(12):
        op = rng.integers(4)
        if op == 0:
            rb.append(map_leaves(step_space(), batch(1, int(rng.integers(1 << 30))), lambda v: v[0]))
        elif op == 1:
            rb.extend(batch(int(rng.integers(0, 90)), int(rng.integers(1 << 30))))
        elif op == 2:
            rb.flush()
        else:
            rb.end_episode() if len(rb) else None
    assert_matches(rb.stats(), rb[:])
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert_matches(reader.stats(), reader[:])


@pytest.mark.parametrize("shape,layout", [((6, 5, 1), "HWC"), ((6, 5, 2), "HWC"), ((6, 5, 3), "HWC"),
                                          ((6, 5, 4), "HWC"), ((6, 5, 5), "HWC"), ((3, 6, 5), "CHW")])
def test_uint8_frames_of_every_channel_count_match_numpy(shape, layout):
    """Each channel count takes its own counting path (Pillow band histograms for 1-4, bincount else)."""
    rng = np.random.default_rng(len(shape) + shape[-1])
    leaf = BoxSpace(0, 255, shape, np.uint8, metadata={"kind": "image", "layout": layout})
    frames = rng.integers(0, 256, (40, *shape), dtype=np.uint8)
    frames[:, 0] = 7  # a value shared by every channel in one row, so per-channel mixing shows
    acc = LeafAccumulator(leaf)
    for chunk in np.array_split(frames, 3):
        acc.add(chunk)
    axis = layout.index("C") + 1
    x = np.moveaxis(frames, axis, -1).reshape(-1, shape[axis - 1]).astype(np.float64)
    s = acc.result("cam")
    np.testing.assert_array_equal(s.count, len(x))
    np.testing.assert_array_equal(s.min, x.min(0))
    np.testing.assert_array_equal(s.max, x.max(0))
    np.testing.assert_allclose(s.mean, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s.std, x.std(0), rtol=1e-10)
    np.testing.assert_array_equal(s.q50, np.quantile(x, 0.5, axis=0))


def test_uint8_all_0_and_all_255_frames_give_exactly_127_5():
    leaf = BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})
    acc = LeafAccumulator(leaf)
    frames = np.zeros((101, 8, 8, 3), np.uint8)
    frames[1::2] = 255
    frames = frames[:100]
    for chunk in np.array_split(frames, 7):
        acc.add(chunk)
    s = acc.result("pixels")
    assert s.shape == (3,) and s.per_channel
    assert (s.mean == 127.5).all() and (s.std == 127.5).all()
    assert (s.count == 100 * 64).all() and (s.q50 == 127.5).all() and (s.quantile_error == 0).all()


@pytest.mark.parametrize("dist", ["normal", "lognormal", "uniform_int16", "spikes"])
def test_quantiles_within_their_stated_bound(dist):
    rng = np.random.default_rng(7)
    dtype = np.int16 if dist == "uniform_int16" else np.float32
    acc = LeafAccumulator(BoxSpace(-np.inf if dtype == np.float32 else -30000, np.inf if dtype == np.float32 else 30000,
                                   (4,), dtype))
    parts = []
    for i in range(30):  # ranges that grow batch after batch (the histograms double their width)
        m = int(rng.integers(1, 200))
        if dist == "normal":
            x = rng.normal(0, 1 + i, (m, 4))
        elif dist == "lognormal":
            x = rng.lognormal(0, 2, (m, 4))
        elif dist == "uniform_int16":
            x = rng.integers(-100 * (i + 1), 100 * (i + 1), (m, 4))
        else:
            x = np.where(rng.random((m, 4)) < 0.5, 0.0, 1e4) + rng.normal(0, 1e-3, (m, 4))
        parts.append(x.astype(dtype))
        acc.add(parts[-1])
    x = np.concatenate(parts).astype(np.float64)
    s = acc.result("x")
    for key, p in {"q01": .01, "q10": .1, "q50": .5, "q90": .9, "q99": .99}.items():
        err = np.abs(getattr(s, key) - np.quantile(x, p, axis=0))
        assert (err <= s.quantile_error * (1 + 1e-9) + 1e-9 * np.abs(x).max()).all(), (key, err, s.quantile_error)
    # the bound is a bin width, the narrowest power of two holding the values: 2 (max - min) / (bins - 2)
    assert (s.quantile_error <= 2 * (x.max(0) - x.min(0)) / (1024 - 2) + (dtype == np.int16)).all()


def test_nan_and_inf_are_not_counted():
    acc = LeafAccumulator(BoxSpace(-np.inf, np.inf, (2,), np.float64))
    acc.add(np.array([[1.0, np.nan], [3.0, np.inf], [5.0, 2.0]]))
    s = acc.result("x")
    assert s.count.tolist() == [3, 1] and s.mean.tolist() == [3.0, 2.0] and s.max.tolist() == [5.0, 2.0]


def test_discard_after_end_episode_keeps_stats_committed(tmp_path):
    rb = make(tmp_path)
    kept = batch(40, 1)
    rb.extend(kept)
    rb.end_episode()
    rb.extend(batch(25, 2))
    assert rb.discard_episode() == 25
    assert rb._stats.keeper.live is not None and rb._stats.keeper.live.covers(rb._writer.appended)  # restored, no recompute
    assert_matches(rb.stats(), kept)
    rb.extend(batch(10, 3))
    rb.flush()
    rb.extend(batch(5, 4))
    rb.discard_episode()  # the boundary copy no longer covers the held steps: recomputed on demand
    assert_matches(rb.stats(), rb[:])
    rb.close()


def test_ring_stats_are_over_the_held_steps(tmp_path):
    rb = make(tmp_path, capacity=50)
    rb.extend(batch(30, 1))
    rb.end_episode()
    assert_matches(rb.stats(), rb[:])
    for seed in range(2, 6):
        rb.extend(batch(17, seed))
        rb.end_episode()
        assert_matches(rb.stats(), rb[:])  # steps left: recomputed from the 50 held
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert reader.total_steps == 98 and len(reader) == 50
        assert_matches(reader.stats(), reader[:])


READER = """
import json, sys
from trajstore.replay_buffer import ReplayBuffer
rb = ReplayBuffer.load_from(sys.argv[1])
print(json.dumps({k: v.to_json() for k, v in rb.stats().items()}))
"""


def test_reopen_in_a_fresh_process_reads_the_committed_stats(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(64, 1))
    rb.end_episode()
    rb.extend(batch(7, 2))  # not flushed: not seen by other processes
    meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
    assert meta["stats"]["file"] == "stats.json" and (meta["stats"]["first"], meta["stats"]["stop"]) == (0, 64)
    out = subprocess.run([sys.executable, "-c", READER, str(tmp_path / "rb")], capture_output=True, text=True,
                         check=True)
    theirs = json.loads(out.stdout)
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        ours = {k: v.to_json() for k, v in reader.stats().items()}
        assert theirs == ours
        assert_matches(reader.stats(), reader[:64])
    rb.close()


def test_folder_without_stats_computes_them_and_a_mismatched_file_is_ignored(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(33, 1))
    rb.close()
    path = tmp_path / "rb" / "trajstore.json"
    meta = json.loads(path.read_text())
    stats_id = meta.pop("stats")["id"]
    path.write_text(json.dumps(meta))  # as an older trajstore wrote it
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert_matches(reader.stats(), reader[:])
    meta["stats"] = {"file": "stats.json", "id": "0" * 32, "first": 0, "stop": 33}  # a crash between the writes
    path.write_text(json.dumps(meta))
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert reader._stats.keeper.load(tmp_path / "rb", meta, reader._views.current().ring) is None
        assert_matches(reader.stats(), reader[:])
    assert stats_id != "0" * 32
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as writer:  # commits what it computed
        assert_matches(writer.stats(), writer[:])
    assert json.loads(path.read_text())["stats"]["stop"] == 33


def test_keys_and_leaves_without_stats(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(5, 1))
    assert list(rb.stats("observation")) == ["observation/pixels", "observation/state"]
    assert list(rb.stats(["reward", "action"])) == ["reward", "action"]
    with pytest.raises(ValueError, match="no statistics"):
        rb.stats("done")
    with pytest.raises(KeyError):
        rb.stats("nope")
    rb.close()


def test_cli_stats_prints_a_table_and_json(tmp_path):
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    rb = make(tmp_path)
    rb.extend(batch(20, 1))
    rb.close()
    runner = CliRunner()
    res = runner.invoke(app, ["stats", str(tmp_path / "rb")])
    assert res.exit_code == 0, res.output
    assert "observation/pixels" in res.output and "channel 2" in res.output and "reward" in res.output
    res = runner.invoke(app, ["stats", str(tmp_path / "rb"), "--json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert data["action"]["mean"] == reader.stats()["action"].mean.tolist()
    assert runner.invoke(app, ["stats", str(tmp_path / "missing")]).exit_code == 2


def test_normalizer_mean_std_and_min_max():
    torch = pytest.importorskip("torch")
    from trajstore.training.torch import Normalizer

    space = DictSpace({"obs": DictSpace({"pixels": BoxSpace(0, 255, (4, 4, 3), np.uint8, metadata={"kind": "image"}),
                                         "const": BoxSpace(-5, 5, (2,), np.float32)}),
                       "action": BoxSpace(-3, 3, (2,), np.float32)})
    rng = np.random.default_rng(0)
    data = space.sample(rng, batch_size=200)
    data["obs"]["const"][:] = 1.5
    from trajstore.replay_buffer.stats_keeper import RangeStats
    from trajstore.spaces import tree
    ranged = RangeStats(space, 0, 0)
    ranged.add(tree.flatten(space, data), 200, [0, 1, 2])
    stats = {k: v.result(k) for k, v in ranged.leaves.items()}
    batch_t = {"obs": {"pixels": torch.as_tensor(data["obs"]["pixels"]), "const": torch.as_tensor(data["obs"]["const"])},
               "action": torch.as_tensor(data["action"])}
    n = Normalizer(stats, mode="mean_std").normalize(batch_t)
    a = n["action"].double().numpy()
    np.testing.assert_allclose(a.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(a.std(0), 1, atol=1e-5)
    px = n["obs"]["pixels"].numpy().reshape(-1, 3)
    np.testing.assert_allclose(px.mean(0), 0, atol=1e-4)
    assert torch.all(n["obs"]["const"] == 0)  # zero std: shifted, not divided by ~0
    m = Normalizer(stats, mode="min_max")
    mm = m.normalize(batch_t)
    assert mm["action"].min() >= -1 - 1e-6 and mm["action"].max() <= 1 + 1e-6
    np.testing.assert_allclose(mm["action"].amin(0).numpy(), -1, atol=1e-6)
    back = m.unnormalize(mm)
    np.testing.assert_allclose(back["action"].numpy(), data["action"], atol=1e-5)
    np.testing.assert_allclose(back["obs"]["pixels"].numpy(), data["obs"]["pixels"], atol=1e-3)
    with pytest.raises(ValueError):
        Normalizer(stats, mode="zscore")


def test_joined_float_leaves_count_as_each_leaf_alone():
    """RangeStats counts per-element float leaves as one joined accumulator: each leaf's moments and
    histograms must be those of counting it on its own (ranges that grow, NaN, other dtypes)."""
    from trajstore.replay_buffer.leaf_stats import LeafAccumulator
    from trajstore.replay_buffer.stats_keeper import RangeStats
    from trajstore.spaces import tree

    space = DictSpace({
        "cam": BoxSpace(0, 255, (4, 4, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
        "joints": BoxSpace(-np.inf, np.inf, (7,), np.float32),
        "grid": BoxSpace(-np.inf, np.inf, (2, 3), np.float64),
        "count": BoxSpace(0, 1000, (2,), np.int32),
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
    })
    leaves = tree.leaves(space)
    ranged = RangeStats(space, 0, 0)
    alone = {tree.path_name(p): LeafAccumulator(leaf) for p, leaf in leaves}
    assert len(ranged._units) == 3  # cam, count alone; joints + grid + reward joined
    rng = np.random.default_rng(0)
    for scale in (1.0, 1.0, 50.0, 0.01, 1e4):  # later batches widen the ranges (bins merge)
        batch = [rng.integers(0, 256, (5, 4, 4, 3), dtype=np.uint8),
                 (rng.normal(size=(5, 7)) * scale).astype(np.float32),
                 rng.normal(size=(5, 2, 3)) * scale + 3,
                 rng.integers(0, 1000, (5, 2)).astype(np.int32),
                 (rng.normal(size=5) * scale).astype(np.float32)]
        if scale == 50.0:
            batch[1][2, 3] = np.nan  # not counted, for that element only
        ranged.add(batch, 5, list(range(len(batch))))
        for (path, _), values in zip(leaves, batch):
            alone[tree.path_name(path)].add(values)
    got = ranged.copy().leaves
    assert list(got) == list(alone)
    for name, acc in alone.items():
        mine, theirs = got[name].to_json(), acc.to_json()
        assert mine["histogram"] == theirs["histogram"], name
        for key in ("n", "min", "max"):
            assert mine["moments"][key] == theirs["moments"][key], (name, key)
        np.testing.assert_allclose(mine["moments"]["mean"], theirs["moments"]["mean"], rtol=1e-12)
        np.testing.assert_allclose(mine["moments"]["m2"], theirs["moments"]["m2"], rtol=1e-12)
        assert got[name].result(name).shape == acc.result(name).shape
    assert got["joints"].moments.n.tolist() == [25, 25, 25, 24, 25, 25, 25]
