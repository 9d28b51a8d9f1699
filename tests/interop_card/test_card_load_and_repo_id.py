"""The card of a LeRobot export shows both ways to open it (the folder with ``root=``, the Hub with the repo
id alone), shows info.json without trajstore's private entry (and says where it is), and repo ids are
checked as the Hub checks them before anything is written; the default ``local/<folder>`` is always valid."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")  # trajstore.interop.lerobot writes parquet

from trajstore.interop.lerobot._dataset_card import card_text
from trajstore.interop.lerobot._repo_id import check_repo_id, default_repo_id

LEROBOT_PYTHON = Path("/root/.cache/trajstore-peers/lerobot/bin/python")
INFO = {"codebase_version": "v3.0", "fps": 10, "features": {"action": {"dtype": "float32", "shape": [2]}},
        "trajstore": {"version": 1, "features": {"action": {"leaf": ["action"], "shape": [2]}}}}
GOOD = ["user/pusht", "lerobot/aloha_sim_insertion_human", "a/b", "_a/_b", "u/v1.0", "u-1/x_y-z.2",
        "u/" + "x" * 96]
BAD = ["../../etc", "local/..", "u/..", "u/a..b", "u/a--b", "u/-a", "u/a-", "u/.a", "u/a.", "u/a b", "u/a/b",
       "pusht", "/pusht", "u/", "", "u/a.git", "u/" + "x" * 97, "u/a\nb", "u/é"]


def python_blocks(text):
    return re.findall(r"```python\n(.*?)\n```", text, re.S)


def test_the_card_gives_the_local_and_the_hub_form():
    text = card_text(INFO, repo_id="me/pusht", folder="out")
    blocks = python_blocks(text)
    assert len(blocks) == 2
    assert blocks[0].splitlines()[-1] == 'dataset = LeRobotDataset("me/pusht", root="out")'
    assert blocks[1] == 'dataset = LeRobotDataset("me/pusht")'
    assert "from this folder on disk (`root`: the folder that holds this card)" in text
    assert "or from the Hugging Face Hub, once pushed there:" in text


def test_a_local_repo_id_gets_a_hub_form_under_the_users_name():
    blocks = python_blocks(card_text(INFO, repo_id="local/pusht", folder="pusht"))
    assert blocks[0].splitlines()[-1] == 'dataset = LeRobotDataset("local/pusht", root="pusht")'
    assert blocks[1] == 'dataset = LeRobotDataset("<user>/pusht")'


def test_the_card_shows_info_json_without_the_trajstore_entry():
    text = card_text(INFO, repo_id="me/pusht")
    shown = json.loads(re.search(r"\[meta/info.json\]\(meta/info.json\):\n```json\n(.*?)\n```\n", text, re.S).group(1))
    assert shown == {k: v for k, v in INFO.items() if k != "trajstore"}
    assert "meta/info.json also holds a `trajstore` entry, left out here" in text
    plain = card_text({k: v for k, v in INFO.items() if k != "trajstore"}, repo_id="me/pusht")
    assert "trajstore` entry" not in plain


@pytest.mark.parametrize("repo_id", GOOD)
def test_hub_names_are_accepted(repo_id):
    assert check_repo_id(repo_id) == repo_id


@pytest.mark.parametrize("repo_id", BAD)
def test_other_names_are_refused(repo_id):
    with pytest.raises(ValueError, match=r"repo_id .* is not a Hub dataset name: "):
        check_repo_id(repo_id)
    with pytest.raises(ValueError, match="is not a Hub dataset name"):
        card_text(INFO, repo_id=repo_id)


@pytest.mark.skipif(not LEROBOT_PYTHON.exists(), reason="the LeRobot peer venv (huggingface_hub) is not installed")
def test_huggingface_hub_agrees():
    script = ("import json, sys\nfrom huggingface_hub.utils import validate_repo_id\nout = {}\n"
              "for r in json.loads(sys.argv[1]):\n    try:\n        validate_repo_id(r); out[r] = True\n"
              "    except Exception:\n        out[r] = False\nprint(json.dumps(out))")
    ids = GOOD + [r for r in BAD if r not in ("pusht", "u/é")]  # stricter than the Hub's library: no namespace, non-ASCII
    hub = json.loads(subprocess.run([str(LEROBOT_PYTHON), "-c", script, json.dumps(ids)], capture_output=True,
                                    text=True, check=True).stdout)
    assert hub == {r: r in GOOD for r in ids}


@pytest.mark.parametrize("folder, repo_id", [
    ("pusht", "local/pusht"), ("my data", "local/my_data"), ("..", "local/dataset"), ("a..b--c", "local/a.b-c"),
    ("-x.", "local/x"), ("é", "local/_"), ("x" * 200, "local/" + "x" * 96), ("d.git", "local/d"),
])
def test_the_default_repo_id_is_a_valid_name(folder, repo_id):
    assert default_repo_id(folder) == repo_id


def test_export_refuses_a_bad_repo_id_before_writing_and_names_the_default(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("av")
    from trajstore.interop.lerobot import export_lerobot
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"action": np.zeros((3, 2), np.float32)})
        rb.end_episode()
    with pytest.raises(ValueError, match=r"repo_id '\.\./\.\./etc' is not a Hub dataset name"):
        export_lerobot(tmp_path / "rb", tmp_path / "lr", repo_id="../../etc", fps=10)
    assert not (tmp_path / "lr").exists()
    result = export_lerobot(tmp_path / "rb", tmp_path / "my data", fps=10)
    assert result.repo_id == "local/my_data"
    blocks = python_blocks((tmp_path / "my data/README.md").read_text())
    assert blocks[0].splitlines()[-1] == 'dataset = LeRobotDataset("local/my_data", root="my data")'
