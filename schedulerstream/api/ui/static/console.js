// schedulerstream web console: plain DOM, no dependencies, no build step.
// The key lives in sessionStorage (this tab only) and goes out as a Bearer header, never in a URL.
// Every text node is set with textContent (no innerHTML), and the page's CSP allows only our files.
"use strict";

const KEY = "schedulerstream.key";
const POLL_MS = 2000;
const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const OUTCOMES = ["succeeded", "failed", "timed_out", "dead_lettered", "cancelled", "skipped",
  "running", "pending"];
const ACTIVE_RUN = new Set(["pending", "running"]);
const $ = (id) => document.getElementById(id);

let session = null;   // {tenant, operator, tenants}
let refresher = null; // the current page's refresh function
let timer = null;

// ---- DOM and formatting helpers -----------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
  for (const child of children.flat()) if (child) el.append(child);
  return el;
}

function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  return el;
}

function announce(text) { fill($("live"), text); }

const formats = new Map();
function formatIn(zone) {
  if (!formats.has(zone)) {
    formats.set(zone, new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
      minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    }));
  }
  return formats.get(zone);
}

// "2026-03-29 03:00:00 GMT+2 (Europe/Paris)": every time states its zone.
function when(iso, zone) {
  if (!iso) return "—";
  const z = zone || VIEWER_ZONE;
  let parts;
  try { parts = formatIn(z).formatToParts(new Date(iso)); } catch (e) { return iso; }
  const p = Object.fromEntries(parts.map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName} (${z})`;
}

function timeEl(iso, zone) { return iso ? h("time", { datetime: iso }, when(iso, zone)) : "—"; }

function ms(value) {
  if (value === null || value === undefined) return "—";
  if (Math.abs(value) >= 10000) return `${(value / 1000).toFixed(1)} s`;
  return `${Math.round(value)} ms`;
}

function lateness(run) {
  if (!run.started_at || !run.scheduled_at) return null;
  return new Date(run.started_at) - new Date(run.scheduled_at);
}

function badge(status) { return h("span", { class: `badge s-${status}` }, status.replace("_", " ")); }

function link(href, text, attrs) { return h("a", { href, ...(attrs || {}) }, text); }
const jobHref = (tenant, jobId) => `/ui/jobs/${encodeURIComponent(tenant)}/${encodeURIComponent(jobId)}`;
const runHref = (runId) => `/ui/runs/${encodeURIComponent(runId)}`;
const tenantOfRun = (runId) => runId.split("/")[0];

function table(caption, headers, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || "Nothing yet.");
  return h("div", { class: "table-wrap" },
    h("table", {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((cells) => h("tr", {},
        cells.map((c, i) => h("td", { "data-label": headers[i] }, c)))))));
}

// ---- the API -------------------------------------------------------------------------------
class ApiError extends Error {
  // fields: the 422's [{field, message}] (empty for other errors)
  constructor(status, message, fields) { super(message); this.status = status; this.fields = fields || []; }
}

async function api(path, options) {
  const opts = options || {};
  const headers = { ...(opts.headers || {}), Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: opts.method || "GET", headers, cache: "no-store", credentials: "omit",
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text }; }
  if (!response.ok) {
    let detail = data && data.detail !== undefined ? data.detail : response.statusText;
    const fields = Array.isArray(detail) ? detail : [];
    if (fields.length) detail = fields.map((d) => `${d.field}: ${d.message}`).join("; ");
    if (response.status === 401 && !opts.signin) signOut("Your key is no longer accepted; sign in again.");
    throw new ApiError(response.status, String(detail), fields);
  }
  return data;
}

function scopeQuery(tenant) { return session.operator && tenant ? `tenant=${encodeURIComponent(tenant)}` : ""; }

// ---- sign in and out, routing, polling ------------------------------------------------------
async function signIn(event) {
  event.preventDefault();
  const input = $("key");
  fill($("signin-error"));
  sessionStorage.setItem(KEY, input.value.trim());
  try {
    session = await api("/v1/console/session", { signin: true });
  } catch (error) {
    sessionStorage.removeItem(KEY);
    fill($("signin-error"), error.status === 401 ? "That key was refused." : `Cannot sign in: ${error.message}`);
    input.setAttribute("aria-invalid", "true");
    input.focus();
    return;
  }
  input.value = "";
  input.removeAttribute("aria-invalid");
  const path = location.pathname.replace(/\/+$/, "");
  navigate(path === "/ui" || path === "" ? "/ui/jobs" : location.pathname, path === "/ui");
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  session = null;
  stopPolling();
  $("top").hidden = true;
  fill($("page"));
  $("signin-page").hidden = false;
  fill($("signin-error"), message || "");
  $("key").focus();
}

function navigate(path, replace) {
  if (replace) history.replaceState(null, "", path); else history.pushState(null, "", path);
  route();
}

function stopPolling() { if (timer) clearTimeout(timer); timer = null; refresher = null; }

// Each wait is POLL_MS ± 25 %, counted from the end of the last refresh: a fixed period would
// lock onto a job of the same period and show the same instant of its runs at every refresh.
function startPolling(refresh) {
  stopPolling();
  refresher = refresh;
  const tick = async () => {
    if (refresher !== refresh) return;
    if (!document.hidden) {
      try { await refresh(); } catch (error) { /* shown by the page; retried next tick */ }
    }
    if (refresher === refresh) timer = setTimeout(tick, POLL_MS * (0.75 + Math.random() / 2));
  };
  return tick();
}

function pageShell(title, ...rest) {
  const heading = h("h1", { tabindex: "-1" }, title);
  fill($("page"), heading, ...rest);
  document.title = `${title} · schedulerstream`;
  return heading;
}

function errorBox() { return h("p", { class: "error", role: "alert" }); }

function showError(box, error) {
  fill(box, error ? (error.status === 404 ? "Not found (or not yours to see)." : error.message) : "");
}

async function route() {
  if (!session) return;
  $("signin-page").hidden = true;
  $("top").hidden = false;
  fill($("who"), session.operator ? "Operator (all tenants, read-only)" : `Tenant ${session.tenant}`);
  $("nav-new").hidden = session.operator;
  const parts = location.pathname.split("/").filter(Boolean).slice(1).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === (parts[0] || "jobs")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  stopPolling();
  let heading;
  if (parts[0] === "overview") heading = overviewPage();
  else if (parts[0] === "new" && parts.length === 1) heading = editorPage(null, null);
  else if (parts[0] === "jobs" && parts.length === 4 && parts[3] === "edit") heading = editorPage(parts[1], parts[2]);
  else if (parts[0] === "jobs" && parts.length === 3) heading = jobPage(parts[1], parts[2]);
  else if (parts[0] === "runs" && parts.length >= 2) heading = runPage(parts.slice(1).join("/"));
  else if (!parts.length || (parts[0] === "jobs" && parts.length === 1)) heading = jobsPage();
  else heading = pageShell("Page not found", h("p", {}, link("/ui/jobs", "Back to the jobs")));
  heading.focus();
}

function tenantPicker(current, onChange) {
  if (!session.operator) return null;
  const select = h("select", { id: "tenant", onchange: () => onChange(select.value) },
    h("option", { value: "" }, "All tenants"),
    session.tenants.map((t) => h("option", { value: t, selected: t === current }, t)));
  return h("div", { class: "field" }, h("label", { for: "tenant" }, "Tenant"), select);
}

// ---- Jobs ----------------------------------------------------------------------------------
function jobsPage() {
  const state = { q: "", status: "", tenant: "", cursors: [null] };
  const results = h("div", { id: "jobs" });
  const error = errorBox();
  const pager = h("div", { class: "pager" });
  const reset = () => { state.cursors = [null]; refresh(); };
  const search = h("input", { id: "q", type: "search", placeholder: "part of a job id",
    oninput: () => { state.q = search.value.trim(); reset(); } });
  const status = h("select", { id: "status", onchange: () => { state.status = status.value; reset(); } },
    h("option", { value: "" }, "Any status"), ["active", "paused", "ended"].map((s) => h("option", { value: s }, s)));
  const filters = h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    h("div", { class: "field" }, h("label", { for: "q" }, "Search job ids"), search),
    h("div", { class: "field" }, h("label", { for: "status" }, "Status"), status),
    tenantPicker("", (t) => { state.tenant = t; reset(); }));
  const heading = pageShell("Jobs", filters, error, results, pager);

  async function refresh() {
    const cursor = state.cursors[state.cursors.length - 1];
    const query = new URLSearchParams({ limit: "25" });
    if (state.q) query.set("q", state.q);
    if (state.status) query.set("status", state.status);
    if (state.tenant) query.set("tenant", state.tenant);
    if (cursor) query.set("cursor", cursor);
    let page;
    try { page = await api(`/v1/console/jobs?${query}`); showError(error); }
    catch (e) { showError(error, e); throw e; }
    const multi = session.operator;
    const headers = [...(multi ? ["Tenant"] : []), "Job", "Schedule", "Zone", "Next fire", "Status", "Last run"];
    fill(results, table("Jobs", headers, page.items.map((j) => [
      ...(multi ? [j.tenant] : []),
      link(jobHref(j.tenant, j.job_id), j.job_id),
      h("span", {}, j.schedule, h("br"), h("code", {}, j.expression)),
      j.timezone,
      j.next_fire_at ? h("span", {}, timeEl(j.next_fire_at, j.timezone), h("br"),
        h("small", {}, timeEl(j.next_fire_at, VIEWER_ZONE))) : "—",
      h("span", {}, badge(j.status), j.paused_reason ? h("small", { class: "reason" }, ` ${j.paused_reason}`) : null),
      j.last_run ? h("span", {}, link(runHref(j.last_run.run_id), j.last_run.status, { class: `s-text-${j.last_run.status}` }),
        ` · late ${ms(j.last_run.lateness_ms)}`) : "—",
    ]), state.q || state.status ? "No job matches." : "No jobs yet: create one with New job (or PUT one to /v1/jobs/{job_id})."));
    const previous = h("button", { type: "button", class: "quiet", disabled: state.cursors.length < 2,
      onclick: () => { state.cursors.pop(); refresh(); } }, "Previous page");
    const next = h("button", { type: "button", class: "quiet", disabled: !page.next_cursor,
      onclick: () => { state.cursors.push(page.next_cursor); refresh(); } }, "Next page");
    fill(pager, previous, h("span", {}, `Page ${state.cursors.length}`), next);
  }
  startPolling(refresh);
  return heading;
}

// ---- Job -----------------------------------------------------------------------------------
function jobPage(tenant, jobId) {
  const scope = scopeQuery(tenant);
  const base = `/v1/console/jobs/${encodeURIComponent(jobId)}`;
  const write = `/v1/jobs/${encodeURIComponent(jobId)}`;
  const state = { cursors: [null], job: null };
  const error = errorBox();
  const summary = h("div", { id: "summary" });
  const actions = h("section", { "aria-labelledby": "actions-h", class: "actions" });
  const upcoming = h("div", { id: "upcoming" });
  const runs = h("div", { id: "runs" });
  const pager = h("div", { class: "pager" });
  const definition = h("pre", { id: "definition", tabindex: "0" });
  const copy = h("button", { type: "button", class: "quiet", onclick: async () => {
    try { await navigator.clipboard.writeText(definition.textContent); announce("Definition copied."); }
    catch (e) { getSelection().selectAllChildren(definition); announce("Selected; copy with Ctrl+C."); }
  } }, "Copy JSON");
  const heading = pageShell(jobId, h("p", { class: "crumbs" }, link("/ui/jobs", "Jobs"), ` / ${tenant} / ${jobId}`),
    error, summary, actions,
    h("section", { "aria-labelledby": "upcoming-h" }, h("h2", { id: "upcoming-h" }, "Next 20 instants"), upcoming),
    h("section", { "aria-labelledby": "runs-h" }, h("h2", { id: "runs-h" }, "Runs"), runs, pager),
    h("section", { "aria-labelledby": "def-h" }, h("h2", { id: "def-h" }, "Definition"), copy, definition));

  async function act(label, path, body, method) {
    let result;
    try { result = await api(path, { method: method || "POST", body }); }
    catch (e) { showError(error, e); announce(`${label} failed: ${e.message}`); return null; }
    announce(`${label}: done.`);
    if (method !== "DELETE") await refresh().catch(() => {});
    return result;
  }

  function buildActions() {
    if (session.operator) {
      return fill(actions, h("h2", { id: "actions-h" }, "Actions"),
        h("p", { class: "help" }, "Read-only: the operator key cannot change jobs; sign in with the tenant's key."));
    }
    const reason = h("input", { id: "pause-reason", type: "text", maxlength: "1000", placeholder: "e.g. receiver maintenance" });
    const result = h("p", { id: "action-result", role: "status" });
    const pause = h("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      const body = reason.value.trim() ? { reason: reason.value.trim() } : undefined;
      if (await act("Pause", `${write}/pause`, body)) reason.value = "";
    } }, h("label", { for: "pause-reason" }, "Reason for pausing"), reason, h("button", { type: "submit", id: "pause" }, "Pause"));
    const resume = h("button", { type: "button", id: "resume", onclick: () => act("Resume", `${write}/resume`) }, "Resume");
    const trigger = h("button", { type: "button", id: "trigger", onclick: async () => {
      const r = await act("Trigger", `${write}/trigger`, {});
      if (r) fill(result, "Triggered run ", link(runHref(r.run_id), r.run_id), ".");
    } }, "Trigger now");
    const now = new Date();
    const iso = (d) => d.toISOString().slice(0, 16);
    const start = h("input", { id: "bf-start", type: "datetime-local", value: iso(new Date(now - 3600e3)), required: true });
    const end = h("input", { id: "bf-end", type: "datetime-local", value: iso(now), required: true });
    const confirmBox = h("div", { id: "bf-confirm", role: "group", "aria-live": "polite" });
    const utc = (v) => `${v}:00Z`;
    const backfill = h("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      fill(confirmBox);
      let preview;
      try {
        preview = await api(`${base}/backfill-preview?${new URLSearchParams({ start: utc(start.value), end: utc(end.value) })}`);
      } catch (err) { showError(error, err); return; }
      const yes = h("button", { type: "button", id: "bf-yes", class: "danger", onclick: async () => {
        fill(confirmBox);
        const r = await act("Backfill", `${write}/backfill`, { start: utc(start.value), end: utc(end.value) });
        if (r) fill(result, `Backfill requested: ${r.runs} runs.`);
      } }, `Create ${preview.runs} runs`);
      const no = h("button", { type: "button", class: "quiet", onclick: () => { fill(confirmBox); backfill.querySelector("button").focus(); } }, "Cancel");
      fill(confirmBox, h("p", {}, `This backfill will create ${preview.runs} run${preview.runs === 1 ? "" : "s"} (instants up to now). Continue?`), yes, " ", no);
      yes.focus();
    } }, h("label", { for: "bf-start" }, "Backfill from (UTC)"), start,
      h("label", { for: "bf-end" }, "until (UTC)"), end, h("button", { type: "submit", id: "backfill" }, "Backfill…"));
    const deleteBox = h("div", { id: "delete-confirm", "aria-live": "polite" });
    const remove = h("button", { type: "button", id: "delete", class: "danger", onclick: () => {
      const yes = h("button", { type: "button", id: "delete-yes", class: "danger", onclick: async () => {
        if (await act("Delete", write, undefined, "DELETE")) navigate("/ui/jobs");
      } }, `Delete ${jobId}`);
      fill(deleteBox, h("p", {}, `Delete job ${jobId}? No run starts after this; it cannot be undone.`),
        yes, " ", h("button", { type: "button", class: "quiet", onclick: () => { fill(deleteBox); remove.focus(); } }, "Keep it"));
      yes.focus();
    } }, "Delete…");
    const edit = link(`${jobHref(tenant, jobId)}/edit`, "Edit", { id: "edit", class: "button quiet" });
    fill(actions, h("h2", { id: "actions-h" }, "Actions"), h("div", { class: "row" }, edit), pause, h("div", { class: "row" }, resume, trigger),
      backfill, confirmBox, h("div", { class: "row" }, remove), deleteBox, result);
  }

  async function refresh() {
    let detail;
    try { detail = await api(`${base}?${scope}`); showError(error); }
    catch (e) {
      showError(error, e);
      if (e.status === 404) { fill(summary); fill(actions); stopPolling(); }
      throw e;
    }
    if (!state.job) buildActions();
    state.job = detail;
    const job = detail.job;
    fill(summary, h("dl", { class: "facts" },
      h("dt", {}, "Status"), h("dd", { id: "job-status" }, badge(detail.status),
        job.paused_reason ? h("span", { class: "reason", id: "paused-reason" }, ` ${job.paused_reason}`) : null,
        job.projection === "pending" ? h("small", {}, " (saved; the read model catches up)") : null),
      h("dt", {}, "Schedule"), h("dd", {}, `${detail.schedule} `, h("code", {}, detail.expression)),
      h("dt", {}, "Zone"), h("dd", {}, `${detail.timezone} (yours: ${VIEWER_ZONE})`),
      h("dt", {}, "Version"), h("dd", {}, String(job.version)),
      h("dt", {}, "Last run"), h("dd", {}, job.last_run ? link(runHref(job.last_run.run_id), job.last_run.status) : "—")));
    const resume = $("resume");
    if (resume) resume.disabled = !job.paused;
    fill(upcoming, detail.status === "paused" ? h("p", { class: "help" }, "Paused: these instants will not fire until resumed.") : null,
      table("Next instants", ["#", `In ${detail.timezone}`, "UTC", "Yours", "DST note"],
        detail.upcoming.map((i, n) => [String(n + 1), timeEl(i.utc, detail.timezone), timeEl(i.utc, "UTC"),
          timeEl(i.utc, VIEWER_ZONE), i.note || ""]), "No more instants: the schedule has ended."));
    definition.textContent = JSON.stringify(job.definition, null, 2);
    const cursor = state.cursors[state.cursors.length - 1];
    const query = new URLSearchParams({ limit: "20" });
    if (scope) query.set("tenant", tenant);
    if (cursor) query.set("cursor", cursor);
    const page = await api(`${base}/runs?${query}`);
    fill(runs, table("Runs, newest first", ["Run", "Status", "Trigger", "Scheduled", "Started", "Finished", "Attempts", "Lateness"],
      page.items.map((r) => [link(runHref(r.run_id), r.run_id.split("@").pop()), badge(r.status), r.trigger.replace("_", "-"),
        timeEl(r.scheduled_at, detail.timezone), timeEl(r.started_at, detail.timezone), timeEl(r.finished_at, detail.timezone),
        String(r.attempt_count), ms(lateness(r))]), "No runs yet."));
    fill(pager,
      h("button", { type: "button", class: "quiet", disabled: state.cursors.length < 2, onclick: () => { state.cursors.pop(); refresh(); } }, "Newer runs"),
      h("span", {}, `Page ${state.cursors.length}`),
      h("button", { type: "button", class: "quiet", disabled: !page.next_cursor, onclick: () => { state.cursors.push(page.next_cursor); refresh(); } }, "Older runs"));
  }
  startPolling(refresh);
  return heading;
}

// ---- Run -----------------------------------------------------------------------------------
function runPage(runId) {
  const error = errorBox();
  const facts = h("div", { id: "run-facts" });
  const attempts = h("div", { id: "attempts" });
  const controls = h("div", { class: "row" });
  const tenant = tenantOfRun(runId);
  const jobId = runId.slice(tenant.length + 1).split("@")[0];
  const heading = pageShell(`Run ${runId.split("@").pop()}`,
    h("p", { class: "crumbs" }, link("/ui/jobs", "Jobs"), " / ", link(jobHref(tenant, jobId), `${tenant} / ${jobId}`), ` / ${runId}`),
    error, facts, controls, h("section", { "aria-labelledby": "att-h" }, h("h2", { id: "att-h" }, "Attempts"), attempts));
  const path = `/v1/console/runs/${encodeURIComponent(runId)}`;

  async function refresh() {
    let run;
    try { run = await api(path); showError(error); }
    catch (e) { showError(error, e); throw e; } // a run just triggered is found a moment later
    fill(facts, h("dl", { class: "facts" },
      h("dt", {}, "Status"), h("dd", { id: "run-status" }, badge(run.status)),
      h("dt", {}, "Trigger"), h("dd", {}, run.trigger.replace("_", "-")),
      h("dt", {}, "Scheduled"), h("dd", {}, timeEl(run.scheduled_at)),
      h("dt", {}, "Started"), h("dd", {}, timeEl(run.started_at)),
      h("dt", {}, "Finished"), h("dd", {}, timeEl(run.finished_at)),
      h("dt", {}, "Lateness"), h("dd", {}, ms(lateness(run))),
      h("dt", {}, "Attempts"), h("dd", {}, String(run.attempt_count)),
      h("dt", {}, "Last error"), h("dd", {}, run.last_error || "—")));
    if (ACTIVE_RUN.has(run.status) && !session.operator) {
      if (!$("cancel")) {
        fill(controls, h("button", { type: "button", id: "cancel", class: "danger", onclick: async (e) => {
          e.target.disabled = true;
          try { await api(`/v1/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST" }); announce("Cancel requested."); await refresh(); }
          catch (err) { showError(error, err); e.target.disabled = false; }
        } }, "Cancel run"));
      }
    } else fill(controls);
    fill(attempts, table("Attempts", ["#", "Outcome", "At", "Reason", "HTTP status", "Duration", "Retry at", "Count"],
      run.attempts.map((a) => [String(a.attempt), badge(a.kind), timeEl(a.at), a.reason || "—",
        a.status_code === null ? "—" : String(a.status_code), ms(a.duration_ms), timeEl(a.retry_at), String(a.count)]),
      "No attempt yet."));
  }
  startPolling(refresh);
  return heading;
}

