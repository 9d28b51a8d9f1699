"""import_lerobot(export_lerobot(buffer)) gives the buffer back: the space (scalar leaves of shape (),
bounds, metadata), every low-dim value exactly, PNG frames exactly and video frames within H.264 loss,
the episode data of several JSON types, the interrupted flags and the final observations; key_map renames
round-trip; selections; the dataset card call; damaged trajstore entries are refused."""

import json
import sys
import types

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("av")
import pyarrow.parquet as pq  # noqa: E402

from trajstore.errors import FormatError, InvalidValueError, UnknownLeafError  # noqa: E402
from trajstore.interop.lerobot import export_lerobot, import_lerobot  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402

FPS = 10
LENGTHS = (5, 4, 6)
CAM = {"kind": "image", "layout": "HWC", "fps": FPS}
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
FINALS = "meta/trajstore/final_observations.parquet"
#: Episode data of several JSON types: seed int, success bool, task str (missing in one), score int and
#: float mixed (JSON text), notes a list / an object / null.
DATA = [
    {"seed": 0, "success": True, "task": "push", "score": 0.5, "notes": ["a", 1]},
    {"seed": 1, "success": False, "score": 1, "notes": {"k": None}},
    {"seed": 2, "success": True, "task": "push", "score": 2.25, "notes": None},
]
#: Episode 1 was interrupted and has no final observation.
INTERRUPTED = (False, True, False)


def step_space():
    return DictSpace({
        "observation": DictSpace({
            "cam": BoxSpace(0, 255, (24, 32, 3), np.uint8, metadata=CAM),
            "state": BoxSpace(-1e3, 1e3, (3,), np.float32, metadata={"names": ["x", "y", "i"], "units": "m"}),
            "contact": BinarySpace(),
        }),
        "action": BoxSpace(-5, 5, (2,), np.float32),
        "reward": BoxSpace(-10, 10, (), np.float64),
        "terminated": BinarySpace(),
        "count": BoxSpace(0, 10_000, (), np.int32, metadata={"units": "steps"}),
    })


def frame(e, i):
    """A flat level by step, a bright square whose column says the episode."""
    f = np.full((24, 32, 3), 30 + 15 * i, np.uint8)
    f[8:16, 8 * e:8 * e + 8] = (240, 200, 40)
    return f


def observation(e, i):
    return {"cam": frame(e, i), "state": np.array([e, i / 3, 10 * e + i], np.float32), "contact": i % 2 == 1}


@pytest.fixture
def source(tmp_path):
    space = step_space()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",  # PNG: the source is exact
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))
    rng = np.random.default_rng(3)
    for e, n in enumerate(LENGTHS):
        for i in range(n):
            rb.append({"observation": observation(e, i), "action": rng.uniform(-5, 5, 2).astype(np.float32),
                       "reward": float(rng.normal()) / 3, "terminated": i == n - 1, "count": 100 * e + i})
        final = None if INTERRUPTED[e] else observation(e, n)
        rb.end_episode(final, interrupted=INTERRUPTED[e], **DATA[e])
    rb.close()
    return tmp_path / "rb"


def leaves(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, prefix + (k,))
    else:
        yield "/".join(prefix), np.asarray(value)


def assert_same(src, back, camera_check=None):
    """Space, steps, episodes, data, interrupted flags and final observations of two buffer folders."""
    with ReplayBuffer.load_from(src) as a, ReplayBuffer.load_from(back) as b:
        assert b.space == a.space  # scalars (), bounds, dtypes, metadata
        assert [(e.start, e.stop) for e in b.episodes] == [(e.start, e.stop) for e in a.episodes]
        assert [e.data for e in b.episodes] == [e.data for e in a.episodes] == DATA
        assert [type(e.data["score"]) for e in b.episodes] == [float, int, float]
        assert [e.interrupted for e in b.episodes] == list(INTERRUPTED)
        want, got = dict(leaves(a[:])), dict(leaves(b[:]))
        assert list(got) == list(want)
        for name, w in want.items():
            assert got[name].shape == w.shape and got[name].dtype == w.dtype, name
            if name == "observation/cam" and camera_check is not None:
                camera_check(got[name], w)
            else:
                np.testing.assert_array_equal(got[name], w, err_msg=name)
        for k in range(len(LENGTHS)):
            fa, fb = a.final_observation(k), b.final_observation(k)
            assert (fb is None) == (fa is None) == INTERRUPTED[k]
            if fa is not None:
                for (na, va), (nb, vb) in zip(leaves(fa), leaves(fb)):
                    assert na == nb and vb.shape == va.shape and vb.dtype == va.dtype
                    np.testing.assert_array_equal(vb, va, err_msg=f"final {k} {na}")  # PNG side file: exact


