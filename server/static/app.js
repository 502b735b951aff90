// The ktune dashboard: jobs (filters, paging, counts by state), per-job convergence and why a
// config wins (explain.js), and strategies compared across seeds. Reads /v1 only.
import { drawChart, formatNumber } from "./plot.js";
import { STATUS_COLORS, rate, renderExplain } from "./explain.js";

const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f", "#6b7280", "#a16207"];
const LIVE = new Set(["queued", "running"]);
const PAGE = 5000;

const main = document.getElementById("main");
let timer = null;
let generation = 0; // bumps on every navigation, so stale refreshes stop

// -- talking to the API -------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  const token = localStorage.getItem("ktune.token");
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail : body.detail.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ");
    } catch (_) { /* not JSON */ }
    if (response.status === 401) askToken(detail);
    throw new ApiError(response.status, detail);
  }
  return response.json();
}

async function allTrials(jobId, since = 0) {
  const items = [];
  for (;;) {
    const page = await api(`/v1/jobs/${jobId}/trials?since=${since}&limit=${PAGE}`);
    items.push(...page.items);
    since = page.next_since;
    if (page.items.length < PAGE) return { items, since, page };
  }
}

// -- helpers -------------------------------------------------------------------------------

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

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const ms = (v) => (v === null || v === undefined ? "–" : `${formatNumber(v)} ms`);

