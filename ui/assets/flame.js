// SPDX-License-Identifier: Apache-2.0
// kernel_exporter flame graph page: takes a profile through /profile/cpu or
// /profile/offcpu (format=tree), draws its flame graph on a canvas (root
// on top, outermost frames first), zooms on click, highlights the frames
// a search matches with their share, and draws differential flame graphs
// (/profile/diff). No library, no network but this exporter.
'use strict';

const API = '../../profile/';
const ROW = 16;            // frame height in CSS px
const MIN_TEXT = 28;       // narrowest frame that gets its name
const HIGHLIGHT = 'rgb(230,0,230)';

// st is the page's state; window.keFlame exposes what the Chromium test
// reads (see integration/profile_chromium_test.go).
const st = {
  graph: null,     // FlameGraph or DiffGraph (st.diff)
  diff: false,
  root: null,      // frame tree: {name, k, m, t, s, b, x0, depth, parent, kids}
  zoom: null,
  re: null,        // search
  rects: [],       // frames drawn: {f, x, y, w}
  id: 0,           // the profile shown
  recent: [],
};

function $(id) { return document.getElementById(id); }
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}
function setStatus(text, error) {
  const s = $('status');
  s.textContent = text;
  s.className = error ? 'note error' : 'note';
}
function pct(f) { return (100 * f).toFixed(1) + '%'; }
// A change of share, in percentage points (29.8% to 69.9%: +40.1 pp).
function signed(f) { return (f >= 0 ? '+' : '') + (100 * f).toFixed(1) + ' pp'; }
function fmtValue(v) {
  if (st.diff) return pct(v);
  if (st.graph.unit === 'nanoseconds') {
    if (v >= 1e9) return (v / 1e9).toPrecision(3) + ' s';
    if (v >= 1e6) return (v / 1e6).toPrecision(3) + ' ms';
    return (v / 1e3).toPrecision(3) + ' µs';
  }
  return v + ' samples';
}

// ---- the frame tree ---------------------------------------------------
// build turns the JSON tree into frames with their offsets: x0 is where
// the frame starts, in the root's value units (flame graph) or shares
// (differential, where widths are the new profile's shares).
function build(node, parent, depth, x0) {
  const f = { name: node.n, k: !!node.k, m: node.m || '', t: st.diff ? node.w : node.t, s: node.s || 0,
    b: node.b || 0, x0, depth, parent, kids: [] };
  let x = x0;
  for (const c of node.c || []) {
    const k = build(c, f, depth + 1, x);
    f.kids.push(k);
    x += k.t;
  }
  return f;
}

function isAncestor(a, f) {
  for (let p = f; p; p = p.parent) if (p === a) return true;
  return false;
}

// ---- colours ----------------------------------------------------------
function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return (h >>> 0) / 4294967296;
}
function colour(f) {
  if (st.re && st.re.test(f.name)) return HIGHLIGHT;
  if (st.diff) {
    const d = f.t - f.b, m = st.maxDelta || 1;
    const r = Math.min(1, Math.abs(d) / m);
    const c = Math.round(220 * (1 - r));
    if (Math.abs(d) < 1e-9) return 'rgb(220,220,220)';
    return d > 0 ? 'rgb(255,' + c + ',' + c + ')' : 'rgb(' + c + ',' + c + ',255)';
  }
  if (!f.parent || f.depth === 0) return 'rgb(200,200,200)';
  if (!f.m && !f.k && f.depth <= st.levels) return 'rgb(190,196,205)'; // comm, process, cgroup levels
  const v = hash(f.name);
  if (f.k) return 'rgb(' + Math.round(220 + 35 * v) + ',' + Math.round(110 + 60 * v) + ',' + Math.round(30 * v) + ')';
  return 'rgb(' + Math.round(205 + 50 * v) + ',' + Math.round(80 + 150 * v) + ',' + Math.round(55 * v) + ')';
}

// dark reports whether an rgb(r,g,b) fill needs white text.
function dark(fill) {
  const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(fill);
  return m ? 0.299 * m[1] + 0.587 * m[2] + 0.114 * m[3] < 140 : false;
}

