// sion's management page (S1 SION-MT): reads this switch's /api endpoints
// and, through the management addresses /api/switch lists in "peers",
// its neighbours' — and theirs — and draws the place as an SVG graph,
// every REFRESH_MS. No library, no network but the switches'.
"use strict";

const REFRESH_MS = 1500;
const MAX_VIEWS = 64; // switches whose views one refresh reads
const MAX_ROUTES = 8; // filters listed per link direction
const MAX_LABEL = 40; // characters of a name drawn on the graph (the whole name is its tooltip)
const MAX_FILTER = 120; // characters of a filter drawn under a link
const SVG = "http://www.w3.org/2000/svg";

// Names and filters come from the network: switches, peers, gateways and
// places are named by whoever runs them. The page only ever puts them in
// the document as text (textContent) or attribute values (setAttribute),
// never as HTML; keys by name are Map keys, never CSS selectors or plain
// objects' properties ("constructor", "__proto__").

// views by switch name: what its endpoints said, and its links' counters
// of the previous refresh, for rates.
const views = new Map();
let selfName = null;

async function getJSON(url) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 3000);
  try {
    const r = await fetch(url, { signal: ctl.signal, cache: "no-store" });
    if (!r.ok) throw new Error(url + ": " + r.status);
    return await r.json();
  } finally {
    clearTimeout(timer);
  }
}

// readView reads the five endpoints of the switch whose management base
// URL is base ("" for this page's own switch).
async function readView(base) {
  const [sw, links, routes, gateways, sessions] = await Promise.all(
    ["switch", "links", "routes", "gateways", "sessions"].map((e) => getJSON(base + "api/" + e)));
  return { base, sw, links: links.links, routes: routes.routes, gateways: gateways.gateways, sessions: sessions.sessions };
}

// refresh walks the place from this switch over its links to the
// neighbours whose management address is known, reading each view once.
async function refresh() {
  const seen = new Map(); // name → view, or null: no view
  const queue = [""];
  const bases = new Set(queue);
  while (queue.length > 0 && seen.size < MAX_VIEWS) {
    const base = queue.shift();
    let v;
    try {
      v = await readView(base);
    } catch (err) {
      if (base === "") throw err;
      continue; // a neighbour that does not answer is drawn without its view
    }
    const name = v.sw.name;
    if (base === "") selfName = name;
    if (seen.has(name)) continue;
    rates(v, views.get(name));
    seen.set(name, v);
    for (const l of v.links) {
      const next = peerBase(v.sw.peers, l.peer);
      if (!next) continue;
      if (!bases.has(next)) {
        bases.add(next);
        queue.push(next);
      }
    }
  }
  views.clear();
  for (const [name, v] of seen) views.set(name, v);
}

// peerBase returns the management base URL peers lists for the switch
// name, ending in "/", or null: none, or not an http(s) URL.
function peerBase(peers, name) {
  if (!peers || !Object.hasOwn(peers, name)) return null;
  const url = peers[name];
  if (typeof url !== "string") return null;
  try {
    const u = new URL(url, location.href);
    if (u.protocol !== "http:" && u.protocol !== "https:") return null;
    return u.href.replace(/\/?$/, "/");
  } catch {
    return null;
  }
}

// clip shortens s to n characters for drawing.
function clip(s, n) {
  s = String(s);
  return s.length <= n ? s : s.slice(0, n - 1) + "…";
}

// rates gives each link of v its events/s each way, from the counters of
// the view before.
function rates(v, before) {
  const t = Date.parse(v.sw.now);
  for (const l of v.links) {
    l.rate_sent = l.rate_received = null;
    const p = before && before.links.find((b) => b.peer === l.peer);
    if (!p) continue;
    const dt = (t - Date.parse(before.sw.now)) / 1000;
    if (dt <= 0) continue;
    l.rate_sent = Math.max(0, l.events_sent - p.events_sent) / dt;
    l.rate_received = Math.max(0, l.events_received - p.events_received) / dt;
  }
}

