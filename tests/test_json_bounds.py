"""Deep or huge JSON: every JSON file trajstore reads is checked for nesting depth and number size
before it is parsed (a FormatError naming the file, never a RecursionError), and a value that could
not be written or read back is refused before anything changes."""

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.cli.buffers import make_buffer, steps
from trajstore._fs import read_json, write_json_atomic
from trajstore._json import MAX_DEPTH, check_storable, loads_bounded, text_problem
from trajstore.cli.main import app
from trajstore.cli.remote import parse_storage_options
from trajstore.errors import FormatError, InvalidValueError
from trajstore.ops import verify_buffer
from trajstore.remote.manifest import Manifest
from trajstore.replay_buffer import ReplayBuffer

DEEP = 100_000
runner = CliRunner()


def deep(n=DEEP):
    return "[" * n + "]" * n


def nesting(value):
    """Depth of lists and dicts, without recursion (the reference for text_problem)."""
    top, todo = 0, [(value, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (list, dict)):
            top = max(top, d + 1)
            todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return top


# -- the reader ------------------------------------------------------------------------------
def test_a_deep_document_is_a_format_error_naming_its_source():
    with pytest.raises(FormatError, match=r"here\.json is not valid JSON \(nested deeper than 256 levels"):
        loads_bounded(deep(), source="here.json")
    with pytest.raises(FormatError, match=r"here\.json is not valid JSON \(nested deeper than 256 levels"):
        loads_bounded(deep().encode(), source="here.json")
    assert loads_bounded(deep(MAX_DEPTH), source="x") is not None  # at the bound: read


def test_brackets_and_digits_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 1000, "b": '\\"[[[' * 300, "c": "\\" * 7 + "{" * 500, "d": "9" * 5000,
                       "e": [["x"]]})
    assert text_problem(text) is None and loads_bounded(text, source="x")["e"] == [["x"]]
    assert text_problem(json.dumps(["]" * 500] + [[[[]]]]), max_depth=3) == "nested deeper than 3 levels (at least 4)"


@pytest.mark.parametrize("seed", range(20))
def test_the_depth_scan_agrees_with_the_parsed_depth(seed):
    rng = np.random.default_rng(seed)
    pieces = ['"', "\\", "\\\\", '\\"', "[", "]", "{", "}", "a"]

    def value(d):
        r = rng.random()
        if d > 10 or r < 0.3:
            return "".join(rng.choice(pieces, rng.integers(0, 6)))
        if r < 0.65:
            return [value(d + 1) for _ in range(rng.integers(0, 4))]
        return {"".join(rng.choice(pieces, 3)): value(d + 1) for _ in range(rng.integers(0, 4))}

    for _ in range(50):
        v = value(0)
        text = json.dumps(v)
        for limit in (0, 1, 3, 6):
            assert (text_problem(text, limit) is not None) == (nesting(v) > limit), text


def test_a_number_too_long_to_parse_is_a_format_error():
    with pytest.raises(FormatError, match=r"n\.json is not valid JSON \(a number of more than 400 digits\)"):
        loads_bounded("[" + "7" * 5000 + "]", source="n.json")
    with pytest.raises(FormatError, match="n.json is not valid JSON"):
        loads_bounded(b"{\xff}", source="n.json")


def test_a_deep_file_read_by_read_json_names_the_file(tmp_path):
    (tmp_path / "f.json").write_text(deep())
    with pytest.raises(FormatError, match=rf"statistics: {tmp_path / 'f.json'} is not valid JSON"):
        read_json(tmp_path / "f.json", "statistics")


def test_a_deep_manifest_is_a_damaged_manifest():
    with pytest.raises(FormatError, match="bucket/trajstore-manifest.json is not valid JSON"):
        Manifest.from_bytes(('{"format": "trajstore.remote", "files": ' + deep() + "}").encode(),
                            "bucket/trajstore-manifest.json")


def test_a_deep_storage_option_value_is_kept_as_text():
    assert parse_storage_options([f"key={deep()}"]) == {"key": deep()}
    assert parse_storage_options(['client_kwargs={"a": [1]}']) == {"client_kwargs": {"a": [1]}}


