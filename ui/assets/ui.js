// SPDX-License-Identifier: Apache-2.0
// kernel_exporter live page: polls data every second and draws on canvas.
// No library, no network but this exporter (see package ui).
'use strict';

const RING = 600;          // samples kept, as the server's ring
const HEAT_W = 600;        // heatmap plot width in CSS px (one column per sample)
const HEAT_H = 220;        // heatmap plot height in CSS px
const AXIS_L = 64, AXIS_B = 16, PAD_T = 4;
const QCOL = ['#ffffff', '#ffb000', '#ff4d6d'];
const PALETTE = [[0.0, [59, 15, 112]], [0.25, [140, 41, 129]], [0.5, [222, 73, 104]], [0.75, [254, 159, 109]], [1.0, [252, 253, 191]]];

const st = { seq: 0, times: [], hists: new Map(), counters: new Map(), sections: new Map(), scrolled: false };

function $(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

// ---- formatting -------------------------------------------------------
function unitOf(name) {
  if (name.endsWith('_seconds')) return 's';
  if (name.endsWith('_bytes')) return 'B';
  return '';
}
function fmt(v, unit) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  if (unit === 's') {
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a < 1e-6) return +(v * 1e9).toPrecision(3) + 'ns';
    if (a < 1e-3) return +(v * 1e6).toPrecision(3) + 'µs';
    if (a < 1) return +(v * 1e3).toPrecision(3) + 'ms';
    return +v.toPrecision(3) + 's';
  }
  if (unit === 'B') {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return +v.toPrecision(3) + u[i];
  }
  return fmtNum(v);
}
function fmtNum(v) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toPrecision(3) + 'G';
  if (a >= 1e6) return +(v / 1e6).toPrecision(3) + 'M';
  if (a >= 1e3) return +(v / 1e3).toPrecision(3) + 'k';
  return +v.toPrecision(3) + '';
}

function colour(t) {
  for (let i = 1; i < PALETTE.length; i++) {
    if (t <= PALETTE[i][0]) {
      const [t0, c0] = PALETTE[i - 1], [t1, c1] = PALETTE[i];
      const f = (t - t0) / (t1 - t0);
      return 'rgb(' + c0.map((c, j) => Math.round(c + (c1[j] - c) * f)).join(',') + ')';
    }
  }
  return 'rgb(' + PALETTE[PALETTE.length - 1][1].join(',') + ')';
}

// ---- canvas helpers ---------------------------------------------------
function sizeCanvas(c, w, h) {
  const dpr = window.devicePixelRatio || 1;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
    c.style.width = w + 'px';
    c.style.height = h + 'px';
  }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  return g;
}

// Log-scale y edges of each bucket (+Inf last): [lo, hi] in log10 units,
// or bucket indexes when a bound is not positive.
function bucketEdges(upper) {
  const n = upper.length + 1;
  const edges = [];
  const logOK = upper.every(u => u > 0);
  if (!logOK) {
    for (let b = 0; b < n; b++) edges.push([b, b + 1]);
    return edges;
  }
  const L = upper.map(Math.log10);
  const step0 = L.length > 1 ? L[1] - L[0] : Math.log10(2);
  const stepN = L.length > 1 ? L[L.length - 1] - L[L.length - 2] : Math.log10(2);
  for (let b = 0; b < n; b++) {
    const lo = b === 0 ? L[0] - step0 : L[b - 1];
    const hi = b < L.length ? L[b] : L[L.length - 1] + stepN;
    edges.push([lo, hi]);
  }
  return edges;
}

