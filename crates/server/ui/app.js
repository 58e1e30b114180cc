// The EviCortex inspector: a front end over the HTTP API with the key the user types.
// Everything shown is built with DOM nodes and textContent: stored turns are untrusted text.
// The key lives in this tab's sessionStorage only; it is never put in a URL.
"use strict";

const KEY_SLOT = "evicortex.inspector.key";
const $ = (id) => document.getElementById(id);

const state = { key: sessionStorage.getItem(KEY_SLOT) || "", namespace: null, admin: false };

/// An element with text (never parsed as HTML) and optional class.
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function say(id, text, kind) {
  const node = $(id);
  node.textContent = text;
  node.className = "message" + (kind ? " " + kind : "");
}

/// Calls the API. Resolves to the parsed body; rejects with an Error whose message says the
/// status and the server's error text (401 and 403 named as such).
async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + state.key };
  const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  try { parsed = JSON.parse(text); } catch (_) { parsed = null; }
  if (!response.ok) {
    const detail = parsed && parsed.error ? parsed.error : text;
    const field = parsed && parsed.field ? " (field " + parsed.field + ")" : "";
    let prefix = "Error " + response.status;
    if (response.status === 401) prefix = "401 Unauthorized: the key was refused";
    if (response.status === 403) prefix = "403 Forbidden";
    const error = new Error(prefix + ": " + detail + field);
    error.status = response.status;
    throw error;
  }
  return parsed;
}

function nsPath(suffix) {
  return "/v1/namespaces/" + encodeURIComponent(state.namespace) + suffix;
}

// ---- key and namespace -------------------------------------------------------------------

async function connect(event) {
  if (event) event.preventDefault();
  say("auth-message", "Connecting…", "");
  const typed = $("key").value.trim();
  if (typed) state.key = typed;
  $("key").value = "";
  resetWorkspace();
  $("workspace").hidden = true;
  $("namespace-label").hidden = true;
  if (!state.key) {
    say("auth-message", "Enter an API key (evk_...).", "error");
    return;
  }
  try {
    const listing = await api("GET", "/v1/namespaces");
    sessionStorage.setItem(KEY_SLOT, state.key);
    state.admin = listing.admin;
    const select = $("namespace");
    clear(select);
    for (const ns of listing.namespaces) select.appendChild(el("option", ns));
    if (listing.namespaces.length === 0) {
      say("auth-message", "Connected with an admin key; the store has no namespace yet.", "ok");
      return;
    }
    say("auth-message", "Connected with " + (listing.admin ? "an admin key" : "a key for namespace " + listing.namespaces[0]) + ".", "ok");
    $("namespace-label").hidden = false;
    await pickNamespace(listing.namespaces[0]);
  } catch (error) {
    forgetKey(false);
    say("auth-message", error.message, "error");
  }
}

function forgetKey(announce) {
  state.key = "";
  state.namespace = null;
  sessionStorage.removeItem(KEY_SLOT);
  resetWorkspace();
  $("workspace").hidden = true;
  $("namespace-label").hidden = true;
  clear($("namespace"));
  if (announce) say("auth-message", "Key forgotten.", "");
}

/// Clears everything shown for the previous namespace.
function resetWorkspace() {
  clear($("timeline"));
  clear($("timeline-axis"));
  $("ns-stats").textContent = "";
  $("result").hidden = true;
  for (const id of ["citations", "explain"]) clear($(id).querySelector("tbody"));
  for (const id of ["context-text", "raw-json", "summary"]) $(id).textContent = "";
  clear($("budget-bar"));
  clear($("budget-figures"));
  for (const id of ["compile-message", "verify-result", "erase-result"]) say(id, "", "");
  $("erase-confirm").hidden = true;
}

async function pickNamespace(namespace) {
  state.namespace = namespace;
  $("namespace").value = namespace;
  resetWorkspace();
  $("workspace").hidden = false;
  await loadSessions();
}

// ---- sessions timeline -------------------------------------------------------------------

async function loadSessions() {
  const namespace = state.namespace;
  try {
    const [stats, listing] = await Promise.all([api("GET", nsPath("/stats")), api("GET", nsPath("/sessions"))]);
    if (namespace !== state.namespace) return;
    const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
    $("ns-stats").textContent = plural(stats.turns, "turn") + " in " + plural(stats.sessions, "session");
    renderTimeline(listing.sessions);
  } catch (error) {
    say("auth-message", error.message, "error");
  }
}

