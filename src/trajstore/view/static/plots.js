// plots.js: one uPlot chart per low-dim leaf of the chosen episode, x = step, with a vertical line at
// the current step that follows playback; a click or drag on a chart seeks there.
"use strict";
window.TV = window.TV || {};

(function () {
  const PLOT_HEIGHT = 180;
  // Tableau 10: distinct and readable on white; further dimensions get golden-angle hues.
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  // Step ticks are whole numbers: uPlot would otherwise place ticks at 0.5 on short episodes.
  const STEP_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000,
                      20000, 50000, 100000, 200000, 500000, 1000000];

  function colour(i) {
    return i < PALETTE.length ? PALETTE[i] : `hsl(${Math.round((i * 137.508) % 360)} 65% 42%)`;
  }

  /** Short text of a number: integers as they are, others with 4 significant digits. */
  function fmtNum(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "—";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e12) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }

  /** A dimension's legend label without its leaf's key ("action[0]" -> "[0]"): the title names the leaf. */
  function shortName(name, key) {
    return name.startsWith(`${key}[`) ? name.slice(key.length) : name;
  }

  /** Width of the y axis from its longest tick label, so large values are not clipped. */
  function yAxisSize(u, values) {
    if (!values || !values.length) return 40;
    const longest = Math.max(...values.map((v) => String(v).length));
    return Math.max(40, longest * 7 + 16);
  }

  class PlotSet {
    /** root: the element holding the charts; onSeek(step): called on a click or drag in a chart. */
    constructor(root, onSeek) {
      this.root = root;
      this.onSeek = onSeek;
      this.charts = [];
      this.step = 0;
      this.n = 0;
      this.every = 1;
      this.onDrawn = null; // set by the viewer: called when every chart has drawn once
      // Resize in the next frame: resizing inside the observer callback trips a ResizeObserver loop warning.
      this._resizeQueued = false;
      this._observer = new ResizeObserver(() => this._queueResize());
      this._observer.observe(root);
    }

    /** Charts for `leaves` (the buffer's leaf list) from the `/series` answer; old charts are removed. */
    build(leaves, answer) {
      this.destroy();
      const xs = answer ? answer.step : [];
      this.n = xs.length;
      this.every = (answer && answer.every) || 1; // a long episode's series has every k-th step
      for (const leaf of leaves) {
        const cols = answer && answer.series ? answer.series[leaf.key] : null;
        this.charts.push(this._chart(leaf, xs, cols));
      }
      this._notifyIfDrawn();
    }

    destroy() {
      for (const c of this.charts) if (c.u) c.u.destroy();
      this.charts = [];
      this.root.replaceChildren();
    }

    /** True when every chart has drawn at least once (charts without data count as drawn). */
    allDrawn() {
      return this.charts.every((c) => c.drawn);
    }

    /** Move the step line (and the legend's values, unless the mouse is over the chart) to `step`. */
    setStep(step) {
      this.step = step;
      for (const c of this.charts) this._place(c);
    }

    _chart(leaf, xs, cols) {
      const div = document.createElement("div");
      div.className = "plot";
      div.dataset.leaf = leaf.key;
      div.dataset.points = String(xs.length);
      this.root.appendChild(div);
      const title = leaf.units ? `${leaf.key} (${leaf.units})` : leaf.key;
      if (!cols || !cols.length || !xs.length) {
        div.innerHTML = `<div class="plot-title"></div><div class="plot-empty">no values in this episode</div>`;
        div.firstChild.textContent = title;
        return {div, u: null, drawn: true, line: null};
      }
      const chart = {div, u: null, drawn: false, line: null};
      const names = leaf.names && leaf.names.length === cols.length ? leaf.names
        : cols.map((_, i) => `${leaf.key}[${i}]`);
      const opts = {
        title,
        width: this._width(div),
        height: PLOT_HEIGHT,
        // A leaf constant over the episode (a flag never set) gets a unit-wide range, not uPlot's 0..100.
        scales: {x: {time: false}, y: {range: (u, lo, hi) => (lo === hi ? [lo - 1, hi + 1] : uPlot.rangeNum(lo, hi, 0.1, true))}},
        series: [
          {label: "step", value: (u, v) => (v === null || v === undefined ? "—" : String(v))},
          ...names.map((name, i) => ({label: shortName(name, leaf.key), stroke: colour(i), width: 1.5,
                                      points: {show: false}, value: (u, v) => fmtNum(v)})),
        ],
        axes: [
          {incrs: STEP_INCRS, values: (u, splits) => splits.map((v) => String(v))},
          {size: yAxisSize, values: (u, splits) => splits.map(fmtNum)},
        ],
        cursor: {drag: {x: false, y: false, setScale: false}, y: false},
        legend: {live: true},
        hooks: {
          draw: [() => { if (!chart.drawn) { chart.drawn = true; this._notifyIfDrawn(); } }],
          setSize: [() => this._place(chart)],
          // When the mouse leaves, uPlot blanks the legend: show the current step's values again.
          setCursor: [(u) => { if (u.cursor.idx === null || u.cursor.idx === undefined) this._legendAt(u); }],
        },
      };
      chart.u = new uPlot(opts, [xs, ...cols], div);
      chart.line = document.createElement("div");
      chart.line.className = "step-line";
      chart.u.over.appendChild(chart.line);
      this._seekOnPointer(chart.u);
      this._place(chart);
      return chart;
    }

    /** Click or drag on the plotting area seeks to the step under the pointer. */
    _seekOnPointer(u) {
      const over = u.over;
      const seekAt = (e) => {
        const r = over.getBoundingClientRect();
        const x = Math.min(Math.max(e.clientX - r.left, 0), r.width);
        const step = Math.round(u.posToVal(x, "x"));
        if (Number.isFinite(step)) this.onSeek(Math.max(step, 0)); // the player clamps to the episode
      };
      over.addEventListener("pointerdown", (e) => {
        if (e.button !== 0) return;
        over.setPointerCapture(e.pointerId);
        seekAt(e);
      });
      over.addEventListener("pointermove", (e) => {
        if (over.hasPointerCapture(e.pointerId)) seekAt(e);
      });
    }

    _place(chart) {
      const u = chart.u;
      if (!u || !chart.line) return;
      const x = u.valToPos(this.step, "x");
      chart.line.style.transform = `translateX(${Math.round(x)}px)`;
      chart.line.hidden = !(x >= 0 && x <= u.over.clientWidth + 1);
      chart.div.dataset.step = String(this.step);
      if (u.cursor.left === undefined || u.cursor.left < 0) this._legendAt(u);
    }

    _legendAt(u) {
      const idx = Math.min(this.n - 1, Math.round(this.step / this.every));
      if (idx >= 0) u.setLegend({idx}, false);
    }

    _width(div) {
      return Math.max(240, Math.floor((div.clientWidth || this.root.clientWidth || 480) - 8)); // less the padding
    }

    _queueResize() {
      if (this._resizeQueued) return;
      this._resizeQueued = true;
      requestAnimationFrame(() => {
        this._resizeQueued = false;
        for (const c of this.charts) {
          if (!c.u) continue;
          const w = this._width(c.div);
          if (Math.abs(w - c.u.width) > 1) c.u.setSize({width: w, height: PLOT_HEIGHT});
        }
      });
    }

    _notifyIfDrawn() {
      if (this.onDrawn && this.allDrawn()) this.onDrawn();
    }
  }

  TV.PlotSet = PlotSet;
  TV.fmtNum = fmtNum;
})();