// ---- heatmap ----------------------------------------------------------
function drawHeatmap(m) {
  const c = m.el.heat;
  const W = AXIS_L + HEAT_W + 4, H = PAD_T + HEAT_H + AXIS_B;
  const g = sizeCanvas(c, W, H);
  g.clearRect(0, 0, W, H);
  g.fillStyle = '#10131a';
  g.fillRect(0, 0, W, H);
  const unit = unitOf(m.name);
  const edges = bucketEdges(m.upper);
  const y0 = edges[0][0], y1 = edges[edges.length - 1][1];
  const yOf = v => PAD_T + HEAT_H - (v - y0) / (y1 - y0) * HEAT_H;
  const n = m.deltas.length;
  let max = 0;
  for (const d of m.deltas) if (d) for (const v of d) if (v > max) max = v;
  const lmax = Math.log1p(max);
  const x0 = AXIS_L + (HEAT_W - n);
  for (let i = 0; i < n; i++) {
    const d = m.deltas[i];
    if (!d) continue;
    for (let b = 0; b < d.length; b++) {
      if (!d[b]) continue;
      const top = yOf(edges[b][1]), bot = yOf(edges[b][0]);
      g.fillStyle = colour(Math.log1p(d[b]) / lmax);
      g.fillRect(x0 + i, top, 1, Math.max(1, bot - top));
    }
  }
  // quantiles of each sample
  const logOK = m.upper.every(u => u > 0);
  if (logOK) {
    for (let i = 0; i < n; i++) {
      const q = m.quant[i];
      if (!q) continue;
      for (let k = 0; k < 3; k++) {
        if (q[k] === null || !(q[k] > 0)) continue;
        g.fillStyle = QCOL[k];
        g.fillRect(x0 + i, yOf(Math.log10(q[k])) - 0.5, 1, 1);
      }
    }
  }
  // axes
  g.fillStyle = '#c9d1d9';
  g.font = '10px system-ui, sans-serif';
  g.textBaseline = 'middle';
  g.textAlign = 'right';
  const every = Math.max(1, Math.ceil(edges.length / (HEAT_H / 14)));
  for (let b = 0; b < m.upper.length; b += every) {
    const y = logOK ? yOf(edges[b][1]) : yOf(b + 1);
    g.fillText('≤' + fmt(m.upper[b], unit), AXIS_L - 4, y);
  }
  g.textBaseline = 'top';
  g.textAlign = 'center';
  for (const [sec, label] of [[600, '-10m'], [480, '-8m'], [360, '-6m'], [240, '-4m'], [120, '-2m'], [0, 'now']]) {
    const x = AXIS_L + HEAT_W - sec;
    g.fillText(label, Math.min(Math.max(x, AXIS_L + 10), AXIS_L + HEAT_W - 10), PAD_T + HEAT_H + 3);
  }
}

// ---- distribution -----------------------------------------------------
function drawDist(m) {
  const w = m.window;
  const c = m.el.dist;
  const unit = unitOf(m.name);
  let lo = -1, hi = -1;
  if (w) w.counts.forEach((v, b) => { if (v) { if (lo < 0) lo = b; hi = b; } });
  const rows = lo < 0 ? 1 : hi - lo + 1;
  const W = 380, RH = 13, H = Math.max(rows * RH + 4, 20);
  const g = sizeCanvas(c, W, H);
  g.clearRect(0, 0, W, H);
  g.font = '10px ui-monospace, monospace';
  g.textBaseline = 'middle';
  if (lo < 0) {
    g.fillStyle = '#5b6470';
    g.fillText('no observations in the last ' + (w ? w.samples : 0) + ' s', 4, 10);
  } else {
    const max = Math.max(...w.counts.slice(lo, hi + 1));
    for (let b = lo; b <= hi; b++) {
      const y = 2 + (b - lo) * RH;
      const label = b < m.upper.length ? '≤' + fmt(m.upper[b], unit) : '>' + fmt(m.upper[m.upper.length - 1], unit);
      g.fillStyle = '#1b1f24';
      g.textAlign = 'right';
      g.fillText(label, 70, y + RH / 2);
      g.fillStyle = '#4c6ef5';
      const bw = w.counts[b] / max * 220;
      g.fillRect(76, y + 1, Math.max(bw, w.counts[b] ? 1 : 0), RH - 2);
      g.fillStyle = '#1b1f24';
      g.textAlign = 'left';
      g.fillText(fmtNum(w.counts[b]), 80 + bw, y + RH / 2);
    }
  }
  const q = w ? w.quantiles : null;
  m.el.quant.textContent = 'last ' + (w ? w.samples : 0) + ' s: ' + fmtNum(w ? w.total : 0) + ' observations · p50 ' +
    fmt(q && q[0], unit) + ' · p99 ' + fmt(q && q[1], unit) + ' · p99.9 ' + fmt(q && q[2], unit);
}