# -- a buffer folder -------------------------------------------------------------------------
def _deepen_last_episode_data(folder, n=DEEP):
    """Replace the last committed episode record's data by a list nested ``n`` levels (bytes only)."""
    meta = json.loads((folder / "trajstore.json").read_text())
    entry = meta["episodes"]["log"]
    log = folder / entry["file"]
    lines = log.read_bytes()[:entry["bytes"]].decode().splitlines()
    head, _, _ = lines[-1].partition('"data":')
    lines[-1] = head + '"data":{"k":' + deep(n) + "}}"
    raw = ("\n".join(lines) + "\n").encode()
    log.write_bytes(raw)
    entry["bytes"] = len(raw)
    (folder / "trajstore.json").write_text(json.dumps(meta))
    return log


def test_a_deep_episode_record_is_damage_naming_the_log(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    log = _deepen_last_episode_data(folder)
    for read_only in (True, False):
        with pytest.raises(FormatError, match=rf"{log} is not valid JSON \(nested deeper than 72"):
            ReplayBuffer.load_from(folder, read_only=read_only)
    report = verify_buffer(folder)
    assert not report.ok and any(str(log) in p.what and "nested deeper" in p.what for p in report.problems)
    result = runner.invoke(app, ["info", str(folder)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and f"{log} is not valid JSON" in result.output


def test_the_log_reads_no_deeper_than_episode_data_is_written(tmp_path):
    deepest = []
    for _ in range(64):
        deepest = [deepest]
    folder = make_buffer(tmp_path / "rb", lengths=[2, 3], data=[{"k": deepest}, {}])
    with ReplayBuffer.load_from(folder) as rb:
        assert rb.episodes[0].data == {"k": deepest}  # the deepest value end_episode takes reads back
    log = _deepen_last_episode_data(folder, 100)
    with pytest.raises(FormatError, match=rf"{log} is not valid JSON \(nested deeper than 72 levels"):
        ReplayBuffer.load_from(folder)


@pytest.mark.parametrize("name", ["stats.json", "storage/storage.json", "storage/@rest/storage.json"])
def test_verify_reports_a_deep_json_file_as_damage(tmp_path, name):
    folder = make_buffer(tmp_path / "rb")
    (folder / name).write_text(deep())
    report = verify_buffer(folder)
    assert not report.ok
    assert any("nested deeper than 256" in p.what for p in report.problems), report.problems
    result = runner.invoke(app, ["verify", str(folder), "--no-progress"])
    assert result.exit_code == 1 and "Traceback" not in result.output


# -- the writer ------------------------------------------------------------------------------
def test_an_integer_json_cannot_hold_is_refused_before_anything_changes(tmp_path):
    folder = make_buffer(tmp_path / "rb", lengths=[3], data=[{}])
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        rb.extend(steps(3, 4))
        with pytest.raises(InvalidValueError, match=r"episode data 'seed' is an integer of 16\d\d\d bits"):
            rb.end_episode(seed=10 ** 4999)
        with pytest.raises(InvalidValueError, match=r"'info/big/0' is an integer of 129 bits"):
            rb.end_episode(info={"big": [2 ** 128]})
        rb.end_episode(seed=2 ** 128 - 1)  # the episode is still open: it closes now, all 4 steps kept
        rb.extend(steps(7, 2))
        rb.end_episode(seed=-(2 ** 127))
    with ReplayBuffer.load_from(folder, read_only=True) as rb:
        assert [len(e) for e in rb.episodes] == [3, 4, 2]
        assert [e.data.get("seed") for e in rb.episodes] == [None, 2 ** 128 - 1, -(2 ** 127)]


def test_check_storable_copies_json_and_names_the_key():
    assert check_storable((np.int64(3), {"a": np.float32(0.5)}), "k") == [3, {"a": 0.5}]
    with pytest.raises(InvalidValueError, match="'k/1' is nan"):
        check_storable([1, math.nan], "k")
    with pytest.raises(InvalidValueError, match="'k' has the key 1"):
        check_storable({1: 2}, "k")
    nested = []
    for _ in range(100):
        nested = [nested]
    with pytest.raises(InvalidValueError, match="'k/0/0.*' is nested deeper than 64 levels"):
        check_storable(nested, "k")


def test_write_json_atomic_refuses_what_it_could_not_read_back(tmp_path):
    path = tmp_path / "f.json"
    path.write_text('{"old": 1}')
    nested: list = []
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    for bad, message in [({"x": 10 ** 5000}, "cannot be written as JSON"), ({"x": math.inf}, "cannot be written"),
                         (nested, "nested deeper than 256")]:
        with pytest.raises(InvalidValueError, match=message):
            write_json_atomic(path, bad)
        assert json.loads(path.read_text()) == {"old": 1} and sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]
