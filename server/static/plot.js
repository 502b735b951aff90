// Small SVG charts for the ktune dashboard: axes (linear or log), step lines, points,
// reference lines, a legend and a hover tooltip. No dependencies.

const SVG = "http://www.w3.org/2000/svg";

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

export function formatNumber(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e5 || a < 1e-3) return v.toExponential(1);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}

function formatTick(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(0);
  return String(Number(v.toPrecision(3)));
}

function linearTicks(lo, hi, count = 6) {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => (hi - lo) / s <= count) || 10 * mag;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
  return ticks;
}

function logTicks(lo, hi) {
  // Under a decade, evenly spaced round numbers read best; over it, 1-2-5 per decade.
  if (hi / lo < 8) return linearTicks(lo, hi, 5).filter((t) => t > 0);
  for (const mults of [[1], [1, 2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9]]) {
    const ticks = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of mults) {
        const t = m * Math.pow(10, e);
        if (t >= lo * 0.999 && t <= hi * 1.001) ticks.push(t);
      }
    }
    if (ticks.length >= 3) return ticks;
  }
  return linearTicks(lo, hi, 5).filter((t) => t > 0);
}

function scale(lo, hi, a, b, log) {
  if (log) {
    const l0 = Math.log10(lo), l1 = Math.log10(hi);
    const span = l1 - l0 || 1;
    return (v) => a + ((Math.log10(v) - l0) / span) * (b - a);
  }
  const span = hi - lo || 1;
  return (v) => a + ((v - lo) / span) * (b - a);
}

function extent(values, pad, log) {
  const finite = values.filter((v) => v !== null && isFinite(v) && (!log || v > 0));
  if (!finite.length) return log ? [1, 10] : [0, 1];
  let lo = Math.min(...finite), hi = Math.max(...finite);
  if (log) {
    if (lo === hi) { lo /= 1.5; hi *= 1.5; }
    return [lo / (1 + pad), hi * (1 + pad)];
  }
  if (lo === hi) { lo -= 1; hi += 1; }
  const d = (hi - lo) * pad;
  return [lo - d, hi + d];
}