function duration(seconds) {
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(2)} h`;
}

function ago(iso) {
  if (!iso) return "–";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

const badge = (state) => h("span", { class: `badge state-${state}` }, state);
const ratio = (job) => (job.best_time_ms && job.space && job.space.optimum_ms ? job.best_time_ms / job.space.optimum_ms : null);

function progressBar(job) {
  const p = job.progress === null ? null : Math.max(0, Math.min(1, job.progress));
  const label = job.budget.trials ? `${job.n_trials} / ${job.budget.trials}` : `${job.n_trials}`;
  return h("div", { class: "progress", title: p === null ? "" : `${Math.round(p * 100)}%` },
    h("div", { class: `bar state-${job.state}`, style: `width:${p === null ? 0 : p * 100}%` }),
    h("span", {}, label));
}

function bestSoFar(trials, xOf) {
  const line = [];
  let best = null;
  for (const t of trials) {
    if (t.status === "ok" && t.time_ms !== null && (best === null || t.time_ms < best)) {
      best = t.time_ms;
      line.push([xOf(t), best]);
    }
  }
  return line;
}

function schedule(fn, delay) {
  clearTimeout(timer);
  const mine = generation;
  timer = setTimeout(() => { if (mine === generation) fn(); }, delay);
}

// replaceChildren() would show a null as the text "null"
const mount = (...nodes) => main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));

function showError(error) {
  mount(h("div", { class: "card error" }, h("h2", {}, "Cannot load this view"), h("p", {}, error.message)));
}

// -- the token dialog ---------------------------------------------------------------------

function askToken(reason) {
  const dialog = document.getElementById("token-dialog");
  document.getElementById("token-reason").textContent = reason || "";
  if (!dialog.open) dialog.showModal();
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  const value = document.getElementById("token-input").value.trim();
  if (ev.submitter && ev.submitter.value === "forget") localStorage.removeItem("ktune.token");
  else if (value) localStorage.setItem("ktune.token", value);
  document.getElementById("token-input").value = "";
  route();
});
document.getElementById("token-button").addEventListener("click", () => askToken(""));

// -- jobs list -----------------------------------------------------------------------------

const selected = new Set();
const JOBS_PAGE = 50;
const FILTERS = ["state", "workload", "device", "strategy"];

/** The filters of a view's hash (e.g. #/?state=done&page=2) as a query string for /v1. */
function filterQuery(params, extra = {}) {
  const q = new URLSearchParams();
  for (const f of FILTERS) if (params.get(f)) q.set(f, params.get(f));
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  return q.toString();
}

function markDrawn(view) {
  window.__ktuneDrawn = { ...(window.__ktuneDrawn || {}), [view]: window.__ktuneDrawn?.[view] ?? performance.now() };
  document.body.dataset.drawn = view;
}

function filterBar(base, params, facets, withState) {
  const go = (key, value) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value); else next.delete(key);
    next.delete("page");
    next.delete("jobs");
    location.hash = `${base}?${next}`;
  };
  const select = (key, values) => h("label", {}, `${key} `, h("select", { id: `pick-${key}`, "aria-label": key, onchange: (ev) => go(key, ev.target.value) },
    h("option", { value: "" }, "any"),
    values.map((v) => h("option", { value: v, selected: params.get(key) === v ? true : null }, v))));
  const states = ["running", "queued", "done", "failed", "cancelled"];
  const chips = states.map((s) => h("button", { class: `chip state-chip${params.get("state") === s ? " active" : ""}`, "data-state": s,
    onclick: () => go("state", params.get("state") === s ? "" : s) }, badge(s), ` ${facets.by_state[s] ?? 0}`));
  return h("div", { class: "filters" },
    withState ? h("div", { class: "chips", id: "state-counts" }, chips) : select("state", states),
    select("workload", facets.workloads), select("device", facets.devices), select("strategy", facets.strategies));
}

async function showJobs(params = new URLSearchParams()) {
  const mine = generation;
  const pageNo = Math.max(0, Number(params.get("page") || 0));
  const [page, facets] = await Promise.all([
    api(`/v1/jobs?${filterQuery(params, { limit: JOBS_PAGE, offset: pageNo * JOBS_PAGE })}`),
    api(`/v1/job-facets?${filterQuery(params)}`),
  ]);
  if (mine !== generation) return;
  const jobs = page.items;
  const toPage = (n) => { const next = new URLSearchParams(params); next.set("page", n); location.hash = `#/?${next}`; };
  const compare = h("button", { class: "primary", disabled: selected.size < 1 ? true : null,
    onclick: () => { location.hash = `#/compare?jobs=${[...selected].join(",")}`; } },
    `Compare selected (${selected.size})`);
  const compareAll = h("a", { class: "button", id: "compare-filtered", href: `#/compare?${filterQuery(params)}` }, "Compare these");
  const rows = jobs.map((j) => {
    const r = ratio(j);
    const box = h("input", { type: "checkbox", "aria-label": `select job ${j.id}`, checked: selected.has(j.id) ? true : null,
      onclick: (ev) => { ev.stopPropagation(); ev.target.checked ? selected.add(j.id) : selected.delete(j.id); showJobs(params); } });
    return h("tr", { class: "clickable", "data-job": j.id, onclick: () => { location.hash = `#/jobs/${j.id}`; } },
      h("td", {}, box),
      h("td", { class: "num" }, `#${j.id}`),
      h("td", {}, badge(j.state)),
      h("td", {}, j.strategy, j.seed !== null ? h("span", { class: "muted" }, ` · seed ${j.seed}`) : null),
      h("td", { class: "mono" }, j.workload),
      h("td", {}, j.device),
      h("td", {}, progressBar(j)),
      h("td", { class: "num" }, ms(j.best_time_ms)),
      h("td", { class: "num" }, r === null ? "–" : `×${r.toFixed(3)}`),
      h("td", { class: "num" }, duration(j.clock_s)),
      h("td", { class: "muted" }, ago(j.created_at)));
  });
  const first = pageNo * JOBS_PAGE;
  const pages = Math.max(1, Math.ceil(facets.total / JOBS_PAGE));
  const pager = h("div", { class: "pager", id: "jobs-pager" },
    h("button", { id: "jobs-prev", disabled: pageNo === 0 ? true : null, onclick: () => toPage(pageNo - 1) }, "← newer"),
    h("span", { class: "muted", id: "jobs-range" }, jobs.length ? `${first + 1}–${first + jobs.length} of ${facets.total}` : `0 of ${facets.total}`),
    h("span", { class: "muted" }, ` · page ${pageNo + 1} of ${pages}`),
    h("button", { id: "jobs-next", disabled: page.next_offset === null ? true : null, onclick: () => toPage(pageNo + 1) }, "older →"));
  const anyFilter = FILTERS.some((f) => params.get(f));
  mount(
    h("div", { class: "toolbar" }, h("h1", {}, "Tuning jobs"), h("div", { class: "spacer" }), compareAll, compare),
    filterBar("#/", params, facets, true),
    jobs.length
      ? h("div", { class: "card flush" }, h("table", { class: "jobs", id: "jobs-table" },
          h("thead", {}, h("tr", {}, ["", "job", "state", "strategy", "workload", "device", "progress", "best", "vs optimum", "tuning time", "created"].map((c) => h("th", {}, c)))),
          h("tbody", {}, rows)))
      : h("div", { class: "card empty" }, h("p", {}, anyFilter ? "No job matches these filters." : "No jobs yet."),
          anyFilter ? null : h("p", { class: "muted" }, "Submit one with POST /v1/jobs, e.g. ",
            h("code", {}, `{"space": "convolution_A4000", "budget": {"trials": 200}}`))),
    pager);
  markDrawn("jobs");
  schedule(() => showJobs(params), jobs.some((j) => LIVE.has(j.state)) ? 1500 : 5000);
}

