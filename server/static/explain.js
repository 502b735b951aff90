// Why a config wins, for one job: knob importance, a slice per knob, parallel coordinates with
// brushing, the trial table (sort, filters, CSV/JSON), each trial's spread over its repeats, and
// GFLOP/s or GB/s where the operator's work is known. Draws what /v1 answers, nothing else.
import { drawChart, formatNumber } from "./plot.js";

export const STATUS_COLORS = {
  ok: "#2563eb",
  compile_error: "#f59e0b",
  runtime_error: "#dc2626",
  wrong_result: "#9333ea",
  timeout: "#92400e",
  invalid: "#9ca3af",
};
const STATUSES = Object.keys(STATUS_COLORS);
const ROWS = 100; // table rows per page
const FAILED_LANE = 14; // px above a plot for trials without a time

// Per-job view state (filters, brushes, sort, page) kept across live refreshes.
const views = new Map();

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (v) => (v === null || v === undefined ? "–" : formatNumber(v));
const pct = (v) => (v === null || v === undefined ? "–" : `${(100 * v).toFixed(1)}%`);

// -- derived numbers -------------------------------------------------------------------------

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/** min, median, max and the spread (max - min) / median of a trial's repeated runs. */
export function spreadOf(t) {
  const xs = (t.times_ms || []).filter((v) => v !== null && isFinite(v)).sort((a, b) => a - b);
  if (!xs.length) return null;
  const mid = median(xs);
  return { n: xs.length, min: xs[0], median: mid, max: xs[xs.length - 1], rel: mid > 0 ? (xs[xs.length - 1] - xs[0]) / mid : null };
}

/** amount / (time_ms * 1e6): GFLOP/s for flops, GB/s for bytes (the API's formula). */
export const rate = (amount, ms) => (amount === null || amount === undefined || ms === null || !(ms > 0) ? null : amount / (ms * 1e6));

function knobOrder(importance, trials) {
  if (importance && importance.knobs.length) return importance.knobs.map((k) => k.name);
  return trials.length ? Object.keys(trials[0].config) : [];
}

/** Each knob's distinct values in the API's order (ascending), for categorical axes. */
function knobValues(importance, names, trials) {
  const out = {};
  const byName = new Map((importance ? importance.knobs : []).map((k) => [k.name, k]));
  for (const name of names) {
    const known = byName.get(name);
    const values = known ? known.values.map((v) => v.value) : [...new Set(trials.map((t) => t.config[name]))];
    out[name] = { values, index: new Map(values.map((v, i) => [JSON.stringify(v), i])) };
  }
  return out;
}
const indexOf = (axis, value) => axis.index.get(JSON.stringify(value)) ?? -1;

function passes(view, axes, t) {
  if (view.status !== "all" && t.status !== view.status) return false;
  if (view.tmin !== null || view.tmax !== null) {
    if (t.time_ms === null) return false;
    if (view.tmin !== null && t.time_ms < view.tmin) return false;
    if (view.tmax !== null && t.time_ms > view.tmax) return false;
  }
  for (const [name, [lo, hi]] of Object.entries(view.ranges)) {
    const i = indexOf(axes[name], t.config[name]);
    if (i < lo || i > hi) return false;
  }
  return true;
}

// -- the panels ------------------------------------------------------------------------------

function importancePanel(importance) {
  if (!importance) return h("p", { class: "muted" }, "Importance not available.");
  const rows = importance.knobs.map((k) => h("div", { class: "imp-row", "data-knob": k.name, "data-importance": k.importance ?? "" },
    h("span", { class: "mono name" }, k.name),
    h("span", { class: "imp-bar" }, h("i", { style: `width:${100 * (k.importance ?? 0)}%` })),
    h("span", { class: "num value" }, k.importance === null ? "–" : pct(k.importance))));
  return h("div", {},
    h("div", { class: "importance", id: "importance" }, rows),
    h("p", { class: "muted small" }, `Method: ${importance.method}. From ${importance.n_ok} ok of ${importance.n_trials} trials.`,
      importance.knobs.some((k) => k.importance === null) ? " –: too few ok trials or no spread in time." : ""));
}

function canvasFor(node, width, height) {
  const ratio = window.devicePixelRatio || 1;
  const canvas = h("canvas", { width: Math.round(width * ratio), height: Math.round(height * ratio), style: `width:${width}px;height:${height}px` });
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  node.replaceChildren(canvas);
  return { canvas, ctx };
}

