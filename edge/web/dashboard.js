// The relay dashboard: polls this edge's /v1/relay/dashboard.json.
"use strict";

const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);

function ago(ms) {
  if (ms < 1500) return "just now";
  if (ms < 90000) return `${Math.round(ms / 1000)} s ago`;
  return `${Math.round(ms / 60000)} min ago`;
}

function card(state, name, lines) {
  const c = document.createElement("div");
  c.className = "card provider";
  c.dataset.state = state;
  c.dataset.name = name;
  const head = document.createElement("div");
  head.className = "name";
  const dot = document.createElement("span");
  dot.className = "dot";
  head.append(dot, document.createTextNode(name));
  c.append(head);
  for (const [cls, text] of lines) {
    if (!text) continue;
    const d = document.createElement("div");
    d.className = cls;
    d.textContent = text;
    c.append(d);
  }
  return c;
}

function renderHealth(providers, error) {
  const box = $("health");
  box.replaceChildren();
  if (error) box.append(card("red", "health bucket", [["err", error]]));
  for (const p of providers || []) {
    const lines = [["meta", p.state === "unknown" ? "not probed yet" : `${p.state} · ${p.latency_ms} ms · ${ago(p.checked_ago_ms || 0)}`]];
    if (p.last_error) lines.push(["err", `last error: ${p.last_error}`]);
    box.append(card(p.state, p.provider, lines));
  }
}

// Breakers: the countdown to the half-open probe ticks between polls.
let breakerData = [];
let breakerAt = Date.now();

function renderBreakers() {
  const box = $("breakers");
  box.replaceChildren();
  if (!breakerData.length) {
    const e = document.createElement("span");
    e.className = "empty";
    e.textContent = "no breaker reports to this process";
    box.append(e);
    return;
  }
  for (const b of breakerData) {
    let meta = b.state.replace("_", "-");
    if (b.state === "open" && b.probe_in_ms !== undefined) {
      const left = Math.max(0, b.probe_in_ms - (Date.now() - breakerAt));
      meta += ` · half-open probe in ${(left / 1000).toFixed(1)} s`;
    }
    const name = !b.model || b.model === "all" ? b.provider : `${b.provider} / ${b.model}`;
    const c = card(b.state, name, [["meta", meta]]);
    c.className = "card breaker";
    box.append(c);
  }
}

function renderWorkers(workers, error) {
  $("worker-count").textContent = error ? "?" : String(workers.length);
  const box = $("workers");
  box.replaceChildren();
  if (error) {
    const e = document.createElement("div");
    e.className = "empty";
    e.textContent = `heartbeats unavailable: ${error}`;
    box.append(e);
    return;
  }
  for (const w of workers) {
    const row = document.createElement("div");
    row.className = "worker";
    row.dataset.state = w.late ? "red" : "green";
    const dot = document.createElement("span");
    dot.className = "dot";
    const id = document.createElement("span");
    id.className = "id";
    id.textContent = w.worker;
    id.title = `instance ${w.instance}`;
    const n = document.createElement("span");
    n.className = "pill";
    n.textContent = w.late ? `silent ${ago(w.silent_ms)}` : `${w.streams} stream${w.streams === 1 ? "" : "s"}`;
    row.append(dot, id, n);
    box.append(row);
  }
}

function render(d) {
  renderHealth(d.providers, d.health_error);
  breakerData = d.breakers || [];
  breakerAt = Date.now();
  renderBreakers();
  $("active").textContent = String(d.active_streams);
  const c = d.clients || {};
  $("clients").textContent = `clients: ${c.sse || 0} SSE · ${c.ws || 0} WebSocket · ${c.completion || 0} waiting`;
  renderWorkers(d.workers || [], d.workers_error);
  const r = d.recent;
  const perSecond = r.chunks.map((n) => n / (r.step_ms / 1000));
  timeChart($("chart-throughput"), perSecond, { stepMs: r.step_ms, area: true });
  timeChart($("chart-ttft"), r.ttft_ms, { stepMs: r.step_ms, area: false });
  sparkline($("spark-streams"), r.streams);
  barChart($("chart-cost"), (d.cost_by_model || []).map((m) => ({ label: m.model, value: m.usd })),
    (v) => `$${v < 0.01 ? v.toFixed(5) : v.toFixed(3)}`);
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

async function poll() {
  try {
    const res = await fetch("/v1/relay/dashboard.json", { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    render(await res.json());
    $("live").className = "dot green";
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    $("live").className = "dot red";
    $("updated").textContent = `edge unreachable: ${e.message}`;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

setInterval(renderBreakers, 250);
poll();