// -- one job -------------------------------------------------------------------------------

function trialTip(t) {
  const config = Object.entries(t.config).map(([k, v]) => `${esc(k)}=${esc(v)}`).join(" ");
  return `<b>#${t.seq + 1}</b> <span style="color:${STATUS_COLORS[t.status]}">${esc(t.status)}</span>` +
    (t.time_ms !== null ? ` · ${esc(formatNumber(t.time_ms))} ms` : "") +
    `<br><span class="muted">${esc(duration(t.clock_s))} into tuning</span><br><code>${config}</code>` +
    (t.error ? `<br><span class="err">${esc(t.error.slice(0, 160))}</span>` : "");
}

function convergenceSpec(job, trials, axis) {
  const xOf = axis === "time" ? (t) => t.clock_s : (t) => t.seq + 1;
  const points = trials.map((t) => ({
    x: xOf(t),
    y: t.time_ms,
    failed: t.status !== "ok" || t.time_ms === null,
    color: STATUS_COLORS[t.status] || "#6b7280",
    cls: `status-${t.status}`,
    r: 2.6,
    tip: trialTip(t),
  }));
  const line = bestSoFar(trials, xOf);
  const last = trials.length ? xOf(trials[trials.length - 1]) : 0;
  const optimum = job.space && job.space.optimum_ms;
  const spec = {
    height: 320,
    yLog: true,
    xMin: 0,
    xLabel: axis === "time" ? `tuning time (s${job.backend === "replay" ? ", replayed GPU time" : ""})` : "measurements",
    yLabel: "time (ms)",
    points,
    lines: [{ points: line, color: "#111827", step: true, width: 2.2, extendTo: last, cls: "best-so-far" }],
    hlines: optimum ? [{ y: optimum, color: "#16a34a", label: `recording optimum ${formatNumber(optimum)} ms` }] : [],
    legend: [
      { kind: "line", color: "#111827", label: "best so far" },
      { kind: "dot", color: STATUS_COLORS.ok, label: "trial" },
      ...(optimum ? [{ kind: "line", color: "#16a34a", label: "optimum", dashed: true }] : []),
    ],
    title: `Convergence of job ${job.id} vs ${axis === "time" ? "tuning time" : "measurements"}`,
  };
  // The axis follows the data (the budget is in the cards), so a young job is not a sliver.
  return spec;
}

function statusChips(trials) {
  const counts = {};
  for (const t of trials) counts[t.status] = (counts[t.status] || 0) + 1;
  return Object.entries(counts).map(([s, n]) =>
    h("span", { class: "chip" }, h("i", { class: "dot", style: `background:${STATUS_COLORS[s]}` }), `${s} ${n}`));
}

function bestConfigsTable(job, trials) {
  const ok = trials.filter((t) => t.status === "ok" && t.time_ms !== null).sort((a, b) => a.time_ms - b.time_ms).slice(0, 10);
  if (!ok.length) return h("p", { class: "muted" }, "No successful measurement yet.");
  const names = Object.keys(ok[0].config);
  const best = ok[0].config;
  const optimum = job.space && job.space.optimum_ms;
  return h("div", { class: "scroll" }, h("table", { class: "configs", id: "best-configs" },
    h("thead", {}, h("tr", {}, h("th", {}, "rank"), h("th", {}, "time"), optimum ? h("th", {}, "vs optimum") : null, h("th", {}, "found at"),
      names.map((n) => h("th", { class: "mono" }, n)))),
    h("tbody", {}, ok.map((t, i) => h("tr", { class: i === 0 ? "top" : "" },
      h("td", { class: "num" }, i + 1),
      h("td", { class: "num" }, ms(t.time_ms)),
      optimum ? h("td", { class: "num" }, `×${(t.time_ms / optimum).toFixed(3)}`) : null,
      h("td", { class: "num" }, `#${t.seq + 1}`),
      names.map((n) => h("td", { class: `mono num${i > 0 && t.config[n] !== best[n] ? " differs" : ""}` }, String(t.config[n]))))))));
}

