"""The viewer's page in a real browser (headless Chromium, tests/view/browser.py) over the test buffer of
tests/view/viewer_buffers.py, whose main camera shows a flat colour naming the episode and step: the
episode list, a decoded frame read back from the canvas, plots with one point per step, stepping with the
keyboard, a selection filtering the list, the URL keeping the place. A screenshot is kept."""

from __future__ import annotations

import pytest

from tests.view.browser import artifacts_dir, launch
from tests.view.viewer_buffers import LENGTHS, SUCCESS, frame_colour, make_buffer
from trajstore.view import serve

CAMERA = "observation/pixels"
CANVAS = f'canvas.camera[data-camera="{CAMERA}"]'


@pytest.fixture(scope="module")
def browser():
    pw, b = launch()
    yield b
    b.close()
    pw.stop()


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    with serve(make_buffer(tmp_path_factory.mktemp("browser") / "rb")) as s:
        yield s


@pytest.fixture
def page(browser, viewer):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.errors = errors
    yield page
    page.close()


def state(page) -> dict:
    return page.evaluate("() => Object.assign({}, window.trajstoreViewer)")


def wait_ready(page, episode: int, step: int) -> None:
    page.wait_for_function(f"() => window.trajstoreViewer && window.trajstoreViewer.ready && "
                           f"window.trajstoreViewer.episode === {episode} && window.trajstoreViewer.step === {step}",
                           timeout=30_000)
    page.wait_for_selector(f'{CANVAS}[data-drawn-step="{step}"]', timeout=30_000)


def centre_pixel(page) -> list[int]:
    """RGB at the centre of the main camera's canvas, as drawn."""
    return page.evaluate(f"""() => {{
        const c = document.querySelector('{CANVAS}');
        return Array.from(c.getContext('2d').getImageData(c.width >> 1, c.height >> 1, 1, 1).data).slice(0, 3);
    }}""")


def test_list_frame_plots_and_stepping(page, viewer, tmp_path):
    page.goto(viewer.url)
    wait_ready(page, 0, 0)
    assert state(page)["episodes"] == len(LENGTHS)
    assert centre_pixel(page) == list(frame_colour(0, 0))
    points = page.eval_on_selector('.plot[data-leaf="observation/state"]', "el => el.dataset.points")
    assert int(points) == LENGTHS[0]
    assert page.locator(".plot").count() == 3  # state, action, reward
    page.keyboard.press("ArrowRight")
    wait_ready(page, 0, 1)
    assert centre_pixel(page) == list(frame_colour(0, 1))
    page.keyboard.press("ArrowLeft")
    wait_ready(page, 0, 0)
    page.keyboard.press("ArrowDown")  # the next episode in the list
    wait_ready(page, 1, 0)
    assert centre_pixel(page) == list(frame_colour(1, 0))
    assert "episode=1" in page.url
    page.screenshot(path=str(artifacts_dir(tmp_path) / "viewer-test-buffer.png"), full_page=True)
    assert page.errors == []


def test_a_link_opens_the_same_place(page, viewer):
    page.goto(viewer.url + "#episode=4&step=17")
    wait_ready(page, 4, 17)
    assert centre_pixel(page) == list(frame_colour(4, 17))
    assert page.errors == []


def test_a_selection_filters_the_list(page, viewer):
    page.goto(viewer.url)
    wait_ready(page, 0, 0)
    box = page.locator("#filter")
    box.fill("success == true and steps > 26")
    box.press("Enter")
    want = [e for e, n in enumerate(LENGTHS) if SUCCESS[e] and n > 26]
    page.wait_for_function(f"() => window.trajstoreViewer.episodes === {len(want)}", timeout=30_000)
    assert page.locator("body").inner_text().count(f"{len(want)} of {len(LENGTHS)}") >= 1
    box.fill("success ==")
    box.press("Enter")
    page.wait_for_function("() => document.body.innerText.includes('expected a value')", timeout=30_000)
    box.fill("")
    box.press("Enter")
    page.wait_for_function(f"() => window.trajstoreViewer.episodes === {len(LENGTHS)}", timeout=30_000)
    assert [e for e in page.errors if "400" not in e] == []  # the bad selection's 400 is the one error
