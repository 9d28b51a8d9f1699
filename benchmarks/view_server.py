"""``trajstore view`` at scale: how long a 20,000-episode buffer takes to open in the viewer, and how fast
frames are served while stepping, against 30 fps playback.

Cases:

* **open**: a buffer of ``--episodes`` episodes (``--steps`` steps each: a 96x96 JPEG camera, state (8,),
  action (2,), data ``task``/``success``/``seed``). Timed from ``serve(path)`` (the buffer opened) until
  ``/api/buffer`` and ``/api/episodes`` are answered (the page's first two requests); with Chromium and
  Playwright also in the browser: from ``page.goto`` until the episode list shows every episode and the
  first episode's frame and plots are drawn (``window.trajstoreViewer.ready``).
* **frames**: one episode of ``--frame-steps`` steps per camera kind (96x96 JPEG, 480x640 JPEG, 480x640
  H.264 video), every frame fetched in order over HTTP keep-alive as the page does when stepping;
  frames/s and the ratio to 30 fps (above 1: stepping keeps up with playback). With the browser also:
  ArrowRight pressed for every step, each time waiting until the next frame is drawn on the canvas
  (bounded by Playwright's round trip), and the page's own playback at 1x and 4x (the cameras declare
  30 fps): steps/s from play to the last step, and the steps whose frame was never drawn.

    python benchmarks/view_server.py [--episodes 20000] [--steps 5] [--frame-steps 300] [--no-browser]

Prints one table (``--markdown`` for a Markdown one). No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np

PLAYBACK_FPS = 30.0
CAMERA = "observation/pixels"


def space(height: int, width: int, kind: str):
    from trajstore.spaces import BoxSpace, DictSpace

    cam = BoxSpace(0, 255, (height, width, 3), np.uint8, metadata={"kind": kind, "fps": 30})
    return DictSpace({"observation": DictSpace({"pixels": cam, "state": BoxSpace(-10, 10, (8,), np.float32)}),
                      "action": BoxSpace(-1, 1, (2,), np.float32)})


def make_buffer(path: Path, episodes: int, steps: int, height: int = 96, width: int = 96, kind: str = "image"):
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, ImageStorage, VideoStorage, dict_storage_kwargs_from_space

    sp = space(height, width, kind)
    kwargs = dict_storage_kwargs_from_space(sp, kind_storage_cls={"image": ImageStorage, "video": VideoStorage})
    y, x = np.mgrid[0:height, 0:width]
    rb = ReplayBuffer.create(DictStorage, sp, cache_path=path, **kwargs)
    rng = np.random.default_rng(0)
    for e in range(episodes):
        s = np.arange(steps)
        pixels = ((x[None] + y[None] * 2 + s[:, None, None] * 5) % 256).astype(np.uint8)
        batch = {"observation": {"pixels": np.repeat(pixels[..., None], 3, -1),
                                 "state": rng.standard_normal((steps, 8)).astype(np.float32)},
                 "action": rng.uniform(-1, 1, (steps, 2)).astype(np.float32)}
        rb.extend(batch)
        rb.end_episode(flush=(e + 1) % 1000 == 0, task=("push", "stack")[e % 2], success=bool(e % 3), seed=e)
    rb.close()
    return path


class Client:
    """One keep-alive connection, as a browser tab holds."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: {r.status} {body[:200]!r}")
        return body


def open_case(folder: Path) -> float:
    from trajstore.view import serve

    t0 = time.perf_counter()
    with serve(folder) as s:
        c = Client(s.port)
        c.get("/api/buffer")
        c.get("/api/episodes")
        return time.perf_counter() - t0


def frames_case(folder: Path, steps: int) -> float:
    from trajstore.view import serve

    with serve(folder) as s:
        c = Client(s.port)
        c.get(f"/api/episode/0/frame/0?camera={quote(CAMERA, safe='')}")  # the first read opens the files
        t0 = time.perf_counter()
        for i in range(steps):
            c.get(f"/api/episode/0/frame/{i}?camera={quote(CAMERA, safe='')}")
        return steps / (time.perf_counter() - t0)


def browser():
    """``(playwright, browser)`` on Debian's chromium, or ``None`` when either is missing."""
    if shutil.which("chromium") is None:
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    pw = sync_playwright().start()
    return pw, pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])


def browser_open(b, folder: Path, episodes: int) -> float:
    from trajstore.view import serve

    with serve(folder) as s:
        page = b.new_page(viewport={"width": 1280, "height": 800})
        t0 = time.perf_counter()
        page.goto(s.url)
        page.wait_for_function(f"() => window.trajstoreViewer && window.trajstoreViewer.ready && "
                               f"window.trajstoreViewer.episodes === {episodes}", timeout=120_000)
        seconds = time.perf_counter() - t0
        page.close()
        return seconds


