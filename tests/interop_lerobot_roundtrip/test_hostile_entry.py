"""import_lerobot refuses a hand-edited export with a FormatError naming the file, the field (or column and
row) and what was expected, before anything is written: episode data cells nested too deep or holding
NaN, ``trajstore`` entry columns that are LeRobot's own or missing, leaf names a buffer cannot have,
interrupted indices and feature keys that are not the dataset's; values the leaf's space refuses name the
data file, the episode and the feature."""

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("av")
import pyarrow.parquet as pq  # noqa: E402

from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.lerobot import export_lerobot, import_lerobot  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402

from .test_roundtrip import DATA, EPISODES, edit_info, source  # noqa: E402,F401  (source: a fixture)

DATA_FILE = "data/chunk-000/file-000.parquet"


@pytest.fixture
def exported(source, tmp_path):  # noqa: F811
    export_lerobot(source, tmp_path / "lr", camera="image")
    return tmp_path / "lr"


def set_column(path, name, values, typ=None, **write):
    """Replace (or add) column ``name`` of the parquet file ``path``."""
    table = pq.read_table(path)
    typ = typ or (table.schema.field(name).type if name in table.column_names else pa.string())
    array = pa.array(values, typ)
    if name in table.column_names:
        table = table.set_column(table.column_names.index(name), pa.field(name, typ), array)
    else:
        table = table.append_column(pa.field(name, typ), array)
    pq.write_table(table, path, **write)


def refused(root, tmp_path, match):
    with pytest.raises(FormatError, match=match):
        import_lerobot(root, tmp_path / "back", progress=False)
    assert not (tmp_path / "back").exists()


# -- 1. episode data cells: the bounded JSON reader, then what the buffer keeps -----------------------

@pytest.mark.parametrize("cell, why", [
    ("[" * 200_000 + "]" * 200_000, r"is not valid JSON \(nested deeper than 256 levels"),
    ("[" * 100 + "]" * 100, r"not episode data the buffer can keep .*nested deeper than 64 levels"),
    ("1" * 100_000, r"is not valid JSON \(a number of more than 400 digits"),
    ("[NaN]", r"is not JSON text \(NaN or Infinity\)"),
    ("[1e999]", r"is not JSON text \(NaN or Infinity\)"),
    ('{"a": ', "is not valid JSON"),
])
def test_an_episode_data_cell_that_cannot_be_kept_names_file_column_and_row(exported, tmp_path, cell, why):
    set_column(exported / EPISODES, "episode_data/notes", [json.dumps(["ok"]), cell, None])
    refused(exported, tmp_path, rf"{exported / EPISODES}: column 'episode_data/notes' row 1.*{why}")


