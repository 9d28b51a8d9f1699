// The episode list: every held episode as one fixed-height row, only the visible rows in the DOM
// (a buffer of 20,000 episodes renders as fast as one of 20).
"use strict";

const ROW_HEIGHT = 26;

class EpisodeList {
  constructor(scroller, inner, onChoose) {
    this.scroller = scroller;
    this.inner = inner;
    this.onChoose = onChoose;
    this.columns = null;   // the /api/episodes answer
    this.shown = [];       // positions (into columns) of the rows shown, in order
    this.chosen = null;    // the chosen episode id
    this.positionOf = new Map();  // episode id -> position in columns
    scroller.addEventListener("scroll", () => this.render());
    inner.addEventListener("click", (ev) => {
      const row = ev.target.closest(".row");
      if (row) this.onChoose(Number(row.dataset.id));
    });
  }

  setColumns(columns) {
    this.columns = columns;
    this.positionOf = new Map(columns.id.map((id, k) => [id, k]));
    this.showAll();
  }

  showAll() { this.show(this.columns.id.map((_, k) => k)); }

  showIds(ids) { this.show(ids.filter((id) => this.positionOf.has(id)).map((id) => this.positionOf.get(id))); }

  show(positions) {
    this.shown = positions;
    this.inner.style.height = `${positions.length * ROW_HEIGHT}px`;
    this.render(true);
  }

  idsShown() { return this.shown.map((k) => this.columns.id[k]); }

  // The id `delta` rows away from the chosen one in the rows shown (the first row if it is not shown).
  neighbour(delta) {
    const ids = this.idsShown();
    if (!ids.length) return null;
    const at = ids.indexOf(this.chosen);
    if (at < 0) return ids[0];
    return ids[Math.max(0, Math.min(ids.length - 1, at + delta))];
  }

  choose(id) {
    this.chosen = id;
    const row = this.shown.indexOf(this.positionOf.get(id));
    if (row >= 0) {  // scroll the chosen row into view
      const top = row * ROW_HEIGHT, view = this.scroller;
      if (top < view.scrollTop) view.scrollTop = top;
      else if (top + ROW_HEIGHT > view.scrollTop + view.clientHeight) view.scrollTop = top + ROW_HEIGHT - view.clientHeight;
    }
    this.render(true);
  }

  render(force) {
    if (!this.columns) return;
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW_HEIGHT) - 5);
    const last = Math.min(this.shown.length, first + Math.ceil(this.scroller.clientHeight / ROW_HEIGHT) + 10);
    if (!force && this.range && this.range[0] === first && this.range[1] === last) return;
    this.range = [first, last];
    const c = this.columns, parts = [];
    for (let r = first; r < last; r++) {
      const k = this.shown[r], id = c.id[k];
      const ok = c.success[k] === true ? '<span class="ok">&#10003;</span>'
        : c.success[k] === false ? '<span class="fail">&#10007;</span>' : "";
      const flags = [c.interrupted[k] ? "int" : "", c.overwritten[k] ? "ovw" : "", !c.done[k] && !c.interrupted[k] ? "open" : ""]
        .filter(Boolean).join(" ");
      parts.push(`<div class="row${id === this.chosen ? " chosen" : ""}" data-id="${id}" style="top:${r * ROW_HEIGHT}px">` +
        `<span>${id}</span><span>${c.steps[k]}</span><span title="${escapeHtml(c.task[k] ?? "")}">${escapeHtml(c.task[k] ?? "")}</span>` +
        `<span>${ok}</span><span class="flag">${flags}</span></div>`);
    }
    this.inner.innerHTML = parts.join("");
  }
}

function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch]));
}