function logScale(lo, hi, a, b) {
  const l0 = Math.log10(lo), span = Math.log10(hi) - l0 || 1;
  return (v) => a + ((Math.log10(v) - l0) / span) * (b - a);
}

function timeExtent(trials) {
  let lo = Infinity, hi = -Infinity;
  for (const t of trials) if (t.time_ms > 0) { lo = Math.min(lo, t.time_ms); hi = Math.max(hi, t.time_ms); }
  if (!isFinite(lo)) return [1, 10];
  if (lo === hi) return [lo / 1.5, hi * 1.5];
  return [lo / 1.05, hi * 1.05];
}

// Deterministic jitter so a slice draws the same on every refresh.
const jitter = (seq) => (((seq * 2654435761) % 1000) / 1000 - 0.5) * 0.5;

function slicePlot(node, name, axis, knob, trials, keep, extent) {
  const width = 300, height = 190, m = { l: 46, r: 8, t: 10 + FAILED_LANE, b: 34 };
  const { ctx } = canvasFor(node, width, height);
  const n = Math.max(axis.values.length, 1);
  const X = (i) => m.l + ((i + 0.5) / n) * (width - m.l - m.r);
  const Y = logScale(extent[0], extent[1], height - m.b, m.t);
  ctx.font = "10px system-ui, sans-serif";
  ctx.fillStyle = "#6b7280";
  ctx.strokeStyle = "#e5e7eb";
  ctx.strokeRect(m.l, m.t, width - m.l - m.r, height - m.t - m.b);
  for (const v of [extent[0] * 1.05, Math.sqrt(extent[0] * extent[1]), extent[1] / 1.05]) {
    ctx.textAlign = "right";
    ctx.fillText(formatNumber(v), m.l - 4, Y(v) + 3);
  }
  ctx.textAlign = "center";
  const every = Math.ceil(n / 8);
  axis.values.forEach((v, i) => { if (i % every === 0) ctx.fillText(String(v), X(i), height - m.b + 13); });
  ctx.fillText(name, (m.l + width - m.r) / 2, height - 6);
  ctx.textAlign = "right";
  ctx.fillText("failed", m.l - 4, m.t - 4);
  let drawn = 0, failed = 0;
  const bandW = (width - m.l - m.r) / n;
  for (const pass of [false, true]) { // the trials outside the filters first, in grey
    for (const t of trials) {
      if (keep(t) !== pass) continue;
      const i = indexOf(axis, t.config[name]);
      if (i < 0) continue;
      const x = X(i) + jitter(t.seq ?? 0) * bandW;
      const ok = t.status === "ok" && t.time_ms > 0;
      const y = ok ? Y(t.time_ms) : m.t - FAILED_LANE / 2 - 2;
      ctx.fillStyle = pass ? STATUS_COLORS[t.status] || "#6b7280" : "#d1d5db";
      ctx.globalAlpha = pass ? 0.7 : 0.5;
      ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
      if (ok) drawn++; else failed++;
    }
  }
  ctx.globalAlpha = 1;
  // the geometric mean per value (the API's main effect), as a black line
  if (knob) {
    ctx.strokeStyle = "#111827";
    ctx.lineWidth = 1.6;
    ctx.beginPath();
    let started = false;
    knob.values.forEach((v, i) => {
      if (v.geomean_ms === null) return;
      if (started) ctx.lineTo(X(i), Y(v.geomean_ms)); else ctx.moveTo(X(i), Y(v.geomean_ms));
      started = true;
    });
    ctx.stroke();
  }
  node.dataset.points = String(drawn);
  node.dataset.failed = String(failed);
}

