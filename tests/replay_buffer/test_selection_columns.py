"""Selections evaluated over columns (selection_columns) give exactly what the per-episode predicate gives:
random data with missing keys, mixed kinds, nested values, unicode and large integers, random expressions."""

import json
import random
import warnings

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.data_columns import MISSING, EpisodeRow
from trajstore.replay_buffer.episode_query import parse_selection
from trajstore.replay_buffer.selection_columns import data_column, select_mask
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"action": BoxSpace(-1, 1, (), np.float32)})
KEYS = ["success", "seed", "task", "score", "info", "flag"]
FIELDS = ["id", "steps", "interrupted", "done", "overwritten"]
BIG = 2 ** 60 + 1
VALUES = [True, False, None, 0, 1, -1, 2, 3, 7, 1.0, 0.5, -2.5, 1e300, BIG, 2 ** 60, -BIG, 2 ** 100,
          "", "push", "Push", "pusht", "é", "日本", "a\"b", "back\\slash", "z\u0000", "\U0001f600",
          [], [1], {"a": 1}, {}, [True], {"success": True}]
LITERALS = ["true", "false", "null", "0", "1", "-1", "2", "3", "1.0", "0.5", "-2.5", "1e300", str(BIG),
            str(2 ** 60), "1152921504606846976.0", "1e999", "''", "'push'", "'Push'", "'pusht'", "'é'",
            "'日本'", "'a\\\"b'", "'\U0001f600'", "'z'"]
OPS = ["==", "!=", "<", "<=", ">", ">="]


def random_data(rng: random.Random) -> dict:
    return {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.7}


def random_expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 3 and r < 0.3:
        op = rng.choice([" and ", " or ", " && ", " || "])
        return f"({random_expression(rng, depth + 1)}{op}{random_expression(rng, depth + 1)})"
    if depth < 3 and r < 0.4:
        return rng.choice(["not ", "!"]) + random_expression(rng, depth + 1)
    name = rng.choice(KEYS + FIELDS + ["data.success", "data.id", "missing_key"])
    if rng.random() < 0.15:
        return name
    return f"{name} {rng.choice(OPS)} {rng.choice(LITERALS)}"


def test_columns_equal_the_per_episode_predicate_on_random_values():
    rng = random.Random(0)
    n = 400
    datas = [random_data(rng) for _ in range(n)]
    fields = {"id": np.arange(10, 10 + n, dtype=np.int64), "steps": np.array([rng.randrange(0, 5) for _ in range(n)]),
              "done": np.array([rng.random() < 0.5 for _ in range(n)]),
              "interrupted": np.array([rng.random() < 0.5 for _ in range(n)]),
              "overwritten": np.array([rng.random() < 0.2 for _ in range(n)])}
    rows = [EpisodeRow(*(fields[f][k].item() for f in ("id", "steps", "done", "interrupted", "overwritten")), d)
            for k, d in enumerate(datas)]
    data = {key: [d.get(key, MISSING) for d in datas] for key in KEYS + ["id", "missing_key"]}
    selected = 0
    for _ in range(600):
        sel = parse_selection(random_expression(rng))
        assert sel.plan is not None
        mask = select_mask(sel.plan, fields, {k: data[k] for k in sel.keys}, MISSING)
        expected = [sel.predicate(r) for r in rows]
        assert mask.tolist() == expected, sel.text
        selected += sum(expected)
    assert 0 < selected < 600 * n  # the expressions select some episodes, not all


def test_large_integers_and_floats_compare_as_python_does():
    values = [BIG, 2 ** 60, 1.152921504606847e18, 1, 1.0, True, MISSING]
    fields = {"id": np.arange(7, dtype=np.int64)}
    got = {text: select_mask(parse_selection(text).plan, fields, {"x": values}, MISSING).tolist()
           for text in ("x == 1152921504606846976.0", f"x == {BIG}", "x > 1152921504606846976", "x == 1",
                        "x != 1", "x == true", "x >= 1e999")}
    assert got == {"x == 1152921504606846976.0": [False, True, True, False, False, False, False],
                   f"x == {BIG}": [True, False, False, False, False, False, False],
                   "x > 1152921504606846976": [True, False, False, False, False, False, False],
                   "x == 1": [False, False, False, True, True, False, False],
                   "x != 1": [True, True, True, False, False, True, True],
                   "x == true": [False, False, False, False, False, True, False],
                   "x >= 1e999": [False] * 7}


def test_a_value_json_does_not_give_is_left_to_the_predicate():
    class Text(str):
        pass

    assert data_column([Text("a"), "b", MISSING], MISSING) is None
    assert data_column([object(), MISSING], MISSING) is None
    column = data_column(["a", 1, None, MISSING, [2]], MISSING)
    assert column is not None and column.kinds.tolist() == [4, 3, 1, 0, 5]


@pytest.mark.parametrize("reopen", ["memory", "read_only", "writable"])
def test_buffer_selections_equal_the_per_episode_predicate(tmp_path, reopen):
    rng = random.Random(1)
    path = None if reopen == "memory" else str(tmp_path / "rb")
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, capacity=300,
                             **dict_storage_kwargs_from_space(SPACE))
    for k in range(120):
        rb.extend({"action": np.zeros(rng.randrange(1, 5), np.float32)})
        rb.end_episode(interrupted=rng.random() < 0.3, flush=k % 7 == 0, **random_data(rng))
    rb.extend({"action": np.zeros(2, np.float32)})  # the open episode
    if reopen != "memory":
        rb.close()
        rb = ReplayBuffer.load_from(path, read_only=reopen == "read_only")
    episodes = rb.episodes
    plain = list(episodes)
    assert any(e.overwritten for e in plain) and not plain[-1].done
    cols = episodes.columns()
    for _ in range(300):
        sel = parse_selection(random_expression(rng))
        expected = [e.id for e in plain if sel.predicate(e)]
        values = {k: episodes.data_values(k) for k in sel.keys}
        mask = select_mask(sel.plan, cols, values, MISSING)  # the path select takes
        assert cols["id"][mask].tolist() == expected, sel.text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a key no episode has (warned of, tested elsewhere)
            assert sel.select(episodes) == expected, sel.text
    rb.close()



@pytest.mark.parametrize("ascii_only", [True, False])
def test_scanned_values_equal_the_parsed_ones(ascii_only):
    from trajstore.replay_buffer.data_columns import top_level_values

    rng = random.Random(2)
    long = ["x" * 100, "é" * 40, 12345678901234567890123, -1.2345678901234567e-300, "a,b}c", "{", "t", "n"]
    lines, datas = [], []
    for k in range(500):
        data = {key: rng.choice(VALUES + long) for key in KEYS if rng.random() < 0.6}
        datas.append(data)
        record = {"id": k, "start": k, "stop": k + 1, "final": -1, "interrupted": False, "data": data}
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=ascii_only).encode() + b"\n")
    lines[7] = lines[7][:-3] + b',"seed":5,"seed":-6}}\n'  # a key given twice: the last one, as json.loads
    datas[7]["seed"] = -6
    span = b"".join(lines)
    lengths = np.array([len(x) for x in lines], np.int64)
    starts = np.cumsum(lengths) - lengths
    for key in KEYS + ["data", "id", "none"]:
        got = top_level_values(span, starts, lengths, key, "test.log", 300)
        expected = [d.get(key, MISSING) for d in datas]
        assert [type(v) for v in got] == [type(v) for v in expected] and got == expected, key