// ---- counters ---------------------------------------------------------
function drawSpark(c, rates) {
  const W = 160, H = 18;
  const g = sizeCanvas(c, W, H);
  g.clearRect(0, 0, W, H);
  let max = 0;
  for (const v of rates) if (v !== null && v > max) max = v;
  if (max <= 0) return;
  g.strokeStyle = '#2f9e44';
  g.lineWidth = 1;
  g.beginPath();
  const n = rates.length, dx = W / RING;
  let pen = false;
  for (let i = 0; i < n; i++) {
    const v = rates[i];
    if (v === null) { pen = false; continue; }
    const x = W - (n - i) * dx, y = H - 1 - v / max * (H - 2);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  }
  g.stroke();
}

function renderCounter(m) {
  const tb = m.el.body;
  tb.replaceChildren();
  if (m.top.length === 0) {
    tb.append($('tr', {}, $('td', { class: 'empty', colspan: String(m.labelNames.length + 2) }, 'no label set moved in the last second')));
    return;
  }
  for (const k of m.top) {
    const s = m.series.get(k);
    if (!s) continue;
    let last = null;
    for (let i = s.rates.length - 1; i >= 0; i--) if (s.rates[i] !== null) { last = s.rates[i]; break; }
    const spark = $('canvas', { class: 'spark' });
    const tr = $('tr', {});
    for (const l of s.labels) tr.append($('td', {}, l));
    tr.append($('td', { class: 'rate' }, fmtNum(last) + '/s'), $('td', {}, spark));
    tb.append(tr);
    drawSpark(spark, s.rates);
  }
}

// ---- DOM --------------------------------------------------------------
function section(config) {
  let s = st.sections.get(config);
  if (!s) {
    s = $('section', { class: 'config', id: config }, $('h2', {}, config));
    st.sections.set(config, s);
    document.getElementById('main').append(s);
  }
  return s;
}

// renderAudit shows each config's self-audit (the data's audit list) in
// its section, as the landing page does: the ratio of the last interval,
// marked outside [0.98, 1.02] or when not compared; a counter this kernel
// does not keep said so, unmarked.
function renderAudit(list) {
  const by = new Map();
  for (const a of list || []) {
    if (!by.has(a.config)) by.set(a.config, []);
    by.get(a.config).push(a);
  }
  for (const [config, s] of st.sections) {
    let p = s.querySelector('p.audit');
    const as = by.get(config);
    if (!as) { if (p) p.remove(); continue; }
    if (!p) {
      p = $('p', { class: 'audit', title: "our events over the kernel's own count of them in the last audit interval (kernel_exporter_audit_ratio)" });
      s.querySelector('h2').after(p);
    }
    const kids = ['audit:'];
    const idle = [];
    for (const a of as) {
      let text, mark = false;
      switch (a.state) {
        case 'in_band': text = a.ratio.toFixed(3); break;
        case 'out_of_band': text = a.ratio.toFixed(3); mark = true; break;
        case 'error': text = 'not compared: ' + a.reason; mark = true; break;
        case 'unavailable': text = 'not available on this kernel: ' + a.reason; break;
        default: idle.push(a.source); continue;
      }
      kids.push(' ' + a.source + ' ', $('span', { class: mark ? 'mark' : '', 'data-source': a.source, 'data-state': a.state }, text));
    }
    if (idle.length) kids.push(' ' + idle.join(', ') + ' ', $('span', { class: '', 'data-state': 'no_events' }, 'no kernel events'));
    p.replaceChildren(...kids);
  }
}

function histCard(m) {
  // data-plot: the plot area inside the canvas (x, y, width, height in CSS
  // px), where only samples are drawn (the Chromium test reads it).
  const heat = $('canvas', { class: 'heatmap', 'data-config': m.config, 'data-metric': m.name,
    'data-plot': [AXIS_L, PAD_T, HEAT_W, HEAT_H].join(',') });
  const dist = $('canvas', { class: 'dist', 'data-config': m.config, 'data-metric': m.name });
  const quant = $('div', { class: 'quant' });
  const card = $('div', { class: 'card', 'data-metric': m.name },
    $('h3', {}, m.name), $('p', { class: 'help' }, m.help),
    $('div', { class: 'hist' }, heat, $('div', {}, dist, quant)));
  section(m.config).append(card);
  m.el = { card, heat, dist, quant };
}

