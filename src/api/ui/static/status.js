// The status page's script: it listens to /ui/events (server-sent events) and puts what
// the bridge sends into the page, as text only (textContent, never HTML). The words and
// numbers come ready from the bridge (src/api/ui/model.ts, the same as `shardbridge
// status`); nothing here formats or decides, but the staleness warning.

/** A page with no snapshot for this long says so: a frozen page must not look live. */
const STALE_AFTER_MS = 3000;
const HISTORY_SHOWN = 50;

const $ = (id) => document.getElementById(id);

function cell(row, index, text) {
  const td = row.cells[index];
  if (td.textContent !== text) td.textContent = text;
  return td;
}

/**
 * Rows keyed by `key`, created by `make` when new, updated by `fill`, in the order given:
 * a row that stays is the same element (no flicker, a selection survives).
 */
function reconcile(tbody, items, key, make, fill) {
  const existing = new Map([...tbody.rows].map((row) => [row.dataset.key, row]));
  items.forEach((item, i) => {
    let row = existing.get(key(item));
    existing.delete(key(item));
    if (row === undefined) {
      row = make();
      row.dataset.key = key(item);
    }
    fill(row, item);
    if (tbody.rows[i] !== row) tbody.insertBefore(row, tbody.rows[i] ?? null);
  });
  for (const row of existing.values()) row.remove();
}

function makeRow(columns) {
  const row = document.createElement("tr");
  for (const cls of columns) {
    const td = row.insertCell();
    if (cls) td.className = cls;
  }
  return row;
}

function shardRow() {
  const row = makeRow(["shard", "number", "holder", "left", "since", "lag"]);
  const bar = document.createElement("div");
  bar.className = "bar";
  const fill = document.createElement("div");
  fill.className = "fill";
  bar.append(fill);
  const label = document.createElement("span");
  row.cells[3].append(bar, label);
  return row;
}

function fillShard(row, s) {
  cell(row, 0, s.shard);
  cell(row, 1, s.nodes);
  cell(row, 2, s.holder).classList.toggle("none", !s.held);
  const left = row.cells[3];
  left.dataset.health = s.unsharded ? "unsharded" : (s.health ?? "free");
  // A width set through the CSSOM, which the Content-Security-Policy allows (no style attribute).
  left.querySelector(".fill").style.width = `${(s.left_fraction * 100).toFixed(1)}%`;
  const text = s.held ? `${s.left} of ${s.ttl}` : s.unsharded ? "nova's ring" : "free";
  const label = left.querySelector("span");
  if (label.textContent !== text) label.textContent = text;
  cell(row, 4, s.since);
  cell(row, 5, s.feedLag);
}

function fillAgent(row, a) {
  cell(row, 0, a.agent);
  cell(row, 1, a.state).dataset.state = a.up ? "up" : "down";
  cell(row, 2, a.holds);
  cell(row, 3, a.serves);
  cell(row, 4, a.lastSeen);
}

function transitionItem(t, fresh) {
  const li = document.createElement("li");
  li.dataset.kind = t.kind;
  li.dataset.seq = String(t.seq);
  if (fresh) li.classList.add("fresh");
  const time = document.createElement("time");
  time.dateTime = t.at;
  time.textContent = t.at.slice(11, 23);
  const text = document.createElement("span");
  text.textContent = t.text;
  li.append(time, text);
  return li;
}

let lastSnapshotAt = 0;

function connection(state, text) {
  const el = $("connection");
  el.dataset.state = state;
  el.textContent = text;
}

function notice(text) {
  const el = $("notice");
  el.hidden = text === null;
  el.textContent = text ?? "";
}

function showSnapshot(model) {
  lastSnapshotAt = performance.now();
  $("headline").textContent = model.headline;
  $("ironic").textContent = model.ironic;
  $("ironic").classList.toggle("lagging", model.ironic_lag_ms !== null);
  $("at").textContent = `as of ${model.at.slice(0, 19).replace("T", " ")} UTC`;
  reconcile($("shards").tBodies[0], model.shards, (s) => s.shard, shardRow, fillShard);
  reconcile(
    $("agents").tBodies[0],
    model.agents,
    (a) => a.agent,
    () => makeRow(["agent", "state", "holds", "serves", "seen"]),
    fillAgent,
  );
  connection("live", "live");
  notice(null);
}

function addTransition(t, fresh) {
  const list = $("transitions");
  if (list.querySelector(`li[data-seq="${t.seq}"]`) !== null) return;
  list.prepend(transitionItem(t, fresh));
  while (list.children.length > HISTORY_SHOWN) list.lastElementChild.remove();
  $("no-transitions").hidden = true;
}

function showHistory(history) {
  $("transitions").replaceChildren();
  for (const t of history) addTransition(t, false);
  $("no-transitions").hidden = history.length > 0;
}

const events = new EventSource("/ui/events");
events.addEventListener("snapshot", (e) => showSnapshot(JSON.parse(e.data)));
events.addEventListener("history", (e) => showHistory(JSON.parse(e.data)));
events.addEventListener("transition", (e) => addTransition(JSON.parse(e.data), true));
events.addEventListener("trouble", (e) => {
  const { detail } = JSON.parse(e.data);
  connection("trouble", "store trouble");
  notice(`The bridge cannot read its store: ${detail}. What is shown is the last good look.`);
});
events.addEventListener("open", () => connection("live", "live"));
events.addEventListener("error", () => {
  if (events.readyState === EventSource.CLOSED) {
    // Refused (401: the session ended or was never there): reconnecting will not help.
    connection("closed", "disconnected");
    notice("The bridge closed the page's feed: the session has ended. Reload, or log in again at /ui/login.");
  } else {
    connection("reconnecting", "reconnecting…");
  }
});

setInterval(() => {
  if (lastSnapshotAt === 0 || performance.now() - lastSnapshotAt < STALE_AFTER_MS) return;
  const state = $("connection").dataset.state;
  if (state === "live") connection("stale", "stale");
  const seconds = Math.round((performance.now() - lastSnapshotAt) / 1000);
  if (state !== "closed")
    notice(`No news from the bridge for ${seconds} s: what is shown may be out of date.`);
}, 1000);