// ---- drawing ----------------------------------------------------------
function draw() {
  const c = $('flame');
  st.rects = [];
  if (!st.root) { c.width = 0; c.height = 0; return; }
  const W = Math.max(300, $('plot').clientWidth);
  const z = st.zoom || st.root;
  const scale = z.t > 0 ? W / z.t : 0;
  // Frames drawn: the zoomed frame's ancestors full width, then its
  // subtree scaled to the width.
  const list = [];
  for (let p = z.parent; p; p = p.parent) list.push({ f: p, x: 0, w: W });
  const walk = (f) => {
    const w = f.t * scale;
    if (w < 0.3) return;
    list.push({ f, x: (f.x0 - z.x0) * scale, w });
    for (const k of f.kids) walk(k);
  };
  walk(z);
  let depth = 0;
  for (const r of list) depth = Math.max(depth, r.f.depth);
  const H = (depth + 1) * ROW;
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(W * dpr);
  c.height = Math.round(H * dpr);
  c.style.width = W + 'px';
  c.style.height = H + 'px';
  c.dataset.plot = [0, 0, W, H].join(',');
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  g.font = '11px ui-monospace, monospace';
  g.textBaseline = 'middle';
  for (const r of list) {
    const y = r.f.depth * ROW;
    r.y = y;
    r.fill = colour(r.f);
    g.fillStyle = r.fill;
    // A 1 px gap on the right and below separates the frames.
    g.fillRect(r.x, y, Math.max(r.w - (r.w > 3 ? 1 : 0), 0.5), ROW - 1);
    if (r.w >= MIN_TEXT) {
      g.save();
      g.beginPath();
      g.rect(r.x, y, r.w - 1, ROW - 1);
      g.clip();
      g.fillStyle = dark(r.fill) ? '#ffffff' : '#1b1f24';
      g.fillText(r.f.name, r.x + 3, y + ROW / 2);
      g.restore();
    }
    st.rects.push(r);
  }
}

// ---- search -----------------------------------------------------------
// matched returns the share of the root's value in frames the search
// matches, each counted once: a match inside another match is not added
// (as flamegraph.pl's "Matched").
function matched() {
  if (!st.re || !st.root || !(st.root.t > 0)) return null;
  let sum = 0;
  const walk = (f) => {
    if (f.depth > 0 && st.re.test(f.name)) { sum += f.t; return; }
    for (const k of f.kids) walk(k);
  };
  walk(st.root);
  return sum / st.root.t;
}

function search() {
  const q = $('search').value;
  st.re = null;
  if (q) {
    try { st.re = new RegExp(q); } catch (e) { st.re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); }
  }
  draw();
  const m = matched();
  const out = $('matched');
  if (m === null) {
    out.textContent = '';
    delete out.dataset.share;
  } else {
    out.textContent = 'matched ' + pct(m) + (st.diff ? ' of the new profile' : ' of ' + fmtValue(st.root.t));
    out.dataset.share = String(m);
  }
}

// ---- tooltip and zoom -------------------------------------------------
function frameAt(ev) {
  const c = $('flame');
  const b = c.getBoundingClientRect();
  const x = ev.clientX - b.left, y = ev.clientY - b.top;
  for (let i = st.rects.length - 1; i >= 0; i--) {
    const r = st.rects[i];
    if (x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + ROW) return r;
  }
  return null;
}

function describe(f) {
  const total = st.root.t;
  let s = f.name + (f.k ? ' [kernel]' : '') + (f.m ? '\n' + f.m : '');
  if (st.diff) {
    s += '\nnew ' + pct(f.t) + ', base ' + pct(f.b) + ' (' + signed(f.t - f.b) + ')';
  } else {
    s += '\n' + fmtValue(f.t) + ', ' + pct(f.t / total) + ' of all' + (f.s ? '; self ' + fmtValue(f.s) : '');
  }
  return s;
}

function hover(ev) {
  const tip = $('tip');
  const r = frameAt(ev);
  if (!r) { tip.hidden = true; return; }
  tip.textContent = describe(r.f);
  tip.hidden = false;
  const p = $('plot').getBoundingClientRect();
  let x = ev.clientX - p.left + 12;
  if (x + 420 > p.width) x = Math.max(0, x - 440);
  tip.style.left = x + 'px';
  tip.style.top = (ev.clientY - p.top + 14) + 'px';
}

