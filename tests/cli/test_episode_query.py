"""The episode selection parser: ids, expressions over episode data, and clear errors (never eval)."""

import os
import subprocess
import sys
import warnings

import pytest

from trajstore.errors import InvalidValueError, SelectionWarning
from trajstore.replay_buffer.episode_query import parse_selection, tokenize
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


# -- hostile selections: deep, huge, far-reaching ranges; keys no episode has --------------------
@pytest.mark.parametrize("text", ["(" * 5000 + "success" + ")" * 5000, "not " * 5000 + "success",
                                  "! " * 5000 + "success", "(not " * 3000 + "success" + ")" * 3000])
def test_deep_nesting_is_refused_cleanly(text):
    with pytest.raises(InvalidValueError, match="parentheses and 'not' nest deeper than 64 levels"):
        parse_selection(text)


def test_nesting_at_the_bound_is_read():
    assert chosen("(" * 32 + "not " * 32 + "success" + ")" * 32) == [0, 2, 3]
    assert chosen("not " * 63 + "success") == [1, 4]


def test_a_far_reaching_range_is_checked_without_expanding_it():
    selection = parse_selection("0-1000000000000")
    assert selection.ranges == ((0, 1_000_000_000_000),)
    with pytest.raises(InvalidValueError, match=r"episodes \[5, 6, 7, 8, 9\] and 999999999991 more are not held "
                                                r"\(held ids: 0\.\.4\)"):
        selection.select(EPISODES)
    assert parse_selection("3-4, 0-1, 1-2").ranges == ((0, 4),) and chosen("3-4, 0-1, 1-2") == [0, 1, 2, 3, 4]
    with pytest.raises(InvalidValueError, match="below 2\\*\\*63"):
        parse_selection("9" * 5000)
    with pytest.raises(InvalidValueError, match="below 2\\*\\*63"):
        parse_selection("0-9223372036854775808")


def test_a_long_number_literal_is_refused():
    with pytest.raises(InvalidValueError, match="the number at position 7 has more than 64 characters"):
        parse_selection("seed > " + "1" * 5000)


class CountingStr(str):
    """A str that counts the characters of every slice taken of it (re-slicing the text at every
    token made parsing quadratic)."""

    sliced = 0

    def __getitem__(self, key):
        out = str.__getitem__(self, key)
        CountingStr.sliced += len(out)
        return out


def test_the_text_is_scanned_once_not_re_sliced_per_token():
    text = "(success == true or seed >= 3) and " * 600 + "task == 'x'"
    CountingStr.sliced = 0
    pred = parse_selection(CountingStr(text))
    assert CountingStr.sliced <= 2 * len(text)
    assert pred.select(EPISODES) == []  # no episode has task 'x'
    assert [t[1] for t in tokenize(text)[:6]] == ["(", "success", "==", "true", "or", "seed"]
    assert len(tokenize(text)) == 600 * 10 + 3


def test_a_megabyte_expression_parses_in_one_pass(tmp_path):
    # 1.2 MB: the old tokenizer took 45 to 55 s (it copied the rest of the text at every token); now about 3 s.
    code = ("from trajstore.replay_buffer.episode_query import parse_selection\n"
            "text = '(success == true or seed >= 3) and ' * 34000 + 'task == \"x\"'\n"
            "assert len(text) > 1_190_000\n"
            "print(callable(parse_selection(text).predicate))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=25,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def test_a_key_no_held_episode_has_warns_with_the_closest_key():
    with pytest.warns(SelectionWarning, match=r"no held episode has the data key 'sucess' \(did you mean "
                                              r"'success'\?\)"):
        assert chosen("sucess == true") == []
    with pytest.warns(SelectionWarning, match=r"'nested.operatr' \(did you mean 'nested.operator'\?\)"):
        assert chosen("data.nested.operatr == 'ana' or seed == 0") == [0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chosen("success == true and nested.operator == 'x'") == []  # held keys: no warning
        assert parse_selection("nothing").select([]) == []  # nothing held: nothing to compare with
