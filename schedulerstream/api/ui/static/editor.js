// schedulerstream web console: the job form ("New job" and "Edit"), with a JSON tab.
// Loaded after console.js and uses its helpers (h, fill, api, link, when, navigate, ...).
// The API validates (one source of truth); its 422 field errors are shown next to the field
// they name. Fields the form does not show (phase, start_at, max_runs, ...) are kept as they were.
"use strict";

const PREVIEW_COUNT = 5;
const PREVIEW_DELAY_MS = 250;
const TARGET_TYPES = [["http", "HTTP webhook"], ["kafka", "Kafka topic"], ["sqs", "SQS queue"], ["worker", "Worker pool"]];
const NEW_JOB = {
  schedule: { cron: "*/5 * * * *", timezone: VIEWER_ZONE },
  target: { type: "http", url: "", method: "POST" },
  payload: null, misfire_policy: "fire_once", overlap_policy: "allow", timeout: 30,
  retry: { max_attempts: 5, initial_backoff: 1, max_backoff: 300 },
};
// API field (after dropping a target's type tag and list indices) -> the control showing it
const CONTROLS = {
  job_id: "f-job-id", schedule: "f-kind", "schedule.cron": "f-cron", "schedule.every": "f-every",
  "schedule.at": "f-at", "schedule.timezone": "f-tz", "schedule.exclude": "f-exclude",
  "schedule.dst_gap": "f-dst-gap", "schedule.dst_repeat": "f-dst-repeat", "schedule.jitter": "f-jitter",
  target: "f-target-type", "target.url": "f-url", "target.method": "f-method", "target.headers": "f-headers",
  "target.secret": "f-secret", "target.topic": "f-topic", "target.key": "f-key", "target.queue_url": "f-queue-url",
  "target.region": "f-region", "target.pool": "f-pool", payload: "f-payload", "retry.max_attempts": "f-max-attempts",
  "retry.initial_backoff": "f-initial-backoff", "retry.max_backoff": "f-max-backoff", timeout: "f-timeout",
  misfire_policy: "f-misfire", catch_up_window: "f-catch-up", overlap_policy: "f-overlap",
  // the /v1/cron/next preview's names
  expr: "f-cron", or: "f-cron", tz: "f-tz", exclude: "f-exclude", dst_gap: "f-dst-gap", dst_repeat: "f-dst-repeat",
};

// ---- time in a named zone (for "at") --------------------------------------------------------
function wallParts(zone, instant) {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit",
    day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }).formatToParts(new Date(instant));
  return Object.fromEntries(parts.map((p) => [p.type, p.value]));
}

function offsetMinutes(zone, instant) {
  const p = wallParts(zone, instant);
  const wall = Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second);
  return Math.round((wall - Math.floor(instant / 1000) * 1000) / 60000);
}

// "2026-03-29T09:00" in Europe/Berlin -> "2026-03-29T09:00:00+02:00" (the API wants an offset)
function zonedIso(local, zone) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(local);
  if (!m) return local;
  const wall = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
  let offset;
  try { offset = offsetMinutes(zone, wall); offset = offsetMinutes(zone, wall - offset * 60000); }
  catch (e) { return `${local.length === 16 ? `${local}:00` : local}Z`; } // unknown zone: the API names it
  const two = (n) => String(n).padStart(2, "0");
  const abs = Math.abs(offset);
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6] || "00"}${offset < 0 ? "-" : "+"}${two(Math.floor(abs / 60))}:${two(abs % 60)}`;
}

function localInput(iso, zone) {
  if (!iso) return "";
  try {
    const p = wallParts(zone, new Date(iso).getTime());
    return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}`;
  } catch (e) { return ""; }
}

// ---- small parsers (anything they cannot read goes to the API as written, which names it) ------
const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);
const duration = (text) => (text.trim() !== "" && Number.isFinite(Number(text)) ? Number(text) : text.trim());

