// Live pages: a section with data-live="/…/events" is refreshed from the server's events (no build step).
"use strict";

function text(value) {
  return value === null || value === undefined ? "" : String(value);
}

function fillTable(table, rows, columns, empty) {
  const body = table.querySelector("tbody");
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = columns;
    td.textContent = empty;
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
  // Every figure comes with where it is from (the daemon's record, or the store and the config without one).
  const live = view.live || {};
  const set = (field, value) => {
    const el = section.querySelector(`[data-field="${field}"]`);
    if (el) el.textContent = text(value);
  };
  set("line", view.line);
  section.querySelector(".condition").className = "condition " + (view.running ? "ok" : "down");
  set("rss", view.rss_text);
  set("database", view.database_text);
  for (const [name, figure] of Object.entries(view.figures || {})) {
    set(name, figure.value);
    set(name + "_from", figure.from);
  }
  set("spend_today", view.spend_today);
  set("spend_month", view.spend_month);
  set("cache_today", view.cache_today);
  set("last_backup", view.last_backup);
  const from = section.querySelector('[data-field="messages_from"]');
  if (from) {
    from.hidden = !view.messages_from;
    from.textContent = text(view.messages_from);
  }
  const failover = section.querySelector('[data-field="failover"]');
  if (failover) {
    failover.hidden = !view.failover;
    failover.textContent = "Failover: " + text(view.failover);
  }
  const idle = view.idle || "none";
  const tables = {
    messages: [Object.entries(view.messages || {}), 2, "none"],
    queues: [Object.entries(live.queues || {}), 2, idle],
    loops: [Object.entries(live.loops || {}).map(([n, l]) => [n, l.state, l.restarts, l.last_error]), 4, idle],
    errors: [Object.entries(live.errors || {}).map(([k, pair]) => [k, pair[0]]), 2, idle],
    mcp: [Object.entries(view.mcp || {}).map(([n, m]) => [n, m.state, (m.tools || []).length, (m.pending || []).join(", ")]), 4, "none configured"],
  };
  for (const [name, [rows, columns, empty]] of Object.entries(tables)) {
    const table = section.querySelector(`[data-table="${name}"]`);
    if (table) fillTable(table, rows, columns, empty);
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