function renderTimeline(sessions) {
  const list = $("timeline");
  const axis = $("timeline-axis");
  clear(list);
  clear(axis);
  if (sessions.length === 0) {
    list.appendChild(el("li", "No turns stored in this namespace.", "muted"));
    return;
  }
  const times = sessions.flatMap((s) => [Date.parse(s.first), Date.parse(s.last)]);
  const start = Math.min(...times);
  const span = Math.max(Math.max(...times) - start, 1);
  for (const s of sessions) {
    const marker = el("span", "", "marker");
    marker.title = s.session;
    marker.style.left = ((Date.parse(s.first) - start) / span * 100).toFixed(2) + "%";
    axis.appendChild(marker);
    const item = el("li");
    item.appendChild(el("strong", s.session));
    const when = s.first.slice(0, 10) === s.last.slice(0, 10)
      ? s.first.slice(0, 16).replace("T", " ")
      : s.first.slice(0, 10) + " to " + s.last.slice(0, 10);
    item.appendChild(el("span", " " + when + " · " + s.turns + (s.turns === 1 ? " turn" : " turns"), "muted"));
    list.appendChild(item);
  }
}

// ---- compile -----------------------------------------------------------------------------

async function compile(event) {
  event.preventDefault();
  say("compile-message", "Compiling…", "");
  $("result").hidden = true;
  const request = {
    query: $("question").value,
    budget: Number($("budget").value),
    reader_tokenizer: $("reader-tokenizer").value,
  };
  const asOf = $("as-of").value.trim();
  if (asOf) request.as_of = asOf;
  const options = $("options").value.trim();
  if (options) {
    try {
      request.options = JSON.parse(options);
    } catch (error) {
      say("compile-message", "Settings are not valid JSON: " + error.message, "error");
      return;
    }
  }
  const namespace = state.namespace;
  try {
    const context = await api("POST", nsPath("/compile"), request);
    if (namespace !== state.namespace) return;
    say("compile-message", "", "");
    renderContext(context);
  } catch (error) {
    say("compile-message", error.message, "error");
  }
}

function renderContext(c) {
  const reason = c.abstain_reason ? " (" + c.abstain_reason.kind.replace(/_/g, " ") + ")" : "";
  $("summary").textContent = (c.abstain ? "Abstains" + reason : c.items.length + " turns cited") +
    " · " + c.tokens_used + " of " + c.budget + " " + c.reader_tokenizer + " tokens" +
    (c.support === null || c.support === undefined ? "" : " · support " + c.support.toFixed(4)) +
    (c.encoder ? " · encoder " + c.encoder.model : " · lexical only") +
    (c.coverage && c.coverage.dense_pending ? " · " + c.coverage.dense_pending + " turns not embedded yet" : "");
  renderBudget(c);
  $("context-text").textContent = c.abstain ? "(nothing packed: the compiler abstains)" : c.text;
  renderCitations(c.items);
  renderExplain(c);
  $("raw-json").textContent = JSON.stringify(c, null, 2);
  $("result").hidden = false;
}

function renderBudget(c) {
  const parts = c.budget_parts || { preamble: 0, headers: 0, evidence: 0 };
  const bar = $("budget-bar");
  const figures = $("budget-figures");
  clear(bar);
  clear(figures);
  const budget = Math.max(c.budget, 1);
  const segments = [
    ["preamble", parts.preamble],
    ["headers", parts.headers],
    ["evidence", parts.evidence],
    ["unused", Math.max(c.budget - c.tokens_used, 0)],
  ];
  for (const [name, tokens] of segments) {
    const segment = el("span", "", "segment " + name);
    segment.title = name + ": " + tokens + " tokens";
    segment.style.width = (tokens / budget * 100).toFixed(2) + "%";
    bar.appendChild(segment);
  }
  const rows = [
    ["preamble", parts.preamble],
    ["headers", parts.headers],
    ["evidence", parts.evidence],
    ["used", c.tokens_used],
    ["budget", c.budget],
  ];
  for (const [name, tokens] of rows) {
    const term = el("dt", name, "swatch " + name);
    const value = el("dd", tokens);
    value.dataset.part = name;
    figures.appendChild(term);
    figures.appendChild(value);
  }
}

function renderCitations(items) {
  const body = $("citations").querySelector("tbody");
  clear(body);
  for (const item of items) {
    const row = el("tr");
    row.dataset.record = item.record;
    row.appendChild(el("td", item.citation, "citation"));
    row.appendChild(el("td", item.session));
    row.appendChild(el("td", item.time));
    row.appendChild(el("td", item.role));
    row.appendChild(el("td", item.speaker || ""));
    row.appendChild(el("td", item.tokens, "num"));
    row.appendChild(el("td", item.text, "turn-text"));
    body.appendChild(row);
  }
}

const rank = (r) => (r ? "#" + r.rank + " (" + r.score.toFixed(3) + ")" : "–");