function click(ev) {
  const r = frameAt(ev);
  if (!r) return;
  st.zoom = r.f.depth === 0 ? null : r.f;
  search();
}

// ---- data -------------------------------------------------------------
async function getJSON(url, init) {
  const r = await fetch(url, Object.assign({ cache: 'no-store', credentials: 'same-origin' }, init || {}));
  const text = await r.text();
  if (!r.ok) throw new Error(r.status + ' ' + r.statusText + ': ' + text.trim());
  return JSON.parse(text);
}

function levels(view) {
  return { comm: 1, process: 1, cgroup: 2, stack: 0 }[view] || 0;
}

function show(graph, diff) {
  st.graph = graph;
  st.diff = diff;
  st.levels = diff ? 1 : levels(graph.view);
  st.root = build(graph.tree, null, 0, 0);
  st.zoom = null;
  st.maxDelta = 0;
  if (diff) {
    const walk = (f) => { st.maxDelta = Math.max(st.maxDelta, Math.abs(f.t - f.b)); f.kids.forEach(walk); };
    walk(st.root);
  }
  search();
  legend();
}

// ready marks the page as showing a graph (data-state, data-id: what the
// Chromium test waits for), once the lists are up to date.
function ready() {
  document.body.dataset.id = String(st.id);
  document.body.dataset.state = st.diff ? 'diff' : 'flame';
}

function legend() {
  const g = st.graph;
  const l = $('legend');
  const t = $('table');
  t.replaceChildren();
  if (st.diff) {
    l.textContent = 'Differential flame graph: widths are the new profile (' + g.new + '), colours its change against the base (' + g.base +
      '), each normalised by its total: red grew, blue shrank. Base ' + g.base_total + ', new ' + g.new_total + ' ' + g.unit + '.';
    const table = (title, rows, cls) => {
      const tb = el('tbody', {});
      for (const r of rows) {
        tb.append(el('tr', {}, el('td', { class: cls }, signed(r.delta)), el('td', {}, pct(r.base)), el('td', {}, pct(r.new)),
          el('td', {}, signed(r.self_delta)), el('td', { class: 'fn' }, r.function + (r.kernel ? ' [k]' : ''))));
      }
      if (!rows.length) tb.append(el('tr', {}, el('td', { class: 'fn', colspan: '5' }, '(none)')));
      return el('table', { class: 'diff', 'data-table': cls }, el('caption', {}, title),
        el('thead', {}, el('tr', {}, el('th', {}, 'total Δ'), el('th', {}, 'base'), el('th', {}, 'new'), el('th', {}, 'self Δ'), el('th', { class: 'fn' }, 'function'))), tb);
    };
    t.append(el('div', { class: 'tables' }, table('grew most', g.grew, 'grew'), table('shrank most', g.shrank, 'shrank')));
    return;
  }
  const s = g.stats;
  let text = g.kind + ' profile, ' + g.seconds.toFixed(1) + ' s' + (g.frequency ? ' at ' + g.frequency + ' Hz' : '') +
    (g.event ? ' (' + g.event + ')' : '') + (g.filter ? ', ' + g.filter : '') + ': ' + fmtValue(g.total) + '.';
  if (s.user_frames > 0) text += ' User frames resolved: ' + pct(s.user_resolved / s.user_frames) + '.';
  if (g.pruned) text += ' ' + g.pruned + ' frames narrower than 0.005% left out.';
  l.textContent = text;
}

async function refreshRecent() {
  try {
    st.recent = await getJSON(API + 'recent');
  } catch (e) {
    setStatus('profiles unavailable: ' + e.message, true);
    return;
  }
  const shown = $('shown'), cmp = $('compare');
  shown.replaceChildren();
  for (const p of st.recent) shown.append(el('option', { value: String(p.id) }, p.label));
  if (!st.recent.length) shown.append(el('option', { value: '' }, '(none yet)'));
  shown.value = st.id ? String(st.id) : '';
  const keep = cmp.value;
  cmp.replaceChildren(el('option', { value: '' }, '(nothing)'));
  for (const p of st.recent) if (p.id !== st.id && p.kind === (st.graph && st.graph.kind)) cmp.append(el('option', { value: String(p.id) }, p.label));
  cmp.append(el('option', { value: 'upload' }, 'an uploaded file…'));
  cmp.value = [...cmp.options].some(o => o.value === keep) ? keep : '';
}

