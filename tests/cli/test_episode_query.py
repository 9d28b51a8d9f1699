"""The episode selection parser: ids, expressions over episode data, and clear errors (never eval)."""

import pytest

from trajstore.replay_buffer.episode_query import parse_selection
from trajstore.replay_buffer.episodes import Episode


def ep(i, n=10, data=None, interrupted=False, overwritten=False):
    return Episode(i, 0, n, overwritten, not interrupted, interrupted, False, data)


EPISODES = [ep(0, 7, {"task": "push the T", "success": True, "seed": 0}),
            ep(1, 5, {"task": "push the T", "success": False, "seed": 1}),
            ep(2, 9, {"task": "stack", "success": True, "seed": 2.5}, interrupted=True),
            ep(3, 6, {"task": "stack", "success": 1, "nested": {"operator": "ana"}}),
            ep(4, 3, None)]


def chosen(text):
    return parse_selection(text).select(EPISODES)


@pytest.mark.parametrize("text, ids", [
    ("0,3", [0, 3]), ("1-3", [1, 2, 3]), (" 4 , 0-1 ", [0, 1, 4]), ("2,2,1-2", [1, 2]),
])
def test_ids(text, ids):
    assert chosen(text) == ids


@pytest.mark.parametrize("text, ids", [
    ("success == true", [0, 2]),  # 1 is not true: bools and numbers never compare equal
    ("success == 1", [3]),
    ('task == "push the T"', [0, 1]),
    ("task == 'stack' and not interrupted", [3]),
    ("task=='stack'&&!interrupted", [3]),
    ("success == false or seed >= 2", [1, 2]),
    ("seed > 0.5", [1, 2]),
    ("(seed < 1 or seed > 2) and success", [0, 2]),
    ("not success", [1, 4]),
    ("task != 'stack'", [0, 1, 4]),  # a missing key equals nothing, so != holds
    ("seed < 100", [0, 1, 2]),  # ...and orders against nothing
    ("task < 5", []),  # a string and a number are never ordered
    ("data.nested.operator == 'ana'", [3]),
    ("nested.operator == \"ana\"", [3]),
    ("steps >= 7", [0, 2]),
    ("id == 4 or overwritten", [4]),
    ("interrupted", [2]),
    ("done and success == true", [0]),
    ("data.id == 0", []),  # data.<key> always reads the data, not the episode's id
    ('task == "a \\"quoted\\" task"', []),
    ("task == null", []),
])
def test_expressions(text, ids):
    assert chosen(text) == ids


@pytest.mark.parametrize("text, message", [
    ("", "empty episode selection"),
    ("success ==", "nothing more at the end, expected a value"),
    ("success = true", "unexpected character '='"),
    ("(success", "expected ')'"),
    ("success true", "unexpected 'true' at position 8"),
    ("1 == success", "expected a name"),
    ("__import__('os')", "expected 'and', 'or' or the end"),
    ("task == 'x", "unexpected character"),
    ("5-2", "runs backwards"),
    ("and", "expected a name"),
])
def test_malformed_selections_are_refused_with_the_place(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_selection(text)


def test_unknown_ids_are_named():
    with pytest.raises(ValueError, match=r"episodes \[7, 8\] are not held \(held ids: 0\.\.4\)"):
        chosen("0,7-8")
