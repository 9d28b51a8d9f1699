"""The README's screenshot of the viewer (docs/viewer.png is a copy of this test's artefact): real PushT
demonstrations in Chromium, the page showing the recorded frame and a plot per low-dim leaf."""

from __future__ import annotations

import io

import numpy as np
import pytest

from tests.view.browser import artifacts_dir, launch
from trajstore.view import serve

pytest.importorskip("gym_pusht")

CAMERA = "observation/pixels"


@pytest.mark.slow
def test_the_page_over_pusht_demonstrations(tmp_path, monkeypatch):
    from PIL import Image

    from trajstore.recording.pusht_recording import record_pusht
    from trajstore.replay_buffer import ReplayBuffer

    summary = record_pusht(tmp_path / "pusht", 3, progress=False)
    assert summary.successes >= 1
    monkeypatch.chdir(tmp_path)  # the page's title is the path given: "pusht", as a user types it
    pw, browser = launch()
    try:
        with serve("pusht") as s:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(s.url + "#episode=1&step=40")
            page.wait_for_function("() => window.trajstoreViewer && window.trajstoreViewer.ready", timeout=60_000)
            page.wait_for_selector(f'canvas.camera[data-camera="{CAMERA}"][data-drawn-step="40"]', timeout=60_000)
            drawn = page.evaluate(f"""() => {{
                const c = document.querySelector('canvas.camera[data-camera="{CAMERA}"]');
                return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data);
            }}""")
            out = artifacts_dir(tmp_path) / "viewer-pusht.png"
            page.screenshot(path=str(out))
    finally:
        browser.close()
        pw.stop()
    with ReplayBuffer.load_from(tmp_path / "pusht") as rb:
        want = rb[rb.episode(1).start + 40]["observation"]["pixels"].astype(int)
    got = np.array(drawn, np.int64).reshape(want.shape[0], want.shape[1], 4)[..., :3]
    assert np.abs(got - want).mean() < 3  # the recorded frame (JPEG stored, JPEG served)
    shot = Image.open(io.BytesIO(out.read_bytes()))
    assert shot.size == (1280, 900)