function parallelCoordinates(node, names, axes, trials, view, extent, onBrush) {
  const width = Math.max(node.clientWidth || 900, 500), height = 300, m = { l: 30, r: 60, t: 22 + FAILED_LANE, b: 26 };
  const { canvas, ctx } = canvasFor(node, width, height);
  const columns = [...names, "time_ms"];
  const gap = (width - m.l - m.r) / Math.max(columns.length - 1, 1);
  const AX = (j) => m.l + j * gap;
  const top = m.t, bottom = height - m.b;
  const Yk = (name, i) => (axes[name].values.length <= 1 ? (top + bottom) / 2 : bottom - (i / (axes[name].values.length - 1)) * (bottom - top));
  const Yt = logScale(extent[0], extent[1], bottom, top);
  const yOf = (name, t) => (name === "time_ms" ? (t.status === "ok" && t.time_ms > 0 ? Yt(t.time_ms) : top - FAILED_LANE) : Yk(name, indexOf(axes[name], t.config[name])));
  const [lo, hi] = extent;
  const color = (t) => {
    if (t.status !== "ok" || !(t.time_ms > 0)) return "rgba(220,38,38,0.35)";
    const f = Math.max(0, Math.min(1, (Math.log(t.time_ms) - Math.log(lo)) / (Math.log(hi) - Math.log(lo) || 1)));
    return `hsla(${Math.round(140 + f * 100)}, 70%, ${Math.round(32 + f * 30)}%, 0.45)`; // fast: green, slow: blue-violet
  };
  const keep = (t) => passes(view, axes, t);
  let selected = 0;
  for (const pass of [false, true]) {
    for (const t of trials) {
      if (keep(t) !== pass) continue;
      if (pass) selected++;
      ctx.strokeStyle = pass ? color(t) : "rgba(209,213,219,0.35)";
      ctx.lineWidth = pass ? 1 : 0.7;
      ctx.beginPath();
      columns.forEach((name, j) => (j ? ctx.lineTo(AX(j), yOf(name, t)) : ctx.moveTo(AX(j), yOf(name, t))));
      ctx.stroke();
    }
  }
  // axes, ticks and brushes
  ctx.font = "10.5px system-ui, sans-serif";
  columns.forEach((name, j) => {
    const x = AX(j);
    ctx.strokeStyle = "#374151";
    ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
    ctx.fillStyle = "#111827";
    ctx.textAlign = "center";
    ctx.fillText(name === "time_ms" ? "time (ms)" : name, x, 12);
    ctx.fillStyle = "#6b7280";
    ctx.textAlign = "left";
    if (name === "time_ms") {
      for (const v of [lo * 1.05, Math.sqrt(lo * hi), hi / 1.05]) ctx.fillText(formatNumber(v), x + 4, Yt(v) + 3);
      ctx.fillText("failed", x + 4, top - FAILED_LANE + 3);
    } else {
      const values = axes[name].values, every = Math.ceil(values.length / 10);
      values.forEach((v, i) => { if (i % every === 0 || i === values.length - 1) ctx.fillText(String(v), x + 4, Yk(name, i) + 3); });
    }
    let band = null;
    if (name === "time_ms" && (view.tmin !== null || view.tmax !== null)) {
      band = [Yt(view.tmax ?? hi), Yt(view.tmin ?? lo)];
    } else if (view.ranges[name]) {
      const [a, b] = view.ranges[name];
      band = [Yk(name, b) - 5, Yk(name, a) + 5];
    }
    if (band) {
      ctx.fillStyle = "rgba(37,99,235,0.15)";
      ctx.strokeStyle = "#2563eb";
      ctx.fillRect(x - 8, band[0], 16, band[1] - band[0]);
      ctx.strokeRect(x - 8, band[0], 16, band[1] - band[0]);
    }
  });
  node.dataset.selected = String(selected);
  node.dataset.lines = String(trials.length);
  node.dataset.axes = columns.join(",");

  // brushing: drag along an axis to keep the trials in that span; a click clears the axis
  const pos = (ev) => { const r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
  canvas.addEventListener("mousedown", (ev) => {
    const [x, y0] = pos(ev);
    const j = Math.round((x - m.l) / gap);
    if (j < 0 || j >= columns.length || Math.abs(AX(j) - x) > 14) return;
    const name = columns[j];
    ev.preventDefault();
    window.addEventListener("mouseup", (up) => {
      const [, y1] = pos(up);
      const a = Math.max(top, Math.min(y0, y1)), b = Math.min(bottom, Math.max(y0, y1));
      if (b - a < 3) { onBrush(name, null); return; } // a click: clear
      if (name === "time_ms") {
        const inv = (y) => Math.pow(10, Math.log10(lo) + ((bottom - y) / (bottom - top)) * (Math.log10(hi) - Math.log10(lo)));
        onBrush(name, [inv(b), inv(a)]);
      } else {
        const idx = [];
        for (let i = 0; i < axes[name].values.length; i++) { const y = Yk(name, i); if (y >= a - 2 && y <= b + 2) idx.push(i); }
        onBrush(name, idx.length ? [idx[0], idx[idx.length - 1]] : null);
      }
    }, { once: true });
  });
}

function spreadPanel(node, trials) {
  const withRuns = trials.filter((t) => t.status === "ok" && t.time_ms !== null && (t.times_ms || []).length);
  if (!withRuns.length) {
    node.replaceChildren(h("p", { class: "muted", id: "spread-none" }, "Repeated runs not recorded for these trials."));
    return;
  }
  const top = withRuns.slice().sort((a, b) => a.time_ms - b.time_ms).slice(0, 30);
  const points = [], lines = [];
  top.forEach((t, i) => {
    const s = spreadOf(t);
    lines.push({ points: [[i + 1, s.min], [i + 1, s.max]], color: "#9ca3af", width: 4, cls: "whisker" });
    for (const v of t.times_ms) points.push({ x: i + 1, y: v, color: "#2563eb", r: 1.6, cls: "run" });
    points.push({ x: i + 1, y: t.time_ms, color: "#111827", r: 3.2, cls: "median",
      tip: `<b>#${t.seq + 1}</b> median ${formatNumber(t.time_ms)} ms over ${s.n} runs<br>min ${formatNumber(s.min)} · max ${formatNumber(s.max)} · spread ${pct(s.rel)}` });
  });
  const box = h("div", { class: "plot", id: "plot-spread" });
  node.replaceChildren(box);
  drawChart(box, {
    height: 260, yLog: true, xMin: 0, xMax: top.length + 1, xLabel: "the fastest trials, by rank", yLabel: "time of each run (ms)",
    points, lines,
    legend: [{ kind: "dot", color: "#2563eb", label: "one run" }, { kind: "dot", color: "#111827", label: "median (time_ms)" }, { kind: "line", color: "#9ca3af", label: "min–max" }],
  });
  box.dataset.trials = String(top.length);
}

// -- the table ------------------------------------------------------------------------------

function columnsFor(names, work, hasPredicted) {
  const cols = [
    { key: "seq", label: "#", get: (t) => (t.seq === null ? null : t.seq + 1) },
    { key: "status", label: "status", get: (t) => t.status, text: true },
    { key: "time_ms", label: "time (ms)", get: (t) => t.time_ms },
    { key: "runs", label: "runs", get: (t) => (t.times_ms || []).length },
    { key: "spread", label: "spread", get: (t) => { const s = spreadOf(t); return s ? s.rel : null; }, show: pct, title: "(max − min) / median of the repeated runs" },
  ];
  if (work && work.flops !== null) cols.push({ key: "gflops", label: "GFLOP/s", get: (t) => rate(work.flops, t.time_ms) });
  if (work && work.bytes !== null) cols.push({ key: "gbps", label: "GB/s", get: (t) => rate(work.bytes, t.time_ms) });
  // the fraction of the device's peak, where the device's spec knows it (the API's numbers)
  if (work && work.flops !== null && work.peak_gflops) cols.push({ key: "peak_flops", label: "of peak FLOP/s", get: (t) => t.peak_flops_fraction, show: pct, title: `GFLOP/s / the device's peak, ${work.peak_gflops.toFixed(0)} GFLOP/s` });
  if (work && work.bytes !== null && work.peak_gbps) cols.push({ key: "peak_bw", label: "of peak GB/s", get: (t) => t.peak_bandwidth_fraction, show: pct, title: `GB/s / the device's peak bandwidth, ${work.peak_gbps.toFixed(0)} GB/s` });
  if (hasPredicted) cols.push({ key: "predicted", label: "predicted (ms)", get: (t) => t.predicted });
  cols.push({ key: "compile_ms", label: "compile (ms)", get: (t) => t.compile_ms });
  for (const n of names) cols.push({ key: `knob:${n}`, label: n, get: (t) => t.config[n], knob: true });
  cols.push({ key: "error", label: "error", get: (t) => t.error, text: true });
  return cols;
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1; // missing values last, either direction
  if (b === null || b === undefined) return -1;
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b), undefined, { numeric: true });
}

