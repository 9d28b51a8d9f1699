// player.js: one canvas per camera of the chosen episode, the shared control bar and the playback clock.
// Frames are fetched as images, decoded once into ImageBitmaps and kept per (camera, step) for the
// current episode only; the steps ahead of the cursor are prefetched with a few requests in flight.
"use strict";
window.TV = window.TV || {};

(function () {
  const IN_FLIGHT = 4; // frame requests at once: enough to hide latency, few enough to keep the server responsive
  const CACHE_BYTES = 384 * 1024 * 1024; // decoded pixels kept (RGBA), over all cameras
  const AHEAD_SECONDS = 1.5; // prefetched ahead of the cursor while playing
  const PAUSED_AHEAD = 8, PAUSED_BEHIND = 4; // around the cursor while paused, so stepping is instant
  const RETRY_MS = 2000; // a failed frame is not asked again sooner

  /** The error message of a failed answer: the server's {"error": ...} or the HTTP status. */
  async function answerError(r) {
    const body = await r.json().catch(() => null);
    const err = new Error(body && body.error ? body.error : `HTTP ${r.status} ${r.statusText}`);
    err.status = r.status;
    return err;
  }

  class FrameCache {
    constructor(onSettled) {
      this.onSettled = onSettled; // (entry) when a frame is decoded or has failed
      this.generation = 0;
      this.reset(null, [], 0, null);
    }

    /** Forget every frame (closing the bitmaps) and serve episode `episode` (`first`: its first held step). */
    reset(episode, cameras, n, first) {
      for (const e of (this.entries || new Map()).values()) {
        if (e.ctrl) e.ctrl.abort();
        if (e.bitmap) e.bitmap.close();
      }
      this.generation++;
      this.episode = episode;
      this.cameras = cameras;
      this.n = n;
      this.first = first;
      this.entries = new Map(); // "camera\0step" -> {camera, step, status, bitmap, error, ctrl}
      this.queue = []; // entries waiting for a request, most wanted first
      this.inflight = 0;
      this.center = 0;
      const pixels = cameras.reduce((sum, c) => sum + 4 * c.width * c.height, 0) || 1;
      this.maxSteps = Math.max(16, Math.floor(CACHE_BYTES / pixels)); // steps whose frames fit the budget
      this.maxFrames = this.maxSteps * Math.max(1, cameras.length);
    }

    get(camera, step) { return this.entries.get(`${camera}\0${step}`); }

    /** Every camera's frame of `step` is decoded or has failed (nothing left to wait for). */
    settled(step) {
      return this.cameras.every((c) => {
        const e = this.get(c.key, step);
        return e !== undefined && (e.status === "ready" || e.status === "error");
      });
    }

    /** Ask for a frame; `urgent` goes before the prefetches. */
    want(camera, step, urgent) {
      const key = `${camera}\0${step}`;
      let e = this.entries.get(key);
      // A failed frame is asked again when the user comes back to it a little later (a server restarted).
      if (e && e.status === "error" && urgent && performance.now() - e.failedAt > RETRY_MS) {
        this.entries.delete(key);
        e = undefined;
      }
      if (e && e.status !== "queued") return e;
      if (e) this.queue.splice(this.queue.indexOf(e), 1);
      else {
        e = {camera, step, status: "queued", bitmap: null, error: null, ctrl: null};
        this.entries.set(key, e);
      }
      if (urgent) this.queue.unshift(e); else this.queue.push(e);
      this._pump();
      return e;
    }

    /** Queue the frames of [center - behind, center + ahead], nearest first; drop queued ones outside. */
    prefetch(center, ahead, behind) {
      this.center = center;
      ahead = Math.min(ahead, Math.floor(this.maxSteps / 2)); // never prefetch what the budget evicts at once
      const lo = Math.max(0, center - behind), hi = Math.min(this.n - 1, center + ahead);
      this.queue = this.queue.filter((e) => {
        const keep = e.step >= lo && e.step <= hi;
        if (!keep) this.entries.delete(`${e.camera}\0${e.step}`);
        return keep;
      });
      const order = [];
      for (let s = center; s <= hi; s++) order.push(s);
      for (let s = center - 1; s >= lo; s--) order.push(s);
      const queued = new Set(this.queue);
      this.queue = [];
      for (const s of order) {
        for (const c of this.cameras) {
          const e = this.get(c.key, s);
          if (!e) this.want(c.key, s, false);
          else if (queued.has(e)) this.queue.push(e);
        }
      }
      this._pump();
    }

    _pump() {
      while (this.inflight < IN_FLIGHT && this.queue.length) this._load(this.queue.shift());
    }

    async _load(e) {
      const generation = this.generation;
      e.status = "loading";
      e.ctrl = new AbortController();
      this.inflight++;
      const url = `/api/episode/${this.episode}/frame/${e.step}?camera=${encodeURIComponent(e.camera)}` +
        (this.first === null || this.first === undefined ? "" : `&first=${this.first}`);
      try {
        const r = await fetch(url, {signal: e.ctrl.signal}).catch((err) => {
          if (err.name === "AbortError") throw err;
          throw new Error("the server does not answer (is `trajstore view` still running?)");
        });
        if (!r.ok) throw await answerError(r);
        const bitmap = await createImageBitmap(await r.blob());
        if (generation !== this.generation) { bitmap.close(); return; }
        e.bitmap = bitmap;
        e.status = "ready";
      } catch (err) {
        if (generation !== this.generation) return; // aborted by a reset: nobody waits for it
        e.status = "error";
        e.error = err;
        e.failedAt = performance.now();
      } finally {
        if (generation === this.generation) {
          e.ctrl = null;
          this.inflight--;
          this._evict();
          this._pump();
        }
      }
      this.onSettled(e);
    }

    /** Keep the cache within its budget by closing the frames farthest from the cursor. */
    _evict() {
      if (this.entries.size <= this.maxFrames) return;
      const ready = [...this.entries.values()].filter((e) => e.status === "ready");
      ready.sort((a, b) => Math.abs(b.step - this.center) - Math.abs(a.step - this.center));
      for (const e of ready.slice(0, this.entries.size - this.maxFrames)) {
        e.bitmap.close();
        this.entries.delete(`${e.camera}\0${e.step}`);
      }
    }
  }

  class Player {
    /** els: {players, play, back, forward, scrub, speed, readout}; hooks: {onStep, onPlaying, onDrawn, onError, onStale}. */
    constructor(els, hooks) {
      this.els = els;
      this.hooks = hooks;
      this.cache = new FrameCache((e) => this._settled(e));
      this.canvases = new Map();
      this.cameras = [];
      this.episode = null;
      this.times = null;
      this.n = 0;
      this.step = 0;
      this.fps = 30;
      this.speed = 1;
      this.playing = false;
      this._raf = 0;
      this._bind();
    }

    /** Show episode `ep` (the /api/episode answer) of `buffer` at `step`. */
    load(buffer, ep, step) {
      this.pause();
      this.cameras = buffer.cameras;
      this.fps = buffer.fps > 0 ? buffer.fps : 30;
      this.episode = ep.id;
      this.n = ep.steps;
      this.times = ep.times;
      this.cache.reset(ep.id, this.cameras, this.n, ep.first);
      this._buildCanvases();
      this.els.scrub.max = String(Math.max(0, this.n - 1));
      this.els.scrub.disabled = this.n === 0;
      this._show(this._clamp(step));
    }

    /** No episode: empty players, disabled controls. */
    clear() {
      this.pause();
      this.episode = null;
      this.n = 0;
      this.step = 0;
      this.cache.reset(null, [], 0, null);
      this.canvases.clear();
      this.els.players.replaceChildren();
      this.els.scrub.max = "0";
      this.els.scrub.disabled = true;
      this.els.readout.textContent = "";
    }

    /** Every camera's canvas shows the current step. */
    allDrawn() {
      for (const canvas of this.canvases.values()) if (canvas.dataset.drawnStep !== String(this.step)) return false;
      return true;
    }

    seek(step) {
      if (this.episode === null || this.n === 0) return;
      step = this._clamp(step);
      this._anchor(step);
      if (step !== this.step) this._show(step);
    }

    /** Step by `delta` frames, pausing playback. */
    stepBy(delta) {
      this.pause();
      this.seek(this.step + delta);
    }

    toggle() { if (this.playing) this.pause(); else this.play(); }

    play() {
      if (this.playing || this.episode === null || this.n < 2) return;
      if (this.step >= this.n - 1) this._show(0); // at the end: play from the start
      this.playing = true;
      this._anchor(this.step);
      this._prefetch();
      this._raf = requestAnimationFrame((t) => this._tick(t));
      this._playingChanged();
    }

    pause() {
      if (!this.playing) return;
      this.playing = false;
      cancelAnimationFrame(this._raf);
      this._prefetch();
      this._playingChanged();
    }

    setSpeed(speed) {
      this.speed = speed > 0 ? speed : 1;
      this._anchor(this.step);
      if (this.playing) this._prefetch();
    }

    // -- playback ------------------------------------------------------------------------------
    // The clock maps time since the anchor to a step. At 1x and slower the cursor moves one step at a
    // time and waits for frames that are not there yet (no frame is skipped); faster, it jumps to the
    // furthest decoded step the clock has reached. When frames lag, the clock restarts from the cursor
    // instead of racing to catch up.
    _anchor(step) {
      this._anchorStep = step;
      this._anchorTime = performance.now();
    }

    _tick(now) {
      if (!this.playing) return;
      const target = Math.min(this.n - 1,
        this._anchorStep + Math.floor(((now - this._anchorTime) * this.fps * this.speed) / 1000));
      if (target > this.step) {
        const limit = this.speed <= 1 ? this.step + 1 : target;
        let next = -1;
        for (let s = limit; s > this.step; s--) if (this.cache.settled(s)) { next = s; break; }
        if (next < target) this._anchor(next < 0 ? this.step : next);
        if (next > 0) this._show(next);
      }
      if (this.step >= this.n - 1) { this.pause(); return; }
      this._raf = requestAnimationFrame((t) => this._tick(t));
    }

    _prefetch() {
      if (this.episode === null || !this.cameras.length) return;
      if (this.playing) {
        const ahead = Math.min(240, Math.max(8, Math.ceil(this.fps * this.speed * AHEAD_SECONDS)));
        this.cache.prefetch(this.step, ahead, 1);
      } else {
        this.cache.prefetch(this.step, PAUSED_AHEAD, PAUSED_BEHIND);
      }
    }

    // -- drawing -------------------------------------------------------------------------------
    _show(step) {
      this.step = step;
      for (const c of this.cameras) {
        const e = this.cache.want(c.key, step, true);
        if (e.status === "ready" || e.status === "error") this._draw(e);
      }
      this._prefetch();
      this.els.scrub.value = String(step);
      this.els.readout.textContent = this._readout(step);
      this.hooks.onStep(step);
    }

    _settled(e) {
      if (e.status === "error" && e.error && e.error.status === 409) { this.hooks.onStale(this.step); return; }
      if (e.step === this.step) this._draw(e);
    }

    _draw(e) {
      const canvas = this.canvases.get(e.camera);
      if (!canvas) return;
      if (e.status === "error") {
        const ctx = canvas.getContext("2d");
        ctx.fillStyle = "#e4e4e7";
        ctx.fillRect(0, 0, canvas.width, canvas.height);
        delete canvas.dataset.drawnStep;
        canvas.dataset.error = e.error.message;
        this.hooks.onError(`frame ${e.step} of ${e.camera}: ${e.error.message}`);
        return;
      }
      // A frame of another size than the buffer says (a CHW leaf shown as HWC): show it as it is.
      if (canvas.width !== e.bitmap.width || canvas.height !== e.bitmap.height) {
        canvas.width = e.bitmap.width;
        canvas.height = e.bitmap.height;
      }
      canvas.getContext("2d").drawImage(e.bitmap, 0, 0);
      delete canvas.dataset.error;
      canvas.dataset.drawnStep = String(e.step);
      this.hooks.onDrawn();
    }

    _buildCanvases() {
      this.canvases.clear();
      const figures = this.cameras.map((cam) => {
        const fig = document.createElement("figure");
        fig.className = "player";
        const canvas = document.createElement("canvas");
        canvas.className = "camera";
        canvas.dataset.camera = cam.key;
        canvas.width = cam.width;
        canvas.height = cam.height;
        const scale = displayScale(cam.width, cam.height);
        const cssWidth = Math.round(cam.width * scale);
        canvas.style.width = `${cssWidth}px`;
        fig.style.width = `${cssWidth + 18}px`; // the caption wraps under the frame instead of widening it
        if (scale >= 2) canvas.classList.add("pixelated");
        const cap = document.createElement("figcaption");
        const name = document.createElement("span");
        name.className = "camera-key";
        name.textContent = cam.key;
        const info = document.createElement("span");
        info.className = "camera-info";
        info.textContent = `${cam.width}×${cam.height} · ${cam.storage}${cam.lossless === false ? " (lossy)" : ""}`;
        cap.append(name, info);
        fig.append(canvas, cap);
        this.canvases.set(cam.key, canvas);
        return fig;
      });
      if (!figures.length) {
        const none = document.createElement("div");
        none.className = "note";
        none.textContent = "this buffer has no camera";
        figures.push(none);
      }
      this.els.players.replaceChildren(...figures);
    }

    _readout(step) {
      if (this.n === 0) return "no steps";
      const t = this.times && this.times[step] !== null && this.times[step] !== undefined
        ? this.times[step] : step / this.fps;
      return `step ${step} / ${this.n - 1} · ${t.toFixed(2)} s`;
    }

    _clamp(step) {
      step = Math.round(Number(step));
      if (!Number.isFinite(step)) step = 0;
      return Math.min(Math.max(step, 0), Math.max(0, this.n - 1));
    }

    _playingChanged() {
      this.els.play.classList.toggle("playing", this.playing);
      this.els.play.setAttribute("aria-label", this.playing ? "pause" : "play");
      this.hooks.onPlaying(this.playing);
    }

    _bind() {
      const els = this.els;
      els.play.addEventListener("click", () => this.toggle());
      els.back.addEventListener("click", () => this.stepBy(-1));
      els.forward.addEventListener("click", () => this.stepBy(1));
      els.scrub.addEventListener("input", () => this.seek(Number(els.scrub.value)));
      els.speed.addEventListener("change", () => this.setSpeed(Number(els.speed.value)));
    }
  }

  /** CSS scale of a camera: small frames up by a whole factor (to ~300 px), large ones down to 360 px high. */
  function displayScale(width, height) {
    const side = Math.max(width, height, 1);
    if (side < 160) return Math.max(1, Math.min(8, Math.floor(300 / side)));
    return Math.min(1, 360 / Math.max(height, 1));
  }

  TV.Player = Player;
})();
