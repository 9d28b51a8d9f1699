"""The viewer's server answers, checked against what the buffer was given (tests/view/viewer_buffers.py)."""

import io
from urllib.parse import quote

import numpy as np
import pytest
from PIL import Image

from tests.view.conftest import get
from tests.view.viewer_buffers import (FPS, INTERRUPTED, LENGTHS, STATE_NAMES, SUCCESS, TASKS, action,
                                       final_observation, frame_colour, state, steps)
from trajstore.replay_buffer import ReplayBuffer

CAM = quote("observation/pixels", safe="")


def image(answer) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(answer.body)).convert("RGB"))


def test_the_buffer_at_a_glance(server, folder):
    b = get(server, "/api/buffer").json()
    assert (b["steps"], b["episodes"], b["capacity"], b["fps"]) == (sum(LENGTHS), len(LENGTHS), None, FPS)
    cams = {c["key"]: c for c in b["cameras"]}
    assert set(cams) == {"observation/pixels", "observation/wrist"}
    assert (cams["observation/pixels"]["height"], cams["observation/pixels"]["width"]) == (24, 32)
    assert cams["observation/pixels"]["lossless"] and not cams["observation/wrist"]["lossless"]
    leaves = {leaf["key"]: leaf for leaf in b["leaves"]}
    assert leaves["observation/state"]["names"] == STATE_NAMES and leaves["observation/state"]["units"] == "m"
    assert leaves["action"]["names"] == ["action[0]", "action[1]"] and leaves["reward"]["names"] == ["reward"]
    every_state = np.concatenate([state(e, np.arange(n)) for e, n in enumerate(LENGTHS)]).astype(np.float64)
    st = b["stats"]["observation/state"]
    np.testing.assert_allclose(st["mean"], every_state.mean(0), rtol=1e-6)
    np.testing.assert_allclose(st["max"], every_state.max(0), rtol=1e-6)
    assert set(b["data_keys"]) >= {"task", "success", "seed"}


def test_episode_columns_and_selections(server):
    cols = get(server, "/api/episodes").json()
    assert cols["id"] == list(range(len(LENGTHS))) and cols["steps"] == list(LENGTHS)
    assert cols["task"] == list(TASKS) and cols["success"] == list(SUCCESS)
    assert cols["interrupted"] == [e == INTERRUPTED for e in range(len(LENGTHS))]
    picked = get(server, "/api/episodes?select=" + quote("success == true and steps > 26")).json()
    assert picked["ids"] == [e for e, n in enumerate(LENGTHS) if SUCCESS[e] and n > 26] == [0, 4]
    assert get(server, "/api/episodes?select=" + quote("1,3-4")).json()["ids"] == [1, 3, 4]
    assert get(server, "/api/episodes?select=").json()["id"] == cols["id"]  # an empty box: every episode


def test_a_bad_selection_is_a_400_with_the_parsers_words(server):
    a = get(server, "/api/episodes?select=" + quote("success =="))
    assert a.status == 400 and "expected a value" in a.json()["error"]
    a = get(server, "/api/episodes?select=" + quote("tsak == 'push'"))  # a key no episode has: warned, kept
    assert a.status == 200 and a.json()["ids"] == [] and "task" in " ".join(a.json()["notes"])


def test_one_episode_its_times_and_final_observation(server):
    e = get(server, "/api/episode/2").json()
    assert (e["id"], e["steps"], e["start"], e["stop"]) == (2, LENGTHS[2], sum(LENGTHS[:2]), sum(LENGTHS[:3]))
    assert e["data"] == {"task": TASKS[2], "success": SUCCESS[2], "seed": 2}
    np.testing.assert_allclose(e["times"], np.arange(LENGTHS[2]) / FPS)
    final = final_observation(2, LENGTHS[2])
    np.testing.assert_allclose(e["final_observation"]["observation/state"], final["state"])
    assert set(e["final_cameras"]) == {"observation/pixels", "observation/wrist"}
    assert get(server, f"/api/episode/{INTERRUPTED}").json()["interrupted"] is True


def test_series_are_the_appended_values_per_dimension(server):
    s = get(server, "/api/episode/1/series").json()
    n = LENGTHS[1]
    assert s["step"] == list(range(n))
    np.testing.assert_allclose(np.array(s["series"]["observation/state"]).T, state(1, np.arange(n)))
    np.testing.assert_allclose(np.array(s["series"]["action"]).T, action(1, np.arange(n)), rtol=1e-6)
    assert np.array(s["series"]["reward"]).shape == (1, n)


