// ckcd-coex dashboard: polls GET /metrics and the /coex/v1 reads once a second and draws
// them on canvases of its own. Read-only: it sends GET requests only.
"use strict";

const API = "/coex/v1";
const POLL_MS = 1000;
const WINDOW_S = 120;          // what the charts show
const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
const REASON_COLORS = {overflow: "#dc2626", early: "#d97706", choke_match: "#7c3aed", delay: "#2563eb",
                       penalty: "#db2777", flush: "#4b5563", shrink: "#0891b2"};

// --- Prometheus text format (what GET /metrics sends) --------------------------------------

function parseLabels(text) {
  const labels = {};
  const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    labels[m[1]] = m[2].replace(/\\n/g, "\n").replace(/\\"/g, "\"").replace(/\\\\/g, "\\");
  }
  return labels;
}

// -> {name: [{labels, value}]}
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    (out[m[1]] = out[m[1]] || []).push({labels: m[2] ? parseLabels(m[2]) : {}, value: Number(m[3])});
  }
  return out;
}

function samples(metrics, name) { return metrics[name] || []; }
function portKey(l) { return `${l.dpid}:${l.port}`; }

// --- history: per series [[t_s, value]], computed from counters between two scrapes --------------

const history = {};            // series id -> [[t, v]]
let previous = null;           // {t, metrics} of the last scrape

function push(id, t, v) {
  const h = (history[id] = history[id] || []);
  h.push([t, v]);
  while (h.length && h[0][0] < t - WINDOW_S) h.shift();
}

function byKey(list, keyOf) {
  const m = new Map();
  for (const s of list) m.set(keyOf(s.labels), s.value);
  return m;
}

function record(now, metrics) {
  if (previous !== null) {
    const dt = now - previous.t;
    if (dt <= 0) return;
    // queueing delay of the frames dequeued since the last scrape: delta sum / delta count
    const sum0 = byKey(samples(previous.metrics, "coex_port_sojourn_seconds_sum"), portKey);
    const cnt0 = byKey(samples(previous.metrics, "coex_port_sojourn_seconds_count"), portKey);
    const cnt1 = byKey(samples(metrics, "coex_port_sojourn_seconds_count"), portKey);
    for (const s of samples(metrics, "coex_port_sojourn_seconds_sum")) {
      const k = portKey(s.labels);
      if (!sum0.has(k)) continue;
      const dn = cnt1.get(k) - cnt0.get(k);
      const ds = s.value - sum0.get(k);
      push(`delay/${k}`, now, dn > 0 && ds >= 0 ? 1000 * ds / dn : 0);
    }
    // drops and ECN marks (CE where the discipline would have dropped) per second, by reason
    for (const kind of ["drops", "marks"]) {
      const name = `coex_port_${kind}_total`;
      const before = byKey(samples(previous.metrics, name), l => `${portKey(l)}/${l.reason}`);
      for (const s of samples(metrics, name)) {
        const k = `${portKey(s.labels)}/${s.labels.reason}`;
        if (before.has(k)) push(`${kind}/${k}`, now, Math.max(0, s.value - before.get(k)) / dt);
      }
    }
    // per aggregate: the largest rate over the switches (each switch on the path counts it once)
    const bytes0 = byKey(samples(previous.metrics, "coex_aggregate_bytes_total"), l => `${l.aggregate}/${l.dpid}`);
    const rates = {};
    for (const s of samples(metrics, "coex_aggregate_bytes_total")) {
      const k = `${s.labels.aggregate}/${s.labels.dpid}`;
      if (!bytes0.has(k)) continue;
      const bps = Math.max(0, s.value - bytes0.get(k)) * 8 / dt;  // a flow that expired gives no negative rate
      rates[s.labels.aggregate] = Math.max(rates[s.labels.aggregate] || 0, bps);
    }
    for (const [agg, bps] of Object.entries(rates)) push(`agg/${agg}`, now, bps / 1e6);
  }
  previous = {t: now, metrics};
}

// --- charts -------------------------------------------------------------------------------

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 2, 2.5, 5, 10]) if (f * p >= v) return f * p;
  return 10 * p;
}

