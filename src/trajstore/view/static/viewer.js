// The page: loads the buffer, the episode list and the chosen episode; keeps players, plots, readout and
// the URL hash on one cursor (episode, step); playback, keyboard and the selection filter.
"use strict";

const $ = (id) => document.getElementById(id);
const state = window.trajstoreViewer = { episode: null, step: 0, playing: false, episodes: 0, ready: false };
const app = { buffer: null, list: null, frames: null, players: null, plots: null, episode: null, fps: 30, token: 0 };

async function getJSON(path) {
  const r = await fetch(path);
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new FrameError(r.status, body.error || r.statusText);
  return body;
}

function message(text) { $("message").textContent = text || ""; }

async function start() {
  try {
    app.buffer = await getJSON("/api/buffer");
  } catch (err) {
    message(`could not read the buffer: ${err.message}`);
    return;
  }
  const b = app.buffer;
  app.fps = b.fps || 30;
  document.title = `trajstore view: ${b.title}`;
  $("title").textContent = b.title;
  $("summary").textContent = `${b.steps} steps · ${b.episodes} episodes · ` +
    `${b.fps ? `${b.fps} fps` : "no fps (played at 30)"} · ${b.capacity ? `ring of ${b.capacity}` : "unbounded"}`;
  app.frames = new FrameCache();
  app.players = new CameraPlayers($("players"), b.cameras);
  app.plots = new LeafPlots($("plots"), b.leaves, (step) => { pause(); showStep(step); });
  app.list = new EpisodeList($("list"), $("list-inner"), (id) => chooseEpisode(id, 0));
  renderStats();
  await loadEpisodes();
  const hash = new URLSearchParams(location.hash.slice(1));
  const wanted = hash.has("episode") ? Number(hash.get("episode")) : null;
  const first = app.list.columns.id.length ? app.list.columns.id[0] : null;
  const id = wanted !== null && app.list.positionOf.has(wanted) ? wanted : first;
  if (id === null) { message("the buffer holds no episode yet"); return; }
  await chooseEpisode(id, hash.has("step") ? Number(hash.get("step")) : 0);
}

async function loadEpisodes() {
  app.list.setColumns(await getJSON("/api/episodes"));
  state.episodes = app.list.shown.length;
  $("filter-status").textContent = `${state.episodes} episodes`;
}

async function chooseEpisode(id, step) {
  pause();
  const token = ++app.token;  // a newer choice wins over answers still on their way
  state.ready = false;
  try {
    const [ep, series] = await Promise.all([getJSON(`/api/episode/${id}`), getJSON(`/api/episode/${id}/series`)]);
    if (token !== app.token) return;
    app.episode = ep;
    app.frames.first = ep.first;
    app.frames.keepOnly(id);
    app.players.clear();
    state.episode = id;
    document.body.dataset.episode = String(id);
    app.list.choose(id);
    $("scrub").max = String(Math.max(0, ep.steps - 1));
    app.plots.show(series);
    renderEpisode(ep);
    message(ep.steps ? "" : `episode ${id} has no steps yet`);
    await showStep(Math.max(0, Math.min(ep.steps - 1, Number.isFinite(step) ? step : 0)));
  } catch (err) {
    if (token === app.token) message(`episode ${id}: ${err.message}`);
  }
}

// Move the cursor to `step`: readout, slider, plots and hash at once, then the frames once decoded.
async function showStep(step) {
  const ep = app.episode;
  if (!ep || !ep.steps) { state.ready = true; return; }
  step = Math.max(0, Math.min(ep.steps - 1, step));
  state.step = step;
  state.ready = false;
  $("scrub").value = String(step);
  const t = ep.times ? ` · ${ep.times[step] === null ? "?" : ep.times[step].toFixed(2)} s` : "";
  $("readout").textContent = `step ${step} / ${ep.steps - 1}${t}`;
  app.plots.setStep(step);
  history.replaceState(null, "", `#episode=${ep.id}&step=${step}`);
  const cams = app.buffer.cameras.map((c) => c.key);
  const draws = cams.map((cam) => app.frames.get(ep.id, cam, step, true).then((bitmap) => {
    if (state.episode === ep.id && state.step === step) app.players.draw(cam, bitmap, step);
  }));
  app.frames.prefetch(ep.id, cams, step + 1, state.playing ? Math.ceil(app.fps * 2) : 3, ep.steps);
  try {
    await Promise.all(draws);
    if (state.step === step && state.episode === ep.id) { state.ready = true; message(""); }
  } catch (err) {
    if (err.status === 409) { chooseEpisode(ep.id, step); return; }  // a ring overwrote the episode's start
    message(`episode ${ep.id} step ${step}: ${err.message}`);
    state.ready = true;
  }
}

// Playback at fps x speed; at most one step per frame interval and only once the shown frame is drawn,
// so slow frames slow the playback rather than skip steps.
let lastTick = 0;
function tick(now) {
  if (!state.playing) return;
  const interval = 1000 / (app.fps * Number($("speed").value));
  if (now - lastTick >= interval && state.ready) {
    lastTick = now;
    if (state.step >= app.episode.steps - 1) { pause(); return; }
    showStep(state.step + 1);
  }
  requestAnimationFrame(tick);
}

