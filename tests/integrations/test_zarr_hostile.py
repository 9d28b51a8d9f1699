"""zarr import of hostile groups: trajstore's attributes are data, checked for type, never keywords of
``end_episode``; declared shapes are checked before anything is read; every case is a FormatError
naming the group and the attribute or array, and the CLI prints one line and exits 2."""

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
pytest.importorskip("numcodecs")
from typer.testing import CliRunner  # noqa: E402

from tests.integrations.zarr_helpers import make_buffer, make_dp_group  # noqa: E402
from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError, InvalidValueError  # noqa: E402
from trajstore.interop.zarr import export_zarr, import_zarr  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A group export_zarr wrote (3 episodes, the second interrupted, with data), never changed."""
    tmp = tmp_path_factory.mktemp("zarr")
    make_buffer(tmp / "rb")
    export_zarr(tmp / "rb", tmp / "z", compressor=None, progress=False)
    return tmp / "z"


@pytest.fixture
def group(tmp_path, exported) -> Path:
    import shutil

    return Path(shutil.copytree(exported, tmp_path / "z"))


def nothing_made(tmp_path) -> None:
    assert not (tmp_path / "rb").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def edit_json(path: Path, edit) -> None:
    value = json.loads(path.read_text())
    edit(value)
    path.write_text(json.dumps(value))


def edit_attrs(group: Path, edit) -> None:
    edit_json(group / ".zattrs", edit)


def set_episode_data(group: Path, key: str, value) -> None:
    edit_attrs(group, lambda a: a["trajstore_episode_data"][0]["data"].update({key: value}))


def run(src, tmp_path):
    return import_zarr(src, tmp_path / "rb", camera="png")


def test_the_export_imports_with_its_episode_data(tmp_path, group):
    run(group, tmp_path)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [rb.episode(k).data for k in range(3)] == [{"task": "push 0", "success": False, "seed": 0},
                                                          {"reason": "reset"},
                                                          {"task": "push 2", "success": False, "seed": 2}]
        assert [rb.episode(k).interrupted for k in range(3)] == [False, True, False]


@pytest.mark.parametrize("key", ["interrupted", "self", "flush"])
def test_data_keys_that_are_end_episode_parameters_are_refused(tmp_path, group, key):
    set_episode_data(group, key, True)
    with pytest.raises(FormatError, match=rf"z: attribute trajstore_episode_data\[0\]: data key\(s\) \['{key}'\] "
                                          "are parameters of end_episode"):
        run(group, tmp_path)
    nothing_made(tmp_path)


def test_final_observation_in_the_data_is_not_a_final_observation(tmp_path, group):
    """A data key final_observation holding a valid observation: refused, not stored as the episode's final
    observation."""
    observation = {"pixels": np.zeros((24, 32, 3), np.uint8).tolist(), "agent_pos": [1.0, 2.0]}
    set_episode_data(group, "final_observation", observation)
    with pytest.raises(FormatError, match=r"data key\(s\) \['final_observation'\] are parameters of end_episode"):
        run(group, tmp_path)
    nothing_made(tmp_path)


def test_reserved_keys_are_end_episode_parameters():
    from trajstore.interop.zarr._attrs import RESERVED_DATA_KEYS

    params = inspect.signature(ReplayBuffer.end_episode).parameters
    # episode_key is a parameter kept in the data (data["episode_key"]): passed through, the key again
    assert set(RESERVED_DATA_KEYS) == {n for n, p in params.items() if p.kind is not p.VAR_KEYWORD} - {"episode_key"}


@pytest.mark.parametrize("value", ["no", 0, 1, None, [True]])
def test_interrupted_must_be_a_json_bool(tmp_path, group, value):
    edit_attrs(group, lambda a: a["trajstore_episode_data"][0].update(interrupted=value))
    with pytest.raises(FormatError, match=r"trajstore_episode_data\[0\]: 'interrupted' must be a JSON bool, got"):
        run(group, tmp_path)
    nothing_made(tmp_path)


@pytest.mark.parametrize("entry, message", [
    ([1, 2], r"trajstore_episode_data\[0\] must be an object, got list"),
    ({"data": {}, "final": 1}, r"trajstore_episode_data\[0\] has the unknown member\(s\) \['final'\]"),
    ({"data": "task"}, r"trajstore_episode_data\[0\]: 'data' must be a JSON dict, got 'task'"),
    ({"data": {}, "id": "0"}, r"trajstore_episode_data\[0\]: 'id' must be a JSON int"),
])
def test_episode_entries_are_checked(tmp_path, group, entry, message):
    edit_attrs(group, lambda a: a["trajstore_episode_data"].__setitem__(0, entry))
    with pytest.raises(FormatError, match=message):
        run(group, tmp_path)
    nothing_made(tmp_path)


def test_too_deep_episode_data_names_the_attribute(tmp_path, group):
    deep: list = []
    for _ in range(200):
        deep = [deep]
    set_episode_data(group, "deep", deep)
    with pytest.raises(InvalidValueError, match=r"trajstore_episode_data\[0\]: episode data 'deep/0/0.*' is nested"):
        run(group, tmp_path)
    nothing_made(tmp_path)


@pytest.mark.parametrize("value", [5, "action", [1, 2], ["action", None], {"a": 1}])
def test_trajstore_keys_must_be_a_list_of_strings(tmp_path, group, value):
    edit_attrs(group, lambda a: a.update(trajstore_keys=value))
    with pytest.raises(FormatError, match=r"z: attribute trajstore_keys must be a list of data keys \(strings\)"):
        run(group, tmp_path)
    nothing_made(tmp_path)


@pytest.mark.parametrize("value", [5, ["observation", "pixels"], ""])
def test_trajstore_path_must_be_a_string(tmp_path, group, value):
    edit_json(group / "data/action/.zattrs", lambda a: a.update(trajstore_path=value))
    with pytest.raises(FormatError, match=r"data/action: attribute trajstore_path must be a leaf name"):
        run(group, tmp_path)
    nothing_made(tmp_path)


@pytest.mark.parametrize("file, message", [(".zattrs", r"z: not a zarr group \(JSONDecodeError"),
                                           ("data/action/.zattrs", r"z: data/ cannot be listed \(JSONDecodeError")])
def test_unreadable_attributes_name_the_group(tmp_path, group, file, message):
    (group / file).write_text('{"trajstore_keys": [')
    with pytest.raises(FormatError, match=message):
        run(group, tmp_path)
    nothing_made(tmp_path)


def test_episode_ends_longer_than_the_data_is_refused_before_reading(tmp_path):
    make_dp_group(tmp_path / "dp")
    edit_json(tmp_path / "dp/meta/episode_ends/.zarray", lambda a: a.update(shape=[2**40], chunks=[2**20]))
    with pytest.raises(FormatError, match=r"meta/episode_ends lists 1099511627776 episodes, more than the 17 steps"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    nothing_made(tmp_path)


def test_a_huge_step_shape_is_refused_before_allocating(tmp_path):
    make_dp_group(tmp_path / "dp")
    edit_json(tmp_path / "dp/data/state/.zarray", lambda a: a.update(shape=[17, 100000, 100000], chunks=[7, 5, 5]))
    with pytest.raises(FormatError, match=r"dp: data/state: shape \(17, 100000, 100000\) float32 is 40000000000 "
                                          r"bytes per step; at most 268435456"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    nothing_made(tmp_path)


def test_a_chunk_that_cannot_be_decoded_names_the_array(tmp_path):
    make_dp_group(tmp_path / "dp")
    chunk = tmp_path / "dp/data/state/1.0"
    chunk.write_bytes(b"x" * 1000)  # (a truncated Blosc chunk decodes to garbage without an error)
    with pytest.raises(FormatError, match=r"data/state: cannot read steps 6\.\.9: RuntimeError: error during blosc"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    nothing_made(tmp_path)


@pytest.mark.parametrize("edit", ["keys", "self"])
def test_cli_prints_one_line_and_exits_2(tmp_path, group, edit):
    if edit == "keys":
        edit_attrs(group, lambda a: a.update(trajstore_keys=5))
    else:
        set_episode_data(group, "self", 1)
    result = CliRunner().invoke(app, ["import", "zarr", str(group), str(tmp_path / "rb"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "Traceback" not in result.output and "attribute trajstore_" in result.output
    nothing_made(tmp_path)


@pytest.mark.parametrize("what", ["chunk", "array", "attrs"])
def test_symlinks_out_of_the_group_are_refused(tmp_path, group, what):
    """zarr would follow them: a chunk, an array folder or an attribute file read from elsewhere."""
    import shutil

    target = {"chunk": "data/action/0.0", "array": "data/action", "attrs": ".zattrs"}[what]
    shutil.move(group / target, tmp_path / "elsewhere")
    (group / target).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FormatError, match=rf"zarr group .*z: the path '{target}' leads outside .*z through a symlink"):
        run(group, tmp_path)
    nothing_made(tmp_path)


def test_symlinks_inside_the_group_are_followed(tmp_path, group):
    import shutil

    shutil.move(group / "data/action/0.0", group / "data/action/real-chunk")
    (group / "data/action/0.0").symlink_to("real-chunk")
    run(group, tmp_path)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert len(rb) == 18


@pytest.mark.parametrize("edit, message", [
    ({"shape": [100000, 100000]}, r"data/action: attribute trajstore_space says shape \[100000, 100000\] per step, "
                                  r"the array is \(18, 2\)"),
    ({"low": None}, r"data/action: attribute trajstore_space is not a trajstore space \(Out of range float values"),
    ({"high": float("nan")}, r"data/action: attribute trajstore_space is not a trajstore space"),
])
def test_a_kept_space_is_checked_before_it_is_built(tmp_path, group, edit, message):
    edit_json(group / "data/action/.zattrs", lambda a: a["trajstore_space"].update(edit))
    with pytest.raises(FormatError, match=message):
        run(group, tmp_path)
    nothing_made(tmp_path)