// model turns the views into nodes and edges.
function model() {
  const nodes = new Map();
  const edges = new Map();
  const node = (name, extra) => {
    if (!nodes.has(name)) nodes.set(name, { name, view: views.get(name), slow: false, place: null, ...extra });
    return nodes.get(name);
  };
  const pair = (child, parent) => JSON.stringify([child, parent]);
  const edgeOf = (a, b) => edges.get(pair(a, b)) || edges.get(pair(b, a));
  for (const [name, v] of views) {
    const n = node(name);
    n.slow = v.sessions.some((s) => s.slow);
    for (const l of v.links) {
      node(l.peer);
      const [child, parent] = l.parent ? [name, l.peer] : [l.peer, name];
      const key = pair(child, parent);
      if (!edges.has(key)) edges.set(key, { key, label: child + "->" + parent, kind: "link", child, parent, state: l.state, rate: new Map(), routes: [] });
      const e = edges.get(key);
      if (l.state !== "up") e.state = l.state;
      if (l.rate_sent != null) e.rate.set(name + "→" + l.peer, l.rate_sent);
      const back = l.peer + "→" + name;
      if (l.rate_received != null && !e.rate.has(back) && !views.has(l.peer)) e.rate.set(back, l.rate_received);
    }
    for (const g of v.gateways) {
      // "\0" starts no switch's name: a place's node is never a switch's
      const other = "\0" + JSON.stringify([g.peer_place, g.peer]);
      node(other, { place: g.peer_place, via: g.peer });
      const key = JSON.stringify(["gw", name, g.name]);
      edges.set(key, { key, kind: "gateway", gateway: g.name, child: name, parent: other, state: g.state, rate: new Map(), routes: [] });
    }
  }
  for (const [name, v] of views) {
    for (const r of v.routes) {
      const e = r.gateway ? edges.get(JSON.stringify(["gw", name, r.gateway])) : edgeOf(name, r.peer);
      if (e) e.routes.push({ from: name, to: r.peer, filter: r.filter, refs: r.refs, covered: r.covered_by });
    }
  }
  return { nodes, edges };
}

function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}

// layout places the switches as the tree the links make — each parent
// above its children, roots on top — and each other place below the
// switch whose gateway reaches it.
function layout({ nodes, edges }) {
  const up = new Map(); // node → the node it hangs from
  for (const e of edges.values()) {
    if (e.kind === "link") up.set(e.child, e.parent);
    else up.set(e.parent, e.child); // an other place hangs from its gateway's switch
  }
  const depth = (name) => {
    let d = 0;
    for (let n = name; up.has(n) && d < nodes.size; n = up.get(n)) d++;
    return d;
  };
  const levels = new Map();
  const order = (a, b) => (a === selfName ? -1 : b === selfName ? 1 : 0) || a.localeCompare(b);
  for (const name of [...nodes.keys()].sort(order)) {
    const d = depth(name);
    if (!levels.has(d)) levels.set(d, []);
    levels.get(d).push(name);
  }
  const deepest = Math.max(1, ...levels.keys());
  const step = Math.min(140, 500 / deepest);
  const pos = new Map();
  for (const [d, names] of levels) {
    names.forEach((name, i) => pos.set(name, { x: (900 * (i + 1)) / (names.length + 1), y: 60 + d * step }));
  }
  return pos;
}

