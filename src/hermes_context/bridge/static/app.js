// hermes-context inspector: plain JS over the bridge API. Untrusted text is only
// ever inserted with textContent / text nodes, never as HTML.
"use strict";
const $ = (id) => document.getElementById(id);
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
let token = sessionStorage.getItem("hermesToken") || "";
let current = null;

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${token}`, ...(options.headers || {}) };
  if (options.body && typeof options.body !== "string") {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try { message = (await response.json()).error.message; } catch (e) { /* not JSON */ }
    const error = new Error(message); error.status = response.status; throw error;
  }
  return response;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (p && p.text) || "").join("");
  return content == null ? "" : JSON.stringify(content);
}

async function login() {
  token = $("token").value.trim() || token;
  try {
    await api("/v1/sessions?limit=1");
    sessionStorage.setItem("hermesToken", token);
    $("login").hidden = true;
    await Promise.all([loadSessions(), loadMemory()]);
  } catch (e) {
    $("login-error").textContent = e.message;
    $("login").hidden = false;
  }
}

async function loadSessions() {
  const { sessions } = await (await api("/v1/sessions?limit=50")).json();
  const list = $("sessions");
  list.replaceChildren();
  for (const s of sessions) {
    const item = el("div", "session" + (s.id === current ? " active" : ""), `${s.id} (${s.message_count || 0})`);
    item.dataset.id = s.id;
    item.onclick = () => openSession(s.id);
    list.append(item);
  }
}

async function openSession(id) {
  current = id;
  $("title").textContent = `Session ${id}`;
  await Promise.all([loadMessages(), loadContext(), loadSessions()]);
}

function renderMessage(m, container) {
  const box = el("div", `msg ${m.role}${m.summary ? " summary" : ""}`);
  box.dataset.id = m.id;
  box.append(el("div", "role", m.summary ? "summary (compressed context)" : m.role));
  let text = contentText(m.content);
  if (m.tool_calls) text += (text ? "\n" : "") + m.tool_calls.map((c) => `→ ${c.function.name}(${c.function.arguments})`).join("\n");
  box.append(el("div", "text", text));
  if (m.summary && m.originals) {
    const button = el("button", "expand", "Show originals");
    const nested = el("div", "originals");
    nested.hidden = true;
    button.onclick = async () => {
      if (!nested.childElementCount) {
        const { messages } = await (await api(m.originals)).json();
        for (const original of messages) renderMessage(original, nested);
      }
      nested.hidden = !nested.hidden;
      button.textContent = nested.hidden ? "Show originals" : "Hide originals";
    };
    box.append(button, nested);
  }
  container.append(box);
}

async function loadMessages() {
  if (!current) return;
  const { messages } = await (await api(`/v1/sessions/${current}/messages`)).json();
  const list = $("messages");
  list.replaceChildren();
  for (const m of messages) if (m.role !== "system") renderMessage(m, list);
}

async function loadContext() {
  if (!current) return;
  const info = await (await api(`/v1/sessions/${current}/context`)).json();
  const bar = $("bar"), table = $("parts");
  bar.replaceChildren(); table.replaceChildren();
  const entries = Object.entries(info.parts);
  entries.forEach(([name, tokens], i) => {
    const part = el("div");
    part.style.width = `${(100 * tokens) / Math.max(info.threshold, info.total)}%`;
    part.style.background = COLORS[i % COLORS.length];
    part.title = `${name}: ${tokens}`;
    bar.append(part);
    const row = el("tr");
    row.append(el("td", null, name.replaceAll("_", " ")), el("td", null, tokens.toLocaleString()));
    table.append(row);
  });
  const row = el("tr");
  row.append(el("td", null, `total (${info.percent_of_threshold}% of threshold)`), el("td", null, info.total.toLocaleString()));
  table.append(row);
}

function highlight(text, words) {
  const out = document.createDocumentFragment();
  const lower = text.toLowerCase();
  let pos = 0;
  while (pos < text.length) {
    let best = -1, length = 0;
    for (const w of words) {
      const at = lower.indexOf(w, pos);
      if (at >= 0 && (best < 0 || at < best)) { best = at; length = w.length; }
    }
    if (best < 0) break;
    out.append(document.createTextNode(text.slice(pos, best)), el("mark", null, text.slice(best, best + length)));
    pos = best + length;
  }
  out.append(document.createTextNode(text.slice(pos)));
  return out;
}

async function search(event) {
  event.preventDefault();
  const q = $("query").value.trim();
  if (!q) return;
  const { hits } = await (await api(`/v1/search?q=${encodeURIComponent(q)}`)).json();
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  const list = $("hits");
  list.replaceChildren();
  if (!hits.length) list.append(el("div", "hit", "no matches"));
  for (const h of hits) {
    const item = el("div", "hit");
    const label = `${h.session_id} #${h.message_id || h.id}${h.compacted ? " (compacted)" : ""}: `;
    item.append(el("b", null, label), highlight(h.snippet || contentText(h.content) || "", words));
    list.append(item);
  }
}