function excludedOf(text) {
  return lines(text).map((l) => {
    const range = /^(\S+)\s*\.\.\s*(\S+)$/.exec(l);
    return range ? { from: range[1], to: range[2] } : l;
  });
}
const excludedText = (items) => (items || []).map((i) => (typeof i === "string" ? i : `${i.from}..${i.to}`)).join("\n");

function headersOf(text) {
  const out = {};
  for (const [n, l] of lines(text).entries()) {
    const at = l.indexOf(":");
    if (at < 1) throw new FieldProblem("f-headers", `line ${n + 1}: write "Name: value"`);
    out[l.slice(0, at).trim()] = l.slice(at + 1).trim();
  }
  return out;
}

class FieldProblem extends Error {
  constructor(control, message) { super(message); this.control = control; }
}

function newSecret() {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

// ---- the page --------------------------------------------------------------------------------
function editorPage(tenant, jobId) {
  const editing = jobId !== null;
  const title = editing ? `Edit ${jobId}` : "New job";
  const body = h("div", { id: "editor" });
  const heading = pageShell(title, h("p", { class: "crumbs" }, link("/ui/jobs", "Jobs"),
    editing ? [" / ", link(jobHref(tenant, jobId), `${tenant} / ${jobId}`), " / edit"] : " / new"), body);
  if (session.operator) {
    fill(body, h("p", { class: "help" }, "Read-only: the operator key cannot change jobs; sign in with the tenant's key."));
  } else if (!editing) {
    buildEditor(body, null, null);
  } else if (tenant !== session.tenant) {
    fill(body, h("p", { class: "error", role: "alert" }, "Not found (or not yours to see)."));
  } else {
    fill(body, h("p", { class: "help" }, "Loading the job…"));
    api(`/v1/jobs/${encodeURIComponent(jobId)}`).then((job) => buildEditor(body, jobId, job))
      .catch((e) => fill(body, h("p", { class: "error", role: "alert" }, e.status === 404 ? "Not found (or not yours to see)." : e.message)));
  }
  return heading;
}

// One labelled control with its help and its error, wired with aria-describedby.
function field(id, label, control, help, attrs) {
  const helpEl = help ? h("p", { id: `${id}-help`, class: "help" }, help) : null;
  control.setAttribute("aria-describedby", [help ? `${id}-help` : null, `${id}-error`].filter(Boolean).join(" "));
  return h("div", { class: "field", ...(attrs || {}) }, h("label", { for: id }, label), control, helpEl,
    h("p", { id: `${id}-error`, class: "field-error" }));
}

function input(id, attrs) { return h("input", { id, name: id, type: "text", autocomplete: "off", spellcheck: "false", ...(attrs || {}) }); }
function area(id, rows, attrs) { return h("textarea", { id, name: id, rows, spellcheck: "false", ...(attrs || {}) }); }
function select(id, options) { return h("select", { id, name: id }, options.map(([v, t]) => h("option", { value: v }, t))); }

function buildEditor(body, jobId, job) {
  const editing = jobId !== null;
  const base = structuredClone(job ? job.definition : NEW_JOB);
  const redacted = base.target && base.target.secret === "redacted";
  const c = {}; // controls by id
  const make = (el) => { c[el.id] = el; return el; };

  // schedule
  const kinds = [["cron", "Cron"], ["every", "Every"], ["at", "Once, at"]];
  const kind = h("fieldset", { id: "f-kind", class: "kinds", tabindex: "-1", "aria-describedby": "f-kind-error" },
    h("legend", {}, "Schedule kind"),
    kinds.map(([v, t]) => h("label", { class: "choice" },
      make(h("input", { type: "radio", name: "kind", id: `f-kind-${v}`, value: v, onchange: showKind })), ` ${t}`)),
    h("p", { id: "f-kind-error", class: "field-error" }));
  const cronPanel = h("div", { id: "p-cron" }, field("f-cron", "Cron expressions", make(area("f-cron", 2, { oninput: schedulePreview })),
    "One per line: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first (*/5 * * * * *), or @daily. Several lines fire at the union of their instants, each instant once."));
  const everyPanel = h("div", { id: "p-every" }, field("f-every", "Period", make(input("f-every", { inputmode: "decimal", oninput: schedulePreview })),
    "Seconds (30) or ISO 8601 (PT5M)."));
  const atPanel = h("div", { id: "p-at" }, field("f-at", "At (wall time in the job's zone)",
    make(input("f-at", { type: "datetime-local", step: "1", oninput: schedulePreview })), "Fires once."));
  const zoneList = h("datalist", { id: "zones" },
    (typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : []).map((z) => h("option", { value: z })));
  const tz = field("f-tz", "Time zone", make(input("f-tz", { list: "zones", oninput: schedulePreview })),
    `IANA name, e.g. Europe/Berlin (yours: ${VIEWER_ZONE}).`);
  const exclude = field("f-exclude", "Dates without runs", make(area("f-exclude", 2, { oninput: schedulePreview, placeholder: "2026-12-25\n2026-12-31..2027-01-01" })),
    "Optional. One per line: a local date YYYY-MM-DD, or a range FROM..TO (both included), in the job's time zone.");
  const dst = h("details", { class: "more" }, h("summary", {}, "DST and jitter"),
    h("div", { class: "grid" },
      field("f-dst-gap", "In a DST gap (a wall time that does not exist)", make(select("f-dst-gap",
        [["auto", "auto"], ["fire_after", "fire after the gap"], ["skip", "skip"]]))),
      field("f-dst-repeat", "In a DST overlap (a wall time that happens twice)", make(select("f-dst-repeat",
        [["auto", "auto"], ["first", "first only"], ["both", "both"]]))),
      field("f-jitter", "Jitter", make(input("f-jitter", { inputmode: "decimal" })), "Up to this many seconds late, at random (0: none).")));
  c["f-dst-gap"].addEventListener("change", schedulePreview);
  c["f-dst-repeat"].addEventListener("change", schedulePreview);
  const preview = h("div", { id: "preview", class: "preview" });
  const schedule = h("fieldset", { class: "group" }, h("legend", {}, "When"), kind, cronPanel, everyPanel, atPanel,
    tz, zoneList, exclude, dst,
    h("section", { "aria-labelledby": "preview-h" }, h("h3", { id: "preview-h" }, "Next instants"), preview));

  // target
  const typeSelect = make(select("f-target-type", TARGET_TYPES));
  typeSelect.addEventListener("change", showTarget);
  const secretHelp = redacted
    ? "This job has a secret, and the API never shows it: enter it again to keep signing, or leave it empty to stop signing."
    : "Optional: signs each request (Standard Webhooks). whsec_ and base64 of 16+ bytes.";
  const generate = h("button", { type: "button", class: "quiet", id: "f-secret-generate", onclick: () => {
    c["f-secret"].value = newSecret(); announce("A new secret is in the field; copy it to your receiver.");
  } }, "Generate a secret");
  const targets = {
    http: h("div", { id: "p-http", class: "grid" },
      field("f-url", "URL", make(input("f-url", { inputmode: "url", placeholder: "https://example.com/hook" }))),
      field("f-method", "Method", make(select("f-method", ["POST", "PUT", "PATCH", "GET", "DELETE"].map((m) => [m, m])))),
      field("f-headers", "Headers", make(area("f-headers", 2, { placeholder: "X-Team: billing" })), "Optional. One per line: Name: value."),
      h("div", {}, field("f-secret", "Signing secret", make(input("f-secret", { placeholder: redacted ? "(set; enter it again)" : "" })), secretHelp), generate)),
    kafka: h("div", { id: "p-kafka", class: "grid" },
      field("f-topic", "Topic", make(input("f-topic"))),
      field("f-key", "Record key", make(input("f-key")), "Optional (default: the run id).")),
    sqs: h("div", { id: "p-sqs", class: "grid" },
      field("f-queue-url", "Queue URL", make(input("f-queue-url", { inputmode: "url" }))),
      field("f-region", "Region", make(input("f-region", { placeholder: "eu-west-1" })))),
    worker: h("div", { id: "p-worker", class: "grid" },
      field("f-pool", "Worker pool", make(input("f-pool")), "Workers of this pool take the runs (schedulerstream worker).")),
  };
  const target = h("fieldset", { class: "group" }, h("legend", {}, "Where to"),
    field("f-target-type", "Target", typeSelect), Object.values(targets));

  // payload, retries, policies
  const payload = h("fieldset", { class: "group" }, h("legend", {}, "What"),
    field("f-payload", "Payload (JSON)", make(area("f-payload", 4, { placeholder: '{"report": "daily"}' })), "Optional: sent with every run."));
  const policy = h("fieldset", { class: "group" }, h("legend", {}, "Retries and policies"),
    h("div", { class: "grid" },
      field("f-max-attempts", "Attempts at most", make(input("f-max-attempts", { type: "number", min: "1", max: "1000" }))),
      field("f-initial-backoff", "First retry after", make(input("f-initial-backoff", { inputmode: "decimal" })), "Seconds or ISO 8601; doubles each retry."),
      field("f-max-backoff", "Retry delay at most", make(input("f-max-backoff", { inputmode: "decimal" }))),
      field("f-timeout", "Timeout per attempt", make(input("f-timeout", { inputmode: "decimal" })), "Seconds or ISO 8601."),
      field("f-misfire", "Missed while down", make(select("f-misfire",
        [["fire_once", "fire once"], ["skip", "skip"], ["catch_up", "catch up (each run)"]])), "What to do with instants missed while the scheduler was down."),
      field("f-catch-up", "Catch up at most", make(input("f-catch-up", { inputmode: "decimal" })), "How far back missed instants count."),
      field("f-overlap", "If the previous run is still going", make(select("f-overlap",
        [["allow", "run anyway"], ["forbid", "skip this one"], ["replace", "cancel the previous"], ["buffer_one", "queue one"]])))));

  // the JSON tab
  const json = make(area("f-json", 18, { class: "code" }));
  const jsonPanel = h("div", { id: "panel-json", role: "tabpanel", "aria-labelledby": "tab-json", hidden: true },
    field("f-json", "The whole definition (JSON)", json,
      "Paste or edit a definition as the API takes it (tenant, job_id and version may be left out; the server sets the version)."));
  const formPanel = h("div", { id: "panel-form", role: "tabpanel", "aria-labelledby": "tab-form" }, schedule, target, payload, policy);
  const tabs = h("div", { role: "tablist", "aria-label": "Edit as", class: "tabs" },
    h("button", { type: "button", role: "tab", id: "tab-form", "aria-controls": "panel-form", "aria-selected": "true", onclick: () => showTab("form") }, "Form"),
    h("button", { type: "button", role: "tab", id: "tab-json", "aria-controls": "panel-json", "aria-selected": "false", tabindex: "-1", onclick: () => showTab("json") }, "JSON"));
  tabs.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight" && e.key !== "Home" && e.key !== "End") return;
    e.preventDefault();
    const next = mode === "form" ? "json" : "form";
    showTab(e.key === "Home" ? "form" : e.key === "End" ? "json" : next);
    $(`tab-${mode}`).focus();
  });

  const idField = field("f-job-id", "Job id", make(input("f-job-id", { required: true, maxlength: "128", value: jobId || "", readonly: editing })),
    editing ? "A job's id cannot change." : "Letters, digits, . _ - (it is in the job's URL).");
  const summary = h("div", { id: "form-errors", class: "summary", tabindex: "-1", role: "alert" });
  const submit = h("button", { type: "submit", id: "save" }, editing ? "Save changes" : "Create job");
  const cancel = link(editing ? jobHref(session.tenant, jobId) : "/ui/jobs", "Cancel", { class: "button quiet" });
  const form = h("form", { id: "job-form", novalidate: true, onsubmit: save }, summary, idField, tabs, formPanel, jsonPanel,
    h("div", { class: "row" }, submit, cancel));
  fill(body, form);

  form.addEventListener("input", (event) => { // an edited field's error is out of date
    const id = event.target.id.startsWith("f-kind-") ? "f-kind" : event.target.id;
    clearErrors([id]);
    for (const item of summary.querySelectorAll(`li[data-control="${id}"]`)) item.remove();
    if (summary.childNodes.length && !summary.querySelector("li")) fill(summary);
  });
  let mode = "form";
  let previewSeq = 0;
  let previewTimer = null;
  fillForm(base);

  function value(id) { return c[id].value; }
  function kindNow() { return (kinds.find(([v]) => c[`f-kind-${v}`].checked) || ["cron"])[0]; }

  function showKind() {
    const k = kindNow();
    cronPanel.hidden = k !== "cron"; everyPanel.hidden = k !== "every"; atPanel.hidden = k !== "at";
    schedulePreview();
  }
  function showTarget() { for (const [t, panel] of Object.entries(targets)) panel.hidden = t !== typeSelect.value; }

  function fillForm(def) {
    const s = def.schedule || {};
    const k = s.every !== undefined && s.every !== null ? "every" : s.at ? "at" : "cron";
    for (const [v] of kinds) c[`f-kind-${v}`].checked = v === k;
    c["f-cron"].value = Array.isArray(s.cron) ? s.cron.join("\n") : s.cron || "";
    c["f-every"].value = s.every ?? "";
    c["f-tz"].value = s.timezone || "UTC";
    c["f-at"].value = localInput(s.at, c["f-tz"].value);
    c["f-exclude"].value = excludedText(s.exclude);
    c["f-dst-gap"].value = s.dst_gap || "auto";
    c["f-dst-repeat"].value = s.dst_repeat || "auto";
    c["f-jitter"].value = s.jitter ?? 0;
    const t = def.target || { type: "http" };
    typeSelect.value = t.type || "http";
    c["f-url"].value = t.url || "";
    c["f-method"].value = t.method || "POST";
    c["f-headers"].value = Object.entries(t.headers || {}).map(([n, v]) => `${n}: ${v}`).join("\n");
    c["f-secret"].value = t.secret && t.secret !== "redacted" ? t.secret : "";
    c["f-topic"].value = t.topic || "";
    c["f-key"].value = t.key || "";
    c["f-queue-url"].value = t.queue_url || "";
    c["f-region"].value = t.region || "";
    c["f-pool"].value = t.pool || "";
    c["f-payload"].value = def.payload === null || def.payload === undefined ? "" : JSON.stringify(def.payload, null, 2);
    const r = def.retry || {};
    c["f-max-attempts"].value = r.max_attempts ?? 5;
    c["f-initial-backoff"].value = r.initial_backoff ?? 1;
    c["f-max-backoff"].value = r.max_backoff ?? 300;
    c["f-timeout"].value = def.timeout ?? 30;
    c["f-misfire"].value = def.misfire_policy || "fire_once";
    c["f-catch-up"].value = def.catch_up_window ?? 3600;
    c["f-overlap"].value = def.overlap_policy || "allow";
    showTarget();
    showKind();
  }

  // The definition the form shows, on top of `from` (so fields it does not show are kept).
  function readForm(from) {
    const def = structuredClone(from);
    for (const name of ["tenant", "job_id", "version"]) delete def[name];
    const s = { ...(def.schedule || {}) };
    delete s.cron; delete s.every; delete s.at;
    const k = kindNow();
    if (k === "cron") { const list = lines(value("f-cron")); s.cron = list.length === 1 ? list[0] : list.length ? list : ""; }
    if (k === "every") s.every = duration(value("f-every"));
    if (k === "at") s.at = value("f-at") ? zonedIso(value("f-at"), value("f-tz").trim()) : "";
    if (k !== "every") delete s.phase;
    s.timezone = value("f-tz").trim();
    s.exclude = excludedOf(value("f-exclude"));
    s.dst_gap = value("f-dst-gap");
    s.dst_repeat = value("f-dst-repeat");
    s.jitter = duration(value("f-jitter") || "0");
    def.schedule = s;
    const type = typeSelect.value;
    const kept = def.target && def.target.type === type ? def.target : {};
    const optional = (text) => (text.trim() ? text.trim() : null);
    const t = { ...kept, type };
    if (type === "http") {
      Object.assign(t, { url: value("f-url").trim(), method: value("f-method"), headers: headersOf(value("f-headers")),
        secret: optional(value("f-secret")) });
    } else if (type === "kafka") Object.assign(t, { topic: value("f-topic").trim(), key: optional(value("f-key")) });
    else if (type === "sqs") Object.assign(t, { queue_url: value("f-queue-url").trim(), region: value("f-region").trim() });
    else t.pool = value("f-pool").trim();
    def.target = t;
    const text = value("f-payload").trim();
    if (!text) def.payload = null;
    else {
      try { def.payload = JSON.parse(text); } catch (e) { throw new FieldProblem("f-payload", `not JSON: ${e.message}`); }
    }
    def.retry = { ...(def.retry || {}), max_attempts: value("f-max-attempts") === "" ? "" : Number(value("f-max-attempts")),
      initial_backoff: duration(value("f-initial-backoff")), max_backoff: duration(value("f-max-backoff")) };
    def.timeout = duration(value("f-timeout"));
    def.misfire_policy = value("f-misfire");
    def.catch_up_window = duration(value("f-catch-up"));
    def.overlap_policy = value("f-overlap");
    return def;
  }

  function readJson() {
    let def;
    try { def = JSON.parse(json.value); } catch (e) { throw new FieldProblem("f-json", `not JSON: ${e.message}`); }
    if (!def || typeof def !== "object" || Array.isArray(def)) throw new FieldProblem("f-json", "must be a JSON object");
    delete def.version; // the server sets it; If-Match carries the one this edit started from
    if (def.target && def.target.secret === "redacted") delete def.target.secret;
    return def;
  }

  function showTab(next) {
    if (next === mode) return;
    clearErrors();
    if (next === "json") {
      let def;
      try { def = readForm(base); } catch (e) { return showProblems([e]); }
      json.value = JSON.stringify(def, null, 2);
    } else {
      let def;
      try { def = readJson(); } catch (e) { return showProblems([e]); }
      if (typeof def.job_id === "string" && !editing && !c["f-job-id"].value) c["f-job-id"].value = def.job_id;
      fillForm(def);
    }
    mode = next;
    for (const t of ["form", "json"]) {
      const tab = $(`tab-${t}`);
      tab.setAttribute("aria-selected", String(t === mode));
      tab.tabIndex = t === mode ? 0 : -1;
      $(`panel-${t}`).hidden = t !== mode;
    }
  }

  // ---- errors next to their field, and a summary linking to each ----------------------------
  function controlOf(apiField) {
    const parts = apiField.split(".");
    if (parts[0] === "target" && TARGET_TYPES.some(([t]) => t === parts[1])) parts.splice(1, 1);
    let index = null;
    const named = [];
    for (const p of parts) { if (/^\d+$/.test(p)) index = Number(p); else if (p !== "date" && p !== "range") named.push(p); }
    for (let n = named.length; n > 0; n -= 1) {
      const id = CONTROLS[named.slice(0, n).join(".")];
      if (id) return { id, index };
    }
    return { id: null, index };
  }

  function problemOf(error, fromPreview) {
    const { id, index } = controlOf(error.field);
    let message = error.message;
    let control = mode === "json" && !fromPreview ? "f-json" : id;
    if (error.field === "schedule" && /^cron\b/.test(message)) { control = mode === "json" ? "f-json" : "f-cron"; message = message.replace(/^cron /, ""); }
    if (index !== null && (error.field.startsWith("schedule.exclude") || error.field.startsWith("exclude"))) message = `line ${index + 1}: ${message}`;
    if (error.field.startsWith("or.")) message = `line ${index + 2}: ${message}`;
    if (control === "f-json" || control === null) message = `${error.field}: ${message}`;
    return new FieldProblem(control, message);
  }

  function setError(control, message) {
    const box = $(`${control}-error`);
    const el = c[control] || $(control);
    if (!box || !el) return false;
    fill(box, box.textContent ? `${box.textContent} ${message}` : message);
    el.setAttribute("aria-invalid", "true");
    return true;
  }

  function clearErrors(only) {
    for (const box of form.querySelectorAll(".field-error")) {
      const control = box.id.replace(/-error$/, "");
      if (only && !only.includes(control)) continue;
      fill(box);
      const el = c[control] || $(control);
      if (el) el.removeAttribute("aria-invalid");
    }
    if (!only) fill(summary);
  }

  function showProblems(problems, headline) {
    const items = problems.map((p) => {
      const placed = p.control && setError(p.control, p.message);
      const label = placed ? form.querySelector(`label[for="${p.control}"], #${p.control} > legend`) : null;
      return h("li", { "data-control": placed ? p.control : null }, placed
        ? h("a", { href: `#${p.control}`, onclick: (e) => { e.preventDefault(); (c[p.control] || $(p.control)).focus(); } },
          `${label ? label.textContent : p.control}: ${p.message}`)
        : p.message);
    });
    const count = problems.length === 1 ? "this problem" : `these ${problems.length} problems`;
    fill(summary, h("p", {}, headline || `Not saved: fix ${count}.`), h("ul", {}, items));
    summary.focus();
  }

  // ---- the live preview (cron: /v1/cron/next; at: the instant itself) -------------------------
  function schedulePreview() {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(runPreview, PREVIEW_DELAY_MS);
  }

  // Interval instants are phase + k * period since the epoch (timing/every.py), so every
  // instance agrees; computed here for a period in seconds (ISO 8601: the job page lists them).
  function everyPreview(zone) {
    const period = Number(value("f-every"));
    const phase = Number((base.schedule || {}).phase || 0);
    const sentence = h("p", { class: "help" }, "Fires at every multiple of the period since 1970-01-01 UTC, plus the phase (so all instances agree).");
    if (!(period > 0) || !Number.isFinite(phase)) return sentence;
    const step = period * 1000;
    const first = Math.ceil((Date.now() - phase * 1000) / step) * step + phase * 1000;
    const rows = [];
    for (let n = 0; n < PREVIEW_COUNT; n += 1) {
      const iso = new Date(first + n * step).toISOString();
      rows.push([String(n + 1), timeEl(iso, zone), timeEl(iso, "UTC"), timeEl(iso, VIEWER_ZONE)]);
    }
    const caveat = lines(value("f-exclude")).length ? h("p", { class: "help" }, "Dates without runs are left out when the job runs; this preview does not apply them.") : null;
    return [sentence, table("Next instants", ["#", `In ${zone}`, "UTC", "Yours"], rows), caveat];
  }

  async function runPreview() {
    const seq = ++previewSeq;
    const zone = value("f-tz").trim() || "UTC";
    const k = kindNow();
    const mine = ["f-cron", "f-tz", "f-exclude", "f-at", "f-dst-gap", "f-dst-repeat"];
    if (k === "every") { clearErrors(mine); fill(preview, everyPreview(zone)); return; }
    if (k === "at") {
      clearErrors(mine);
      const at = value("f-at") ? zonedIso(value("f-at"), zone) : null;
      fill(preview, at && !at.endsWith("Z") ? table("Next instants", ["#", `In ${zone}`, "UTC", "Yours"], [["1", timeEl(at, zone), timeEl(at, "UTC"), timeEl(at, VIEWER_ZONE)]])
        : h("p", { class: "help" }, "Pick a date and time and a known time zone."));
      return;
    }
    const exprs = lines(value("f-cron"));
    if (!exprs.length) { fill(preview, h("p", { class: "help" }, "Type a cron expression to see its next instants.")); return; }
    const query = new URLSearchParams({ expr: exprs[0], tz: zone, count: String(PREVIEW_COUNT),
      dst_gap: value("f-dst-gap"), dst_repeat: value("f-dst-repeat") });
    for (const more of exprs.slice(1)) query.append("or", more);
    for (const item of lines(value("f-exclude"))) query.append("exclude", item);
    let answer;
    try { answer = await api(`/v1/cron/next?${query}`); }
    catch (e) {
      if (seq !== previewSeq) return;
      clearErrors(mine);
      const problems = (e.fields || []).length ? e.fields.map((f) => problemOf(f, true)) : [new FieldProblem("f-cron", e.message)];
      for (const p of problems) setError(p.control || "f-cron", p.message);
      fill(preview, h("p", { class: "help" }, "No preview until the schedule reads well (see the note at the field)."));
      return;
    }
    if (seq !== previewSeq) return;
    clearErrors(mine);
    const several = exprs.length > 1;
    fill(preview, table("Next instants", ["#", `In ${zone}`, "UTC", "Yours", "DST note", ...(several ? ["Expressions"] : [])],
      answer.instants.map((i, n) => [String(n + 1), timeEl(i.utc, zone), timeEl(i.utc, "UTC"), timeEl(i.utc, VIEWER_ZONE),
        i.note || "", ...(several ? [i.expressions.join(", ")] : [])]), "No instant: the schedule never fires (or every date is excluded)."));
  }

  // ---- save ----------------------------------------------------------------------------------
  async function save(event) {
    event.preventDefault();
    clearErrors();
    let id = c["f-job-id"].value.trim();
    let def;
    try {
      def = mode === "json" ? readJson() : readForm(base);
      if (!id && typeof def.job_id === "string") { id = def.job_id; c["f-job-id"].value = id; }
      if (!id) throw new FieldProblem("f-job-id", "give the job an id");
      if (redacted && def.target && def.target.type === "http" && !def.target.secret && !confirmDropSecret()) return;
    } catch (e) { if (e instanceof FieldProblem) return showProblems([e]); throw e; }
    submit.disabled = true;
    try {
      const path = `/v1/jobs/${encodeURIComponent(id)}`;
      if (!editing) {
        const exists = await api(path).then(() => true, (e) => (e.status === 404 ? false : Promise.reject(e)));
        if (exists) return showProblems([new FieldProblem("f-job-id", "a job with this id exists; open it and use Edit (saving here would replace it)")]);
      }
      const headers = editing ? { "If-Match": `"${job.version}"` } : {};
      const written = await api(path, { method: "PUT", body: def, headers });
      announce(editing ? `Saved: version ${written.version}.` : `Created ${id}.`);
      navigate(jobHref(session.tenant, id));
    } catch (e) {
      if (e.status === 422 && (e.fields || []).length) showProblems(e.fields.map((f) => problemOf(f, false)));
      else if (e.status === 409 && editing) {
        showProblems([new FieldProblem(null, `${e.message}. Someone changed this job since you opened the form.`)],
          "Not saved: the job changed meanwhile. Reload the form to edit the newest version (your changes here are not kept).");
        summary.append(h("button", { type: "button", class: "quiet", id: "reload", onclick: () => route() }, "Reload the form"));
      } else showProblems([new FieldProblem(null, e.message)], "Not saved.");
    } finally { submit.disabled = false; }
  }

  let dropConfirmed = false;
  function confirmDropSecret() {
    if (dropConfirmed) return true;
    dropConfirmed = true; // a second save without a secret means it
    throw new FieldProblem(mode === "json" ? "f-json" : "f-secret",
      "this job signs its requests, and the API never shows the secret: enter it again, or save once more to stop signing");
  }
}