// draw draws the nodes where layout puts them and the edges between them
// with their rates and filters.
function draw({ nodes, edges }) {
  const pos = layout({ nodes, edges });
  const names = [...nodes.keys()];
  const gEdges = document.getElementById("edges");
  const gNodes = document.getElementById("nodes");
  gEdges.replaceChildren();
  gNodes.replaceChildren();
  for (const e of edges.values()) {
    const a = pos.get(e.child), b = pos.get(e.parent);
    const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
    const g = el("g", { class: e.kind + (e.state !== "up" ? " down" : ""), "data-state": e.state });
    g.setAttribute(e.kind === "link" ? "data-link" : "data-gateway", e.kind === "link" ? e.label : e.gateway);
    g.append(el("line", { x1: a.x + (dx * 34) / len, y1: a.y + (dy * 34) / len, x2: b.x - (dx * 34) / len, y2: b.y - (dy * 34) / len, "marker-end": "url(#arrow)" }));
    let y = (a.y + b.y) / 2 - 6, x = (a.x + b.x) / 2 + 8;
    const rateText = [...e.rate].map(([dir, r]) => clip(dir, 2 * MAX_LABEL) + " " + r.toFixed(1) + "/s").join("  ");
    g.append(el("text", { class: "rate", x, y }, e.kind === "gateway" ? "gateway " + clip(e.gateway, MAX_LABEL) : rateText || e.state));
    const byDir = new Map();
    for (const r of e.routes) {
      const dir = r.from + "→" + r.to;
      if (!byDir.has(dir)) byDir.set(dir, []);
      byDir.get(dir).push(r);
    }
    for (const [, rs] of byDir) {
      for (const r of rs.slice(0, MAX_ROUTES)) {
        y += 13;
        const t = el("text", { class: "route", x, y, "data-from": r.from, "data-to": r.to, "data-refs": r.refs, "data-filter": r.filter },
          clip(r.from, MAX_LABEL) + "→" + clip(r.to, MAX_LABEL) + " " + clip(r.filter, MAX_FILTER) + " ×" + r.refs + (r.covered ? " (covered)" : ""));
        t.append(el("title", {}, r.from + "→" + r.to + " " + r.filter));
        g.append(t);
      }
      if (rs.length > MAX_ROUTES) g.append(el("text", { class: "route more", x, y: (y += 13) }, "… " + (rs.length - MAX_ROUTES) + " more"));
    }
    gEdges.append(g);
  }
  for (const name of names) {
    const n = nodes.get(name), p = pos.get(name);
    const cls = ["node", name === selfName ? "self" : "", n.place ? "place" : "", !n.place && !n.view ? "noview" : "", n.slow ? "slow" : ""];
    const g = el("g", { class: cls.filter(Boolean).join(" ") });
    g.setAttribute(n.place ? "data-place" : "data-switch", n.place ? n.place + "/" + n.via : name);
    g.append(el("title", {}, n.place ? "place " + n.place + ", via " + n.via : name));
    if (n.slow) g.setAttribute("data-slow", "true");
    let target = g;
    if (n.view && n.view.base !== "" && name !== selfName) {
      target = el("a", { href: n.view.base }); // follow to the neighbour's own page
      g.append(target);
    }
    target.append(el("circle", { cx: p.x, cy: p.y, r: 32 }));
    target.append(el("text", { x: p.x, y: p.y + 4 }, clip(n.place ? n.place : name, MAX_LABEL)));
    // the node's note goes on its left: the edges' labels are on the right
    const note = n.view ? n.view.sw.state + ", " + n.view.sessions.length + " sessions" : n.place ? "other place, via " + clip(n.via, MAX_LABEL) : "no view";
    target.append(el("text", { class: "sub", x: p.x - 40, y: p.y + 4 }, note));
    gNodes.append(g);
  }
}

function row(cells, tag) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement(tag || "td");
    td.textContent = c == null ? "" : String(c);
    tr.append(td);
  }
  return tr;
}

// details fills in this switch's counters and sessions.
function details() {
  const v = views.get(selfName);
  if (!v) return;
  document.getElementById("place").textContent = "— place " + v.sw.place;
  document.getElementById("self").textContent = v.sw.name + (v.sw.addr ? " (" + v.sw.addr + ")" : "");
  const stats = document.getElementById("stats");
  stats.replaceChildren();
  const flat = (o, prefix) => {
    for (const [k, val] of Object.entries(o)) {
      if (val && typeof val === "object" && !Array.isArray(val)) flat(val, prefix + k + ".");
      else stats.append(row([prefix + k, Array.isArray(val) ? val.join(", ") : val]));
    }
  };
  flat(v.sw.stats, "");
  const links = document.getElementById("links");
  links.replaceChildren(row(["peer", "peer is", "state", "events sent", "received", "dropped", "routes", "proxies"], "th"));
  for (const l of v.links) {
    const tr = row([l.peer, l.parent ? "parent" : "child", l.state, l.events_sent, l.events_received, l.dropped, l.routes, l.proxies]);
    tr.dataset.peer = l.peer;
    links.append(tr);
  }
  const sessions = document.getElementById("sessions");
  sessions.replaceChildren(row(["id", "name", "kind", "peer", "subs", "matched", "delivered", "dropped", "slow"], "th"));
  for (const s of v.sessions) {
    const tr = row([s.id, s.name, s.kind, s.peer, s.num_subscriptions, s.matched, s.delivered, s.dropped, s.slow ? "SLOW" : ""]);
    if (s.slow) tr.className = "slow";
    tr.dataset.session = s.id;
    sessions.append(tr);
  }
}

async function tick() {
  const status = document.getElementById("status");
  try {
    await refresh();
    const m = model();
    draw(m);
    details();
    const links = [...m.edges.values()].filter((e) => e.kind === "link").length;
    status.className = "";
    status.textContent = m.nodes.size + " nodes, " + links + " links; updated " + new Date().toLocaleTimeString();
  } catch (err) {
    status.className = "error";
    status.textContent = "cannot read this switch's view: " + err.message;
  }
  setTimeout(tick, REFRESH_MS);
}

tick();
