// viewer.js: the page. Reads the buffer and its episode list, opens the chosen episode in the players,
// plots and episode panel, and keeps them, the URL hash and window.trajstoreViewer on one place
// (episode, step). The filter box, the keyboard and the message line live here too.
"use strict";

(function () {
  const TV = window.TV;
  const $ = (id) => document.getElementById(id);
  const HASH_WHILE_PLAYING_MS = 1000; // browsers throttle replaceState beyond ~200 calls in 10 s
  const FILTER_DEBOUNCE_MS = 500;
  const STATS_DIMS = 16; // dimensions listed per leaf in the statistics table

  const app = {
    buffer: null, list: null, player: null, plots: null,
    episode: null, // the chosen id
    ep: null, // its /api/episode answer, once loaded
    token: 0, // a newer choice of episode wins over answers still on their way
    filterToken: 0, filterTimer: 0, filterActive: false,
    hashTimer: 0, ready: false, message: null, reloading: false,
  };

  // The read-only state the tests (and a curious user in the console) read.
  window.trajstoreViewer = Object.freeze({
    get episode() { return app.episode; },
    get step() { return app.player ? app.player.step : 0; },
    get playing() { return app.player ? app.player.playing : false; },
    get episodes() { return app.list ? app.list.shown.length : 0; },
    get ready() { return app.ready; },
    get error() { return app.message; },
  });

  // -- server ------------------------------------------------------------------------------------
  /** GET a JSON answer; a 4xx/5xx throws an Error with the server's message and `status`. */
  async function api(path) {
    let r;
    try {
      r = await fetch(path);
    } catch (err) {
      throw new Error("the server does not answer (is `trajstore view` still running?)");
    }
    if (!r.ok) {
      const body = await r.json().catch(() => null);
      const err = new Error(body && body.error ? body.error : `HTTP ${r.status} ${r.statusText}`);
      err.status = r.status;
      throw err;
    }
    return r.json();
  }

  // -- message line ------------------------------------------------------------------------------
  function showMessage(text, kind = "error") {
    app.message = text;
    $("message-text").textContent = text;
    $("message").className = kind;
    $("message").hidden = false;
  }

  function clearMessage() {
    app.message = null;
    $("message").hidden = true;
  }

  // -- start -------------------------------------------------------------------------------------
  async function start() {
    app.list = new TV.EpisodeList($("episode-list"), $("episode-spacer"), (id) => chooseEpisode(id, 0));
    app.plots = new TV.PlotSet($("plots"), (step) => app.player.seek(step));
    app.plots.onDrawn = updateReady;
    app.player = new TV.Player(
      {players: $("players"), play: $("play"), back: $("step-back"), forward: $("step-forward"),
       scrub: $("scrub"), speed: $("speed"), readout: $("readout")},
      {onStep, onPlaying, onDrawn: updateReady, onError: (text) => showMessage(text), onStale});
    bindKeys();
    bindFilter();
    $("message-close").addEventListener("click", clearMessage);
    $("refresh").addEventListener("click", refresh);
    window.addEventListener("hashchange", followHash);
    try {
      await loadBuffer();
    } catch (err) {
      $("buffer-title").textContent = "no buffer";
      showMessage(`could not read the buffer: ${err.message}`);
      return;
    }
    openPlace(readHash());
  }

  async function loadBuffer() {
    const [buffer, columns] = await Promise.all([api("/api/buffer"), api("/api/episodes")]);
    app.buffer = buffer;
    renderHeader(buffer);
    renderStats(buffer);
    renderSkipped(buffer);
    app.list.setColumns(columns);
    if (!app.filterActive) app.list.showIds(null);
    updateCount();
  }

  /** Open the place a hash names; the first episode when it names none (or one that is not held). */
  function openPlace(place) {
    if (place.episode !== null && app.list.has(place.episode)) {
      chooseEpisode(place.episode, place.step ?? 0);
      return;
    }
    const first = app.list.firstShown();
    if (place.episode !== null) {
      showMessage(`episode ${place.episode} is not held in this buffer` +
                  (first === null ? "" : `; showing episode ${first}`), "notice");
    }
    if (first === null) {
      if (place.episode === null) showMessage("the buffer holds no episode yet", "notice");
      setReady(false);
      return;
    }
    chooseEpisode(first, 0, {keepMessage: place.episode !== null});
  }

  /** Read the buffer and the list again (a live writer adds episodes), keeping the place. */
  async function refresh() {
    try {
      await loadBuffer();
      if (app.filterActive) await applyFilter();
    } catch (err) {
      showMessage(`could not read the buffer: ${err.message}`);
      return;
    }
    if (app.episode !== null && app.list.has(app.episode)) {
      const k = app.list.positionOf.get(app.episode);
      if (!app.ep || app.list.columns.steps[k] !== app.ep.steps) {
        chooseEpisode(app.episode, app.player.step, {fromFirst: app.ep ? app.ep.first : null});
      }
      else app.list.choose(app.episode);
    } else {
      openPlace({episode: app.episode, step: null});
    }
  }

  // -- the chosen episode ------------------------------------------------------------------------
  /** Open episode `id` at `step`. `fromFirst`: the episode's `first` that `step` counts from, when a ring
   * may have moved its start since (the same recorded step is shown again). */
  async function chooseEpisode(id, step = 0, {keepMessage = false, fromFirst = null} = {}) {
    const token = ++app.token;
    app.player.pause();
    app.episode = id;
    app.ep = null;
    setReady(false);
    document.body.dataset.episode = String(id);
    app.list.choose(id);
    writeHash(id, step);
    let ep, series;
    try {
      [ep, series] = await Promise.all([api(`/api/episode/${id}`), api(`/api/episode/${id}/series`)]);
    } catch (err) {
      if (token !== app.token) return;
      showMessage(`episode ${id}: ${err.message}`);
      app.player.clear();
      app.plots.destroy();
      renderEpisode(null, `episode ${id} could not be read`);
      return;
    }
    if (token !== app.token) return;
    if (!keepMessage) clearMessage();
    app.ep = ep;
    if (fromFirst !== null && Number.isInteger(ep.first)) step -= ep.first - fromFirst;
    app.plots.build(app.buffer.leaves, series);
    renderEpisode(ep);
    app.player.load(app.buffer, ep, step);
    if (ep.steps === 0) showMessage(`episode ${id} holds no steps yet`, "notice");
    updateReady();
  }

  function onStep(step) {
    app.plots.setStep(step);
    document.body.dataset.step = String(step);
    if (app.ep) writeHash(app.ep.id, step);
    updateReady();
  }

  function onPlaying(playing) {
    document.body.dataset.playing = String(playing);
    if (!playing && app.ep) writeHash(app.ep.id, app.player.step, true);
  }

  /** A ring overwrote the episode's start since it was loaded: its steps count from elsewhere now. */
  function onStale(step) {
    if (app.reloading || app.episode === null) return;
    app.reloading = true;
    const id = app.episode;
    chooseEpisode(id, step, {keepMessage: true, fromFirst: app.ep ? app.ep.first : null}).finally(() => { app.reloading = false; });
    showMessage(`a ring overwrote the start of episode ${id}: reloaded it`, "notice");
  }

  function updateReady() {
    const ep = app.ep;
    setReady(ep !== null && ep.id === app.episode && app.plots.allDrawn() &&
             (ep.steps === 0 || app.player.allDrawn()));
  }

  function setReady(ready) {
    app.ready = ready;
    document.body.dataset.ready = String(ready);
  }

  // -- URL hash: #episode=3&step=10 ----------------------------------------------------------------
  function readHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    const num = (name) => {
      const v = q.get(name);
      return v !== null && /^-?\d+$/.test(v.trim()) ? Number(v) : null;
    };
    return {episode: num("episode"), step: num("step")};
  }

  /** Keep the place in the hash; while playing at most once a second, so the browser does not throttle. */
  function writeHash(id, step, now = false) {
    const put = () => {
      app.hashTimer = 0;
      const text = `#episode=${id}&step=${step}`;
      if (location.hash !== text) history.replaceState(null, "", text);
    };
    clearTimeout(app.hashTimer);
    if (now || !app.player.playing) put();
    else app.hashTimer = setTimeout(put, HASH_WHILE_PLAYING_MS);
  }

  /** The user edited the hash (or followed a link to another place of the same page). */
  function followHash() {
    const place = readHash();
    if (place.episode !== null && place.episode !== app.episode) {
      if (app.list.has(place.episode)) chooseEpisode(place.episode, place.step ?? 0);
      else showMessage(`episode ${place.episode} is not held in this buffer`);
    } else if (place.step !== null && place.step !== app.player.step) {
      app.player.pause();
      app.player.seek(place.step);
    }
  }

  // -- the filter --------------------------------------------------------------------------------
  function bindFilter() {
    const box = $("filter");
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { clearTimeout(app.filterTimer); applyFilter(); }
      else if (e.key === "Escape") box.blur(); // back to the keyboard shortcuts
    });
    box.addEventListener("input", () => {
      clearTimeout(app.filterTimer);
      app.filterTimer = setTimeout(applyFilter, FILTER_DEBOUNCE_MS);
    });
  }

  async function applyFilter() {
    const text = $("filter").value.trim();
    const token = ++app.filterToken;
    if (!text) {
      app.filterActive = false;
      filterError(null);
      filterNotes([]);
      app.list.showIds(null);
      afterFilter();
      return;
    }
    let answer;
    try {
      answer = await api(`/api/episodes?select=${encodeURIComponent(text)}`);
      // A live writer may have added episodes since the list was read: read it again to show them.
      if (answer.ids.some((id) => !app.list.has(id))) app.list.setColumns(await api("/api/episodes"));
    } catch (err) {
      if (token === app.filterToken) { filterError(err.message); filterNotes([]); }  // an old warning would mislead
      return;
    }
    if (token !== app.filterToken) return;
    app.filterActive = true;
    filterError(null);
    filterNotes(answer.notes || []);
    app.list.showIds(answer.ids);
    afterFilter();
  }

  /** Keep the chosen episode when the list still shows it, else choose its first row. */
  function afterFilter() {
    updateCount();
    if (app.episode !== null && app.list.isShown(app.episode)) app.list.choose(app.episode);
    else if (app.list.firstShown() !== null) chooseEpisode(app.list.firstShown(), 0);
  }

  function filterError(text) {
    const el = $("filter-error");
    el.hidden = !text;
    el.textContent = text || "";
    $("filter").classList.toggle("invalid", Boolean(text));
  }

  function filterNotes(notes) {
    const el = $("filter-notes");
    el.hidden = !notes.length;
    el.textContent = notes.join("; ");
  }

  function updateCount() {
    const shown = app.list.shown.length, total = app.list.total;
    const noun = total === 1 ? "episode" : "episodes";
    $("episode-count").textContent = app.filterActive ? `${shown} of ${total} ${noun}` : `${total} ${noun}`;
  }

  // -- keyboard ----------------------------------------------------------------------------------
  function bindKeys() {
    document.addEventListener("keydown", (e) => {
      if (e.altKey || e.ctrlKey || e.metaKey || typingIn(e.target)) return;
      const p = app.player;
      switch (e.key) {
        case "ArrowLeft": p.stepBy(-1); break;
        case "ArrowRight": p.stepBy(1); break;
        case "Home": p.pause(); p.seek(0); break;
        case "End": p.pause(); p.seek(p.n - 1); break;
        case " ": p.toggle(); break;
        case "ArrowUp":
        case "ArrowDown": {
          const id = app.list.neighbour(e.key === "ArrowUp" ? -1 : 1);
          if (id !== null && id !== app.episode) chooseEpisode(id, 0);
          break;
        }
        default: return;
      }
      e.preventDefault(); // no page scroll, no slider move, no button click on Space
    });
  }

  /** The keys belong to a text field (the filter box) or a menu while it has the focus. */
  function typingIn(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && el.type !== "range" && el.type !== "button";
  }

  // -- rendering ---------------------------------------------------------------------------------
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") el.className = v; else el.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
    return el;
  }

  function renderHeader(b) {
    document.title = `${b.title} · trajstore view`;
    $("buffer-title").textContent = b.title;
    $("buffer-title").title = b.title;
    const fps = b.fps ? h("span", {title: `fps from ${b.fps_source}`}, h("b", {class: "num"}, TV.fmtNum(b.fps)), " fps")
      : h("span", {title: "no fps in the buffer: played at 30"}, "fps unknown");
    const parts = [h("span", {}, h("b", {class: "num"}, b.steps), " steps"),
                   h("span", {}, h("b", {class: "num"}, b.episodes), b.episodes === 1 ? " episode" : " episodes"), fps];
    if (b.capacity) parts.push(h("span", {title: "a ring: the oldest steps are overwritten"}, "ring of ",
                                 h("b", {class: "num"}, b.capacity)));
    parts.push(h("span", {}, h("b", {class: "num"}, b.cameras.length), b.cameras.length === 1 ? " camera" : " cameras"));
    $("buffer-summary").replaceChildren(...parts);
  }

  function badge(text, cls, title) {
    return h("span", {class: `badge ${cls}`, title: title || text}, text);
  }

  function renderEpisode(ep, why = "no episode") {
    const box = $("episode-info");
    if (!ep) { box.replaceChildren(h("div", {class: "note"}, why)); return; }
    const flags = [];
    if (ep.done) flags.push(badge("done", "done", "ended with end_episode"));
    else if (!ep.interrupted) flags.push(badge("open", "open", "not ended yet (a writer is recording it)"));
    if (ep.interrupted) flags.push(badge("interrupted", "interrupted"));
    if (ep.overwritten) flags.push(badge("overwritten", "overwritten", "a ring overwrote its oldest steps"));
    if (ep.data && ep.data.success === true) flags.push(badge("✓ success", "success"));
    if (ep.data && ep.data.success === false) flags.push(badge("✗ failure", "failure"));
    const rows = [["steps", ep.steps ? `${ep.steps} (0..${ep.steps - 1})` : "0"],
                  ["buffer rows", `${ep.start}..${ep.stop}`], ["times", ep.time_source]];
    for (const [k, v] of Object.entries(ep.data || {})) rows.push([k, v]);
    box.replaceChildren(h("h2", {}, `Episode ${ep.id}`), h("div", {class: "badges"}, ...flags),
                        kvTable(rows, "episode-data"), ...renderFinal(ep));
  }

  function kvTable(rows, id) {
    const table = h("table", {class: "kv", id});
    for (const [k, v] of rows) table.append(h("tr", {}, h("th", {}, k), valueCell(v)));
    return table;
  }

  function valueCell(v) {
    const text = typeof v === "number" ? TV.fmtNum(v) : typeof v === "object" && v !== null ? JSON.stringify(v)
      : v === null ? "null" : String(v);
    const cell = h("td", {class: typeof v === "number" || typeof v === "boolean" ? "num" : ""},
                   text.length > 160 ? text.slice(0, 160) + "…" : text);
    if (text.length > 160) cell.title = text;
    return cell;
  }

  function renderFinal(ep) {
    const head = h("h3", {}, "Final observation");
    if (!ep.final_observation) return [head, h("div", {class: "note"}, "none recorded")];
    const rows = Object.entries(ep.final_observation)
      .map(([k, values]) => [k, values.map(TV.fmtNum).join(", ")]);
    const out = [head];
    if (rows.length) out.push(kvTable(rows, "final-observation"));
    if (ep.final_cameras && ep.final_cameras.length) {
      const frames = h("div", {class: "final-frames"});
      for (const cam of ep.final_cameras) {
        const img = h("img", {alt: cam, title: `${cam} (final observation)`, class: "final-frame",
                              "data-camera": cam,
                              src: `/api/episode/${ep.id}/final_frame?camera=${encodeURIComponent(cam)}`});
        img.addEventListener("error", () => img.replaceWith(h("span", {class: "note"}, `${cam}: no final frame`)));
        frames.append(h("figure", {}, img, h("figcaption", {}, cam)));
      }
      out.push(frames);
    }
    return out;
  }

  function renderSkipped(b) {
    const entries = Object.entries(b.skipped || {});
    const el = $("skipped");
    el.hidden = !entries.length;
    el.textContent = entries.length ? "Not plotted: " + entries.map(([k, why]) => `${k} (${why})`).join("; ") : "";
  }

  /** The buffer's statistics: a compact table, one row per dimension, grouped by leaf. */
  function renderStats(b) {
    const el = $("stats");
    const stats = b.stats || {};
    const keys = Object.keys(stats);
    if (!keys.length) { el.replaceChildren(h("div", {class: "note"}, b.stats_error || "no statistics")); return; }
    const names = new Map(b.leaves.map((l) => [l.key, l.names]));
    const order = [...b.leaves.map((l) => l.key).filter((k) => k in stats), ...keys.filter((k) => !names.has(k))];
    const table = h("table", {class: "stats"},
                    h("thead", {}, h("tr", {}, ...["", "mean", "std", "min", "max"].map((c) => h("th", {}, c)))));
    const body = h("tbody");
    for (const key of order) body.append(...statRows(key, stats[key], names.get(key)));
    table.append(body);
    el.replaceChildren(table);
  }

  function statRows(key, s, names) {
    const at = (field, i) => (Array.isArray(s[field]) ? s[field][i] : s[field]);
    const dims = Array.isArray(s.mean) ? s.mean.length : 1;
    const count = Array.isArray(s.count) ? s.count[0] : s.count;
    const reduction = s.reduction && s.reduction !== "per_element" ? `, ${s.reduction.replace("_", " ")}` : "";
    const rows = [h("tr", {class: "leaf", "data-leaf": key},
                    h("th", {colspan: "5"}, key, h("span", {class: "muted"}, ` n=${TV.fmtNum(count)}${reduction}`)))];
    for (let i = 0; i < Math.min(dims, STATS_DIMS); i++) {
      let label = names && names.length === dims ? names[i] : dims === 1 ? key : `[${i}]`;
      if (label.startsWith(`${key}[`)) label = label.slice(key.length); // the leaf's row above names it
      rows.push(h("tr", {}, h("td", {class: "dim"}, label),
                  ...["mean", "std", "min", "max"].map((f) => h("td", {class: "num"}, TV.fmtNum(at(f, i))))));
    }
    if (dims > STATS_DIMS) rows.push(h("tr", {}, h("td", {class: "muted", colspan: "5"}, `… ${dims - STATS_DIMS} more`)));
    return rows;
  }

  start();
})();