// spec: {width, height, xLabel, yLabel, yLog, xMin, xMax, yMin, yMax,
//        lines: [{points: [[x, y]], color, step, dashed, width, label}],
//        points: [{x, y, color, cls, r, failed, tip}],
//        hlines: [{y, color, label}], diagonal: bool, legend: [{color, label, kind}],
//        bands: [{x: [], lo: [], hi: [], color, cls}] (a filled area; null ends a segment)}
export function drawChart(container, spec) {
  const width = spec.width || container.clientWidth || 600;
  const height = spec.height || 300;
  const failedPoints = (spec.points || []).filter((p) => p.failed);
  const m = { left: 62, right: 18, top: failedPoints.length ? 30 : 14, bottom: 44 };
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img" });
  if (spec.title) el("title", {}, svg).textContent = spec.title;

  const okPoints = (spec.points || []).filter((p) => !p.failed);
  const xs = [...okPoints.map((p) => p.x), ...failedPoints.map((p) => p.x)];
  const ys = okPoints.map((p) => p.y);
  for (const line of spec.lines || []) {
    for (const [x, y] of line.points) { xs.push(x); ys.push(y); }
    if (line.extendTo !== undefined) xs.push(line.extendTo);
  }
  for (const h of spec.hlines || []) ys.push(h.y);
  for (const b of spec.bands || []) {
    b.x.forEach((x, i) => { if (b.lo[i] !== null && b.hi[i] !== null) { xs.push(x); ys.push(b.lo[i], b.hi[i]); } });
  }
  let [x0, x1] = extent(xs, 0.02, false);
  if (spec.xMin !== undefined) x0 = spec.xMin;
  if (spec.xMax !== undefined) x1 = Math.max(spec.xMax, x0 + 1e-9);
  let [y0, y1] = extent(ys, 0.08, spec.yLog);
  if (spec.diagonal) { x0 = y0 = Math.min(x0, y0); x1 = y1 = Math.max(x1, y1); }
  const X = scale(x0, x1, m.left, width - m.right, spec.xLog);
  const Y = scale(y0, y1, height - m.bottom, m.top, spec.yLog);

  // grid and axes
  const grid = el("g", { class: "grid" }, svg);
  const yTicks = spec.yLog ? logTicks(y0, y1) : linearTicks(y0, y1, 5);
  for (const t of yTicks) {
    const y = Y(t);
    el("line", { x1: m.left, x2: width - m.right, y1: y, y2: y }, grid);
    const label = el("text", { x: m.left - 8, y: y + 4, "text-anchor": "end", class: "tick" }, svg);
    label.textContent = formatTick(t);
  }
  const xTicks = spec.xLog ? logTicks(x0, x1) : linearTicks(x0, x1, Math.max(3, Math.floor(width / 90)));
  for (const t of xTicks) {
    const x = X(t);
    el("line", { x1: x, x2: x, y1: m.top, y2: height - m.bottom }, grid);
    const label = el("text", { x, y: height - m.bottom + 16, "text-anchor": "middle", class: "tick" }, svg);
    label.textContent = formatTick(t);
  }
  el("rect", { x: m.left, y: m.top, width: width - m.left - m.right, height: height - m.top - m.bottom, class: "frame" }, svg);
  const xl = el("text", { x: (m.left + width - m.right) / 2, y: height - 8, "text-anchor": "middle", class: "axis-label" }, svg);
  xl.textContent = spec.xLabel || "";
  const yl = el("text", { x: 14, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle", class: "axis-label",
    transform: `rotate(-90 14 ${(m.top + height - m.bottom) / 2})` }, svg);
  yl.textContent = spec.yLabel || "";

  const clipId = `clip-${Math.random().toString(36).slice(2)}`;
  const clip = el("clipPath", { id: clipId }, el("defs", {}, svg));
  el("rect", { x: m.left, y: m.top - 4, width: width - m.left - m.right + 4, height: height - m.top - m.bottom + 8 }, clip);
  const plot = el("g", { "clip-path": `url(#${clipId})` }, svg);

  if (spec.diagonal) {
    el("line", { x1: X(x0), y1: Y(y0), x2: X(x1), y2: Y(y1), class: "diagonal" }, plot);
  }
  for (const h of spec.hlines || []) {
    if (!(h.y > 0) && spec.yLog) continue;
    el("line", { x1: m.left, x2: width - m.right, y1: Y(h.y), y2: Y(h.y), class: "hline", stroke: h.color || "#16a34a" }, plot);
    if (h.label) {
      const t = el("text", { x: width - m.right - 6, y: Y(h.y) - 5, "text-anchor": "end", class: "hline-label", fill: h.color || "#16a34a" }, svg);
      t.textContent = h.label;
    }
  }
  for (const b of spec.bands || []) {
    // one closed path per run of defined points: along hi, then back along lo
    let run = [];
    const flush = () => {
      if (run.length) {
        const top = run.map((i) => `${X(b.x[i])},${Y(b.hi[i])}`);
        const bottom = run.slice().reverse().map((i) => `${X(b.x[i])},${Y(b.lo[i])}`);
        el("path", { d: `M${top.join("L")}L${bottom.join("L")}Z`, fill: b.color, "fill-opacity": 0.18, stroke: "none", class: `band ${b.cls || ""}` }, plot);
      }
      run = [];
    };
    b.x.forEach((_, i) => { if (b.lo[i] !== null && b.hi[i] !== null) run.push(i); else flush(); });
    flush();
  }
  // points under lines, so the best-so-far curve stays readable
  const pointLayer = el("g", { class: "points" }, plot);
  const drawn = [];
  for (const p of okPoints) {
    const cx = X(p.x), cy = Y(p.y);
    el("circle", { cx, cy, r: p.r || 3, fill: p.color, class: `pt ${p.cls || ""}` }, pointLayer);
    drawn.push({ cx, cy, p });
  }
  if (failedPoints.length) {
    const strip = el("g", { class: "failed-strip" }, svg);
    const lbl = el("text", { x: m.left - 8, y: m.top - 12, "text-anchor": "end", class: "tick" }, strip);
    lbl.textContent = "failed";
    for (const p of failedPoints) {
      const cx = X(p.x), cy = m.top - 16;
      el("path", { d: `M${cx - 3},${cy - 3}L${cx + 3},${cy + 3}M${cx - 3},${cy + 3}L${cx + 3},${cy - 3}`, stroke: p.color, class: `pt failed ${p.cls || ""}` }, strip);
      drawn.push({ cx, cy, p });
    }
  }
  for (const line of spec.lines || []) {
    if (!line.points.length) continue;
    let d = "";
    line.points.forEach(([x, y], i) => {
      const px = X(x), py = Y(y);
      if (i === 0) d += `M${px},${py}`;
      else if (line.step) d += `H${px}V${py}`;
      else d += `L${px},${py}`;
    });
    if (line.extendTo !== undefined && line.step) d += `H${X(line.extendTo)}`;
    el("path", { d, fill: "none", stroke: line.color, "stroke-width": line.width || 2,
      "stroke-dasharray": line.dashed ? "6 4" : "none", class: `series ${line.cls || ""}` }, plot);
  }

  // tooltip: the nearest drawn point within 14 px
  const tip = document.createElement("div");
  tip.className = "tooltip";
  const wrap = document.createElement("div");
  wrap.className = "chart-wrap";
  wrap.appendChild(svg);
  wrap.appendChild(tip);
  svg.addEventListener("mousemove", (ev) => {
    const box = svg.getBoundingClientRect();
    const mx = ev.clientX - box.left, my = ev.clientY - box.top;
    let best = null, bestD = 14 * 14;
    for (const d of drawn) {
      const dd = (d.cx - mx) ** 2 + (d.cy - my) ** 2;
      if (dd < bestD) { bestD = dd; best = d; }
    }
    if (!best || !best.p.tip) { tip.style.display = "none"; return; }
    tip.innerHTML = best.p.tip;
    tip.style.display = "block";
    tip.style.left = `${Math.min(best.cx + 12, width - 220)}px`;
    tip.style.top = `${Math.max(best.cy - 10, 0)}px`;
  });
  svg.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  const parts = [];
  if (spec.legend && spec.legend.length) parts.push(legend(spec.legend));
  parts.push(wrap);
  container.replaceChildren(...parts);
  return svg;
}

function legend(items) {
  const box = document.createElement("div");
  box.className = "legend";
  for (const item of items) {
    const entry = document.createElement("span");
    const mark = document.createElement("i");
    mark.className = item.kind === "line" ? (item.dashed ? "mark line dashed" : "mark line") : "mark dot";
    mark.style.setProperty("--c", item.color);
    entry.append(mark, document.createTextNode(item.label));
    box.appendChild(entry);
  }
  return box;
}