// ---- Overview ------------------------------------------------------------------------------
function barChart(minutes) {
  const width = 720, height = 180, pad = 28;
  const totals = minutes.map((m) => Object.values(m.counts).reduce((a, b) => a + b, 0));
  const top = Math.max(1, ...totals);
  const bar = (width - pad) / minutes.length;
  const bars = [];
  minutes.forEach((m, i) => {
    let y = height - pad;
    for (const outcome of OUTCOMES) {
      const n = m.counts[outcome] || 0;
      if (!n) continue;
      const tall = (n / top) * (height - 2 * pad);
      y -= tall;
      bars.push(svg("rect", { x: pad + i * bar + 1, y, width: Math.max(1, bar - 2), height: tall, class: `f-${outcome}` },
        svg("title", {}, document.createTextNode(`${m.minute}: ${n} ${outcome}`))));
    }
  });
  return chartFrame(width, height, pad, top, "runs", bars,
    `Runs per minute by outcome over the last hour; at most ${top} in a minute.`);
}

function lineChart(minutes) {
  const width = 720, height = 180, pad = 28;
  const values = minutes.flatMap((m) => [m.lateness_p50_ms, m.lateness_p99_ms]).filter((v) => v !== null);
  const top = Math.max(1, ...values);
  const step = (width - pad) / minutes.length;
  const line = (key, cls) => {
    const points = minutes.map((m, i) => (m[key] === null ? null :
      `${(pad + (i + 0.5) * step).toFixed(1)},${(height - pad - (m[key] / top) * (height - 2 * pad)).toFixed(1)}`)).filter(Boolean);
    return points.length ? svg("polyline", { points: points.join(" "), class: cls, fill: "none" }) : null;
  };
  return chartFrame(width, height, pad, `${Math.round(top)} ms`, "lateness", [line("lateness_p50_ms", "l-p50"), line("lateness_p99_ms", "l-p99")],
    `Dispatch lateness per minute over the last hour, p50 and p99; the highest is ${ms(top)}.`);
}

