// The ktune dashboard: jobs, per-job convergence, and a comparison of jobs. Reads /v1 only.
import { drawChart, formatNumber } from "./plot.js";

const STATUS_COLORS = {
  ok: "#2563eb",
  compile_error: "#f59e0b",
  runtime_error: "#dc2626",
  wrong_result: "#9333ea",
  timeout: "#92400e",
  invalid: "#9ca3af",
};
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

async function showJobs() {
  const mine = generation;
  const page = await api("/v1/jobs?limit=200");
  if (mine !== generation) return;
  const jobs = page.items;
  const counts = {};
  for (const j of jobs) counts[j.state] = (counts[j.state] || 0) + 1;
  const compare = h("button", { class: "primary", disabled: selected.size < 1 ? true : null,
    onclick: () => { location.hash = `#/compare?jobs=${[...selected].join(",")}`; } },
    `Compare selected (${selected.size})`);
  const rows = jobs.map((j) => {
    const r = ratio(j);
    const box = h("input", { type: "checkbox", "aria-label": `select job ${j.id}`, checked: selected.has(j.id) ? true : null,
      onclick: (ev) => { ev.stopPropagation(); ev.target.checked ? selected.add(j.id) : selected.delete(j.id); showJobs(); } });
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
  const summary = ["running", "queued", "done", "failed", "cancelled"]
    .filter((s) => counts[s]).map((s) => h("span", { class: "chip" }, badge(s), ` ${counts[s]}`));
  mount(
    h("div", { class: "toolbar" }, h("h1", {}, "Tuning jobs"), h("div", { class: "chips" }, summary), compare),
    jobs.length
      ? h("div", { class: "card flush" }, h("table", { class: "jobs", id: "jobs-table" },
          h("thead", {}, h("tr", {}, ["", "job", "state", "strategy", "workload", "device", "progress", "best", "vs optimum", "tuning time", "created"].map((c) => h("th", {}, c)))),
          h("tbody", {}, rows)))
      : h("div", { class: "card empty" }, h("p", {}, "No jobs yet."),
          h("p", { class: "muted" }, "Submit one with POST /v1/jobs, e.g. ",
            h("code", {}, `{"space": "convolution_A4000", "budget": {"trials": 200}}`))));
  schedule(showJobs, jobs.some((j) => LIVE.has(j.state)) ? 1500 : 5000);
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
  const state = { trials: [], since: 0, job: null };
  const refresh = async () => {
    try {
      state.job = await api(`/v1/jobs/${id}`);
      const got = await allTrials(id, state.since);
      if (mine !== generation) return;
      state.trials.push(...got.items);
      state.since = got.since;
      renderJob(state);
      if (LIVE.has(state.job.state) || LIVE.has(got.page.job_state)) schedule(refresh, 1000);
    } catch (error) {
      if (mine === generation) showError(error);
    }
  };
  await refresh();
}

async function cancel(id) {
  try {
    await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
    route();
  } catch (error) {
    if (error.status !== 401) alert(error.message);
  }
}

function renderJob({ job, trials }) {
  const r = ratio(job);
  const ok = trials.filter((t) => t.status === "ok").length;
  const predicted = trials.filter((t) => t.predicted !== null && t.time_ms !== null);
  const card = (label, value, sub) => h("div", { class: "stat" }, h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  const plotA = h("div", { class: "plot", id: "plot-measurements" });
  const plotB = h("div", { class: "plot", id: "plot-time" });
  const plotP = predicted.length ? h("div", { class: "plot", id: "plot-predicted" }) : null;
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
      card("seed · batch", `${job.seed ?? "–"} · ${job.batch_size}`, job.runner ? `runner ${job.runner}` : null)),
    h("div", { class: "chips" }, statusChips(trials)),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Best so far vs measurements"), plotA),
      h("div", { class: "card" }, h("h2", {}, "Best so far vs tuning time"), plotB)),
    plotP ? h("div", { class: "card" }, h("h2", {}, "Measured vs predicted"), plotP) : null,
    h("div", { class: "card" }, h("h2", {}, "Best configurations"), bestConfigsTable(job, trials)),
  );
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

const trialCache = new Map(); // job id -> {since, items, state}

async function jobTrials(job) {
  const cached = trialCache.get(job.id) || { since: 0, items: [], state: null };
  if (cached.state && !LIVE.has(cached.state) && cached.items.length >= job.n_trials) return cached.items;
  const got = await allTrials(job.id, cached.since);
  cached.items.push(...got.items);
  cached.since = got.since;
  cached.state = job.state;
  trialCache.set(job.id, cached);
  return cached.items;
}

async function showCompare(params) {
  const mine = generation;
  const page = await api("/v1/jobs?limit=200");
  let ids = (params.get("jobs") || "").split(",").map(Number).filter((n) => n > 0);
  const byId = new Map(page.items.map((j) => [j.id, j]));
  if (!ids.length && page.items.length) {
    // By default: the recent jobs of the space tuned most often (e.g. strategies side by side).
    const groups = new Map();
    for (const j of page.items) {
      const key = `${j.workload}@${j.device}`;
      groups.set(key, [...(groups.get(key) || []), j]);
    }
    const biggest = [...groups.values()].reduce((a, b) => (b.length > a.length ? b : a));
    ids = biggest.slice(0, 8).map((j) => j.id);
  }
  for (const id of ids) if (!byId.has(id)) { try { byId.set(id, await api(`/v1/jobs/${id}`)); } catch (_) { /* gone */ } }
  const jobs = ids.map((id) => byId.get(id)).filter(Boolean);
  const series = [];
  for (const job of jobs) series.push({ job, trials: await jobTrials(job) });
  if (mine !== generation) return;
  const spaces = new Set(jobs.map((j) => (j.space ? j.space.name : null)));
  const optimum = spaces.size === 1 && jobs.length && jobs[0].space ? jobs[0].space.optimum_ms : null;
  const norm = (v) => (optimum ? v / optimum : v);
  const yLabel = optimum ? "best so far (× optimum)" : "best so far (ms)";
  const mk = (axis) => ({
    height: 340, yLog: true, xMin: 0, yLabel,
    xLabel: axis === "time" ? `tuning time (s${jobs.every((j) => j.backend === "replay") ? ", replayed GPU time" : ""})` : "measurements",
    lines: series.map(({ job, trials }, i) => ({
      points: bestSoFar(trials, axis === "time" ? (t) => t.clock_s : (t) => t.seq + 1).map(([x, y]) => [x, norm(y)]),
      color: PALETTE[i % PALETTE.length], step: true, width: 2,
      extendTo: trials.length ? (axis === "time" ? trials[trials.length - 1].clock_s : trials.length) : 0,
      cls: `job-${job.id}`,
    })),
    hlines: optimum ? [{ y: 1, color: "#16a34a", label: "optimum" }] : [],
    legend: series.map(({ job }, i) => ({ kind: "line", color: PALETTE[i % PALETTE.length], label: `#${job.id} ${job.strategy}${job.seed !== null ? ` s${job.seed}` : ""}` })),
  });
  const plotA = h("div", { class: "plot", id: "compare-measurements" });
  const plotB = h("div", { class: "plot", id: "compare-time" });
  const picker = page.items.slice(0, 60).map((j) => h("label", { class: "pick" },
    h("input", { type: "checkbox", checked: ids.includes(j.id) ? true : null, onchange: (ev) => {
      const next = ev.target.checked ? [...ids, j.id] : ids.filter((x) => x !== j.id);
      location.hash = `#/compare?jobs=${next.join(",")}`;
    } }),
    ` #${j.id} `, badge(j.state), ` ${j.strategy} · `, h("span", { class: "mono" }, j.workload)));
  const summary = h("table", { class: "configs" },
    h("thead", {}, h("tr", {}, ["", "job", "strategy", "seed", "measurements", "best", optimum ? "vs optimum" : null, "tuning time"].filter((c) => c !== null).map((c) => h("th", {}, c)))),
    h("tbody", {}, series.map(({ job }, i) => h("tr", {},
      h("td", {}, h("i", { class: "dot", style: `background:${PALETTE[i % PALETTE.length]}` })),
      h("td", {}, h("a", { href: `#/jobs/${job.id}` }, `#${job.id}`), " ", badge(job.state)),
      h("td", {}, job.strategy), h("td", { class: "num" }, job.seed ?? "–"), h("td", { class: "num" }, job.n_trials),
      h("td", { class: "num" }, ms(job.best_time_ms)),
      optimum ? h("td", { class: "num" }, job.best_time_ms ? `×${(job.best_time_ms / optimum).toFixed(3)}` : "–") : null,
      h("td", { class: "num" }, duration(job.clock_s))))));
  mount(
    h("div", { class: "toolbar" }, h("h1", {}, "Compare jobs"),
      h("span", { class: "muted" }, spaces.size > 1 ? "jobs on different spaces: times in ms" : optimum ? "normalised to the recording's optimum" : "")),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Best so far vs measurements"), plotA),
      h("div", { class: "card" }, h("h2", {}, "Best so far vs tuning time"), plotB)),
    h("div", { class: "card" }, summary),
    h("details", { class: "card", open: jobs.length ? null : true }, h("summary", {}, "Choose jobs"), h("div", { class: "picker" }, picker)),
  );
  drawChart(plotA, mk("measurements"));
  drawChart(plotB, mk("time"));
  if (jobs.some((j) => LIVE.has(j.state))) schedule(() => showCompare(params), 2000);
}

// -- routing -------------------------------------------------------------------------------

async function route() {
  generation += 1;
  clearTimeout(timer);
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.getAttribute("href") === `#${path.split("/").slice(0, 2).join("/")}` || (path === "/" && a.getAttribute("href") === "#/"));
  try {
    const job = path.match(/^\/jobs\/(\d+)$/);
    if (job) await showJob(Number(job[1]));
    else if (path === "/compare") await showCompare(new URLSearchParams(query || ""));
    else await showJobs();
  } catch (error) {
    showError(error);
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("resize", () => { clearTimeout(window.__resize); window.__resize = setTimeout(route, 200); });
route();