// series: [{name, color, points: [[t, v]]}]; the canvas gets data-points = the points drawn
function drawChart(canvas, series, unit, now) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width, h = canvas.height / (canvas.dataset.dpr || 1);
  canvas.width = w * dpr; canvas.height = h * dpr; canvas.dataset.dpr = dpr;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, w, h);
  const left = 52, right = 10, top = 8, bottom = 34;
  const pw = w - left - right, ph = h - top - bottom;
  let max = 0, drawn = 0, scale = 1;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  // A queue of a few packets waits well under a millisecond: 380 µs reads better than
  // 0.00038 ms, and its tick labels leave room for the axis's unit.
  if (unit === "ms" && max > 0 && max < 1) { unit = "\u00b5s"; scale = 1000; }
  max = niceMax(max * scale);
  const t0 = now - WINDOW_S;
  const x = t => left + pw * (t - t0) / WINDOW_S, y = v => top + ph * (1 - v * scale / max);
  ctx.font = "11px system-ui, sans-serif";
  ctx.strokeStyle = "#e5e7eb"; ctx.fillStyle = "#6b7280"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4, yy = top + ph * (1 - v / max);
    ctx.beginPath(); ctx.moveTo(left, yy); ctx.lineTo(left + pw, yy); ctx.stroke();
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(v >= 100 ? v.toFixed(0) : String(parseFloat(v.toPrecision(2))), left - 4, yy);
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (let s = 0; s <= WINDOW_S; s += 30) ctx.fillText(s === WINDOW_S ? "now" : `-${WINDOW_S - s} s`, x(t0 + s), top + ph + 3);
  ctx.save(); ctx.translate(9, top + ph / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(unit, 0, -6); ctx.restore();
  let lx = left;
  for (const s of series) {
    ctx.strokeStyle = s.color; ctx.lineWidth = 1.6; ctx.setLineDash(s.dash || []); ctx.beginPath();
    s.points.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
    ctx.stroke(); ctx.setLineDash([]);
    drawn += s.points.length;
    ctx.fillStyle = s.color;
    if (s.dash) { ctx.fillRect(lx, h - 12, 4, 3); ctx.fillRect(lx + 6, h - 12, 4, 3); } else ctx.fillRect(lx, h - 12, 10, 3);
    ctx.fillStyle = "#374151"; ctx.textAlign = "left"; ctx.textBaseline = "middle";
    ctx.fillText(s.name, lx + 13, h - 11);
    lx += 24 + ctx.measureText(s.name).width;
  }
  if (!series.length) { ctx.fillStyle = "#9ca3af"; ctx.textAlign = "center"; ctx.fillText("waiting for data", left + pw / 2, top + ph / 2); }
  canvas.dataset.points = drawn;
}

// --- sections -----------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmtFlow(f) { return `${f.src_ip}:${f.src_port} → ${f.dst_ip}:${f.dst_port}`; }
function mbps(bps) { return bps === null || bps === undefined ? "–" : (bps / 1e6).toFixed(1); }
function clock(wall) { return new Date(wall * 1000).toLocaleTimeString(); }

function drawPorts(metrics, now) {
  const box = document.getElementById("ports");
  const infos = samples(metrics, "coex_port_discipline_info");
  if (!infos.length) return;
  const value = (name, l) => (samples(metrics, name).find(s => portKey(s.labels) === portKey(l)) || {}).value;
  for (const info of infos) {
    const l = info.labels, k = portKey(l), id = `port-${l.dpid}-${l.port}`;
    let div = document.getElementById(id);
    if (!div) {
      box.querySelector(".empty")?.remove();
      div = el("div", {class: "port", id, "data-port": k},
        el("h3", {}, `s${l.dpid}:${l.port} `, el("span", {class: "hint"}, l.interface)),
        el("div", {class: "facts"}),
        el("canvas", {class: "chart delay", width: 420, height: 150}),
        el("canvas", {class: "chart drops", width: 420, height: 150}));
      box.append(div);
    }
    const rate = value("coex_port_link_rate_bits_per_second", l), q = value("coex_port_queue_packets", l);
    const active = samples(metrics, "coex_port_ckcd_active_flows").filter(s => portKey(s.labels) === k);
    const fair = samples(metrics, "coex_port_ckcd_fair_share_bits_per_second").filter(s => portKey(s.labels) === k);
    div.querySelector(".facts").textContent = [
      `${l.discipline}${l.bands ? ` (${l.bands})` : ""} via ${l.backend}`,
      rate ? `${mbps(rate)} Mbit/s` : null,
      q !== undefined ? `queue ${q} pkts` : null,
      active.length ? `CKCD active flows ${active.map(s => s.value).join("/")}` : null,
      fair.length ? `fair share ${fair.map(s => mbps(s.value)).join("/")} Mbit/s` : null,
    ].filter(Boolean).join(" · ");
    drawChart(div.querySelector(".delay"),
      [{name: "queueing delay (mean per second)", color: COLORS[0], points: history[`delay/${k}`] || []}], "ms", now);
    // the reasons that dropped (solid) or marked (dashed, same colour) in the window
    const shown = kind => Object.keys(history).filter(h => h.startsWith(`${kind}/${k}/`))
      .filter(h => history[h].some(([, v]) => v > 0)).map(h => h.split("/").pop());
    const drops = shown("drops"), marks = shown("marks");
    const series = (drops.length || marks.length ? drops : ["overflow"]).map(r => (
      {name: `${r} drops`, color: REASON_COLORS[r] || "#111827", points: history[`drops/${k}/${r}`] || []}));
    for (const r of marks) {
      series.push({name: `${r} marks`, color: REASON_COLORS[r] || "#111827", dash: [5, 3],
                   points: history[`marks/${k}/${r}`]});
    }
    drawChart(div.querySelector(".drops"), series, marks.length ? "drops, marks/s" : "drops/s", now);
  }
}