async function showJob(id) {
  const mine = generation;
  const state = { trials: [], since: 0, job: null, importance: null, work: null, explained: -1, explainedAt: 0 };
  const refresh = async () => {
    try {
      state.job = await api(`/v1/jobs/${id}`);
      const got = await allTrials(id, state.since);
      if (mine !== generation) return;
      state.trials.push(...got.items);
      state.since = got.since;
      const live = LIVE.has(state.job.state) || LIVE.has(got.page.job_state);
      // importance is recomputed over every trial: at most every 5 s while the job runs
      if (state.explained !== state.trials.length && (!live || Date.now() - state.explainedAt > 5000)) {
        [state.importance, state.work] = await Promise.all([
          api(`/v1/jobs/${id}/importance`),
          state.work ? state.work : api(`/v1/jobs/${id}/work`),
        ]);
        state.explained = state.trials.length;
        state.explainedAt = Date.now();
      }
      if (mine !== generation) return;
      renderJob(state);
      markDrawn("job");
      if (live) schedule(refresh, 1000);
    } catch (error) {
      if (mine === generation) showError(error);
    }
  };
  await refresh();
}

function throughputCard(card, job, work) {
  if (!work) return null;
  if (work.flops === null && work.bytes === null) return card("throughput", "–", "not known for this operator");
  const gflops = rate(work.flops, job.best_time_ms), gbps = rate(work.bytes, job.best_time_ms);
  return h("div", { id: "throughput" }, card("best throughput",
    gflops === null ? "–" : `${formatNumber(gflops)} GFLOP/s`, gbps === null ? null : `${formatNumber(gbps)} GB/s`));
}

async function cancel(id) {
  try {
    await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
    route();
  } catch (error) {
    if (error.status !== 401) alert(error.message);
  }
}

function renderJob({ job, trials, importance, work }) {
  const r = ratio(job);
  const ok = trials.filter((t) => t.status === "ok").length;
  const predicted = trials.filter((t) => t.predicted !== null && t.time_ms !== null);
  const card = (label, value, sub) => h("div", { class: "stat" }, h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  const plotA = h("div", { class: "plot", id: "plot-measurements" });
  const plotB = h("div", { class: "plot", id: "plot-time" });
  const plotP = predicted.length ? h("div", { class: "plot", id: "plot-predicted" }) : null;
  const explain = h("section", { id: "explain" });
  mount(
    h("div", { class: "toolbar" },
      h("a", { href: "#/", class: "back" }, "← jobs"),
      h("h1", {}, `Job #${job.id} `, badge(job.state)),
      LIVE.has(job.state) ? h("button", { class: "danger", onclick: () => cancel(job.id), disabled: job.cancel_requested ? true : null },
        job.cancel_requested ? "Cancelling…" : "Cancel") : null),
    h("p", { class: "subtitle" }, h("b", {}, job.strategy), " on ", h("span", { class: "mono" }, job.workload), " @ ", job.device,
      job.space ? h("span", { class: "muted" }, ` · recorded space ${job.space.name} (${job.space.configs} configs)`) : null,
      job.backend === "ray" ? h("span", { class: "muted" }, ` · on the Ray cluster, ${job.gpu_workers} ${job.gpu_type ?? "any"} GPU${job.gpu_workers === 1 ? "" : "s"} at once`) : null,
      job.constraints.length ? h("span", { class: "muted" }, " · where ", h("span", { class: "mono" }, job.constraints.join(" and "))) : null),
    job.error ? h("div", { class: "card error" }, job.error) : null,
    h("div", { class: "stats" },
      card("measurements", `${job.n_trials}${job.budget.trials ? ` / ${job.budget.trials}` : ""}`, `${ok} ok`),
      card("best", ms(job.best_time_ms), r === null ? null : `×${r.toFixed(3)} the optimum`),
      card("tuning time", duration(job.clock_s), job.budget.seconds ? `of ${duration(job.budget.seconds)}` : null),
      card("seed · batch", `${job.seed ?? "–"} · ${job.batch_size}`, job.runner ? `runner ${job.runner}` : null),
      throughputCard(card, job, work)),
    h("div", { class: "chips" }, statusChips(trials)),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Best so far vs measurements"), plotA),
      h("div", { class: "card" }, h("h2", {}, "Best so far vs tuning time"), plotB)),
    plotP ? h("div", { class: "card" }, h("h2", {}, "Measured vs predicted"), plotP)
      : h("p", { class: "muted small", id: "predicted-missing" }, "Measured vs predicted: the cost model's predictions are not recorded for this job's trials."),
    h("div", { class: "card" }, h("h2", {}, "Best configurations"), bestConfigsTable(job, trials)),
    explain,
  );
  renderExplain(explain, { job, trials, importance, work });
  drawChart(plotA, convergenceSpec(job, trials, "measurements"));
  drawChart(plotB, convergenceSpec(job, trials, "time"));
  if (plotP) {
    drawChart(plotP, {
      height: 320, xLog: true, yLog: true, diagonal: true,
      xLabel: "predicted (ms)", yLabel: "measured (ms)",
      points: predicted.map((t) => ({ x: t.predicted, y: t.time_ms, color: STATUS_COLORS.ok, tip: trialTip(t) })),
      legend: [{ kind: "dot", color: STATUS_COLORS.ok, label: "trial" }],
    });
  }
}