async function loadFlame(id) {
  const view = $('view').value;
  const g = await getJSON(API + 'flame?id=' + id + '&view=' + encodeURIComponent(view));
  st.id = g.id;
  show(g, false);
  $('compare').value = '';
  await refreshRecent();
  ready();
}

async function take(ev) {
  ev.preventDefault();
  const f = $('take');
  const kind = f.kind.value;
  const q = new URLSearchParams({ format: 'tree', view: $('view').value, seconds: f.seconds.value || '10' });
  if (kind === 'cpu' && f.frequency.value) q.set('frequency', f.frequency.value);
  if (f.pid.value.trim()) q.set('pid', f.pid.value.trim());
  for (const c of f.comm.value.split(',').map(s => s.trim()).filter(Boolean)) q.append('comm', c);
  for (const c of f.cgroup.value.split(',').map(s => s.trim()).filter(Boolean)) q.append('cgroup', c);
  if (f.stacks.value !== 'both') q.set('stacks', f.stacks.value);
  if (f.idle.checked) q.set('idle', '1');
  const secs = +q.get('seconds');
  $('go').disabled = true;
  document.body.dataset.state = 'taking';
  const started = Date.now();
  const timer = setInterval(() => {
    const left = Math.max(0, secs - (Date.now() - started) / 1000);
    setStatus('taking a ' + kind + ' profile: ' + left.toFixed(0) + ' s left…');
  }, 500);
  try {
    const g = await getJSON(API + kind + '?' + q.toString());
    st.id = g.id;
    show(g, false);
    setStatus('Profile ' + (g.id ? '#' + g.id + ' ' : '') + 'taken. Click a frame to zoom in, search to highlight a function, compare with another profile.');
    await refreshRecent();
    ready();
  } catch (e) {
    setStatus(e.message, true);
    document.body.dataset.state = 'error';
  } finally {
    clearInterval(timer);
    $('go').disabled = false;
  }
}

async function compare() {
  const v = $('compare').value;
  if (!st.id) return;
  try {
    if (v === '') { await loadFlame(st.id); return; }
    if (v === 'upload') { $('file').value = ''; $('file').click(); return; }
    const d = await getJSON(API + 'diff?base=' + v + '&new=' + st.id);
    show(d, true);
    ready();
    setStatus('Compared with ' + d.base + '.');
  } catch (e) {
    setStatus(e.message, true);
  }
}

async function upload() {
  const file = $('file').files[0];
  if (!file || !st.id) return;
  try {
    const body = await file.arrayBuffer();
    const d = await getJSON(API + 'diff?new=' + st.id, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body });
    d.base = file.name;
    show(d, true);
    ready();
    setStatus('Compared with ' + file.name + ' (the base).');
  } catch (e) {
    setStatus(e.message, true);
  }
}

window.keFlame = {
  // frames drawn: name, kernel, x, y, width (CSS px), fill colour
  frames: () => st.rects.map(r => ({ name: r.f.name, kernel: r.f.k, x: r.x, y: r.y, w: r.w, fill: r.fill, depth: r.f.depth })),
  matched: () => matched(),
  state: () => document.body.dataset.state,
};

$('take').addEventListener('submit', take);
$('take').kind.addEventListener('change', () => {
  for (const e of document.querySelectorAll('.cpu-only')) e.hidden = $('take').kind.value !== 'cpu';
});
$('search').addEventListener('input', search);
$('reset').addEventListener('click', () => { st.zoom = null; search(); });
$('view').addEventListener('change', () => { if (st.id && !st.diff) loadFlame(st.id).catch(e => setStatus(e.message, true)); });
$('shown').addEventListener('change', () => { const v = $('shown').value; if (v) loadFlame(v).catch(e => setStatus(e.message, true)); });
$('compare').addEventListener('change', compare);
$('file').addEventListener('change', upload);
$('flame').addEventListener('mousemove', hover);
$('flame').addEventListener('mouseleave', () => { $('tip').hidden = true; });
$('flame').addEventListener('click', click);
window.addEventListener('resize', draw);
refreshRecent().then(() => { if (st.recent.length) return loadFlame(st.recent[0].id); }).catch(e => setStatus(e.message, true));
