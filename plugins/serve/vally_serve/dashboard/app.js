// The vally dashboard: plain JavaScript over the REST API (/api/...), no build step.
// Pages are routed by the URL hash: #/ (runs), #/runs/ID, #/runs/ID/experiment,
// #/outcomes/ID, #/outcomes (across runs), #/history?stimulus=NAME, #/compare?runs=A,B,
// #/side?stimulus=NAME&left=A&right=B (one stimulus's trials side by side).
// Every text from the API goes into the page as text (never as HTML).
"use strict";

const app = document.getElementById("app");
const statusLine = document.getElementById("status");

// ---------------------------------------------------------------- helpers

function h(tag, attrs, ...children) {
  const ns = ["svg", "rect", "line", "text", "polyline", "circle", "g", "title", "path"].includes(tag)
    ? "http://www.w3.org/2000/svg" : null;
  const el = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "width%") el.style.width = value + "%";
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

async function api(path, params) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  statusLine.textContent = "loading…";
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  statusLine.textContent = "";
  if (!response.ok) {
    const err = new Error(body.error ? body.error.message : response.statusText);
    err.code = body.error ? body.error.code : "http_error";
    throw err;
  }
  return body;
}

const pct = (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(1) + "%");
const num = (v, digits = 0) => (v === null || v === undefined ? "–" : Number(v).toLocaleString(undefined, { maximumFractionDigits: digits }));
const ms = (v) => {
  if (v === null || v === undefined) return "–";
  if (v < 1000) return Math.round(v) + " ms";
  if (v < 60000) return (v / 1000).toFixed(1) + " s";
  return (v / 60000).toFixed(1) + " min";
};
const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$|Z$/, "") : "–");
const signed = (v, fmt) => (v === null || v === undefined ? "–" : (v > 0 ? "+" : "") + fmt(v));
const badge = (verdict) => h("span", { class: "badge " + verdict, "data-verdict": verdict }, verdict);
const bar = (rate) => h("span", { class: "bar" }, h("span", { "width%": rate === null ? 0 : rate * 100 }));
const link = (href, text, attrs) => h("a", { href, ...(attrs || {}) }, text);
const runHref = (id) => "#/runs/" + encodeURIComponent(id);
const outcomeHref = (id) => "#/outcomes/" + encodeURIComponent(id);
const historyHref = (stimulus, evalName) => "#/history?" + new URLSearchParams({ stimulus, eval: evalName || "" });

function card(label, value, testid) {
  return h("div", { class: "card", "data-testid": testid }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

const NUMERIC_HEADER = /^(#|Trials|Pass|Score|Duration|Tokens|Calls|Failures|Δ|Mean|Graded|Errored|Failed|Runs|Share|Rank|Baseline|Candidate|Interval|Paired)/;

// A table whose column headers sort its rows (click again: the other way), with CSV and
// JSON downloads of what it shows. `attrs` go on the <table>; `attrs["data-name"]` names
// the downloaded files.
function table(headers, rows, attrs) {
  const body = h("tbody", {}, rows);
  const el = h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((x, i) => h("th", {
      class: (NUMERIC_HEADER.test(x) ? "num " : "") + (x ? "sortable" : ""), "data-column": i,
      title: x ? "Sort by " + x : null, onclick: x ? () => sortTable(el, i) : null,
    }, x)))),
    body);
  const name = (attrs && attrs["data-name"]) || (attrs && attrs["data-testid"]) || "table";
  const tools = h("div", { class: "table-tools" },
    h("button", { class: "linkish", "data-testid": "download-csv", onclick: () => download(name + ".csv", "text/csv", tableCsv(el)) }, "CSV"),
    h("button", { class: "linkish", "data-testid": "download-json", onclick: () => download(name + ".json", "application/json", JSON.stringify(tableRecords(el), null, 2) + "\n") }, "JSON"));
  return h("div", { class: "table-box" }, tools, el);
}

// A cell's value for sorting: a number when its text reads as one (12.5%, 1.2 s, 3,400,
// +0.125), else its text; "–" (no value) sorts last either way.
function sortKey(td) {
  const text = (td.dataset.sort ?? td.textContent).trim();
  if (text === "" || text === "–") return null;
  const m = /^([+-]?[\d,]*\.?\d+)\s*(%|ms|s|min)?(\s|$)/.exec(text);
  if (m) {
    const scale = { "%": 1, ms: 1, s: 1000, min: 60000 }[m[2]] || 1;
    return parseFloat(m[1].replace(/,/g, "")) * scale;
  }
  return text.toLocaleLowerCase();
}

