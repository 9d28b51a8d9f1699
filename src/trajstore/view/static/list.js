// list.js: the episode list. Rows have one fixed height and only the visible ones are in the DOM, so a
// buffer of 20,000 episodes shows as fast as one of 20.
"use strict";
window.TV = window.TV || {};

(function () {
  const ROW_HEIGHT = 26;
  const OVERSCAN = 8; // rows drawn beyond the visible ones, so a fast scroll shows no gap

  class EpisodeList {
    /** scroller: the scrolling element; spacer: its child sized to every row; onChoose(id). */
    constructor(scroller, spacer, onChoose) {
      this.scroller = scroller;
      this.spacer = spacer;
      this.onChoose = onChoose;
      this.columns = {id: []}; // the /api/episodes answer
      this.positionOf = new Map(); // episode id -> index into columns
      this.shown = []; // indices into columns of the rows shown, in order
      this.chosen = null;
      this._queued = false;
      scroller.addEventListener("scroll", () => this._queueRender());
      window.addEventListener("resize", () => this._queueRender());
      spacer.addEventListener("click", (e) => {
        const row = e.target.closest(".episode-row");
        if (row) this.onChoose(Number(row.dataset.id));
      });
    }

    get total() { return this.columns.id.length; }

    setColumns(columns) {
      this.columns = columns;
      this.positionOf = new Map(columns.id.map((id, k) => [id, k]));
    }

    /** Show the episodes `ids` (null: every episode), in the buffer's order. */
    showIds(ids) {
      if (ids === null) {
        this.shown = this.columns.id.map((_, k) => k);
      } else {
        const wanted = new Set(ids);
        this.shown = [];
        this.columns.id.forEach((id, k) => { if (wanted.has(id)) this.shown.push(k); });
      }
      this.spacer.style.height = `${this.shown.length * ROW_HEIGHT}px`;
      this.render();
    }

    has(id) { return this.positionOf.has(id); }

    /** Whether episode `id` is one of the rows shown. */
    isShown(id) { return this._rowOf(id) >= 0; }

    /** The id `delta` rows from the chosen one (the first or last row when it is not shown), or null. */
    neighbour(delta) {
      if (!this.shown.length) return null;
      const row = this._rowOf(this.chosen);
      let next;
      if (row < 0) next = delta > 0 ? 0 : this.shown.length - 1;
      else next = Math.min(Math.max(row + delta, 0), this.shown.length - 1);
      return this.columns.id[this.shown[next]];
    }

    firstShown() { return this.shown.length ? this.columns.id[this.shown[0]] : null; }

    /** Highlight episode `id` and scroll its row into view. */
    choose(id) {
      this.chosen = id;
      const row = this._rowOf(id);
      if (row >= 0) {
        const top = row * ROW_HEIGHT, view = this.scroller.clientHeight;
        if (top < this.scroller.scrollTop) this.scroller.scrollTop = top;
        else if (top + ROW_HEIGHT > this.scroller.scrollTop + view) this.scroller.scrollTop = top + ROW_HEIGHT - view;
      }
      this.render();
    }

    render() {
      const top = this.scroller.scrollTop, view = this.scroller.clientHeight || 600;
      const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
      const last = Math.min(this.shown.length, Math.ceil((top + view) / ROW_HEIGHT) + OVERSCAN);
      const rows = [];
      for (let r = first; r < last; r++) rows.push(this._row(r));
      this.spacer.replaceChildren(...rows);
    }

    _queueRender() {
      if (this._queued) return;
      this._queued = true;
      requestAnimationFrame(() => { this._queued = false; this.render(); });
    }

    _rowOf(id) {
      const k = this.positionOf.get(id);
      if (k === undefined) return -1;
      // shown is sorted by column index: binary search
      let lo = 0, hi = this.shown.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (this.shown[mid] === k) return mid;
        if (this.shown[mid] < k) lo = mid + 1; else hi = mid - 1;
      }
      return -1;
    }

    _row(r) {
      const c = this.columns, k = this.shown[r], id = c.id[k];
      const row = document.createElement("div");
      row.className = "episode-row episode-cols" + (id === this.chosen ? " selected" : "");
      row.style.top = `${r * ROW_HEIGHT}px`;
      row.dataset.id = String(id);
      row.setAttribute("role", "option");
      row.setAttribute("aria-selected", id === this.chosen ? "true" : "false");
      const task = c.task ? c.task[k] : null;
      const success = c.success ? c.success[k] : null;
      const cells = [
        cell("ep-id num", String(id)),
        cell("ep-steps num", String(c.steps[k])),
        cell("ep-task", task === null || task === undefined ? "" : String(task)),
        successCell(success),
        flagsCell(c, k),
      ];
      row.append(...cells);
      row.title = `episode ${id}: ${c.steps[k]} steps` + (task ? ` · ${task}` : "") +
        (success === true ? " · success" : success === false ? " · failure" : "");
      return row;
    }
  }

  function cell(cls, text) {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    return span;
  }

  function successCell(success) {
    if (success === true) return cell("ep-success yes", "✓");
    if (success === false) return cell("ep-success no", "✗");
    return cell("ep-success none", "·");
  }

  function flagsCell(c, k) {
    const span = cell("ep-flags", "");
    const flags = [];
    if (c.interrupted && c.interrupted[k]) flags.push(["int", "interrupted", "Interrupted (ended by the user or a time limit)"]);
    if (c.overwritten && c.overwritten[k]) flags.push(["ovr", "overwritten", "A ring overwrote its oldest steps"]);
    if (c.done && !c.done[k] && !(c.interrupted && c.interrupted[k])) flags.push(["open", "open", "Not ended yet (a writer is recording it)"]);
    for (const [text, cls, title] of flags) {
      const b = cell(`flag ${cls}`, text);
      b.title = title;
      span.appendChild(b);
    }
    return span;
  }

  TV.EpisodeList = EpisodeList;
  TV.ROW_HEIGHT = ROW_HEIGHT;
})();