function drawAggregates(now) {
  const names = Object.keys(history).filter(h => h.startsWith("agg/")).map(h => h.slice(4)).sort();
  drawChart(document.getElementById("aggregates"),
    names.map((n, i) => ({name: n, color: COLORS[i % COLORS.length], points: history[`agg/${n}`]})), "Mbit/s", now);
}

function drawTopology(state, metrics) {
  const canvas = document.getElementById("topology");
  const dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 900, h = 220;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr); ctx.clearRect(0, 0, w, h);
  const switches = state.switches.map(s => s.dpid);
  const bottleneck = new Set(samples(metrics, "coex_port_discipline_info").map(s => portKey(s.labels)));
  const pos = {};
  switches.forEach((d, i) => { pos[d] = [w * (i + 1) / (switches.length + 1), h / 2]; });
  ctx.font = "12px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
  for (const link of state.links) {
    const a = pos[link.a.dpid], b = pos[link.b.dpid];
    if (!a || !b) continue;
    const hot = bottleneck.has(`${link.a.dpid}:${link.a.port}`) || bottleneck.has(`${link.b.dpid}:${link.b.port}`);
    ctx.strokeStyle = hot ? "#f59e0b" : "#9ca3af"; ctx.lineWidth = hot ? 5 : 2;
    ctx.beginPath(); ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]); ctx.stroke();
    for (const [end, p, q] of [[link.a, a, b], [link.b, b, a]]) {
      const px = p[0] + (q[0] - p[0]) * 0.2, py = p[1] + (q[1] - p[1]) * 0.2 - 12;
      ctx.fillStyle = bottleneck.has(`${end.dpid}:${end.port}`) ? "#b45309" : "#6b7280";
      ctx.fillText(`port ${end.port}`, px, py);
    }
  }
  const perSwitch = {};
  for (const host of state.hosts) (perSwitch[host.dpid] = perSwitch[host.dpid] || []).push(host);
  for (const [dpid, hosts] of Object.entries(perSwitch)) {
    const p = pos[dpid];
    if (!p) continue;
    hosts.forEach((host, i) => {
      const hx = p[0] + (i - (hosts.length - 1) / 2) * 90, hy = i % 2 ? 28 : h - 28;
      ctx.strokeStyle = "#d1d5db"; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(p[0], p[1]); ctx.lineTo(hx, hy); ctx.stroke();
      ctx.fillStyle = "#ecfdf5"; ctx.fillRect(hx - 40, hy - 10, 80, 20);
      ctx.fillStyle = "#065f46"; ctx.fillText(host.ipv4 || host.mac, hx, hy);
    });
  }
  for (const s of state.switches) {
    const [x, y] = pos[s.dpid];
    ctx.fillStyle = s.connected ? "#1f2937" : "#9ca3af";
    ctx.beginPath(); ctx.arc(x, y, 22, 0, 2 * Math.PI); ctx.fill();
    ctx.fillStyle = "#fff"; ctx.fillText(`s${s.dpid}`, x, y);
  }
  if (!switches.length) { ctx.fillStyle = "#9ca3af"; ctx.fillText("no switch connected", w / 2, h / 2); }
  canvas.dataset.switches = switches.length;
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
}