@pytest.mark.parametrize("episode,step", [(0, 0), (0, 29), (4, 17)])
def test_a_lossless_frame_is_the_appended_pixels(server, episode, step):
    a = get(server, f"/api/episode/{episode}/frame/{step}?camera={CAM}")
    assert a.status == 200 and a.ctype == "image/png"
    got = image(a)
    assert got.shape == (24, 32, 3)
    assert (got == np.array(frame_colour(episode, step), np.uint8)).all()


def test_a_jpeg_frame_and_a_final_frame(server):
    a = get(server, "/api/episode/1/frame/5?camera=observation/wrist")
    assert a.ctype == "image/jpeg"
    want = steps(1, LENGTHS[1])["observation"]["wrist"][5].astype(int)
    assert np.abs(image(a).astype(int) - want).max() <= 12  # JPEG twice (stored, then served)
    f = get(server, f"/api/episode/1/final_frame?camera={CAM}")
    assert (image(f) == np.array(frame_colour(1, LENGTHS[1]), np.uint8)).all()  # step n of the pattern


@pytest.mark.parametrize("path,status,words", [
    ("/api/episode/9", 404, "not held"),
    ("/api/episode/-1/series", 404, "not held"),
    (f"/api/episode/0/frame/30?camera={CAM}", 404, "steps 0..29"),
    (f"/api/episode/0/frame/-1?camera={CAM}", 404, "steps 0..29"),
    ("/api/episode/0/frame/1?camera=observation/state", 404, "no camera"),
    ("/api/episode/0/frame/1", 400, "?camera="),
    ("/api/episode/x", 404, "no such page"),
    ("/api/episode/99999999999999999999", 404, "no such page"),
    ("/static/../server.py", 404, "no static file"),
    ("/static/%2e%2e/server.py", 404, "no static file"),
    ("/static/vendor/../../buffer_api.py", 404, "no static file"),
    ("/static//etc/passwd", 404, "no static file"),
    ("/static/buffer_api.py", 404, "no static file"),
    ("/../../etc/passwd", 404, "no such page"),
    ("/api/episodes?" + "&".join(f"a{i}=1" for i in range(20)), 400, "bad query"),
    ("/api/episodes?select=" + "1," * 6000, 400, "at most"),
    ("/api/episodes?select=%ff", 400, "bad query"),
])
def test_bad_requests_get_4xx_json_never_a_traceback(server, path, status, words):
    a = get(server, path)
    assert a.status == status, (a.status, a.body[:200])
    error = a.json()["error"]
    assert words in error and "Traceback" not in error


def test_head_and_the_page(server):
    page = get(server, "/")
    assert page.status == 200 and page.ctype.startswith("text/html")
    head = get(server, "/api/buffer", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert get(server, "/static/vendor/uPlot.iife.min.js").ctype.startswith("text/javascript")


def test_a_server_of_an_open_buffer_leaves_it_open(folder):
    from trajstore.view import serve

    with ReplayBuffer.load_from(folder) as rb:
        with serve(rb) as s:
            assert get(s, "/api/episodes").json()["steps"] == list(LENGTHS)
        assert len(rb[0:2]["action"]) == 2  # still open


def test_a_page_reload_sees_what_a_writer_added(tmp_path):
    from tests.view.viewer_buffers import make_buffer
    from trajstore.view import serve

    writer = make_buffer(tmp_path / "rb", lengths=(5, 6), close=False)
    try:
        with serve(tmp_path / "rb") as s:
            assert get(s, "/api/episodes").json()["steps"] == [5, 6]
            writer.extend(steps(2, 7))
            writer.end_episode(task="late", success=False)
            cols = get(s, "/api/episodes").json()
            assert cols["steps"] == [5, 6, 7] and cols["task"][-1] == "late"
            assert (image(get(s, f"/api/episode/2/frame/6?camera={CAM}")) == frame_colour(2, 6)).all()
    finally:
        writer.close()


def test_a_reader_error_is_a_500_with_its_message(server, monkeypatch):
    def broken(*a, **k):
        raise OSError(5, "Input/output error", "chunk_000001.bin")

    monkeypatch.setattr(server.api.rb, "windows_at", broken)
    a = get(server, f"/api/episode/0/frame/3?camera={CAM}")
    assert a.status == 500 and "Input/output error" in a.json()["error"] and "chunk_000001.bin" in a.json()["error"]