def test_the_cells_of_the_fixture_still_import_exactly(exported, tmp_path):
    import_lerobot(exported, tmp_path / "back", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as rb:
        assert [e.data for e in rb.episodes] == DATA


# -- 2./3. the entry's columns: only episode_data/ ones, each once, each present ----------------------

@pytest.mark.parametrize("column", ["episode_index", "length", "data/chunk_index", "data/file_index", "tasks",
                                    "file", "stats/action/mean", "dataset_from_index", "episode_data/"])
def test_an_entry_column_that_is_not_an_episode_data_column_is_refused(exported, tmp_path, column):
    edit_info(exported, lambda i: i["trajstore"]["episode_data"].update(x={"column": column, "encoding": "int64"}))
    refused(exported, tmp_path, rf"meta/info.json: entry 'trajstore': episode_data\['x'\].column '{column}' is not "
                                r"an 'episode_data/' column")


def test_two_keys_on_one_column_are_refused(exported, tmp_path):
    edit_info(exported, lambda i: i["trajstore"]["episode_data"].update(
        x={"column": "episode_data/seed", "encoding": "int64"}))
    refused(exported, tmp_path, r"episode_data\['x'\] and episode_data\['seed'\] both name column "
                                "'episode_data/seed'")


def test_an_entry_column_missing_from_meta_episodes_names_file_and_column(exported, tmp_path):
    edit_info(exported, lambda i: i["trajstore"]["episode_data"]["seed"].update(column="episode_data/nope"))
    refused(exported, tmp_path, rf"{exported / EPISODES} has no column 'episode_data/nope', which info.json's "
                                "'trajstore' entry names as episode data")


# -- 4. leaf names, data keys, interrupted indices, feature keys --------------------------------------

@pytest.mark.parametrize("key, leaf", [
    ("observation.state", ["observation", ".."]),
    ("action", [".."]),
    ("action", ["."]),
    ("action", ["observation", ""]),
    ("observation.state", ["observation", "a/b"]),
    ("observation.cam", ["observation", ".."]),  # a camera leaf
    ("action", ["*"]),
    ("action", []),
    ("action", ["a\x00b"]),
])
def test_a_leaf_name_a_buffer_cannot_have_is_refused(exported, tmp_path, key, leaf):
    edit_info(exported, lambda i: i["trajstore"]["features"][key].update(leaf=leaf))
    refused(exported, tmp_path, rf"meta/info.json: entry 'trajstore': features\['{key}'\].leaf must be a list of "
                                r"leaf names \(non-empty, no '/', not '.', '..' or '\*'\)")


def test_an_empty_data_key_is_refused(exported, tmp_path):
    edit_info(exported, lambda i: i["trajstore"]["episode_data"].update(
        {"": {"column": "episode_data/seed", "encoding": "int64"}}))
    refused(exported, tmp_path, "meta/info.json: entry 'trajstore': episode_data has an empty key")


@pytest.mark.parametrize("interrupted, match", [
    ([1, 99999], r"interrupted lists \[99999\], which are not episodes of meta/episodes"),
    ([-1], r"interrupted must be a list of episode indices \(integers >= 0\), got \[-1\]"),
])
def test_interrupted_indices_must_be_exported_episodes(exported, tmp_path, interrupted, match):
    edit_info(exported, lambda i: i["trajstore"].update(interrupted=interrupted))
    refused(exported, tmp_path, rf"meta/info.json: entry 'trajstore':? {match}")


@pytest.mark.parametrize("key", ["nope", "timestamp"])
def test_entry_features_must_be_features_of_info_json(exported, tmp_path, key):
    edit_info(exported, lambda i: i["trajstore"]["features"].update({key: {"leaf": ["x"], "shape": []}}))
    refused(exported, tmp_path, rf"meta/info.json: entry 'trajstore' features name \['{key}'\], which are not "
                                r"features of info.json")


def test_a_value_the_space_refuses_names_file_episode_and_feature(exported, tmp_path):
    table = pq.read_table(exported / DATA_FILE)
    state = table.column("observation.state").to_pylist()
    state[6][1] = float("nan")  # episode 1 (episodes of 5, 4, 6 frames), frame 1
    set_column(exported / DATA_FILE, "observation.state", state)
    refused(exported, tmp_path, rf"LeRobot episode 1 \({exported / DATA_FILE}\): feature 'observation.state' "
                                r"\(leaf 'observation/state'\): .*NaN")


def test_space_bounds_tighter_than_the_data_name_file_episode_and_feature(exported, tmp_path):
    edit_info(exported, lambda i: i["trajstore"]["features"]["count"]["space"].update(high=50))
    refused(exported, tmp_path, rf"LeRobot episode 1 \({exported / DATA_FILE}\): feature 'count' \(leaf 'count'\): "
                                r".*100.*outside")


def test_the_bounds_error_still_passes_unchanged_values(exported, tmp_path):
    import_lerobot(exported, tmp_path / "back", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as rb:
        assert rb.get_at(slice(5, 9))["count"].tolist() == [100, 101, 102, 103]
        assert np.isfinite(rb.get_at(slice(0, 15))["observation"]["state"]).all()


def test_a_final_observation_the_space_refuses_names_the_file_and_episode(exported, tmp_path):
    from .test_roundtrip import FINALS

    table = pq.read_table(exported / FINALS)
    state = table.column("observation.state").to_pylist()
    episodes = table.column("episode_index").to_pylist()
    state[episodes.index(2)][0] = float("nan")
    set_column(exported / FINALS, "observation.state", state, row_group_size=1)  # one row per group, as written
    refused(exported, tmp_path, rf"LeRobot episode 2 \({exported / FINALS}\): .*observation/state.*NaN")
