// One uPlot chart per low-dim leaf (x = step, a line per dimension), a cursor line at the current step
// drawn in the charts' draw hook, and a click or drag on a chart seeks there.
"use strict";

const COLOURS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#0a7b83", "#bf3989", "#57606a",
                 "#fb8500", "#219ebc", "#6a994e", "#b5179e", "#3a86ff", "#e76f51", "#2a9d8f", "#8d99ae"];
const PLOT_HEIGHT = 170;

class LeafPlots {
  constructor(root, leaves, onSeek) {
    this.root = root;
    this.leaves = leaves;
    this.onSeek = onSeek;
    this.charts = [];
    this.step = 0;
    window.addEventListener("resize", () => this.resize());
  }

  // Replace the charts with those of one episode's series (/api/episode/<id>/series).
  show(series) {
    for (const chart of this.charts) chart.destroy();
    this.charts = [];
    this.root.innerHTML = "";
    const x = series.step;
    for (const leaf of this.leaves) {
      const dims = series.series[leaf.key];
      if (!dims) continue;
      const box = document.createElement("div");
      box.className = "plot";
      box.dataset.leaf = leaf.key;
      box.dataset.points = String(x.length);
      this.root.append(box);
      const opts = {
        title: leaf.units ? `${leaf.key} (${leaf.units})` : leaf.key,
        width: this.width(box), height: PLOT_HEIGHT,
        scales: { x: { time: false } },
        axes: [{ label: "step" }, {}],
        legend: { live: true },
        cursor: { drag: { x: false, y: false }, points: { show: false } },
        series: [{ label: "step" }, ...dims.map((_, i) => ({
          label: leaf.names[i] ?? `${leaf.key}[${i}]`, stroke: COLOURS[i % COLOURS.length], width: 1.5,
          points: { show: x.length <= 60 },
        }))],
        hooks: { draw: [(u) => this.drawCursor(u)] },
      };
      const chart = new uPlot(opts, [x, ...dims], box);
      this.hookSeek(chart);
      this.charts.push(chart);
    }
  }

  hookSeek(chart) {
    let down = false;
    const seek = (ev) => {
      const step = Math.round(chart.posToVal(ev.offsetX, "x"));
      if (Number.isFinite(step)) this.onSeek(step);
    };
    chart.over.addEventListener("mousedown", (ev) => { down = true; seek(ev); });
    chart.over.addEventListener("mousemove", (ev) => { if (down) seek(ev); });
    window.addEventListener("mouseup", () => { down = false; });
  }

  setStep(step) {
    this.step = step;
    for (const chart of this.charts) chart.redraw(false, false);  // repaint only: the draw hook moves the cursor
  }

  drawCursor(u) {
    const x = u.valToPos(this.step, "x", true);
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "#d1242f";
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
    ctx.restore();
  }

  width(box) { return Math.max(300, (box.clientWidth || 420) - 12); }

  resize() {
    for (const chart of this.charts) chart.setSize({ width: this.width(chart.root.parentElement), height: PLOT_HEIGHT });
  }
}