function play() {
  if (!app.episode || !app.episode.steps) return;
  if (state.step >= app.episode.steps - 1) showStep(0);
  state.playing = true;
  $("play").innerHTML = "&#10074;&#10074;";
  lastTick = 0;
  requestAnimationFrame(tick);
}

function pause() {
  state.playing = false;
  $("play").innerHTML = "&#9654;";
}

function renderEpisode(ep) {
  const rows = [["id", ep.id], ["steps", ep.steps], ["done", ep.done], ["interrupted", ep.interrupted],
                ["overwritten", ep.overwritten], ["times", ep.time_source]];
  for (const [k, v] of Object.entries(ep.data)) rows.push([k, typeof v === "object" ? JSON.stringify(v) : v]);
  $("episode-data").innerHTML = table(["", ""], rows.map(([k, v]) => [`<th>${escapeHtml(k)}</th>`, escapeHtml(v)]), true);
  const final = $("final");
  if (!ep.final_observation) { final.textContent = "none"; return; }
  const values = Object.entries(ep.final_observation).map(([k, v]) =>
    [`<th>${escapeHtml(k)}</th>`, v.map((x) => (x === null ? "NaN" : fmt(x))).join(", ")]);
  final.innerHTML = table(["", ""], values, true) + '<div class="final-frames">' + ep.final_cameras.map((cam) =>
    `<img alt="${escapeHtml(cam)}" title="${escapeHtml(cam)}" src="/api/episode/${ep.id}/final_frame?camera=${encodeURIComponent(cam)}">`).join("") + "</div>";
}

function renderStats() {
  const stats = app.buffer.stats, rows = [];
  const names = new Map(app.buffer.leaves.map((l) => [l.key, l.names]));
  for (const [leaf, s] of Object.entries(stats)) {
    const n = Array.isArray(s.mean) ? s.mean.length : 1;
    const at = (field, i) => (Array.isArray(s[field]) ? s[field][i] : s[field]);
    for (let i = 0; i < n; i++) {
      const label = n === 1 ? leaf : (names.get(leaf) || [])[i] || `${leaf}[${i}]`;
      rows.push([escapeHtml(label), ...["mean", "std", "min", "max"].map((f) => fmt(at(f, i)))]);
    }
  }
  $("stats").innerHTML = rows.length ? table(["leaf", "mean", "std", "min", "max"], rows)
    : escapeHtml(app.buffer.stats_error || "none");
}

function table(head, rows, noHead) {
  const h = noHead ? "" : `<tr>${head.map((x) => `<th>${x}</th>`).join("")}</tr>`;
  return `<table>${h}${rows.map((r) => `<tr>${r.map((c, i) => (String(c).startsWith("<th>") ? c
    : `<td class="${i ? "num" : ""}">${c}</td>`)).join("")}</tr>`).join("")}</table>`;
}

function fmt(x) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return escapeHtml(x);
  return Math.abs(x) >= 1e5 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : String(Number(x.toFixed(4)));
}

// The selection filter: the server evaluates the text as `trajstore copy --episodes` does.
let filterTimer = null;
async function applyFilter() {
  const text = $("filter").value.trim(), status = $("filter-status");
  status.classList.remove("error");
  try {
    if (!text) {
      await loadEpisodes();
    } else {
      await loadEpisodes();  // the newest episodes first: a live writer may have added some
      const answer = await getJSON(`/api/episodes?select=${encodeURIComponent(text)}`);
      app.list.showIds(answer.ids);
      state.episodes = app.list.shown.length;
      status.textContent = `${state.episodes} of ${app.list.columns.id.length} episodes` +
        (answer.notes && answer.notes.length ? ` · ${answer.notes.join("; ")}` : "");
    }
  } catch (err) {
    status.classList.add("error");
    status.textContent = err.message;
  }
}

function bind() {
  $("play").addEventListener("click", () => (state.playing ? pause() : play()));
  $("back").addEventListener("click", () => { pause(); showStep(state.step - 1); });
  $("forward").addEventListener("click", () => { pause(); showStep(state.step + 1); });
  $("scrub").addEventListener("input", (ev) => { pause(); showStep(Number(ev.target.value)); });
  $("filter").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { clearTimeout(filterTimer); applyFilter(); }
  });
  $("filter").addEventListener("input", () => { clearTimeout(filterTimer); filterTimer = setTimeout(applyFilter, 600); });
  document.addEventListener("keydown", (ev) => {
    if (ev.target === $("filter") || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const moves = { ArrowLeft: -1, ArrowRight: 1 };
    if (ev.key in moves) { ev.preventDefault(); pause(); showStep(state.step + moves[ev.key]); }
    else if (ev.key === "ArrowUp" || ev.key === "ArrowDown") {
      ev.preventDefault();
      const id = app.list.neighbour(ev.key === "ArrowUp" ? -1 : 1);
      if (id !== null && id !== state.episode) chooseEpisode(id, 0);
    } else if (ev.key === " ") { ev.preventDefault(); state.playing ? pause() : play(); }
  });
  window.addEventListener("hashchange", () => {
    const hash = new URLSearchParams(location.hash.slice(1));
    const id = Number(hash.get("episode")), step = Number(hash.get("step") || 0);
    if (hash.has("episode") && id !== state.episode) chooseEpisode(id, step);
    else if (step !== state.step) showStep(step);
  });
}

bind();
start();