def browser_steps(b, folder: Path, steps: int) -> float:
    from trajstore.view import serve

    with serve(folder) as s:
        page = b.new_page(viewport={"width": 1280, "height": 800})
        page.goto(s.url + "#episode=0&step=0")
        page.wait_for_function("() => window.trajstoreViewer && window.trajstoreViewer.ready", timeout=120_000)
        canvas = f'canvas.camera[data-camera="{CAMERA}"]'
        t0 = time.perf_counter()
        for i in range(1, steps):
            page.keyboard.press("ArrowRight")
            page.wait_for_selector(f'{canvas}[data-drawn-step="{i}"]', timeout=60_000)
        rate = (steps - 1) / (time.perf_counter() - t0)
        page.close()
        return rate


def browser_playback(b, folder: Path, steps: int, speed: str) -> tuple[float, int]:
    """``(steps/s, steps not drawn)`` of the page's own playback at ``speed`` over ``steps`` steps: every
    drawn step is recorded by watching the canvas's data-drawn-step."""
    from trajstore.view import serve

    with serve(folder) as s:
        page = b.new_page(viewport={"width": 1280, "height": 800})
        page.goto(s.url + "#episode=0&step=0")
        page.wait_for_function("() => window.trajstoreViewer && window.trajstoreViewer.ready", timeout=120_000)
        page.select_option("#speed", speed)
        page.evaluate(f"""() => {{
            window.__drawn = new Set();
            const c = document.querySelector('canvas.camera[data-camera="{CAMERA}"]');
            new MutationObserver(() => window.__drawn.add(c.dataset.drawnStep))
                .observe(c, {{attributes: true, attributeFilter: ["data-drawn-step"]}});
        }}""")
        t0 = time.perf_counter()
        page.click("#play")
        page.wait_for_function(f"() => window.trajstoreViewer.step === {steps - 1} && window.trajstoreViewer.ready",
                               timeout=300_000)
        rate = (steps - 1) / (time.perf_counter() - t0)
        drawn = page.evaluate("() => window.__drawn.size")
        page.close()
        return rate, steps - 1 - drawn


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20_000)
    ap.add_argument("--steps", type=int, default=5, help="steps per episode of the open case")
    ap.add_argument("--frame-steps", type=int, default=300, help="steps of the episode of the frames case")
    ap.add_argument("--no-browser", action="store_true", help="server figures only")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="trajstore-view-bench-"))
    b = None if args.no_browser else browser()
    try:
        t0 = time.perf_counter()
        many = make_buffer(tmp / "many", args.episodes, args.steps)
        built = time.perf_counter() - t0
        rows.append(("open", f"{args.episodes} episodes: serve + /api/buffer + /api/episodes",
                     f"{open_case(many):.3f} s", f"built in {built:.1f} s"))
        if b is not None:
            rows.append(("open", f"{args.episodes} episodes: in Chromium until the list and episode 0 are drawn",
                         f"{browser_open(b[1], many, args.episodes):.3f} s", ""))
        for label, (h, w, kind) in {"96x96 JPEG": (96, 96, "image"), "480x640 JPEG": (480, 640, "image"),
                                    "480x640 video": (480, 640, "video")}.items():
            folder = make_buffer(tmp / label.replace(" ", "-"), 1, args.frame_steps, h, w, kind)
            rate = frames_case(folder, args.frame_steps)
            rows.append(("frames", f"{label}: {args.frame_steps} frames in order over HTTP",
                         f"{rate:.0f} frames/s", f"{rate / PLAYBACK_FPS:.1f}x 30 fps"))
            if b is not None:
                rate = browser_steps(b[1], folder, min(args.frame_steps, 120))
                rows.append(("frames", f"{label}: ArrowRight in Chromium, each frame drawn",
                             f"{rate:.0f} steps/s", f"{rate / PLAYBACK_FPS:.1f}x 30 fps (Playwright's round trip)"))
                for speed in ("1", "4"):
                    rate, missed = browser_playback(b[1], folder, args.frame_steps, speed)
                    rows.append(("playback", f"{label}: the page playing at {speed}x ({float(speed) * 30:g} steps/s asked)",
                                 f"{rate:.1f} steps/s", f"{missed} steps not drawn"))
    finally:
        if b is not None:
            b[1].close()
            b[0].stop()
        shutil.rmtree(tmp, ignore_errors=True)
    header = ("case", "what", "figure", "note")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in [header, *rows]:
            print(f"{r[0]:<8} {r[1]:<72} {r[2]:>14}  {r[3]}")


if __name__ == "__main__":
    main()
