"""select_source_episodes: the --episodes of every import."""

import pytest

from trajstore.errors import InvalidValueError
from trajstore.interop.source_selection import SourceEpisode, select_source_episodes

SOURCE = [SourceEpisode(3, 10, {"success": True}), SourceEpisode(1, 5, {"success": False}),
          SourceEpisode(7, 30, {"success": True, "task": "lift"})]


def test_none_takes_all_in_source_order():
    assert select_source_episodes(SOURCE, None, source="x") == [3, 1, 7]


def test_id_text_keeps_source_order():
    assert select_source_episodes(SOURCE, "7,1", source="x") == [1, 7]
    assert select_source_episodes(SOURCE, "1,3", source="x") == [3, 1]


def test_expression_over_data_and_steps():
    assert select_source_episodes(SOURCE, "success == true", source="x") == [3, 7]
    assert select_source_episodes(SOURCE, "steps > 8 and not task", source="x") == [3]


def test_index_list_keeps_given_order():
    assert select_source_episodes(SOURCE, [7, 3], source="x") == [7, 3]


@pytest.mark.parametrize("episodes, match", [([2], r"\[2\] are not in the source \(its episodes: 1..7\)"),
                                              ([3, 3], "more than once"), ("4", r"\[4\] are not in the source"),
                                              ("0-2", r"\[0, 2\] are not in the source \(its episodes: 1..7\)"),
                                              ("success == 2", "selects none"), ([True], "must be an int")])
def test_bad_selection_is_refused(episodes, match):
    with pytest.raises(InvalidValueError, match=match):
        select_source_episodes(SOURCE, episodes, source="x")
