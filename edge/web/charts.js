// Hand-drawn SVG charts for the relay dashboard: no library, no CDN.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// size fits the viewBox to the element's pixels, so text is not stretched.
function size(svg, fallbackH) {
  const w = Math.max(svg.clientWidth || 600, 120);
  const h = Math.max(svg.clientHeight || fallbackH, 30);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.replaceChildren();
  return [w, h];
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmt(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
  if (v >= 10 || v === 0) return String(Math.round(v));
  return v.toFixed(v >= 1 ? 1 : 2);
}

// timeChart draws values (one per step, oldest first; null = no data) as
// an area or a line with dots, with a time axis ending at "now".
function timeChart(svg, values, opts) {
  const [w, h] = size(svg, 150);
  const left = 40, right = 8, top = 8, bottom = 18;
  const pw = w - left - right, ph = h - top - bottom;
  const present = values.filter((v) => v !== null && v !== undefined);
  const max = niceMax(Math.max(0, ...present));
  svg.dataset.total = String(present.reduce((a, b) => a + b, 0));
  svg.dataset.count = String(present.filter((v) => v > 0).length);
  svg.dataset.max = String(max);
  for (const f of [0, 0.5, 1]) {
    const y = top + ph - f * ph;
    svg.append(el("line", { class: "grid", x1: left, x2: w - right, y1: y, y2: y }));
    svg.append(el("text", { class: "axis", x: left - 6, y: y + 3, "text-anchor": "end" }, fmt(max * f)));
  }
  const n = values.length;
  const x = (i) => left + (n <= 1 ? 0 : (i / (n - 1)) * pw);
  const y = (v) => top + ph - (v / max) * ph;
  const minutes = Math.round((n * opts.stepMs) / 60000);
  svg.append(el("text", { class: "axis", x: left, y: h - 4 }, `−${minutes}m`));
  svg.append(el("text", { class: "axis", x: left + pw / 2, y: h - 4, "text-anchor": "middle" }, `−${minutes / 2}m`));
  svg.append(el("text", { class: "axis", x: w - right, y: h - 4, "text-anchor": "end" }, "now"));
  if (opts.area) {
    let d = `M${x(0)},${y(0)}`;
    values.forEach((v, i) => { d += ` L${x(i)},${y(v || 0)}`; });
    d += ` L${x(n - 1)},${y(0)} Z`;
    svg.append(el("path", { class: "area", d }));
    let line = "";
    values.forEach((v, i) => { line += `${i ? " L" : "M"}${x(i)},${y(v || 0)}`; });
    svg.append(el("path", { class: "line", d: line }));
    return;
  }
  // A line through the steps that have data; a dot on each.
  let line = "";
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || v === undefined) { pen = false; return; }
    line += `${pen ? " L" : " M"}${x(i)},${y(v)}`;
    pen = true;
    svg.append(el("circle", { class: "pt", cx: x(i), cy: y(v), r: 2.5 }, undefined));
  });
  if (line) svg.append(el("path", { class: "line2", d: line.trim() }));
}

// barChart draws horizontal bars, largest first.
function barChart(svg, items, format) {
  const rowH = 24;
  svg.style.height = `${Math.max(items.length, 1) * rowH + 8}px`;
  const [w] = size(svg, items.length * rowH + 8);
  svg.dataset.count = String(items.length);
  if (!items.length) {
    svg.append(el("text", { class: "axis", x: 4, y: 18 }, "no stream has ended on this edge yet"));
    return;
  }
  const labelW = 120, valueW = 90;
  const max = Math.max(...items.map((i) => i.value), 1e-9);
  items.forEach((item, i) => {
    const y = 4 + i * rowH;
    const bw = Math.max(2, ((w - labelW - valueW) * item.value) / max);
    svg.append(el("text", { class: "label", x: labelW - 8, y: y + 15, "text-anchor": "end" }, item.label));
    const bar = el("rect", { class: "bar", x: labelW, y: y + 3, width: bw, height: rowH - 8, rx: 3 });
    bar.dataset.model = item.label;
    bar.dataset.value = String(item.value);
    svg.append(bar);
    svg.append(el("text", { class: "axis", x: labelW + bw + 6, y: y + 15 }, format(item.value)));
  });
}

// sparkline draws a small filled line.
function sparkline(svg, values) {
  const [w, h] = size(svg, 40);
  const max = niceMax(Math.max(0, ...values));
  const n = values.length;
  const x = (i) => (n <= 1 ? 0 : (i / (n - 1)) * w);
  const y = (v) => h - 2 - (v / max) * (h - 4);
  let d = `M0,${h}`;
  values.forEach((v, i) => { d += ` L${x(i)},${y(v)}`; });
  d += ` L${w},${h} Z`;
  svg.append(el("path", { class: "area", d }));
  svg.dataset.total = String(values.reduce((a, b) => a + b, 0));
}
