"""The dataset card of a LeRobot export: the Hub YAML header as LeRobot 0.4.4 writes it, info.json in the
body, hostile tags and licenses refused before the file is written."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")  # trajstore.interop.lerobot writes parquet

from trajstore.interop.lerobot._dataset_card import card_text, write_dataset_card

LEROBOT_PYTHON = Path("/root/.cache/trajstore-peers/lerobot/bin/python")

INFO = {"codebase_version": "v3.0", "robot_type": "so100", "total_episodes": 2, "total_frames": 30,
        "total_tasks": 1, "fps": 30,
        "features": {"action": {"dtype": "float32", "shape": [2], "names": None},
                     "observation.images.front": {"dtype": "video", "shape": [24, 32, 3],
                                                  "names": ["height", "width", "channels"]},
                     "note": {"dtype": "string", "shape": [1], "names": ["a|b`c"]}}}


def header_and_body(text: str) -> tuple[str, str]:
    assert text.startswith("---\n")
    header, _, body = text[4:].partition("\n---\n")
    return header, body


def json_block(body: str) -> dict:
    found = re.search(r"\[meta/info.json\]\(meta/info.json\):\n```json\n(.*?)\n```\n", body, re.S)
    assert found, body
    return json.loads(found.group(1))


def test_card_header_is_lerobots_and_body_holds_info_json(tmp_path):
    yaml = pytest.importorskip("yaml")
    path = write_dataset_card(tmp_path, INFO, repo_id="user/pusht", tags=["so100", "pusht", "so100"])
    assert path == tmp_path / "README.md"
    header, body = header_and_body(path.read_text(encoding="utf-8"))
    assert header == ("license: apache-2.0\ntask_categories:\n- robotics\ntags:\n- LeRobot\n- so100\n- pusht\n"
                      "configs:\n- config_name: default\n  data_files: data/*/*.parquet")
    assert yaml.safe_load(header) == {"license": "apache-2.0", "task_categories": ["robotics"],
                                      "tags": ["LeRobot", "so100", "pusht"],
                                      "configs": [{"config_name": "default", "data_files": "data/*/*.parquet"}]}
    assert json_block(body) == INFO
    assert "## Dataset Description" in body and "## Dataset Structure" in body
    assert "- **episodes:** 2\n- **frames:** 30\n" in body and "- **License:** apache-2.0" in body
    assert "| `observation.images.front` | video | (24, 32, 3) |" in body and "| `action` | float32 | (2,) |" in body
    assert 'LeRobotDataset("user/pusht")' in body
    assert "visualize_dataset?path=user/pusht" in body


def test_local_repo_has_no_visualizer_link_and_license_is_kept(tmp_path):
    text = card_text(INFO, repo_id="local/out", license="cc-by-nc-4.0")
    header, body = header_and_body(text)
    assert header.splitlines()[0] == "license: cc-by-nc-4.0" and "- **License:** cc-by-nc-4.0" in body
    assert "visualize_dataset" not in body
    assert 'LeRobotDataset("local/out", root="out")' in body and 'LeRobotDataset("<user>/out")' in body


@pytest.mark.parametrize("tag", ["yes", "no", "True", "null", "a: b", "- x", "#hash", "[x]", "{y}", "1.5", "über 😀",
                                 "'quote'", '"dq"', "back\\slash", "x*", "&anchor", "!tag", "%", "@at"])
def test_awkward_tags_read_back_as_the_same_strings(tag):
    yaml = pytest.importorskip("yaml")
    header, _ = header_and_body(card_text(INFO, repo_id="u/d", tags=[tag]))
    assert yaml.safe_load(header)["tags"] == ["LeRobot", tag]


@pytest.mark.parametrize("tags, message", [
    (["x\nlicense: mit"], "control, line-break"),
    (["a\u2028b"], "control, line-break"),
    (["\x7f"], "control"),
    ([""], "non-empty string"),
    (["   "], "non-empty string"),
    ([3], "non-empty string"),
    (["t" * 129], "longer than 128"),
    ([f"t{i}" for i in range(64)], "at most 64"),
    ("so100", "sequence of strings"),
])
def test_bad_tags_are_refused_before_writing(tmp_path, tags, message):
    with pytest.raises(ValueError, match=message):
        write_dataset_card(tmp_path, INFO, repo_id="u/d", tags=tags)
    assert not (tmp_path / "README.md").exists()


@pytest.mark.parametrize("license", ["Apache-2.0", "mit\nfoo: bar", "", "a b", 7])
def test_bad_licenses_are_refused(tmp_path, license):
    with pytest.raises(ValueError, match="not a Hub license identifier"):
        write_dataset_card(tmp_path, INFO, repo_id="u/d", license=license)
    assert not (tmp_path / "README.md").exists()


def test_repo_id_and_info_are_checked(tmp_path):
    with pytest.raises(ValueError, match="repo_id"):
        write_dataset_card(tmp_path, INFO, repo_id="a\nb")
    with pytest.raises(ValueError, match="info must be the dict"):
        write_dataset_card(tmp_path, [1], repo_id="u/d")
    assert not (tmp_path / "README.md").exists()


@pytest.mark.skipif(not LEROBOT_PYTHON.exists(), reason="the LeRobot 0.4.4 venv is not installed")
def test_huggingface_hub_reads_the_card_as_lerobots(tmp_path):
    write_dataset_card(tmp_path, INFO, repo_id="user/pusht", tags=["so100", "a: b", "über"])
    script = f"""
import json
from huggingface_hub import DatasetCard, DatasetCardData
from huggingface_hub.repocard import metadata_load
card = DatasetCard.load({str(tmp_path / 'README.md')!r})
# The header LeRobot's create_lerobot_dataset_card builds for the same arguments.
theirs = DatasetCardData(license="apache-2.0", tags=["LeRobot", "so100", "a: b", "über"],
                         task_categories=["robotics"],
                         configs=[{{"config_name": "default", "data_files": "data/*/*.parquet"}}])
plain = DatasetCardData(license="apache-2.0", tags=["LeRobot", "so100"], task_categories=["robotics"],
                        configs=[{{"config_name": "default", "data_files": "data/*/*.parquet"}}])
print(json.dumps({{"data": card.data.to_dict(), "meta": metadata_load({str(tmp_path / 'README.md')!r}),
                  "theirs": theirs.to_dict(), "plain_yaml": plain.to_yaml()}}))
"""
    done = subprocess.run([str(LEROBOT_PYTHON), "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["data"] == got["theirs"] == got["meta"]
    assert got["data"]["tags"] == ["LeRobot", "so100", "a: b", "über"]
    # Plain tags: the very text huggingface_hub writes for LeRobot.
    assert header_and_body(card_text(INFO, repo_id="u/d", tags=["so100"]))[0] == got["plain_yaml"].strip()