function sortTable(el, column) {
  const th = el.tHead.rows[0].cells[column];
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  for (const other of el.tHead.rows[0].cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const rows = [...el.tBodies[0].rows].map((tr, i) => ({ tr, i, key: tr.cells[column] ? sortKey(tr.cells[column]) : null }));
  rows.sort((a, b) => {
    if (a.key === null || b.key === null) return a.key === b.key ? a.i - b.i : a.key === null ? 1 : -1;
    const order = typeof a.key === typeof b.key ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : typeof a.key === "number" ? -1 : 1;
    return (ascending ? order : -order) || a.i - b.i;
  });
  el.tBodies[0].append(...rows.map((r) => r.tr));
}

// The table as shown: one record per row, by column header (columns without one left out).
function tableRecords(el) {
  const headers = [...el.tHead.rows[0].cells].map((th) => th.textContent.trim());
  return [...el.tBodies[0].rows].map((tr) => {
    const record = {};
    headers.forEach((name, i) => { if (name) record[name] = tr.cells[i] ? tr.cells[i].textContent.replace(/\s+/g, " ").trim() : ""; });
    return record;
  });
}

function tableCsv(el) {
  const records = tableRecords(el);
  const headers = [...el.tHead.rows[0].cells].map((th) => th.textContent.trim()).filter(Boolean);
  const quote = (v) => (/[",\r\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v);
  return [headers, ...records.map((r) => headers.map((k) => r[k]))].map((line) => line.map(quote).join(",")).join("\r\n") + "\r\n";
}

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type: type + ";charset=utf-8" }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function show(...nodes) {
  app.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

function setNav(name) {
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === name);
}

function fail(error) {
  show(h("div", { class: "error-box", "data-testid": "error" }, h("strong", {}, "Error"), " ", error.code ? "[" + error.code + "] " : "", error.message));
}

// A list with cursor pagination: keeps the cursors of earlier pages for "Previous".
function pager(load, render) {
  const state = { cursors: [null], index: 0 };
  const box = h("div", {});
  async function go(index) {
    state.index = index;
    const body = await load(state.cursors[index]);
    state.cursors[index + 1] = body.page.nextCursor;
    const page = body.page;
    const from = index * page.limit + (page.total ? 1 : 0);
    const to = index * page.limit + (render.count ? render.count(body) : page.limit);
    box.replaceChildren(
      render(body),
      h("div", { class: "pager" },
        h("button", { onclick: () => go(index - 1), disabled: index === 0, "data-testid": "prev-page" }, "‹ Previous"),
        h("span", { "data-testid": "page-info" }, `${num(from)}–${num(Math.min(to, page.total))} of ${num(page.total)}`),
        h("button", { onclick: () => go(index + 1), disabled: !page.hasMore, "data-testid": "next-page" }, "Next ›")));
  }
  box.reload = () => { state.cursors = [null]; return go(0).catch(fail); };
  return box;
}

// ---------------------------------------------------------------- charts

function durationChart(bins) {
  if (!bins.length) return h("p", { class: "muted" }, "No durations recorded.");
  const W = 560, H = 180, pad = 28;
  const order = ["pass", "fail", "error", "ungraded"];
  const totals = bins.map((b) => order.reduce((s, k) => s + (b.counts[k] || 0), 0));
  const max = Math.max(1, ...totals);
  const bw = (W - pad * 2) / bins.length;
  const svg = h("svg", { viewBox: `0 0 ${W} ${H + 24}`, width: W, role: "img", "aria-label": "Duration histogram", "data-testid": "duration-chart" });
  svg.append(h("line", { x1: pad, y1: H, x2: W - pad, y2: H, stroke: "#d0d7de" }));
  const colors = { pass: "#1a7f37", fail: "#cf222e", error: "#9a6700", ungraded: "#8c959f" };
  bins.forEach((b, i) => {
    let y = H;
    for (const k of order) {
      const c = b.counts[k] || 0;
      if (!c) continue;
      const hgt = (c / max) * (H - 10);
      y -= hgt;
      svg.append(h("rect", { x: pad + i * bw + 1, y, width: Math.max(1, bw - 2), height: hgt, fill: colors[k] },
        h("title", {}, `${ms(b.lowMs)}–${ms(b.highMs)}: ${c} ${k}`)));
    }
  });
  svg.append(h("text", { x: pad, y: H + 16 }, ms(bins[0].lowMs)));
  svg.append(h("text", { x: W - pad, y: H + 16, "text-anchor": "end" }, ms(bins[bins.length - 1].highMs)));
  svg.append(h("text", { x: pad - 4, y: 12, "text-anchor": "end" }, String(max)));
  const legend = h("div", { class: "legend" }, order.map((k) => h("span", {}, h("i", { class: "swatch-" + k }), k)));
  return h("div", {}, svg, legend);
}

function lineChart(points, label) {
  const W = 720, H = 180, pad = 34;
  const svg = h("svg", { viewBox: `0 0 ${W} ${H + 24}`, width: W, role: "img", "aria-label": label, "data-testid": "history-chart" });
  svg.append(h("line", { x1: pad, y1: H, x2: W - pad, y2: H, stroke: "#d0d7de" }));
  svg.append(h("line", { x1: pad, y1: 10, x2: pad, y2: H, stroke: "#d0d7de" }));
  svg.append(h("text", { x: pad - 4, y: 14, "text-anchor": "end" }, "100%"));
  svg.append(h("text", { x: pad - 4, y: H, "text-anchor": "end" }, "0%"));
  const usable = points.filter((p) => p.passRate !== null);
  const step = usable.length > 1 ? (W - pad * 2) / (usable.length - 1) : 0;
  const xy = usable.map((p, i) => [pad + i * step + (usable.length > 1 ? 0 : (W - pad * 2) / 2), H - p.passRate * (H - 10)]);
  if (xy.length > 1) svg.append(h("polyline", { points: xy.map((p) => p.join(",")).join(" "), fill: "none", stroke: "#1f6feb", "stroke-width": 2 }));
  xy.forEach(([x, y], i) => svg.append(h("circle", { cx: x, cy: y, r: 4, fill: "#1f6feb" },
    h("title", {}, `${usable[i].runName} (${when(usable[i].startedAt)}): ${pct(usable[i].passRate)}`))));
  return svg;
}

function intervalChart(variants) {
  const rows = variants.filter((v) => !v.isBaseline && v.deltas.passRate);
  if (!rows.length) return h("p", { class: "muted" }, "No variant to compare with the baseline.");
  const W = 560, rowH = 28, pad = 140, H = rows.length * rowH + 30;
  const lo = Math.min(-0.1, ...rows.map((v) => v.deltas.passRate.ciLow ?? v.deltas.passRate.delta ?? 0));
  const hi = Math.max(0.1, ...rows.map((v) => v.deltas.passRate.ciHigh ?? v.deltas.passRate.delta ?? 0));
  const x = (v) => pad + ((v - lo) / (hi - lo)) * (W - pad - 20);
  const svg = h("svg", { viewBox: `0 0 ${W} ${H}`, width: W, role: "img", "aria-label": "Pass-rate deltas with 95% intervals", "data-testid": "delta-chart" });
  svg.append(h("line", { x1: x(0), y1: 4, x2: x(0), y2: H - 20, stroke: "#8c959f", "stroke-dasharray": "3,3" }));
  rows.forEach((v, i) => {
    const d = v.deltas.passRate, y = 18 + i * rowH;
    svg.append(h("text", { x: pad - 8, y: y + 4, "text-anchor": "end" }, v.name));
    if (d.ciLow !== null) svg.append(h("line", { x1: x(d.ciLow), y1: y, x2: x(d.ciHigh), y2: y, stroke: "#1f6feb", "stroke-width": 2 }));
    if (d.delta !== null) svg.append(h("circle", { cx: x(d.delta), cy: y, r: 5, fill: d.significant ? (d.delta > 0 ? "#1a7f37" : "#cf222e") : "#1f6feb" },
      h("title", {}, `${v.name}: ${signed(d.delta, pct)} [${pct(d.ciLow)}, ${pct(d.ciHigh)}]`)));
  });
  svg.append(h("text", { x: x(lo), y: H - 4 }, signed(lo, pct)));
  svg.append(h("text", { x: x(hi), y: H - 4, "text-anchor": "end" }, signed(hi, pct)));
  return svg;
}

// ---------------------------------------------------------------- pages

async function runsPage() {
  setNav("runs");
  const kind = h("select", { "data-testid": "kind-filter" }, h("option", { value: "" }, "All runs"), h("option", { value: "eval" }, "Evals"), h("option", { value: "experiment" }, "Experiments"));
  const q = h("input", { type: "search", placeholder: "Filter by name", "data-testid": "run-search" });
  const picked = new Set();
  const compare = h("button", { disabled: true, "data-testid": "compare-runs", onclick: () => { location.hash = "#/compare?runs=" + [...picked].join(","); } }, "Compare selected");
  const list = pager((cursor) => api("/api/runs", { kind: kind.value, q: q.value, cursor, limit: 25 }), (body) => {
    if (!body.runs.length) return h("p", { class: "muted" }, "No runs. Ingest some with: vally ingest <run-dir> --store <db>");
    return table(["", "Run", "Kind", "Started", "Trials", "Pass rate", "Errored", "Duration"], body.runs.map((r) =>
      h("tr", { "data-testid": "run-row", "data-run-id": r.id },
        h("td", {}, h("input", { type: "checkbox", "aria-label": "select " + r.name, onchange: (e) => { e.target.checked ? picked.add(r.id) : picked.delete(r.id); compare.disabled = picked.size < 2; } })),
        h("td", {}, link(runHref(r.id), r.name, { "data-testid": "run-link" }), h("div", { class: "muted" }, r.id)),
        h("td", {}, h("span", { class: "badge kind" }, r.kind)),
        h("td", {}, when(r.startedAt)),
        h("td", { class: "num" }, num(r.trials)),
        h("td", { class: "num" }, bar(r.passRate), pct(r.passRate)),
        h("td", { class: "num" }, num(r.errored)),
        h("td", { class: "num" }, ms(r.durationMs)))), { "data-name": "runs" });
  });
  kind.addEventListener("change", () => list.reload());
  q.addEventListener("change", () => list.reload());
  show(h("h1", {}, "Runs"), h("div", { class: "sub" }, "Every run in the store, newest first."),
    h("div", { class: "panel" }, h("div", { class: "filters" }, kind, q, compare), list));
  await list.reload();
}

function statCards(run) {
  return h("div", { class: "cards", "data-testid": "run-stats" },
    card("Pass rate", pct(run.passRate), "stat-pass-rate"),
    card("pass@k", pct(run.passAtK), "stat-pass-at-k"),
    card("pass^k", pct(run.passToTheK), "stat-pass-to-the-k"),
    card("Mean score", run.meanScore === null ? "–" : run.meanScore.toFixed(3), "stat-score"),
    card("Trials", num(run.trials), "stat-trials"),
    card("Passed / failed", `${num(run.passed)} / ${num(run.failed)}`, "stat-passed"),
    card("Errored", num(run.errored), "stat-errored"),
    card("Mean duration", ms(run.durationMs), "stat-duration"),
    card("Mean tokens", num(run.tokens), "stat-tokens"));
}

// cellHref(row, column, axis): where a cell leads (null: nowhere).
function matrixPanel(runId, axisDefault, cellHref) {
  const metrics = h("select", { "data-testid": "matrix-metric" });
  const holder = pager((cursor) => api(`/api/runs/${encodeURIComponent(runId)}/matrix`, { metric: metrics.value || "passRate", cursor, limit: 25 }), (body) => {
    const fmt = body.metric.unit === "ratio" ? pct : body.metric.unit === "ms" ? ms : (v) => num(v, 1);
    return table(["Eval", "Stimulus", ...body.columns.map((c) => c || "(none)")], body.rows.map((row) =>
      h("tr", { "data-testid": "matrix-row" },
        h("td", {}, row.evalName),
        h("td", {}, link(historyHref(row.stimulus, row.evalName), row.stimulus, { title: "History of this stimulus" })),
        body.columns.map((c) => {
          const cell = row.cells[c];
          const v = cell ? cell.value : null;
          const href = cell && cellHref ? cellHref(row, c, body.axis) : null;
          const td = h("td", { class: "cell", title: cell ? `${cell.trials} trials, ${cell.graded} graded` : "not run" },
            cell ? (href ? link(href, fmt(v), { "data-testid": "matrix-side-link", title: "These trials side by side with the baseline's" }) : fmt(v)) : "");
          if (cell && v !== null && body.metric.unit === "ratio") {
            const good = body.metric.higherIsBetter ? v : 1 - v;
            td.style.background = `hsl(${Math.round(good * 120)}, 70%, 90%)`;
          }
          return td;
        }))), { "data-name": "score-matrix" });
  });
  api("/api/metrics").then((body) => {
    metrics.replaceChildren(...body.metrics.map((m) => h("option", { value: m.name, title: m.description }, m.label)));
    metrics.addEventListener("change", () => holder.reload());
    holder.reload();
  }).catch(fail);
  return h("div", { class: "panel" }, h("div", { class: "filters" }, h("h2", {}, "Score matrix"), metrics,
    h("span", { class: "muted" }, `stimulus × ${axisDefault}`)), holder);
}

function outcomesPanel(runId, detail, graderNames) {
  const verdict = h("select", { "data-testid": "verdict-filter" }, ["", "pass", "fail", "error", "ungraded"].map((v) => h("option", { value: v }, v || "Any verdict")));
  const axis = detail && detail.variants.length > 1 ? "variant" : "model";
  const values = detail ? (axis === "variant" ? detail.variants : detail.models) : [];
  const column = h("select", { "data-testid": "column-filter" }, h("option", { value: "__any" }, "Any " + axis), values.map((v) => h("option", { value: v }, v || "(none)")));
  const q = h("input", { type: "search", placeholder: "Stimulus contains…", "data-testid": "stimulus-filter" });
  const grader = h("select", { "data-testid": "grader-filter", title: "Only the trials this grader judged so" }, h("option", { value: "" }, "Any grader"),
    (graderNames || []).map((g) => h("option", { value: g }, g)));
  const graderVerdict = h("select", { "data-testid": "grader-verdict-filter", disabled: true },
    [["fail", "failed"], ["pass", "passed"], ["error", "errored"], ["any", "judged"]].map(([v, label]) => h("option", { value: v }, label)));
  const errorText = h("input", { type: "search", placeholder: "Error contains…", "data-testid": "error-filter" });
  grader.addEventListener("change", () => { graderVerdict.disabled = !grader.value; });
  const list = pager((cursor) => {
    const params = { verdict: verdict.value, q: q.value, error: errorText.value, cursor, limit: 25 };
    if (grader.value) Object.assign(params, { grader: grader.value, graderVerdict: graderVerdict.value });
    if (column.value !== "__any") params[axis] = column.value;
    if (!runId) params.order = "desc";
    return api(runId ? `/api/runs/${encodeURIComponent(runId)}/outcomes` : "/api/outcomes", params);
  }, (body) => table(["Stimulus", runId ? "Eval" : "Run", "Model", "Variant", "#", "Verdict", "Score", "Duration", "Tokens", "Calls"], body.outcomes.map((o) =>
    h("tr", { "data-testid": "outcome-row", "data-verdict": o.verdict },
      h("td", {}, link(outcomeHref(o.id), o.stimulus, { "data-testid": "outcome-link" })),
      h("td", {}, runId ? o.evalName : link(runHref(o.runId), o.runId.slice(0, 8))),
      h("td", {}, o.model || "–"), h("td", {}, o.variant || "–"),
      h("td", { class: "num" }, o.trialIndex), h("td", {}, badge(o.verdict)),
      h("td", { class: "num" }, o.score === null ? "–" : o.score.toFixed(2)),
      h("td", { class: "num" }, ms(o.durationMs)), h("td", { class: "num" }, num(o.tokens)),
      h("td", { class: "num" }, num(o.toolCalls)))), { "data-name": "outcomes", "data-testid": "outcomes-table" }));
  for (const el of [verdict, column, grader, graderVerdict]) el.addEventListener("change", () => list.reload());
  for (const el of [q, errorText]) el.addEventListener("change", () => list.reload());
  list.reload();
  return h("div", { class: "panel", "data-testid": "outcomes-panel" }, h("h2", {}, "Outcomes"),
    h("div", { class: "filters" }, verdict, runId ? column : null, q, graderNames && graderNames.length ? [grader, graderVerdict] : null, errorText), list);
}

async function runPage(runId) {
  setNav("runs");
  const base = `/api/runs/${encodeURIComponent(runId)}`;
  const [detail, ranking, graders, tools] = await Promise.all([api(base), api(base + "/ranking"), api(base + "/graders"), api(base + "/tools")]);
  const run = detail.run;
  const rankingTable = table(["Rank", ranking.axis === "variant" ? "Variant" : "Model", "Pass rate", "pass@k", "Mean score", "Trials", "Errored", "Duration", "Tokens"], ranking.entries.map((e) =>
    h("tr", { "data-testid": "ranking-row" }, h("td", { class: "num" }, e.rank), h("td", {}, e.name || "(none)"),
      h("td", { class: "num" }, bar(e.passRate), pct(e.passRate)), h("td", { class: "num" }, pct(e.passAtK)),
      h("td", { class: "num" }, e.meanScore === null ? "–" : e.meanScore.toFixed(3)), h("td", { class: "num" }, num(e.trials)),
      h("td", { class: "num" }, num(e.errored)), h("td", { class: "num" }, ms(e.durationMs)), h("td", { class: "num" }, num(e.tokens)))), { "data-name": "ranking", "data-testid": "ranking-table" });
  const graderTable = graders.graders.length ? table(["Grader", "Type", "Failed", "Errored", "Failures", "Mean score", "Fails most on"], graders.graders.map((g) =>
    h("tr", { "data-testid": "grader-row" }, h("td", {}, g.name, g.required ? h("span", { class: "muted" }, " (required)") : null), h("td", {}, g.type),
      h("td", { class: "num" }, num(g.failed)), h("td", { class: "num" }, num(g.errored)), h("td", { class: "num" }, pct(g.failRate)),
      h("td", { class: "num" }, g.meanScore === null ? "–" : g.meanScore.toFixed(2)),
      h("td", {}, g.topFailingStimuli.map((s) => h("div", {}, `${s.stimulus} (${s.failed})`))))), { "data-name": "grader-failures" }) : h("p", { class: "muted" }, "No grader results.");
  const toolTable = tools.tools.length ? table(["Tool", "Calls", "Failures", "Trials", "Calls per trial", "Share of trials"], tools.tools.map((t) =>
    h("tr", { "data-testid": "tool-row" }, h("td", {}, t.tool), h("td", { class: "num" }, num(t.calls)), h("td", { class: "num" }, num(t.failures)),
      h("td", { class: "num" }, num(t.trials)), h("td", { class: "num" }, num(t.callsPerTrial, 2)), h("td", { class: "num" }, pct(t.share)))), { "data-name": "tool-usage" }) : h("p", { class: "muted" }, "No tool calls.");
  show(
    h("div", { class: "crumbs" }, link("#/", "Runs"), " / ", run.name),
    h("h1", { "data-testid": "run-title" }, run.name, " ", h("span", { class: "badge kind" }, run.kind)),
    h("div", { class: "sub" }, `${run.id} · started ${when(run.startedAt)} · ${detail.stimulusCount} stimuli · evals: ${detail.evals.join(", ")} · vally ${run.vallyVersion || "?"}`,
      run.kind === "experiment" ? h("span", {}, " · ", link(runHref(run.id) + "/experiment", "Compare variants with the baseline →", { "data-testid": "experiment-link" })) : null),
    statCards(run),
    h("div", { class: "fit-row" },
      h("div", { class: "panel grow" }, h("h2", {}, "Duration"), durationChart(detail.durationHistogram)),
      h("div", { class: "panel fit", "data-testid": "ranking-panel" }, h("h2", {}, "Ranking"), rankingTable)),
    matrixPanel(runId, ranking.axis),
    h("div", { class: "grid2" },
      h("div", { class: "panel", "data-testid": "graders-panel" }, h("h2", {}, "Grader failures"), graderTable),
      h("div", { class: "panel", "data-testid": "tools-panel" }, h("h2", {}, "Tool usage"), toolTable)),
    outcomesPanel(runId, detail, [...new Set(graders.graders.map((g) => g.name))]));
}

function renderEvent(e) {
  const d = e.data || {};
  const head = h("div", { class: "head" }, h("span", { class: "type" }, e.type || "event"), h("span", {}, "turn " + (e.turn ?? "–")), h("span", {}, when(e.timestamp)));
  const cls = "event " + (e.type || "") + (e.type === "tool_result" && d.success === false ? " failed" : "");
  let body;
  switch (e.type) {
    case "user_message": case "assistant_message": case "reasoning":
      body = h("div", { class: "text" }, d.content ?? ""); break;
    case "tool_call":
      body = h("div", {}, h("strong", {}, d.toolName), d.server ? h("span", { class: "muted" }, " @" + d.server) : null,
        h("pre", { "data-testid": "tool-arguments" }, typeof d.arguments === "string" ? d.arguments : JSON.stringify(d.arguments, null, 2))); break;
    case "tool_result":
      body = h("div", {}, h("strong", {}, d.toolName), " ", d.success === false ? badge("fail") : badge("pass"),
        h("pre", {}, typeof d.result === "string" ? d.result : JSON.stringify(d.result, null, 2))); break;
    case "token_usage":
      body = h("span", { class: "muted" }, `${d.model || ""} in ${num(d.inputTokens)} · out ${num(d.outputTokens)}` + (d.cacheReadTokens ? ` · cached ${num(d.cacheReadTokens)}` : "")); break;
    case "error":
      body = h("div", { class: "text" }, (d.code ? `[${d.code}] ` : "") + (d.message || ""), d.fatal ? " (fatal)" : ""); break;
    case "skill_activation":
      body = h("span", {}, d.skillName); break;
    case "turn_start": case "turn_end":
      body = null; break;
    default:
      body = h("pre", {}, JSON.stringify(e, null, 2));
  }
  return h("div", { class: cls, "data-testid": "event", "data-type": e.type || "" }, head, body);
}

// A tool call and its result as one card: the call's arguments, the result inside.
function renderToolCard(call, result) {
  const d = call.data || {};
  const r = result ? result.data || {} : null;
  const failed = r && r.success === false;
  const head = h("div", { class: "head" }, h("span", { class: "type" }, "tool call"), h("span", {}, "turn " + (call.turn ?? "–")), h("span", {}, when(call.timestamp)));
  const inner = r
    ? h("div", { class: "tool-result" + (failed ? " failed" : ""), "data-testid": "tool-result" },
      h("div", { class: "muted" }, "result ", failed ? badge("fail") : badge("pass"), result.timestamp ? " · " + when(result.timestamp) : ""),
      h("pre", {}, typeof r.result === "string" ? r.result : JSON.stringify(r.result, null, 2)))
    : h("div", { class: "tool-result missing muted", "data-testid": "tool-result-missing" }, "No result shown for this call.");
  return h("div", { class: "event tool_call" + (failed ? " failed" : ""), "data-testid": "event", "data-type": "tool_call", "data-tool-call-id": d.toolCallId || "" },
    head, h("div", {}, h("strong", {}, d.toolName), d.server ? h("span", { class: "muted" }, " @" + d.server) : null,
      h("pre", { "data-testid": "tool-arguments" }, typeof d.arguments === "string" ? d.arguments : JSON.stringify(d.arguments, null, 2))),
    inner);
}

// The events of a page with each tool call folded together with its result (a result
// whose call is not on the page stays an event of its own).
function foldedEvents(events) {
  const calls = new Map();
  const results = new Map();
  for (const e of events) {
    const id = e.data && e.data.toolCallId;
    if (!id) continue;
    if (e.type === "tool_call" && !calls.has(id)) calls.set(id, e);
    else if (e.type === "tool_result" && calls.has(id) && !results.has(id)) results.set(id, e);
  }
  const folded = new Set(results.values());
  return events.filter((e) => !folded.has(e)).map((e) =>
    e.type === "tool_call" && calls.get(e.data && e.data.toolCallId) === e ? renderToolCard(e, results.get(e.data.toolCallId)) : renderEvent(e));
}

// Wrap every occurrence of `needle` (ignoring case) in the text under `root` in a <mark>.
function markText(root, needle) {
  if (!needle) return 0;
  const lower = needle.toLocaleLowerCase();
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  let marks = 0;
  for (const node of nodes) {
    const text = node.nodeValue;
    const hay = text.toLocaleLowerCase();
    let at = hay.indexOf(lower);
    if (at < 0) continue;
    const parts = [];
    let from = 0;
    while (at >= 0) {
      parts.push(document.createTextNode(text.slice(from, at)), h("mark", { "data-testid": "transcript-mark" }, text.slice(at, at + needle.length)));
      marks += 1;
      from = at + needle.length;
      at = hay.indexOf(lower, from);
    }
    parts.push(document.createTextNode(text.slice(from)));
    node.replaceWith(...parts);
  }
  return marks;
}

function trialNav(body) {
  const step = (id, label, testid) => id
    ? link(outcomeHref(id), label, { class: "button", "data-testid": testid })
    : h("span", { class: "button disabled", "data-testid": testid, "aria-disabled": "true" }, label);
  return h("div", { class: "trial-nav", "data-testid": "trial-nav" },
    step(body.previousId, "‹ Previous trial", "prev-trial"), step(body.nextId, "Next trial ›", "next-trial"),
    h("span", { class: "muted" }, "in the order of the run's outcomes"));
}

async function outcomePage(outcomeId) {
  setNav("outcomes");
  const body = await api(`/api/outcomes/${encodeURIComponent(outcomeId)}`);
  const o = body.outcome, rec = body.record, grade = rec.gradeResult, traj = rec.trajectory || {};
  const usage = (traj.metrics || {}).tokenUsage || {};
  const graderRows = grade && grade.details ? grade.details.map((g) => h("tr", { "data-testid": "grader-detail" },
    h("td", {}, g.name), h("td", {}, g.type), h("td", {}, g.status === "error" ? badge("error") : badge(g.passed ? "pass" : "fail")),
    h("td", { class: "num" }, Number(g.score).toFixed(2)), h("td", {}, h("div", { class: "text" }, g.evidence || "")))) : [];
  const search = h("input", { type: "search", placeholder: "Search the transcript", "data-testid": "transcript-search" });
  const matches = h("span", { class: "muted", "data-testid": "transcript-matches" });
  const events = pager((cursor) => api(`/api/outcomes/${encodeURIComponent(outcomeId)}/trajectory`, { cursor, limit: 200, q: search.value }),
    Object.assign((page) => {
      const needle = search.value;
      matches.textContent = needle ? `${num(page.page.total)} event${page.page.total === 1 ? "" : "s"} match “${needle}”` : "";
      if (!page.events.length) return h("p", { class: "muted", "data-testid": "transcript-empty" }, needle ? "No event matches." : "No trajectory events were recorded.");
      const list = h("div", { class: "events", "data-testid": "trajectory" }, foldedEvents(page.events));
      markText(list, needle);
      return list;
    }, { count: (page) => page.events.length }));
  search.addEventListener("change", () => events.reload());
  events.reload();
  // An experiment variant's trial: a way to its stimulus's trials beside the baseline's.
  const beside = h("span", { "data-testid": "beside-baseline" });
  if (o.variant) api(`/api/runs/${encodeURIComponent(o.runId)}`).then((detail) => {
    const baseline = detail.run.baseline;
    if (baseline && baseline !== o.variant) beside.replaceChildren(" · ", link(sideHref(o.evalName, o.stimulus, { run: o.runId, variant: baseline }, { run: o.runId, variant: o.variant }),
      "side by side with the baseline", { "data-testid": "beside-baseline-link" }));
  }).catch(() => {});
  const prompt = rec.stimulus ? (rec.stimulus.prompt || (rec.stimulus.turns || []).map((t) => t.prompt || JSON.stringify(t)).join("\n---\n")) : "";
  show(
    h("div", { class: "crumbs" }, link("#/", "Runs"), " / ", link(runHref(o.runId), body.runName), " / ", o.stimulus),
    trialNav(body),
    h("h1", { "data-testid": "outcome-title" }, o.stimulus, " ", badge(o.verdict)),
    h("div", { class: "sub" }, `${o.trialId} · ${o.model || "no model"}${o.variant ? " · variant " + o.variant : ""} · ${when(o.startedAt)} · `,
      link(historyHref(o.stimulus, o.evalName), "history of this stimulus"), beside),
    h("div", { class: "cards" },
      card("Score", o.score === null ? "–" : o.score.toFixed(3)), card("Duration", ms(o.durationMs)),
      card("Tokens", num(o.tokens)), card("Input / output", `${num(usage.inputTokens)} / ${num(usage.outputTokens)}`),
      card("Tool calls", num(o.toolCalls)), card("Turns", num(o.turns)), card("End", o.endReason || o.status)),
    rec.error ? h("div", { class: "error-box", "data-testid": "trial-error" }, h("strong", {}, `${rec.error.phase}: ${rec.error.code}`), h("div", { class: "text" }, rec.error.message)) : null,
    h("div", { class: "panel" }, h("h2", {}, "Graders"), graderRows.length ? table(["Grader", "Type", "Verdict", "Score", "Evidence"], graderRows) : h("p", { class: "muted" }, "Not graded."),
      grade && grade.constraintViolations && grade.constraintViolations.length ? h("div", { class: "error-box" }, "Constraint violations: " + grade.constraintViolations.join("; ")) : null),
    h("div", { class: "panel" }, h("h2", {}, "Prompt"), h("div", { class: "text" }, prompt)),
    h("div", { class: "panel" }, h("h2", {}, `Trajectory (${body.eventCount} events)`), h("div", { class: "filters" }, search, matches), events),
    traj.output ? h("div", { class: "panel" }, h("h2", {}, "Final output"), h("div", { class: "text" }, traj.output)) : null,
    h("div", { class: "panel", "data-testid": "artifacts" }, h("h2", {}, "Artifacts"), body.artifacts.length ? body.artifacts.map((a) =>
      h("details", {}, h("summary", {}, `${a.path} (${num(a.size)} bytes)`), a.text !== null ? h("pre", {}, a.text) : h("p", { class: "muted" }, "binary or large: see the trial folder")))
      : h("p", { class: "muted" }, "No artifacts."), body.trialDir ? h("p", { class: "muted" }, "Trial folder: " + body.trialDir) : null),
    traj.diff ? h("div", { class: "panel" }, h("h2", {}, "Workspace diff"), h("pre", {}, traj.diff)) : null);
}

async function experimentPage(runId) {
  setNav("runs");
  const body = await api(`/api/runs/${encodeURIComponent(runId)}/experiment`);
  const fmtDelta = (d, fmt) => {
    if (!d || d.delta === null) return "–";
    const cls = d.significant ? (d.delta > 0 ? "delta up" : "delta down") : "delta";
    return h("span", { class: cls, title: d.highVariance ? "high variance across stimuli" : "" }, signed(d.delta, fmt),
      h("span", { class: "muted" }, d.ciLow === null ? ` (${d.stimuli} stimulus: no interval)` : ` [${signed(d.ciLow, fmt)}, ${signed(d.ciHigh, fmt)}]`));
  };
  const rows = body.variants.map((v) => h("tr", { "data-testid": "variant-row", "data-variant": v.name },
    h("td", {}, v.name, v.isBaseline ? h("span", { class: "badge kind" }, " baseline") : null),
    h("td", { class: "num" }, num(v.trials)), h("td", { class: "num" }, bar(v.passRate), pct(v.passRate)),
    h("td", {}, v.isBaseline ? "–" : fmtDelta(v.deltas.passRate, pct)),
    h("td", { class: "num" }, v.meanScore === null ? "–" : v.meanScore.toFixed(3)),
    h("td", {}, v.isBaseline ? "–" : fmtDelta(v.deltas.meanScore, (x) => x.toFixed(3))),
    h("td", {}, v.isBaseline ? "–" : fmtDelta(v.deltas.durationMs, ms)),
    h("td", {}, v.isBaseline ? "–" : fmtDelta(v.deltas.tokens, (x) => num(x))),
    h("td", { class: "num" }, v.mcnemar ? (v.mcnemar.pValue === null ? "–" : v.mcnemar.pValue.toFixed(3)) : "–")));
  show(
    h("div", { class: "crumbs" }, link("#/", "Runs"), " / ", link(runHref(runId), body.run.name), " / experiment"),
    h("h1", { "data-testid": "experiment-title" }, body.experiment || body.run.name),
    h("div", { class: "sub" }, `Variants against the baseline "${body.baseline}". Deltas are means over stimuli with 95% t intervals; green or red when the interval excludes zero.`),
    h("div", { class: "panel" }, table(["Variant", "Trials", "Pass rate", "Δ pass rate [95% CI]", "Mean score", "Δ score", "Δ duration", "Δ tokens", "McNemar p"], rows, { "data-testid": "variants-table" })),
    h("div", { class: "panel" }, h("h2", {}, "Pass-rate delta against the baseline"), intervalChart(body.variants)),
    matrixPanel(runId, "variant", (row, column, axis) => axis === "variant" && column !== body.baseline
      ? sideHref(row.evalName, row.stimulus, { run: runId, variant: body.baseline }, { run: runId, variant: column }) : null));
}

async function historyPage(params) {
  setNav("history");
  const stimulus = params.get("stimulus");
  const search = h("input", { type: "search", placeholder: "Find a stimulus", value: stimulus || "", "data-testid": "stimulus-search" });
  const picker = pager((cursor) => api("/api/stimuli", { q: search.value, cursor, limit: 15 }), (body) =>
    table(["Eval", "Stimulus", "Runs"], body.stimuli.map((s) => h("tr", {}, h("td", {}, s.evalName),
      h("td", {}, link(historyHref(s.stimulus, s.evalName), s.stimulus, { "data-testid": "stimulus-link" })), h("td", { class: "num" }, num(s.runs))))));
  search.addEventListener("change", () => picker.reload());
  const parts = [h("h1", {}, stimulus ? "History: " + stimulus : "Stimulus history")];
  if (stimulus) {
    const query = { stimulus, eval: params.get("eval") || undefined, limit: 100 };
    const body = await api("/api/history", query);
    const chronological = [...body.points].reverse();
    parts.push(h("div", { class: "sub" }, `Pass rate of ${stimulus}${params.get("eval") ? " (" + params.get("eval") + ")" : ""} in each run that ran it, oldest to newest.`),
      h("div", { class: "panel" }, lineChart(chronological, "Pass rate across runs")),
      h("div", { class: "panel" }, table(["Run", "Started", "Trials", "Pass rate", "Mean score", "Duration"], body.points.map((p) =>
        h("tr", { "data-testid": "history-row" }, h("td", {}, link(runHref(p.runId), p.runName), h("span", { class: "muted" }, " " + p.runId.slice(0, 8))), h("td", {}, when(p.startedAt)), h("td", { class: "num" }, num(p.trials)),
          h("td", { class: "num" }, bar(p.passRate), pct(p.passRate)), h("td", { class: "num" }, p.meanScore === null ? "–" : p.meanScore.toFixed(3)), h("td", { class: "num" }, ms(p.durationMs)))))));
  }
  parts.push(h("div", { class: "panel" }, h("h2", {}, "Stimuli"), h("div", { class: "filters" }, search), picker));
  show(...parts);
  picker.reload();
}

// The judge-free comparison of two graded runs (GET /api/compare/graded): vally's own
// figures, shown as they come.
const score = (v) => (v === null || v === undefined ? "–" : Number(v).toFixed(3));
const readingClass = (d) => (d === "better" ? "delta up" : d === "worse" ? "delta down" : "delta");

function gradedPanel(body, openCase) {
  const level = Math.round(body.confidenceLevel * 1000) / 10;
  const byId = new Map(body.cases.map((c) => [c.id, c]));
  for (const m of body.missing) byId.set(m.id, m);
  const caseLink = (id) => {
    const c = byId.get(id);
    return c ? h("button", { class: "linkish", "data-testid": "case-link", "data-case-id": id, onclick: () => openCase(c) }, id) : h("span", {}, id);
  };
  const joined = (ids) => ids.flatMap((id, i) => (i ? [", ", caseLink(id)] : [caseLink(id)]));
  const graders = body.graders.length ? table(["Grader", "Baseline", "Candidate", "Δ", `Interval (${level}%)`, "Paired", "Reading"], body.graders.map((g) =>
    h("tr", { "data-testid": "graded-grader-row", "data-grader": g.name },
      h("td", {}, g.name, g.judged ? h("span", { class: "muted" }, " (judged)") : null, h("div", { class: "muted" }, g.unit)),
      h("td", { class: "num" }, score(g.baselineMean), h("div", { class: "muted" }, `${num(g.baselineCases)} cases`)),
      h("td", { class: "num" }, score(g.candidateMean), h("div", { class: "muted" }, `${num(g.candidateCases)} cases`)),
      h("td", { class: "num" }, h("span", { class: readingClass(g.difference) }, signed(g.delta, score))),
      h("td", { class: "num" }, g.interval ? `[${signed(g.interval.low, score)}, ${signed(g.interval.high, score)}]` : "–"),
      h("td", { class: "num" }, num(g.paired)),
      h("td", {}, h("span", { class: readingClass(g.difference) }, g.difference)))), { "data-testid": "graded-graders" })
    : h("p", { class: "muted" }, "No grader scored a case in these runs.");
  const flipsOf = (kind) => body.flips.filter((f) => f.flip === kind).map((f) => f.id);
  const flipLine = (kind, testid) => {
    const ids = flipsOf(kind);
    return h("div", { "data-testid": testid }, h("strong", {}, kind + ": "), ids.length ? joined(ids) : h("span", { class: "muted" }, "none"));
  };
  const changed = body.cases.filter((c) => c.outcome !== "unchanged");
  const caseRows = changed.map((c) => h("tr", { "data-testid": "graded-case-row", "data-case-id": c.id, "data-outcome": c.outcome },
    h("td", {}, caseLink(c.id)),
    h("td", {}, h("span", { class: c.outcome === "improved" ? "delta up" : "delta down" }, c.outcome)),
    h("td", {}, c.reason),
    h("td", { class: "num" }, pct(c.baseline.passRate)),
    h("td", { class: "num" }, pct(c.candidate.passRate)),
    h("td", {}, c.flip || "–")));
  const failed = body.failed || {};
  return h("div", {},
    h("div", { class: "sub" }, `${body.candidate.label} against ${body.baseline.label}: means over the cases each grader scored, Δ over the cases scored in both runs, intervals at ${level}% over cases.`),
    h("div", { class: "cards", "data-testid": "graded-counts" },
      card("Improved", num(body.improved.length), "graded-improved"),
      card("Regressed", num(body.regressed.length), "graded-regressed"),
      card("pass→fail", num(body.flipCounts.passToFail), "graded-pass-to-fail"),
      card("fail→pass", num(body.flipCounts.failToPass), "graded-fail-to-pass"),
      card("Failed (baseline / candidate)", `${num(failed.baseline || 0)} / ${num(failed.candidate || 0)}`, "graded-failed"),
      card("Missing", num(body.missing.length), "graded-missing")),
    body.warnings.length ? h("div", { class: "warning-box", "data-testid": "graded-warnings" }, h("strong", {}, "Read first"),
      h("ul", {}, body.warnings.map((w) => h("li", { "data-testid": "graded-warning" }, w)))) : null,
    h("h2", {}, "Graders"), graders,
    h("h2", { class: "spaced" }, "Flips"), flipLine("pass→fail", "flips-pass-to-fail"), flipLine("fail→pass", "flips-fail-to-pass"),
    h("h2", { class: "spaced" }, "Improved and regressed cases"),
    changed.length ? table(["Case", "Outcome", "Reason", "Pass rate (baseline)", "Pass rate (candidate)", "Flip"], caseRows, { "data-testid": "graded-cases" })
      : h("p", { class: "muted" }, "No case improved or regressed."),
    body.missing.length ? h("div", { "data-testid": "graded-missing-cases" }, h("h2", { class: "spaced" }, "Missing cases"),
      body.missing.map((m) => h("div", {}, caseLink(m.id), h("span", { class: "muted" }, ` only in the ${m.presentIn}`)))) : null);
}

const SIDE_TRIALS = 5;

async function caseSide(runId, run, c) {
  const page = await api(`/api/runs/${encodeURIComponent(runId)}/outcomes`, { eval: c.eval, stimulus: c.stimulus, limit: SIDE_TRIALS });
  const details = await Promise.all(page.outcomes.map((o) => api(`/api/outcomes/${encodeURIComponent(o.id)}`)));
  const title = h("h2", {}, run ? run.name : runId, h("span", { class: "muted" }, " · " + runId.slice(0, 8)));
  if (!details.length) return h("div", { class: "panel", "data-testid": "case-side", "data-run-id": runId }, title, h("p", { class: "muted" }, "This run has no trial of this case."));
  return h("div", { class: "panel", "data-testid": "case-side", "data-run-id": runId }, title,
    page.page.total > details.length ? h("p", { class: "muted" }, `The first ${details.length} of ${num(page.page.total)} trials.`) : null,
    details.map((d) => {
      const o = d.outcome, traj = d.record.trajectory || {};
      return h("div", { class: "trial-output", "data-testid": "case-trial" },
        h("div", { class: "head" }, link(outcomeHref(o.id), `trial ${o.trialIndex}`), " ", badge(o.verdict),
          h("span", { class: "muted" }, ` score ${o.score === null ? "–" : o.score.toFixed(2)}${o.model ? " · " + o.model : ""}${o.variant ? " · " + o.variant : ""}`)),
        traj.output ? h("div", { class: "text", "data-testid": "case-output" }, traj.output) : h("p", { class: "muted" }, "No final output recorded."));
    }));
}

async function comparePage(params) {
  setNav("runs");
  const runs = params.get("runs") || "";
  const ids = runs.split(",").filter(Boolean);
  const list = pager((cursor) => api("/api/compare", { runs, cursor, limit: 50 }), (body) => table(["Eval", "Stimulus", "Model", ...body.runs.map((r) => r.name + " · " + r.id.slice(0, 8)), "Δ pass rate"], body.rows.map((row) =>
    h("tr", { "data-testid": "compare-row" }, h("td", {}, row.evalName), h("td", {}, link(historyHref(row.stimulus, row.evalName), row.stimulus)), h("td", {}, row.model || "–"),
      body.runs.map((r) => h("td", { class: "num" }, row.runs[r.id] ? pct(row.runs[r.id].passRate) : "")),
      h("td", { class: "num" }, h("span", { class: row.passRateDelta > 0 ? "delta up" : row.passRateDelta < 0 ? "delta down" : "delta" }, signed(row.passRateDelta, pct)))))));
  const pair = ids.length === 2 && ids[0] !== ids[1];
  const graded = pair ? h("div", { class: "panel", "data-testid": "graded-panel" }, h("p", { class: "muted" }, "Loading the graded comparison…")) : null;
  const sideBySide = pair ? h("div", { "data-testid": "case-side-by-side" }) : null;
  show(h("h1", {}, "Compare runs"), graded, sideBySide, h("div", { class: "panel" }, h("h2", {}, "Pass rate per stimulus"), list));
  await list.reload();
  if (!pair) return;
  const names = {};
  let shown = 0;
  async function openCase(c) {
    const ticket = ++shown;
    sideBySide.replaceChildren(h("div", { class: "panel" }, h("p", { class: "muted" }, "Loading " + c.id + "…")));
    try {
      const sides = await Promise.all(ids.map((id) => caseSide(id, names[id], c)));
      if (ticket !== shown) return;
      sideBySide.replaceChildren(h("div", { class: "panel" }, h("h2", { "data-testid": "case-title" }, "Case " + c.id, " ",
        link(sideHref(c.eval, c.stimulus, { run: ids[0] }, { run: ids[1] }), "trial by trial →", { "data-testid": "side-link", class: "muted" })),
        h("div", { class: "grid2" }, sides)));
      sideBySide.scrollIntoView();
    } catch (error) {
      if (ticket === shown) sideBySide.replaceChildren(h("div", { class: "error-box" }, h("strong", {}, "Error"), " ", error.message));
    }
  }
  try {
    const [body, ...details] = await Promise.all([api("/api/compare/graded", { baseline: ids[0], candidate: ids[1] }), ...ids.map((id) => api(`/api/runs/${encodeURIComponent(id)}`))]);
    details.forEach((d, i) => { names[ids[i]] = d.run; });
    graded.replaceChildren(h("h2", {}, "Graded comparison"), gradedPanel(body, openCase));
  } catch (error) {
    graded.replaceChildren(h("h2", {}, "Graded comparison"), h("div", { class: "error-box", "data-testid": "graded-error" }, error.code ? "[" + error.code + "] " : "", error.message));
  }
}

// ---------------------------------------------------------------- side by side

// One stimulus's trials in two runs (or two variants of one), aligned trial by trial:
// header, final output, each grader's verdict and score, then the trajectory step by step.
// #/side?eval=E&stimulus=S&left=RUN&leftVariant=V&right=RUN&rightVariant=V
const SIDE_BY_SIDE_TRIALS = 10;

const sideHref = (evalName, stimulus, left, right) => "#/side?" + new URLSearchParams({
  eval: evalName || "", stimulus, left: left.run, leftVariant: left.variant || "", right: right.run, rightVariant: right.variant || "" });

// The steps of a trajectory as comparable text: messages, reasoning, errors, and each tool
// call with its result (timestamps left out, so two same steps read the same).
function trajectorySteps(events) {
  const results = new Map();
  for (const e of events) if (e.type === "tool_result" && e.data && e.data.toolCallId && !results.has(e.data.toolCallId)) results.set(e.data.toolCallId, e);
  const folded = new Set();
  const steps = [];
  const text = (v) => (typeof v === "string" ? v : JSON.stringify(v, null, 2));
  for (const e of events) {
    const d = e.data || {};
    if (["turn_start", "turn_end", "token_usage"].includes(e.type) || folded.has(e)) continue;
    if (e.type === "tool_call") {
      const r = d.toolCallId ? results.get(d.toolCallId) : undefined;
      if (r) folded.add(r);
      const outcome = r ? `→ ${r.data.success === false ? "failed" : "ok"}: ${text(r.data.result)}` : "→ no result";
      steps.push({ kind: "tool " + d.toolName, text: `${text(d.arguments)}\n${outcome}` });
    } else if (["user_message", "assistant_message", "reasoning"].includes(e.type)) steps.push({ kind: e.type, text: d.content ?? "" });
    else if (e.type === "error") steps.push({ kind: "error", text: (d.code ? `[${d.code}] ` : "") + (d.message || "") });
    else if (e.type === "tool_result") steps.push({ kind: "tool result " + (d.toolName || ""), text: text(d.result) });
    else steps.push({ kind: e.type || "event", text: JSON.stringify(d) });
  }
  return steps;
}

async function sideTrials(runId, variant, evalName, stimulus) {
  const params = { eval: evalName, stimulus, limit: SIDE_BY_SIDE_TRIALS };
  if (variant) params.variant = variant;
  const page = await api(`/api/runs/${encodeURIComponent(runId)}/outcomes`, params);
  const trials = await Promise.all(page.outcomes.map(async (o) => {
    const [detail, events] = await Promise.all([api(`/api/outcomes/${encodeURIComponent(o.id)}`),
      api(`/api/outcomes/${encodeURIComponent(o.id)}/trajectory`, { limit: 500 })]);
    const grade = detail.record.gradeResult;
    const graders = new Map((grade && grade.details ? grade.details : []).map((g) =>
      [g.name, `${g.status === "error" ? "error" : g.passed ? "pass" : "fail"} · ${Number(g.score).toFixed(2)}`]));
    return { outcome: o, output: (detail.record.trajectory || {}).output || "", graders, steps: trajectorySteps(events.events) };
  }));
  return { total: page.page.total, trials };
}

async function sidePage(params) {
  setNav("runs");
  const evalName = params.get("eval") || "", stimulus = params.get("stimulus") || "";
  const left = { run: params.get("left") || "", variant: params.get("leftVariant") || "" };
  const right = { run: params.get("right") || "", variant: params.get("rightVariant") || "" };
  if (!stimulus || !left.run || !right.run) throw Object.assign(new Error("the side-by-side view needs ?stimulus=, left= and right="), { code: "bad_request" });
  const [a, b, runA, runB] = await Promise.all([
    sideTrials(left.run, left.variant, evalName, stimulus), sideTrials(right.run, right.variant, evalName, stimulus),
    api(`/api/runs/${encodeURIComponent(left.run)}`), api(`/api/runs/${encodeURIComponent(right.run)}`)]);
  const label = (side, run) => run.run.name + " · " + side.run + (side.variant ? " · " + side.variant : "");
  const cell = (content) => h("td", { class: "side-cell" }, content === undefined ? h("span", { class: "muted" }, "–") : content);
  const row = (kind, name, l, r, render) => h("tr", { class: "side-row " + kind, "data-testid": "side-row", "data-kind": kind, "data-same": String(l === r) },
    h("th", { scope: "row" }, name), cell(l === undefined ? undefined : render(l)), cell(r === undefined ? undefined : render(r)));
  const asText = (v) => h("div", { class: "text" }, v);
  const rows = [];
  const pairs = Math.max(a.trials.length, b.trials.length);
  for (let i = 0; i < pairs; i++) {
    const l = a.trials[i], r = b.trials[i];
    const head = (t) => t ? h("span", {}, link(outcomeHref(t.outcome.id), `trial ${t.outcome.trialIndex}`), " ", badge(t.outcome.verdict),
      h("span", { class: "muted" }, ` score ${t.outcome.score === null ? "–" : t.outcome.score.toFixed(2)}${t.outcome.model ? " · " + t.outcome.model : ""}`)) : h("span", { class: "muted" }, "no trial");
    rows.push(h("tr", { class: "side-trial", "data-testid": "side-trial" }, h("th", { scope: "row" }, `#${i + 1}`), h("td", {}, head(l)), h("td", {}, head(r))));
    rows.push(row("output", "Output", l && l.output, r && r.output, asText));
    const graders = [...new Set([...(l ? l.graders.keys() : []), ...(r ? r.graders.keys() : [])])];
    for (const g of graders) rows.push(row("grader", g, l && l.graders.get(g), r && r.graders.get(g), asText));
    const steps = Math.max(l ? l.steps.length : 0, r ? r.steps.length : 0);
    for (let k = 0; k < steps; k++) {
      const ls = l && l.steps[k], rs = r && r.steps[k];
      const key = (s) => (s ? s.kind + "\n" + s.text : undefined);
      rows.push(row("step", `step ${k + 1}`, key(ls), key(rs), (t) => {
        const [kind, ...rest] = t.split("\n");
        return h("div", {}, h("span", { class: "type" }, kind), h("pre", {}, rest.join("\n")));
      }));
    }
  }
  const grid = h("table", { class: "side-by-side", "data-testid": "side-by-side" },
    h("thead", {}, h("tr", {}, h("th", { class: "rowhead" }, ""), h("th", { "data-testid": "side-left" }, label(left, runA)), h("th", { "data-testid": "side-right" }, label(right, runB)))),
    h("tbody", {}, rows));
  const toggle = h("input", { type: "checkbox", "data-testid": "diff-only", onchange: (e) => grid.classList.toggle("diff-only", e.target.checked) });
  const differing = rows.filter((r) => r.dataset.same === "false").length;
  const more = a.total > a.trials.length || b.total > b.trials.length;
  show(h("div", { class: "crumbs" }, link("#/", "Runs"), " / side by side"),
    h("h1", { "data-testid": "side-title" }, stimulus, evalName ? h("span", { class: "muted" }, " · " + evalName) : null),
    h("div", { class: "sub" }, `Trials paired in order of their index: ${num(a.total)} on the left, ${num(b.total)} on the right${more ? `; the first ${SIDE_BY_SIDE_TRIALS} of each are shown` : ""}. Steps are aligned by position.`),
    h("div", { class: "panel" }, h("div", { class: "filters" }, h("label", {}, toggle, " Differences only"),
      h("span", { class: "muted", "data-testid": "side-differences" }, `${num(differing)} of ${num(rows.length - pairs)} rows differ`)), grid));
}

async function outcomesPage() {
  setNav("outcomes");
  show(h("h1", {}, "Outcomes across runs"), h("div", { class: "sub" }, "Newest first."), outcomesPanel(null, null));
}

async function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "runs" && parts[1] && parts[2] === "experiment") await experimentPage(parts[1]);
    else if (parts[0] === "runs" && parts[1]) await runPage(parts[1]);
    else if (parts[0] === "outcomes" && parts[1]) await outcomePage(parts[1]);
    else if (parts[0] === "outcomes") await outcomesPage();
    else if (parts[0] === "history") await historyPage(params);
    else if (parts[0] === "compare") await comparePage(params);
    else if (parts[0] === "side") await sidePage(params);
    else await runsPage();
    window.scrollTo(0, 0);
    document.body.dataset.ready = hash;
  } catch (error) {
    fail(error);
    document.body.dataset.ready = hash;
  }
}

window.addEventListener("hashchange", route);
route();