/// What put an item in the text, or kept a candidate out, with each mechanism's contribution.
function contributions(lists, rerankRank, divisor) {
  const parts = [];
  for (const l of lists || []) parts.push(l.list.replace(/_/g, " ") + " #" + l.rank);
  if (rerankRank) parts.push("reranker #" + rerankRank.rank);
  if (divisor) parts.push("long turn: score / " + divisor.toFixed(2));
  return parts;
}

function exclusionReason(reason) {
  switch (reason.kind) {
    case "budget": return "did not fit the budget";
    case "duplicate": return "same text as #" + reason.of + " (cited with it)";
    case "filtered": return "filtered: " + JSON.stringify(reason.filter);
    case "abstained": return "the compiler abstained";
    default: return reason.kind;
  }
}

function renderExplain(c) {
  const body = $("explain").querySelector("tbody");
  clear(body);
  const add = (cells, cls) => {
    const row = el("tr", undefined, cls);
    for (const [text, cellClass] of cells) row.appendChild(el("td", text, cellClass));
    body.appendChild(row);
  };
  for (const item of c.items) {
    const why = [];
    if (item.selected_by.kind === "expansion") why.push("neighbour of #" + item.selected_by.of);
    why.push(...contributions(item.lists, item.rerank, item.length_divisor));
    const fused = item.fused_rank ? "#" + item.fused_rank + " (" + item.fused_score.toFixed(4) + ")" : "–";
    add([[item.citation, "citation"], ["selected"], [rank(item.lexical)], [rank(item.dense)], [fused], [rank(item.rerank)],
      [why.length ? why.join("; ") : "retrieval only"]], "selected");
  }
  for (const ex of c.excluded) {
    const why = [exclusionReason(ex.reason), ...contributions(ex.lists, null, ex.length_divisor)];
    add([["#" + ex.record, "citation"], ["excluded"], [rank(ex.lexical)], [rank(ex.dense)],
      [ex.fused_rank ? "#" + ex.fused_rank : "–"], ["–"], [why.join("; ")]], "excluded");
  }
}

// ---- verify and erase --------------------------------------------------------------------

async function verify() {
  say("verify-result", "Verifying…", "");
  try {
    const report = await api("GET", "/v1/verify");
    say("verify-result", "Ledger verified: " + report.records + " records, " + report.turns + " live turns, " +
      report.erased_turns + " erased, chain head " + report.chain_head.slice(0, 16) + "…", "ok");
  } catch (error) {
    const hint = error.status === 403 ? " (the full-ledger check needs an admin key)" : "";
    say("verify-result", error.message + hint, "error");
  }
}

function eraseRequest() {
  const kind = $("erase-kind").value;
  const target = $("erase-target").value.trim();
  if (kind === "all") return { body: { all: true }, what: "every turn of namespace " + state.namespace };
  if (!target) throw new Error("Name the " + kind + " to erase.");
  if (kind === "record") {
    const record = Number(target.replace(/^#/, ""));
    if (!Number.isInteger(record) || record < 1) throw new Error("A record is a positive number, e.g. 12.");
    return { body: { record }, what: "record #" + record + " of namespace " + state.namespace };
  }
  return { body: { session: target }, what: "session " + target + " of namespace " + state.namespace };
}

let pendingErase = null;

function askErase(event) {
  event.preventDefault();
  try {
    pendingErase = eraseRequest();
  } catch (error) {
    say("erase-result", error.message, "error");
    return;
  }
  $("erase-question").textContent = "Erase " + pendingErase.what + "? The text and everything derived from it are removed for good.";
  $("erase-confirm").hidden = false;
  say("erase-result", "", "");
}

async function confirmErase() {
  const request = pendingErase;
  pendingErase = null;
  $("erase-confirm").hidden = true;
  if (!request) return;
  try {
    const receipt = await api("POST", nsPath("/erase"), request.body);
    say("erase-result", "Erased " + receipt.erased.length + " turns" +
      (receipt.already_erased ? " (" + receipt.already_erased + " were already erased)" : "") + ".", "ok");
    await loadSessions();
  } catch (error) {
    say("erase-result", error.message, "error");
  }
}

function cancelErase() {
  pendingErase = null;
  $("erase-confirm").hidden = true;
  say("erase-result", "Nothing erased.", "");
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", connect);
  $("forget").addEventListener("click", () => forgetKey(true));
  $("namespace").addEventListener("change", (event) => pickNamespace(event.target.value));
  $("compile-form").addEventListener("submit", compile);
  $("verify").addEventListener("click", verify);
  $("erase-form").addEventListener("submit", askErase);
  $("erase-yes").addEventListener("click", confirmErase);
  $("erase-no").addEventListener("click", cancelErase);
  if (state.key) connect();
});