def test_png_export_round_trips_exactly(source, tmp_path):
    export_lerobot(source, tmp_path / "lr", camera="image")
    summary = import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)
    assert summary.leaves["reward"] == "reward" and summary.leaves["observation.cam"] == "observation/cam"
    assert_same(source, tmp_path / "back")


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return np.inf if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def test_video_export_round_trips_within_codec_loss(source, tmp_path):
    """H.264 at CRF 20, yuv420p: every frame within 35 dB PSNR (an RMS error of 4.5 levels; the export
    tests' bound for this codec: measured here 36.5 dB at worst, the loss being the 4:2:0 chroma of the
    square's edges) and nearer its own source frame than any other (the right time of the right episode).
    Low-dim values, data and final observations (PNG side file) stay exact."""
    export_lerobot(source, tmp_path / "lr")  # camera="video"
    import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)

    def within_codec_loss(got, want):
        for i, (g, w) in enumerate(zip(got, want)):
            assert psnr(g, w) >= 35.0, i
            assert np.argmin(np.abs(want.astype(float) - g).mean(axis=(1, 2, 3))) == i, i

    assert_same(source, tmp_path / "back", camera_check=within_codec_loss)


def test_the_files_say_what_trajstore_keeps(source, tmp_path):
    export_lerobot(source, tmp_path / "lr")
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    assert info["features"]["reward"]["shape"] == [1] and info["features"]["terminated"]["shape"] == [1]
    entry = info["trajstore"]
    assert entry["version"] == 1 and entry["final_observations"] == FINALS and entry["interrupted"] == [1]
    assert entry["features"]["reward"] == {"leaf": ["reward"], "shape": [], "metadata": {},
                                           "space": step_space()["reward"].to_json()}
    assert entry["features"]["observation.state"]["metadata"] == {"names": ["x", "y", "i"], "units": "m"}
    assert entry["episode_data"] == {
        "seed": {"column": "episode_data/seed", "encoding": "int64"},
        "success": {"column": "episode_data/success", "encoding": "bool"},
        "task": {"column": "episode_data/task", "encoding": "string"},
        "score": {"column": "episode_data/score", "encoding": "json"},
        "notes": {"column": "episode_data/notes", "encoding": "json"}}
    episodes = pq.read_table(tmp_path / "lr" / EPISODES)
    assert episodes.column_names[:3] == ["episode_index", "tasks", "length"]  # LeRobot's columns first
    assert str(episodes.schema.field("episode_data/seed").type) == "int64"
    assert episodes.column("episode_data/task").to_pylist() == ["push", None, "push"]
    assert episodes.column("episode_data/score").to_pylist() == ["0.5", "1", "2.25"]
    assert episodes.column("episode_data/notes").to_pylist() == ['["a", 1]', '{"k": null}', "null"]
    assert episodes.column("tasks").to_pylist() == [["push"], [""], ["push"]]
    finals = pq.read_table(tmp_path / "lr" / FINALS)
    assert finals.column_names == ["episode_index", "observation.cam", "observation.state", "observation.contact"]
    assert finals.column("episode_index").to_pylist() == [0, 2]
    np.testing.assert_array_equal(np.array(finals.column("observation.state").to_pylist(), np.float32),
                                  np.array([[0, 5 / 3, 5], [2, 2, 26]], np.float32))
    assert finals.column("observation.contact").to_pylist() == [True, False]


def test_key_map_renames_round_trip(source, tmp_path):
    keys = {"observation/cam": "observation.images.front", "observation/state": "observation.state",
            "reward": "next.reward"}
    export_lerobot(source, tmp_path / "lr", key_map=keys, camera="image")
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    assert list(info["features"])[:6] == ["observation.images.front", "observation.state", "observation.contact",
                                          "action", "next.reward", "terminated"]
    assert pq.read_table(tmp_path / "lr" / FINALS).column_names[1] == "observation.images.front"
    import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)
    assert_same(source, tmp_path / "back")  # the original leaf paths come back
    # an import key_map puts a feature elsewhere; the final observation keeps the leaves under observation
    import_lerobot(tmp_path / "lr", tmp_path / "moved", camera="png", progress=False,
                   key_map={"observation.images.front": "camera/front", "next.reward": "reward/next"})
    with ReplayBuffer.load_from(tmp_path / "moved") as rb, ReplayBuffer.load_from(source) as src:
        assert set(rb.space["observation"].spaces) == {"state", "contact"}
        np.testing.assert_array_equal(rb[:]["camera"]["front"], src[:]["observation"]["cam"])
        np.testing.assert_array_equal(rb[:]["reward"]["next"], src[:]["reward"])
        assert set(rb.final_observation(0)) == {"state", "contact"}
        np.testing.assert_array_equal(rb.final_observation(2)["state"], observation(2, 6)["state"])