// -- comparison ----------------------------------------------------------------------------

/** The last x where a band's median is defined: [median, q25, q75, n, x]. */
function bandEnd(band) {
  for (let i = band.x.length - 1; i >= 0; i--) {
    if (band.median[i] !== null) return { median: band.median[i], q25: band.q25[i], q75: band.q75[i], n: band.n[i], x: band.x[i] };
  }
  return null;
}

function bandSpec(answer, axis) {
  const unit = answer.normalised ? `× ${answer.reference}` : "ms";
  return {
    height: 340, yLog: true, xMin: 0, yLabel: `best so far (${unit})`,
    xLabel: axis === "time" ? "tuning time (s)" : "measurements",
    bands: answer.bands.map((b, i) => ({ x: b.x, lo: b.q25, hi: b.q75, color: PALETTE[i % PALETTE.length], cls: `band-${i}` })),
    lines: answer.bands.map((b, i) => ({
      points: b.x.map((x, k) => [x, b.median[k]]).filter(([, y]) => y !== null),
      color: PALETTE[i % PALETTE.length], step: true, width: 2.2, cls: `median strategy-${i}`,
    })),
    hlines: answer.reference === "optimum" ? [{ y: 1, color: "#16a34a", label: "optimum" }] : [],
    legend: answer.bands.map((b, i) => ({ kind: "line", color: PALETTE[i % PALETTE.length], label: `${b.strategy} (${b.jobs.length} job${b.jobs.length === 1 ? "" : "s"}): median, band 25–75%` })),
  };
}

