// Live pages: a section with data-live="/…/events" is refreshed from the server's events (no build step).
"use strict";

function text(value) {
  return value === null || value === undefined ? "" : String(value);
}

function fillTable(table, rows, columns) {
  const body = table.querySelector("tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = columns;
    td.textContent = "none";
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const cells of rows) {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = text(cell); // never innerHTML: the values are the daemon's, some from outside
      tr.append(td);
    }
    body.append(tr);
  }
}

function showStatus(section, view) {
  const s = view.status || {};
  const set = (field, value) => {
    const el = section.querySelector(`[data-field="${field}"]`);
    if (el) el.textContent = text(value);
  };
  set("line", view.line);
  section.querySelector(".condition").className = "condition " + (view.running ? "ok" : "down");
  set("rss", view.rss_text);
  set("database", view.database_text);
  set("archived", s.archived_messages || 0);
  set("turns", s.turns || 0);
  set("model", s.model_retrying || (view.running ? "answering" : "—"));
  set("spend_today", view.spend_today || "—");
  set("spend_month", view.spend_month || "—");
  set("cache_today", view.cache_today || "—");
  set("last_backup", view.last_backup || "—");
  const failover = section.querySelector('[data-field="failover"]');
  if (failover) {
    failover.hidden = !view.failover;
    failover.textContent = "Failover: " + text(view.failover);
  }
  const tables = {
    messages: [Object.entries(s.messages || {}), 2],
    queues: [Object.entries(s.queues || {}), 2],
    loops: [Object.entries(s.loops || {}).map(([n, l]) => [n, l.state, l.restarts, l.last_error]), 4],
    errors: [Object.entries(s.errors || {}).map(([k, pair]) => [k, pair[0]]), 2],
    mcp: [Object.entries(s.mcp || {}).map(([n, m]) => [n, m.state, (m.tools || []).length, (m.pending || []).join(", ")]), 4],
  };
  for (const [name, [rows, columns]] of Object.entries(tables)) {
    const table = section.querySelector(`[data-table="${name}"]`);
    if (table) fillTable(table, rows, columns);
  }
}

const KEEP_LINES = 1000;

function followLog(section) {
  const list = section.querySelector("[data-lines]");
  const events = new EventSource(section.dataset.follow);
  events.onmessage = (event) => {
    const line = JSON.parse(event.data);
    const item = document.createElement("li");
    item.className = "level-" + line.level;
    item.textContent = line.text;
    list.append(item);
    while (list.children.length > KEEP_LINES) list.firstElementChild.remove();
  };
}

document.addEventListener("DOMContentLoaded", () => {
  if (!window.EventSource) return;
  const live = document.querySelector("[data-live]");
  if (live) {
    const events = new EventSource(live.dataset.live);
    events.onmessage = (event) => showStatus(live, JSON.parse(event.data));
  }
  const log = document.querySelector("[data-follow]");
  if (log) followLog(log);
});
