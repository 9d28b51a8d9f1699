// Camera frames: fetched as images by (episode, camera, step), decoded once into ImageBitmaps, kept in a
// bounded cache and prefetched ahead of the cursor while playing, a few requests in flight at most.
"use strict";

const CACHE_FRAMES = 900;   // decoded frames kept (all cameras)
const IN_FLIGHT = 6;        // frame requests at once

class FrameCache {
  constructor(onError) {
    this.frames = new Map();  // "episode|camera|step" -> Promise<ImageBitmap>
    this.queue = [];
    this.running = 0;
    this.onError = onError;
    this.first = null;        // the episode's first held step (a ring's overwrite moves it: the server says 409)
  }

  key(episode, camera, step) { return `${episode}|${camera}|${step}`; }

  url(episode, camera, step) {
    return `/api/episode/${episode}/frame/${step}?camera=${encodeURIComponent(camera)}&first=${this.first}`;
  }

  // A promise of the frame's bitmap; `urgent` requests go before prefetches.
  get(episode, camera, step, urgent) {
    const key = this.key(episode, camera, step);
    let hit = this.frames.get(key);
    if (hit) {
      this.frames.delete(key);  // most recently used last
      this.frames.set(key, hit);
      return hit;
    }
    hit = new Promise((resolve, reject) => {
      const job = () => fetch(this.url(episode, camera, step)).then(async (r) => {
        if (!r.ok) throw new FrameError(r.status, (await r.json().catch(() => ({}))).error || r.statusText);
        return createImageBitmap(await r.blob());
      });
      if (urgent) this.queue.unshift([job, resolve, reject]); else this.queue.push([job, resolve, reject]);
      this.pump();
    });
    hit.catch(() => this.frames.delete(key));
    this.frames.set(key, hit);
    while (this.frames.size > CACHE_FRAMES) this.frames.delete(this.frames.keys().next().value);
    return hit;
  }

  has(episode, camera, step) { return this.frames.has(this.key(episode, camera, step)); }

  pump() {
    while (this.running < IN_FLIGHT && this.queue.length) {
      const [job, resolve, reject] = this.queue.shift();
      this.running++;
      job().then(resolve, reject).finally(() => { this.running--; this.pump(); });
    }
  }

  // Forget queued prefetches and every frame of other episodes.
  keepOnly(episode) {
    this.queue = [];
    for (const key of [...this.frames.keys()]) if (!key.startsWith(`${episode}|`)) this.frames.delete(key);
  }

  prefetch(episode, cameras, from, count, steps) {
    for (let s = from; s < Math.min(steps, from + count); s++) {
      for (const cam of cameras) if (!this.has(episode, cam, s)) this.get(episode, cam, s, false).catch(() => {});
    }
  }
}

class FrameError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// One canvas per camera; draws the frame of a step and marks it (data-drawn-step) once drawn.
class CameraPlayers {
  constructor(root, cameras) {
    this.cameras = cameras;
    this.canvases = new Map();
    root.innerHTML = "";
    for (const cam of cameras) {
      const fig = document.createElement("figure");
      const cap = document.createElement("figcaption");
      cap.textContent = `${cam.key}  ${cam.width}x${cam.height} ${cam.storage}${cam.lossless ? "" : " (lossy)"}`;
      const canvas = document.createElement("canvas");
      canvas.className = "camera";
      canvas.dataset.camera = cam.key;
      canvas.width = cam.width;
      canvas.height = cam.height;
      const scale = Math.max(1, Math.min(4, Math.floor(320 / Math.max(cam.width, cam.height))));  // small frames larger
      canvas.style.width = `${cam.width * scale}px`;
      canvas.style.height = `${cam.height * scale}px`;
      fig.append(cap, canvas);
      root.append(fig);
      this.canvases.set(cam.key, canvas);
    }
  }

  draw(camera, bitmap, step) {
    const canvas = this.canvases.get(camera);
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    canvas.dataset.drawnStep = String(step);
  }

  drawnAll(step) {
    for (const canvas of this.canvases.values()) if (canvas.dataset.drawnStep !== String(step)) return false;
    return true;
  }

  clear() { for (const canvas of this.canvases.values()) delete canvas.dataset.drawnStep; }
}