def test_policy_preset_under_explicit_entries(source, tmp_path):
    export_lerobot(source, tmp_path / "a", key_map="policy", camera="image")
    export_lerobot(source, tmp_path / "b", key_map={"*": "policy", "reward": "reward.next"}, camera="image")
    a = json.loads((tmp_path / "a/meta/info.json").read_text())["features"]
    b = json.loads((tmp_path / "b/meta/info.json").read_text())["features"]
    assert {"observation.images.cam", "observation.state", "next.reward", "action"} <= set(a) and "reward" not in a
    assert {"observation.images.cam", "observation.state", "reward.next"} <= set(b) and "next.reward" not in b
    import_lerobot(tmp_path / "b", tmp_path / "back", camera="png", progress=False)
    assert_same(source, tmp_path / "back")


def test_bad_key_maps_write_nothing(source, tmp_path):
    with pytest.raises(UnknownLeafError, match=r"key_map names \['observation/nope'\]"):
        export_lerobot(source, tmp_path / "out", key_map={"observation/nope": "x"})
    with pytest.raises(InvalidValueError, match="key 'a/b' must be dot-separated"):
        export_lerobot(source, tmp_path / "out", key_map={"action": "a/b"})
    with pytest.raises(InvalidValueError, match="preset must be 'policy'"):
        export_lerobot(source, tmp_path / "out", key_map="lerobot")
    assert not (tmp_path / "out").exists()
    export_lerobot(source, tmp_path / "lr", camera="image")
    with pytest.raises(InvalidValueError, match=r"names \['state'\], not features of the dataset \(features: "):
        import_lerobot(tmp_path / "lr", tmp_path / "back", key_map={"state": "s"}, progress=False)
    with pytest.raises(FormatError, match="both become leaf 'action'"):
        import_lerobot(tmp_path / "lr", tmp_path / "back", key_map={"reward": "action"}, progress=False)
    assert not (tmp_path / "back").exists()


def test_selections(source, tmp_path):
    assert export_lerobot(source, tmp_path / "a", episodes="success == true", camera="image").episodes == [0, 2]
    assert export_lerobot(source, tmp_path / "b", episodes="1-2", camera="image").episodes == [1, 2]
    with pytest.raises(InvalidValueError, match="selects no ended episode"):
        export_lerobot(source, tmp_path / "c", episodes="seed > 9")
    import_lerobot(tmp_path / "a", tmp_path / "a-back", camera="png", progress=False, episodes="seed >= 1")
    with ReplayBuffer.load_from(tmp_path / "a-back") as rb:  # LeRobot episode 1 of the export: source episode 2
        assert [e.data for e in rb.episodes] == [DATA[2]] and len(rb) == LENGTHS[2]
        np.testing.assert_array_equal(rb.final_observation(0)["cam"], frame(2, 6))
    import_lerobot(tmp_path / "b", tmp_path / "b-back", camera="png", progress=False, episodes=[1])
    with ReplayBuffer.load_from(tmp_path / "b-back") as rb:
        assert [e.data for e in rb.episodes] == [DATA[2]]