function counterCard(m) {
  const head = $('tr', {});
  for (const l of m.labelNames) head.append($('th', {}, l));
  head.append($('th', {}, 'rate'), $('th', {}, 'last 10 min'));
  const body = $('tbody', {});
  const card = $('div', { class: 'card', 'data-metric': m.name },
    $('h3', {}, m.name + ' (top ' + 20 + ' by rate)'), $('p', { class: 'help' }, m.help),
    $('table', { class: 'top' }, $('thead', {}, head), body));
  section(m.config).append(card);
  m.el = { card, body };
}

// ---- data -------------------------------------------------------------
function reset() {
  for (const m of st.hists.values()) m.el.card.remove();
  for (const m of st.counters.values()) m.el.card.remove();
  st.times = [];
  st.hists.clear();
  st.counters.clear();
}

function pad(n) { return new Array(n).fill(null); }

function merge(d) {
  if (d.first !== st.seq + 1) reset();
  st.seq = d.seq;
  const before = st.times.length, n = d.t ? d.t.length : 0;
  st.times.push(...(d.t || []));
  const seenH = new Set();
  for (const h of d.histograms) {
    const key = h.config + '\0' + h.name;
    seenH.add(key);
    let m = st.hists.get(key);
    if (m && m.upper.join() !== h.upper.join()) { m.el.card.remove(); m = null; }
    if (!m) {
      m = { config: h.config, name: h.name, help: h.help, upper: h.upper, deltas: pad(before), quant: pad(before) };
      histCard(m);
      st.hists.set(key, m);
    }
    m.deltas.push(...h.deltas);
    m.quant.push(...h.quantiles);
    m.window = h.window;
  }
  for (const [key, m] of st.hists) {
    if (!seenH.has(key)) { m.deltas.push(...pad(n)); m.quant.push(...pad(n)); }
  }
  const seenC = new Set();
  for (const c of d.counters) {
    const key = c.config + '\0' + c.name;
    seenC.add(key);
    let m = st.counters.get(key);
    if (!m) {
      m = { config: c.config, name: c.name, help: c.help, labelNames: c.label_names, series: new Map(), top: [] };
      counterCard(m);
      st.counters.set(key, m);
    }
    const seenS = new Set();
    const keys = c.series.map(s => s.labels.join('\0'));
    c.series.forEach((s, i) => {
      seenS.add(keys[i]);
      let e = m.series.get(keys[i]);
      if (!e) { e = { labels: s.labels, rates: pad(before) }; m.series.set(keys[i], e); }
      e.rates.push(...s.rates);
    });
    for (const k of [...m.series.keys()]) if (!seenS.has(k)) m.series.delete(k);
    m.top = c.top.map(i => keys[i]);
  }
  for (const [key, m] of st.counters) {
    if (!seenC.has(key)) { m.el.card.remove(); st.counters.delete(key); }
  }
  const drop = st.times.length - RING;
  if (drop > 0) {
    st.times.splice(0, drop);
    for (const m of st.hists.values()) { m.deltas.splice(0, drop); m.quant.splice(0, drop); }
    for (const m of st.counters.values()) for (const s of m.series.values()) s.rates.splice(0, drop);
  }
}

function render() {
  for (const m of st.hists.values()) { drawHeatmap(m); drawDist(m); }
  for (const m of st.counters.values()) renderCounter(m);
  if (!st.scrolled && location.hash.length > 1) {
    const el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (el) { el.scrollIntoView(); st.scrolled = true; }
  }
}

function setStatus(text) { document.getElementById('status').textContent = text; }

async function poll() {
  try {
    const r = await fetch('data?since=' + st.seq, { cache: 'no-store', credentials: 'same-origin' });
    if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
    const d = await r.json();
    merge(d);
    render();
    renderAudit(d.audit);
    const when = st.times.length ? new Date(st.times[st.times.length - 1]).toLocaleTimeString() : 'waiting for the first sample';
    setStatus(st.times.length + ' samples · last ' + when);
    if (st.hists.size + st.counters.size === 0 && st.times.length > 0) {
      document.getElementById('main').replaceChildren($('p', { class: 'empty' }, 'No config is up, or none has histograms or counters.'));
      st.sections.clear();
    }
  } catch (e) {
    setStatus('error: ' + e.message);
  }
  setTimeout(poll, 1000);
}

poll();