async function showCompare(params) {
  const mine = generation;
  const q = new URLSearchParams();
  if (params.get("jobs")) q.set("jobs", params.get("jobs"));
  else for (const f of FILTERS) if (params.get(f)) q.set(f, params.get(f));
  if (params.get("normalise")) q.set("normalise", params.get("normalise"));
  const [byCount, byTime, facets] = await Promise.all([
    api(`/v1/compare?${q}&axis=measurements`),
    api(`/v1/compare?${q}&axis=time`),
    api(`/v1/job-facets`),
  ]);
  if (mine !== generation) return;
  const jobs = byCount.jobs;
  const unit = byCount.normalised ? `× ${byCount.reference}` : "ms";
  const colorOf = new Map(byCount.bands.map((b, i) => [b.strategy, PALETTE[i % PALETTE.length]]));
  const plotA = h("div", { class: "plot", id: "compare-measurements" });
  const plotB = h("div", { class: "plot", id: "compare-time" });
  const strategies = h("table", { class: "configs", id: "compare-strategies" },
    h("thead", {}, h("tr", {}, ["", "strategy", "jobs", `median at the end (${unit})`, "interquartile band", "jobs there", "at measurement"].map((c) => h("th", {}, c)))),
    h("tbody", {}, byCount.bands.map((b) => {
      const end = bandEnd(b);
      return h("tr", { "data-strategy": b.strategy },
        h("td", {}, h("i", { class: "dot", style: `background:${colorOf.get(b.strategy)}` })),
        h("td", {}, b.strategy), h("td", { class: "num" }, b.jobs.length),
        h("td", { class: "num median-end" }, end ? formatNumber(end.median) : "–"),
        h("td", { class: "num" }, end ? `${formatNumber(end.q25)} – ${formatNumber(end.q75)}` : "–"),
        h("td", { class: "num" }, end ? end.n : "–"), h("td", { class: "num" }, end ? end.x : "–"));
    })));
  const table = h("table", { class: "configs", id: "compare-jobs" },
    h("thead", {}, h("tr", {}, ["", "job", "strategy", "seed", "workload", "device", "measurements", "best", byCount.normalised ? `best (${unit})` : null].filter((c) => c !== null).map((c) => h("th", {}, c)))),
    h("tbody", {}, jobs.map((job) => h("tr", { "data-job": job.id },
      h("td", {}, h("i", { class: "dot", style: `background:${colorOf.get(job.strategy)}` })),
      h("td", {}, h("a", { href: `#/jobs/${job.id}` }, `#${job.id}`), " ", badge(job.state)),
      h("td", {}, job.strategy), h("td", { class: "num" }, job.seed ?? "–"),
      h("td", { class: "mono" }, job.workload), h("td", {}, job.device),
      h("td", { class: "num" }, job.n_trials), h("td", { class: "num" }, ms(job.best_time_ms)),
      byCount.normalised ? h("td", { class: "num" }, job.best === null ? "–" : formatNumber(job.best)) : null))));
  const normalise = h("label", {}, "normalise ", h("select", { id: "pick-normalise", onchange: (ev) => {
    const next = new URLSearchParams(params); next.set("normalise", ev.target.value); location.hash = `#/compare?${next}`;
  } }, ["auto", "optimum", "best_known", "none"].map((v) => h("option", { value: v, selected: (params.get("normalise") || "auto") === v ? true : null }, v))));
  const scope = params.get("jobs")
    ? h("span", { class: "muted" }, `the ${jobs.length} jobs chosen · `, h("a", { href: "#/compare" }, "pick by filter instead"))
    : h("span", { class: "muted" }, `the newest ${jobs.length} jobs matching the filters (up to 100)`);
  mount(
    h("div", { class: "toolbar" }, h("h1", {}, "Compare strategies"), scope),
    h("div", { class: "card" }, filterBar("#/compare", params, facets, false), h("div", { class: "filters" }, normalise,
      h("span", { class: "muted" }, byCount.normalised ? `times divided by each job's ${byCount.reference} time` : "times in ms (one workload on one device)"))),
    jobs.length ? null : h("div", { class: "card empty" }, h("p", {}, "No job matches these filters.")),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Best so far vs measurements, across seeds"), plotA),
      h("div", { class: "card" }, h("h2", {}, "Best so far vs tuning time, across seeds"), plotB)),
    h("div", { class: "card" }, h("h2", {}, "Strategies"), strategies),
    h("div", { class: "card" }, h("h2", {}, "Jobs"), h("div", { class: "scroll" }, table)),
  );
  drawChart(plotA, bandSpec(byCount, "measurements"));
  drawChart(plotB, bandSpec(byTime, "time"));
  markDrawn("compare");
  if (jobs.some((j) => LIVE.has(j.state))) schedule(() => showCompare(params), 2000);
}

// -- routing -------------------------------------------------------------------------------

async function route() {
  generation += 1;
  clearTimeout(timer);
  delete document.body.dataset.drawn; // set again by the view once it is drawn
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.getAttribute("href") === `#${path.split("/").slice(0, 2).join("/")}` || (path === "/" && a.getAttribute("href") === "#/"));
  try {
    const job = path.match(/^\/jobs\/(\d+)$/);
    if (job) await showJob(Number(job[1]));
    else if (path === "/compare") await showCompare(new URLSearchParams(query || ""));
    else await showJobs(new URLSearchParams(query || ""));
  } catch (error) {
    showError(error);
  }
}

window.addEventListener("hashchange", route);
// Charts are drawn to the page's width: redraw when it changes (not its height alone).
let drawnWidth = window.innerWidth;
// The width is compared when the resizing settles, so a width that comes back (a full-page
// screenshot, a window dragged and let go) redraws nothing.
window.addEventListener("resize", () => {
  clearTimeout(window.__resize);
  window.__resize = setTimeout(() => {
    if (window.innerWidth === drawnWidth) return;
    drawnWidth = window.innerWidth;
    route();
  }, 200);
});
route();