async function loadMemory() {
  const box = $("memory");
  box.replaceChildren();
  try {
    const memory = await (await api("/v1/memory")).json();
    for (const target of ["memory", "user"]) {
      const m = memory[target];
      box.append(el("div", null, `${target === "user" ? "USER.md" : "MEMORY.md"}: ${m.usage ?? "?"} / ${m.limit ?? "?"} chars`));
      for (const entry of m.entries) box.append(el("div", "msg", entry));
    }
  } catch (e) {
    box.append(el("div", null, e.status === 409 ? "memory is off in this bridge" : e.message));
  }
}

function showStatus(kind, data) {
  const status = $("status");
  if (kind === "status") {
    const line = el("div", data.kind.startsWith("compression") ? "compress" : null, `${data.kind}${data.message ? ": " + data.message : ""}`);
    status.append(line);
  } else if (kind === "tool") {
    status.append(el("div", null, `tool ${data.name}(${data.arguments || ""})`));
  } else if (kind === "error") {
    status.append(el("div", "error", `error (${data.error.type}): ${data.error.message}`));
  }
}

// `text` without its last `count` characters (code points, as the server counts them).
function dropTail(text, count) {
  const chars = Array.from(text);
  return chars.slice(0, Math.max(0, chars.length - (count || 0))).join("");
}

async function send() {
  const text = $("input").value;
  if (!text.trim() || !current) return;
  $("input").value = "";
  $("status").replaceChildren();
  const live = $("live");
  live.hidden = false; live.textContent = "";
  const response = await api(`/v1/sessions/${current}/turns`, { method: "POST", body: { message: text } });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", kind = "message";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut).replace(/\r$/, "");
      buffer = buffer.slice(cut + 1);
      if (line.startsWith("event:")) kind = line.slice(6).trim();
      else if (line.startsWith("data:")) {
        const data = JSON.parse(line.slice(5));
        if (kind === "delta") live.textContent += data.text;
        else if (kind === "done") { if (data.session_id !== current) current = data.session_id; }
        else {
          // The model's stream broke and is retried: the text it had sent is not the answer.
          if (kind === "status" && data.kind === "stream_reset") live.textContent = dropTail(live.textContent, data.discarded_chars);
          showStatus(kind, data);
        }
      }
    }
  }
  // The transcript is read again first: "turn finished" means the page shows it (a
  // summary expanded before the reload would be replaced by a collapsed one).
  await Promise.all([loadMessages(), loadContext(), loadSessions()]);
  live.hidden = true;
  $("status").append(el("div", "done", "turn finished"));
}

$("login-button").onclick = login;
$("token").onkeydown = (e) => { if (e.key === "Enter") login(); };
$("new-session").onclick = async () => {
  const { id } = await (await api("/v1/sessions", { method: "POST" })).json();
  await openSession(id);
};
$("send").onclick = send;
$("search-form").onsubmit = search;
if (token) login();