function sortedRows(rows, cols, sort) {
  const col = cols.find((c) => c.key === sort.key) || cols[0];
  const dir = sort.dir === "desc" ? -1 : 1;
  return rows.slice().sort((x, y) => {
    const a = col.get(x), b = col.get(y);
    if (a === null || a === undefined || b === null || b === undefined) return compare(a, b);
    return dir * compare(a, b);
  });
}

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

const csvCell = (v) => {
  if (v === null || v === undefined) return "";
  const s = typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function toCsv(rows, cols) {
  const header = cols.map((c) => csvCell(c.label)).join(",");
  return [header, ...rows.map((t) => cols.map((c) => csvCell(c.get(t))).join(","))].join("\n") + "\n";
}

function tablePanel(node, job, trials, names, axes, view, work, rerender) {
  const hasPredicted = trials.some((t) => t.predicted !== null);
  const cols = columnsFor(names, work, hasPredicted);
  const kept = trials.filter((t) => passes(view, axes, t));
  const rows = sortedRows(kept, cols, view.sort);
  const pages = Math.max(1, Math.ceil(rows.length / ROWS));
  view.page = Math.min(view.page, pages - 1);
  const shown = rows.slice(view.page * ROWS, (view.page + 1) * ROWS);
  const num = (v) => (v === "" ? null : Number(v));

  const statusSelect = h("select", { id: "filter-status", "aria-label": "status", onchange: (ev) => { view.status = ev.target.value; view.page = 0; rerender(); } },
    ["all", ...STATUSES].map((s) => h("option", { value: s, selected: view.status === s ? true : null }, s)));
  const tInput = (which, label) => h("input", { type: "number", step: "any", min: 0, id: `filter-${which}`, placeholder: label, "aria-label": label, value: view[which] ?? "",
    onchange: (ev) => { view[which] = num(ev.target.value); view.page = 0; rerender(); } });
  const knobRange = (name) => {
    const values = axes[name].values, [lo, hi] = view.ranges[name] || [0, values.length - 1];
    const pick = (side) => h("select", { "data-knob": name, "data-side": side, "aria-label": `${name} ${side}`,
      onchange: (ev) => {
        const cur = view.ranges[name] || [0, values.length - 1];
        const next = side === "from" ? [Number(ev.target.value), cur[1]] : [cur[0], Number(ev.target.value)];
        if (next[0] === 0 && next[1] === values.length - 1) delete view.ranges[name]; else view.ranges[name] = [Math.min(...next), Math.max(...next)];
        view.page = 0; rerender();
      } }, values.map((v, i) => h("option", { value: i, selected: (side === "from" ? lo : hi) === i ? true : null }, String(v))));
    return h("label", { class: `knob-range${view.ranges[name] ? " active" : ""}` }, h("span", { class: "mono" }, name), pick("from"), "–", pick("to"));
  };
  const sortBy = (key) => {
    view.sort = view.sort.key === key ? { key, dir: view.sort.dir === "asc" ? "desc" : "asc" } : { key, dir: "asc" };
    rerender();
  };
  const base = `job-${job.id}-trials`;
  const table = h("table", { class: "configs trials", id: "trial-table" },
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { class: `sortable${c.knob ? " mono" : ""}`, "data-key": c.key, title: c.title || "sort",
      "aria-sort": view.sort.key === c.key ? (view.sort.dir === "asc" ? "ascending" : "descending") : null, onclick: () => sortBy(c.key) },
      c.label, view.sort.key === c.key ? (view.sort.dir === "asc" ? " ▲" : " ▼") : "")))),
    h("tbody", {}, shown.map((t) => h("tr", { "data-seq": t.seq },
      cols.map((c) => {
        const v = c.get(t);
        if (c.key === "status") return h("td", {}, h("i", { class: "dot", style: `background:${STATUS_COLORS[t.status]}` }), ` ${t.status}`);
        if (c.key === "error") return h("td", { class: "err", title: t.error }, (t.error || "").slice(0, 60));
        if (c.knob) return h("td", { class: "mono num" }, String(v));
        if (c.key === "seq" || c.key === "runs") return h("td", { class: "num", "data-key": c.key }, v ?? "–");
        return h("td", { class: "num", "data-key": c.key }, c.show ? c.show(v) : typeof v === "number" ? fmt(v) : v ?? "–");
      })))));
  const clear = h("button", { class: "ghost", id: "filter-clear", onclick: () => { Object.assign(view, fresh()); rerender(); } }, "Clear filters");
  node.replaceChildren(
    h("div", { class: "filters" },
      h("label", {}, "status ", statusSelect),
      h("label", {}, "time ", tInput("tmin", "min ms"), "–", tInput("tmax", "max ms")),
      clear,
      h("span", { class: "spacer" }),
      h("span", { class: "muted", id: "trial-count" }, `${rows.length} of ${trials.length} trials`),
      h("button", { id: "download-csv", onclick: () => download(`${base}.csv`, "text/csv", toCsv(rows, cols)) }, "CSV"),
      h("button", { id: "download-json", onclick: () => download(`${base}.json`, "application/json", JSON.stringify(rows, null, 1)) }, "JSON")),
    h("div", { class: "filters knobs" }, names.map(knobRange)),
    h("div", { class: "scroll" }, table),
    h("div", { class: "pager" },
      h("button", { id: "rows-prev", disabled: view.page === 0 ? true : null, onclick: () => { view.page--; rerender(); } }, "← prev"),
      h("span", { class: "muted" }, `page ${view.page + 1} of ${pages}`),
      h("button", { id: "rows-next", disabled: view.page >= pages - 1 ? true : null, onclick: () => { view.page++; rerender(); } }, "next →")),
    (!work || work.flops === null) && (!work || work.bytes === null)
      ? h("p", { class: "muted small" }, `GFLOP/s and GB/s: not known${work && work.reason ? ` (${work.reason})` : ""}.`)
      : (work && !work.peak_gflops && !work.peak_gbps
        ? h("p", { class: "muted small", id: "peak-none" }, `Fraction of peak: not known${work.peak_reason ? ` (${work.peak_reason})` : ""}.`) : null),
    hasPredicted ? null : h("p", { class: "muted small", id: "predicted-none" }, "Predicted times: not recorded for this job."));
}