def test_a_dataset_lerobot_wrote_keeps_its_episode_data(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot_v3_sim"
    import_lerobot(fixture, tmp_path / "rb", camera="png", progress=False, episodes='task == "stack the red block"')
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [e.data for e in rb.episodes] == [{"task": "stack the red block", "lerobot_episode_index": 1}]
        assert rb.final_observation(0) is None


def test_the_dataset_card_is_written_after_info_json(source, tmp_path, monkeypatch):
    calls = []
    card = types.ModuleType("trajstore.interop.lerobot._dataset_card")

    def write_dataset_card(root, info, *, repo_id, license=None, tags=(), folder=None):
        calls.append((json.loads((root / "meta/info.json").read_text()) == info, repo_id, license, tags, folder))
        (root / "README.md").write_text("card")
        return root / "README.md"

    card.write_dataset_card = write_dataset_card
    monkeypatch.setitem(sys.modules, card.__name__, card)
    result = export_lerobot(source, tmp_path / "lr", repo_id="me/demo", license="mit", tags=["sim"], camera="image")
    assert calls == [(True, "me/demo", "mit", ("sim",), "lr")]
    assert (tmp_path / "lr/README.md").read_text() == "card" and "README.md" in result.files
    monkeypatch.setitem(sys.modules, card.__name__, None)  # the module absent: no card, no error
    assert "README.md" not in export_lerobot(source, tmp_path / "plain", camera="image").files


def edit_info(path, change):
    info = json.loads((path / "meta/info.json").read_text())
    change(info)
    (path / "meta/info.json").write_text(json.dumps(info))


@pytest.mark.parametrize("change, match", [
    (lambda i: i["trajstore"].update(version=2), "version 2 is not supported"),
    (lambda i: i["trajstore"].update(final_observations="../../x.parquet"), "final_observations"),
    (lambda i: i["trajstore"]["features"]["reward"].update(shape=[2]), r"shape \[2\] does not hold"),
    (lambda i: i["trajstore"]["features"]["reward"]["space"].update(dtype="int8"), "does not fit the feature"),
    (lambda i: i["trajstore"]["episode_data"]["seed"].update(encoding="string"), "episode_data/seed.*not a string"),
    (lambda i: i["trajstore"]["episode_data"].update(flush={"column": "x", "encoding": "bool"}),
     "'flush' is a parameter of end_episode"),
])
def test_a_damaged_trajstore_entry_is_refused_before_writing(source, tmp_path, change, match):
    export_lerobot(source, tmp_path / "lr", camera="image")
    edit_info(tmp_path / "lr", change)
    with pytest.raises(FormatError, match=match):
        import_lerobot(tmp_path / "lr", tmp_path / "back", progress=False)
    assert not (tmp_path / "back").exists()


def test_text_leaves_round_trip(tmp_path):
    """A text leaf is a LeRobot ``string`` feature; the trajstore entry keeps its TextSpace, so it comes back
    (in the steps and in the final observation)."""
    from trajstore.spaces import TextSpace

    space = DictSpace({"observation": DictSpace({"note": TextSpace(8), "x": BoxSpace(0, 1, (), np.float32)})})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(space))
    rb.extend({"observation": {"note": np.array(["ab", "cde", ""]), "x": np.array([0.5, 0.25, 1], np.float32)}})
    rb.end_episode({"note": "fin", "x": np.float32(0.75)}, task="t")
    rb.close()
    export_lerobot(tmp_path / "rb", tmp_path / "lr", fps=10)
    assert json.loads((tmp_path / "lr/meta/info.json").read_text())["features"]["observation.note"]["dtype"] == "string"
    import_lerobot(tmp_path / "lr", tmp_path / "back", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as back:
        assert back.space == space
        assert back[:]["observation"]["note"].tolist() == ["ab", "cde", ""]
        assert back.final_observation(0)["note"] == "fin" and back.final_observation(0)["x"] == np.float32(0.75)
        assert back.episode(0).data == {"task": "t"}


def test_a_damaged_final_observations_file_is_refused(source, tmp_path):
    export_lerobot(source, tmp_path / "lr", camera="image")
    finals = pq.read_table(tmp_path / "lr" / FINALS)
    short = pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32()))  # 2 values where the state has 3
    pq.write_table(finals.set_column(2, "observation.state", short), tmp_path / "lr" / FINALS, row_group_size=1)
    with pytest.raises(FormatError, match=r"final_observations\.parquet \(episode 0\).*'observation\.state' holds 2"):
        import_lerobot(tmp_path / "lr", tmp_path / "back", progress=False)
    pq.write_table(finals, tmp_path / "lr" / FINALS)  # both rows in one row group
    with pytest.raises(FormatError, match="row group 0 holds 2 rows"):
        import_lerobot(tmp_path / "lr", tmp_path / "back", progress=False)
    (tmp_path / "lr" / FINALS).unlink()
    with pytest.raises(FormatError, match="final_observations.parquet, which does not exist"):
        import_lerobot(tmp_path / "lr", tmp_path / "back", progress=False)
    assert not (tmp_path / "back").exists()