function drawHeavyHitters(hh) {
  document.getElementById("hh-status").textContent = hh.enabled
    ? `detection on (${hh.detector || "rate"}, ${hh.source})${hh.error ? ": " + hh.error : ""}` : "detection off";
  fillTable("hh-current", hh.current.length ? hh.current.map(c => el("tr", {"data-flow": fmtFlow(c.flow)},
    el("td", {class: "steered"}, fmtFlow(c.flow)), el("td", {}, `s${c.dpid}:${c.port}`), el("td", {}, clock(c.since)),
    el("td", {}, mbps(c.estimate_bps)), el("td", {}, mbps(c.detected_estimate_bps))))
    : [el("tr", {}, el("td", {colspan: 5, class: "empty"}, "none steered now"))]);
  fillTable("hh-log", hh.log.slice(-12).reverse().map(r => el("tr", {},
    el("td", {}, clock(r.time)), el("td", {class: r.decision}, r.decision), el("td", {}, fmtFlow(r.flow)),
    el("td", {}, mbps(r.estimate_bps)),
    el("td", {}, r.reason + (r.detection_latency_s !== undefined ? `, after ${r.detection_latency_s} s` : "")))));
}

function drawPolicy(doc) {
  const p = doc.policy, a = p.approaches;
  document.getElementById("policy-version").textContent = `version ${doc.version}`;
  const flag = (name, on) => el("span", {class: on ? "on" : "off"}, `${name} ${on ? "on" : "off"}`);
  const lq = a.limited_queue || {};
  document.getElementById("approaches").replaceChildren(
    flag("Separate Paths", a.separate_paths), " · ", flag("Separate Queues", a.separate_queues), " · ",
    flag(`Limited Queue${lq.enabled ? ` (${lq.aggregate}, ${lq.fraction})` : ""}`, lq.enabled), " · ",
    flag("heavy-hitter steering", p.heavy_hitters && p.heavy_hitters.enabled));
  const rules = {};
  for (const r of p.rules) rules[r.aggregate] = (rules[r.aggregate] || 0) + 1;
  fillTable("policy-aggregates", Object.entries(p.aggregates).map(([name, g]) => el("tr", {},
    el("td", {}, name), el("td", {}, g.dscp ?? "–"), el("td", {}, g.queue_weight ?? "–"),
    el("td", {}, g.own_path ? "yes" : "no"), el("td", {}, rules[name] || 0))));
  fillTable("policy-ports", p.ports.length ? p.ports.map(port => el("tr", {},
    el("td", {}, `s${port.dpid}:${port.port}`), el("td", {}, `${mbps(port.capacity_bps)} Mbit/s`),
    el("td", {}, port.aqm ? port.aqm.discipline : "as the link runs")))
    : [el("tr", {}, el("td", {colspan: 3, class: "empty"}, "none declared"))]);
}

// --- the loop -------------------------------------------------------------------------------

async function get(path, asText) {
  const res = await fetch(path, {cache: "no-store"});
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return asText ? res.text() : res.json();
}

async function tick() {
  const health = document.getElementById("health");
  try {
    const [text, state, hh, policy] = await Promise.all([
      get("/metrics", true), get(`${API}/state`), get(`${API}/heavy-hitters`), get(`${API}/policy`)]);
    const now = Date.now() / 1000, metrics = parseMetrics(text);
    record(now, metrics);
    drawTopology(state, metrics);
    drawPorts(metrics, now);
    drawAggregates(now);
    drawHeavyHitters(hh);
    drawPolicy(policy);
    const connected = (samples(metrics, "coex_switches_connected")[0] || {}).value;
    health.textContent = `${connected} switch${connected === 1 ? "" : "es"} connected · policy version ${policy.version} · ${new Date().toLocaleTimeString()}`;
    health.classList.remove("bad");
    document.body.dataset.updates = Number(document.body.dataset.updates || 0) + 1;
  } catch (err) {
    health.textContent = `controller not answering (${err.message}); retrying`;
    health.classList.add("bad");
  }
  setTimeout(tick, POLL_MS);
}

tick();