const fresh = () => ({ status: "all", tmin: null, tmax: null, ranges: {}, sort: { key: "time_ms", dir: "asc" }, page: 0 });

// -- the whole section ----------------------------------------------------------------------

/** Fill ``root`` with the panels for ``job``; ``importance`` and ``work`` are the API's answers. */
export function renderExplain(root, { job, trials, importance, work }) {
  if (!views.has(job.id)) views.set(job.id, fresh());
  const view = views.get(job.id);
  const names = knobOrder(importance, trials);
  const axes = knobValues(importance, names, trials);
  const extent = timeExtent(trials);
  const byName = new Map((importance ? importance.knobs : []).map((k) => [k.name, k]));
  const pc = h("div", { class: "pcoords", id: "pcoords" });
  const slices = h("div", { class: "slices", id: "slices" });
  const table = h("div", { id: "trials-panel" });
  const spread = h("div", { id: "spread-panel" });
  const brushNote = h("span", { class: "muted small" });

  const redraw = () => {
    const keep = (t) => passes(view, axes, t);
    parallelCoordinates(pc, names, axes, trials, view, extent, (name, range) => {
      if (name === "time_ms") { view.tmin = range ? range[0] : null; view.tmax = range ? range[1] : null; }
      else if (range) view.ranges[name] = range; else delete view.ranges[name];
      view.page = 0;
      redraw();
    });
    slices.replaceChildren();
    for (const name of names) {
      const cell = h("div", { class: "slice", "data-knob": name });
      const knob = byName.get(name);
      slices.append(h("div", { class: "slice-card" },
        h("div", { class: "slice-title" }, h("span", { class: "mono" }, name), h("span", { class: "muted" }, knob && knob.importance !== null ? ` importance ${pct(knob.importance)}` : "")),
        cell));
      slicePlot(cell, name, axes[name], knob, trials, keep, extent);
    }
    tablePanel(table, job, trials, names, axes, view, work, redraw);
    spreadPanel(spread, trials.filter(keep));
    const active = Object.keys(view.ranges).length + (view.tmin !== null || view.tmax !== null ? 1 : 0) + (view.status !== "all" ? 1 : 0);
    brushNote.textContent = active ? `${active} filter${active > 1 ? "s" : ""} active: the grey trials are filtered out` : "drag along an axis to filter; click an axis to clear it";
  };

  root.replaceChildren(
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Which knobs matter"), importancePanel(importance)),
      h("div", { class: "card" }, h("h2", {}, "Spread over repeated runs"), spread)),
    h("div", { class: "card" }, h("h2", {}, "Parallel coordinates ", brushNote), pc),
    h("div", { class: "card" }, h("h2", {}, "Time against each knob (every trial, by status; line: geometric mean)"), slices),
    h("div", { class: "card" }, h("h2", {}, "Trials"), table));
  redraw();
}