function chartFrame(width, height, pad, top, name, shapes, label) {
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, class: `chart chart-${name}` },
    svg("line", { x1: pad, y1: height - pad, x2: width, y2: height - pad, class: "axis" }),
    svg("line", { x1: pad, y1: pad, x2: pad, y2: height - pad, class: "axis" }),
    svg("text", { x: 2, y: pad, class: "tick" }, document.createTextNode(String(top))),
    svg("text", { x: pad, y: height - 8, class: "tick" }, document.createTextNode("−60 min")),
    svg("text", { x: width - 40, y: height - 8, class: "tick" }, document.createTextNode("now")),
    shapes);
}

function legend(items) {
  return h("ul", { class: "legend" }, items.map(([cls, text]) => h("li", {}, h("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), text)));
}

function overviewPage() {
  const state = { tenant: "" };
  const error = errorBox();
  const charts = h("div", { id: "charts" });
  const queue = h("div", { id: "queue" });
  const failing = h("div", { id: "failing" });
  const heading = pageShell("Overview", tenantPicker("", (t) => { state.tenant = t; refresh(); }), error, charts,
    h("section", { "aria-labelledby": "queue-h" }, h("h2", { id: "queue-h" }, "Queue and in flight per tenant"), queue),
    h("section", { "aria-labelledby": "failing-h" }, h("h2", { id: "failing-h" }, "Jobs failing most (last hour)"), failing));

  async function refresh() {
    let data;
    const query = state.tenant ? `?tenant=${encodeURIComponent(state.tenant)}` : "";
    try { data = await api(`/v1/console/overview${query}`); showError(error); }
    catch (e) { showError(error, e); throw e; }
    const open = charts.querySelector("details[open]") !== null;
    const rows = data.minutes.filter((m) => Object.keys(m.counts).length);
    const details = h("details", { open },
      h("summary", {}, "The same as a table"),
      table("Runs and lateness per minute", ["Minute", ...OUTCOMES, "p50", "p99"],
        rows.map((m) => [when(`${m.minute.slice(0, -1)}:00Z`, "UTC"), ...OUTCOMES.map((o) => String(m.counts[o] || 0)),
          ms(m.lateness_p50_ms), ms(m.lateness_p99_ms)]), "No runs in the last hour."));
    fill(charts,
      h("section", { "aria-labelledby": "rate-h" }, h("h2", { id: "rate-h" }, "Runs per minute by outcome"),
        h("p", { class: "help" }, `By scheduled minute, ${when(data.since.replace("Z", ":00Z"))} until now.`),
        barChart(data.minutes), legend(OUTCOMES.map((o) => [`f-${o}`, o.replace("_", " ")]))),
      h("section", { "aria-labelledby": "late-h" }, h("h2", { id: "late-h" }, "Dispatch lateness (started − scheduled)"),
        lineChart(data.minutes), legend([["l-p50", "p50"], ["l-p99", "p99"]]),
        data.lateness_sampled ? h("p", { class: "help" }, "Measured on the newest runs only.") : null),
      details);
    fill(queue, table("Queue per tenant", ["Tenant", "Due, not started", "In flight"],
      data.queue.map((q) => [q.tenant, String(q.pending), String(q.running)]), "Nothing waiting or in flight."));
    fill(failing, table("Failing jobs", ["Job", "Failures"],
      data.failing.map((f) => [link(jobHref(f.tenant, f.job_id), `${f.tenant} / ${f.job_id}`), String(f.failures)]),
      "No failures in the last hour."));
  }
  startPolling(refresh);
  return heading;
}

// ---- start -----------------------------------------------------------------------------------
document.addEventListener("click", (event) => {
  const a = event.target.closest("a[href^='/ui']");
  if (!a || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden && refresher) refresher().catch(() => {}); });

document.addEventListener("DOMContentLoaded", async () => {
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", () => signOut("Signed out."));
  if (sessionStorage.getItem(KEY)) {
    try { session = await api("/v1/console/session", { signin: true }); route(); return; }
    catch (e) { sessionStorage.removeItem(KEY); }
  }
  signOut("");
});
