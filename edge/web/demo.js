// The relay demo chat. It starts an answer with POST /v1/streams (an
// EventSource cannot POST), follows it with an EventSource on
// /v1/streams/<id>, and lets you cut the connection: POST
// /v1/streams/<id>/drop makes the edge end the response, and the browser's
// own EventSource reconnects with Last-Event-ID.
"use strict";

const $ = (id) => document.getElementById(id);

// state is also what e2e/browser_test.go reads.
const state = {
  status: "idle", id: "", text: "", seq: 0, cursor: "", provider: "",
  opens: 0, reconnects: 0, drops: 0, error: null, finish: "",
};
window.relayDemo = state;

const history = [];
let source = null;
let answerEl = null;

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("key").value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

function log(line) {
  const d = document.createElement("div");
  d.textContent = `${new Date().toLocaleTimeString()}  ${line}`;
  $("log").prepend(d);
}

function render() {
  $("st-state").className = `state-${state.status}`;
  $("st-state").replaceChildren(document.createTextNode("state "), Object.assign(document.createElement("b"), { textContent: state.status }));
  $("st-id").textContent = state.id || "–";
  $("st-seq").textContent = String(state.seq);
  $("st-cursor").textContent = state.cursor || "–";
  $("st-reconnects").textContent = String(state.reconnects);
  $("st-provider").textContent = state.provider || "–";
  if (answerEl) answerEl.textContent = state.text + (state.error ? `\n\n⚠ ${state.error.message}` : "");
  const busy = state.status === "streaming" || state.status === "reconnecting" || state.status === "starting";
  $("send").disabled = busy;
  $("drop").disabled = !(state.status === "streaming");
}

function bubble(cls, text) {
  const box = $("conversation");
  if (box.querySelector(".empty")) box.replaceChildren();
  const d = document.createElement("div");
  d.className = `msg ${cls}`;
  d.textContent = text;
  box.append(d);
  return d;
}

async function loadModels() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    const body = await res.json();
    for (const m of body.data || []) $("model").append(new Option(m.id, m.id));
  } catch (e) {
    log(`models: ${e.message}`);
  }
}

async function send() {
  const prompt = $("prompt").value;
  if (!prompt.trim()) return;
  Object.assign(state, { status: "starting", id: "", text: "", seq: 0, cursor: "", provider: "", opens: 0, reconnects: 0, drops: 0, error: null, finish: "" });
  bubble("user", prompt);
  answerEl = bubble("assistant", "");
  render();
  const messages = history.concat([{ role: "user", content: prompt }]);
  let res;
  try {
    res = await fetch("/v1/streams", { method: "POST", headers: headers(), body: JSON.stringify({ model: $("model").value, messages }) });
  } catch (e) {
    fail({ message: e.message });
    return;
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    fail(body.error || { message: `HTTP ${res.status}` });
    return;
  }
  state.id = body.id;
  state.status = "streaming";
  log(`stream ${body.id} started`);
  follow(`${body.url}?token=${encodeURIComponent(body.resume_token)}`, messages);
  render();
}

function fail(error) {
  state.error = error;
  state.status = "error";
  log(`error: ${error.message}`);
  render();
}

function follow(url, messages) {
  source = new EventSource(url);
  source.onopen = () => {
    state.opens++;
    if (state.opens > 1) {
      state.reconnects++;
      log(`reconnected; resuming after ${state.cursor || "the start"}`);
    }
    state.status = "streaming";
    render();
  };
  source.onmessage = (ev) => {
    if (ev.data === "[DONE]") {
      source.close();
      if (!state.error) {
        state.status = "done";
        history.push(...messages.slice(history.length), { role: "assistant", content: state.text });
      } else {
        state.status = "error";
      }
      log(`stream ended: ${state.status}${state.finish ? ` (${state.finish})` : ""}`);
      render();
      return;
    }
    let obj;
    try {
      obj = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (obj.error) {
      // Without an id: the edge is draining or lost the log; the
      // EventSource reconnects by itself. With one: the terminal error.
      if (ev.lastEventId && obj.relay) {
        state.error = obj.error;
        state.cursor = obj.relay.cursor;
      } else {
        log(`edge: ${obj.error.message}; reconnecting`);
      }
      render();
      return;
    }
    const choice = obj.choices && obj.choices[0];
    if (choice && choice.delta && typeof choice.delta.content === "string") state.text += choice.delta.content;
    if (choice && choice.finish_reason) state.finish = choice.finish_reason;
    if (obj.relay) {
      state.seq = obj.relay.seq;
      state.cursor = ev.lastEventId || obj.relay.cursor;
      if (obj.relay.provider) state.provider = `${obj.relay.provider}/${obj.relay.model}`;
    }
    render();
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      if (state.status !== "done") fail({ message: "the stream could not be resumed" });
      return;
    }
    if (state.status === "streaming") {
      state.status = "reconnecting";
      log("connection lost; the browser reconnects with Last-Event-ID");
      render();
    }
  };
}

async function drop() {
  if (!state.id) return;
  const res = await fetch(`/v1/streams/${state.id}/drop`, { method: "POST", headers: headers() });
  const body = await res.json().catch(() => ({}));
  state.drops++;
  log(`dropped ${body.dropped ?? "?"} connection(s) at seq ${state.seq}`);
  render();
}

$("send").addEventListener("click", send);
$("drop").addEventListener("click", drop);
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) send();
});
loadModels();
render();
