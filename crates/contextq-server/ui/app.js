// The memory inspector: workspaces, the memory tree, a file with line numbers, its history with
// diffs and a conditional restore, and the tenant's audit trail. Everything a model wrote (paths,
// contents, titles) is hostile: it only ever reaches the page as text (textContent, text nodes),
// never as HTML; the server's Content-Security-Policy forbids inline script besides.
"use strict";
(() => { // Nothing of this page is global (its names would shadow window's: history, status).

const KEY = "contextq-inspector-key";
// Set when the key is a session minted by a sign-in link: Sign out revokes it on the server.
const SESSION = "contextq-inspector-session";
const TAG = "mem-tool";
const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes, never HTML). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function status(text, error) {
  const s = $("status");
  s.textContent = text || "";
  s.className = error ? "error" : "";
}

function show(...nodes) {
  const view = $("view");
  view.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  const heading = view.querySelector("h2");
  if (heading) { heading.tabIndex = -1; heading.focus(); }
}

async function api(path, options = {}) {
  const key = sessionStorage.getItem(KEY);
  const headers = Object.assign({ "authorization": "Bearer " + key }, options.headers || {});
  if (options.body) headers["content-type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 204) return { response, body: null };
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    let message = body && body.error ? body.error.message : response.statusText;
    if (response.status === 401) {
      signOut();
      message = `The key was refused (${message}): sign in again.`;
    }
    const err = new Error(message);
    err.status = response.status;
    throw err;
  }
  return { response, body };
}

const seg = (s) => encodeURIComponent(s);

/** Every page of a paged list (`nextCursor`). */
async function allPages(path, field) {
  let out = [];
  let cursor = null;
  for (let i = 0; i < 1000; i++) {
    const sep = path.includes("?") ? "&" : "?";
    const { body } = await api(cursor ? `${path}${sep}cursor=${seg(cursor)}` : path);
    out = out.concat(body[field]);
    if (!body.nextCursor || body.nextCursor === cursor) break;
    cursor = body.nextCursor;
  }
  return out;
}

function memoryPath(workspace, externalId) {
  return "/memories/" + externalId.slice(`${TAG}:${workspace}/`.length);
}

function size(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}

// ---- Views -------------------------------------------------------------------------------

async function workspaces() {
  status("");
  const { body } = await api("/api/workspaces");
  const rows = body.workspaces.map((w) =>
    el("tr", {},
      el("td", {}, el("button", { type: "button", class: "link", onclick: () => run(() => tree(w.slug)) }, w.slug)),
      el("td", {}, w.name),
      el("td", {}, w.archived ? "archived" : ""),
      el("td", {}, w.createdAt)));
  show(el("h2", {}, "Workspaces"),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "slug"), el("th", {}, "name"), el("th", {}, ""), el("th", {}, "created"))),
      el("tbody", {}, rows)));
}

async function tree(workspace) {
  status("");
  const prefix = `${TAG}:${workspace}/`;
  const rows = await allPages(`/api/contexts?workspace=${seg(workspace)}&tag=${TAG}&externalIdPrefix=${seg(prefix)}&limit=500`, "contexts");
  const files = rows.filter((c) => c.externalId.startsWith(prefix) && c.workspace === workspace)
    .sort((a, b) => (a.externalId < b.externalId ? -1 : 1));
  const body = files.map((c) => {
    const path = memoryPath(workspace, c.externalId);
    const depth = path.split("/").length - 3;
    return el("tr", {},
      el("td", {}, el("span", { class: "muted" }, "\u00a0\u00a0\u00a0\u00a0".repeat(depth)),
        el("button", { type: "button", class: "link file", onclick: () => run(() => file(workspace, c.externalId)) }, path)),
      el("td", { class: "num" }, size(c.sizeBytes)),
      el("td", {}, c.updatedAt));
  });
  show(el("h2", {}, `Memory of workspace ${workspace}`),
    el("p", { class: "muted" }, `${files.length} files`),
    el("table", { id: "tree" }, el("thead", {}, el("tr", {}, el("th", {}, "file"), el("th", {}, "size"), el("th", {}, "last change"))),
      el("tbody", {}, body)));
}

/** The content with line numbers, as Claude's view shows it. */
function numbered(content) {
  const lines = content.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.map((l, i) => `${String(i + 1).padStart(6, " ")}\t${l}`).join("\n");
}

async function file(workspace, externalId) {
  status("");
  const path = memoryPath(workspace, externalId);
  let context = null;
  try {
    ({ body: context } = await api(`/api/contexts/by-external/${seg(externalId)}`));
  } catch (e) {
    if (e.status !== 404) throw e;
  }
  const back = el("button", { type: "button", onclick: () => run(() => tree(workspace)) }, "Back to the tree");
  const hist = el("button", { type: "button", id: "open-history", onclick: () => run(() => history(workspace, externalId)) }, "History");
  if (!context || context.workspace !== workspace || !context.tags.includes(TAG)) {
    show(el("h2", {}, path), el("div", { class: "toolbar" }, back, hist), el("p", {}, "This file does not exist now."));
    return;
  }
  show(el("h2", {}, path),
    el("div", { class: "toolbar" }, back, hist, el("span", { class: "muted" }, `version ${context.version}, changed ${context.updatedAt}`)),
    el("pre", { id: "content", tabindex: "0" }, numbered(context.content)));
}

async function history(workspace, externalId) {
  status("");
  const path = memoryPath(workspace, externalId);
  const versions = (await allPages(`/api/contexts/by-external/${seg(externalId)}/versions?workspace=${seg(workspace)}`, "versions"))
    .filter((v) => v.tags.includes(TAG) || v.action === "delete");
  const newest = versions.length ? versions[0].version : null;
  const pick = (name, value, checked) => {
    const input = el("input", { type: "radio", name, value: String(value), "aria-label": `${name} ${value}` });
    input.checked = checked;
    return input;
  };
  const rows = versions.map((v, i) =>
    el("tr", {},
      el("td", { class: "num" }, v.version),
      el("td", {}, pick("a", v.version, i === 1 || (versions.length === 1 && i === 0))),
      el("td", {}, pick("b", v.version, i === 0)),
      el("td", {}, v.createdAt),
      el("td", {}, v.action),
      el("td", { class: "num" }, v.action === "delete" ? "-" : size(v.sizeBytes)),
      el("td", {}, v.keyLast4 ? `sk_live_…${v.keyLast4}` : "(operator)"),
      el("td", {}, i === 0 ? "" : el("button", {
        type: "button", class: "restore", "data-version": String(v.version),
        onclick: () => run(() => restore(workspace, externalId, v.version, newest)),
      }, `Restore ${v.version}`))));
  const diffOut = el("div", { id: "diff" });
  const showDiff = el("button", {
    type: "button", id: "show-diff",
    onclick: () => run(async () => {
      const a = document.querySelector("input[name=a]:checked");
      const b = document.querySelector("input[name=b]:checked");
      if (!a || !b) { status("Choose two versions."); return; }
      diffOut.replaceChildren(await diff(externalId, workspace, Number(a.value), Number(b.value)));
    }),
  }, "Show diff");
  show(el("h2", {}, `History of ${path}`),
    el("div", { class: "toolbar" },
      el("button", { type: "button", onclick: () => run(() => file(workspace, externalId)) }, "Back to the file"),
      showDiff, el("span", { class: "muted" }, "A: older, B: newer")),
    el("table", { id: "versions" },
      el("thead", {}, el("tr", {}, ...["version", "A", "B", "time", "action", "size", "key", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)),
    diffOut);
}

async function version(externalId, workspace, n) {
  const { body } = await api(`/api/contexts/by-external/${seg(externalId)}/versions/${n}?workspace=${seg(workspace)}`);
  return body;
}

/** A line diff (longest common subsequence), as lines marked same, added or removed. */
function lineDiff(a, b) {
  const x = a === "" ? [] : a.replace(/\n$/, "").split("\n");
  const y = b === "" ? [] : b.replace(/\n$/, "").split("\n");
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push(["same", x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["del", x[i++]]);
    else out.push(["add", y[j++]]);
  }
  while (i < n) out.push(["del", x[i++]]);
  while (j < m) out.push(["add", y[j++]]);
  return out;
}

async function diff(externalId, workspace, a, b) {
  const [va, vb] = await Promise.all([version(externalId, workspace, a), version(externalId, workspace, b)]);
  const lines = lineDiff(va.content || "", vb.content || "");
  const sign = { same: "  ", add: "+ ", del: "- " };
  return el("div", {},
    el("h2", {}, `Version ${a} → version ${b}`),
    el("pre", { class: "diff", tabindex: "0" }, lines.map(([kind, text]) => el("span", { class: kind }, sign[kind] + text))));
}

/** Puts the file back to version `n`, by the library's rules (docs/history.md): the file is read
 * first, only a row of this workspace carrying the tool's tag counts as the file, its newest
 * version must still be `seen` and be exactly that row at that version, and the write is
 * conditional on that same state (If-Match on the row read, or create-only). Check and write are
 * one condition the server enforces: a change after the user looked is never clobbered. */
async function restore(workspace, externalId, n, seen) {
  const path = memoryPath(workspace, externalId);
  const changed = () => {
    status(`${path} changed after you looked (its newest version is no longer ${seen}); nothing was changed. Look again.`, true);
    return history(workspace, externalId);
  };
  let current = null;
  try {
    ({ body: current } = await api(`/api/contexts/by-external/${seg(externalId)}`));
  } catch (e) { if (e.status !== 404) throw e; }
  if (current && (current.workspace !== workspace || !(current.tags || []).includes(TAG))) {
    status(`${path}: its id is held by a row that is not this memory file (another workspace or without the tag ${TAG}); nothing was changed.`, true);
    return history(workspace, externalId);
  }
  const { body: latest } = await api(`/api/contexts/by-external/${seg(externalId)}/versions?workspace=${seg(workspace)}&limit=1`);
  const newest = latest.versions[0];
  const agrees = newest && newest.version === seen && (current
    ? newest.action !== "delete" && newest.contextId === current.id && newest.contextVersion === current.version
    : newest.action === "delete");
  if (!agrees) return changed();
  const target = await version(externalId, workspace, n);
  try {
    if (target.action === "delete") {
      if (current) await api(`/api/contexts/${seg(current.id)}`, { method: "DELETE", headers: { "if-match": `"${current.version}"` } });
    } else if (current) {
      await api(`/api/contexts/${seg(current.id)}`, {
        method: "PUT", headers: { "if-match": `"${current.version}"` }, body: JSON.stringify({ content: target.content }),
      });
    } else {
      await api("/api/contexts/bulk-upsert", {
        method: "POST",
        body: JSON.stringify({ contexts: [{
          externalId, workspace, type: target.type, title: target.title, content: target.content, tags: target.tags, ifAbsent: true,
        }] }),
      });
    }
  } catch (e) {
    if (e.status === 412 || e.status === 409 || e.status === 404) {
      status(`${path} changed while restoring; nothing was changed. Look again.`, true);
      return history(workspace, externalId);
    }
    throw e;
  }
  await file(workspace, externalId);
  status(`Restored ${path} to version ${n}.`);
}

async function audit(before) {
  status("");
  const pathInput = el("input", { id: "audit-path", placeholder: "path or prefix, e.g. mem-tool:default/notes" });
  const keyInput = el("input", { id: "audit-key", placeholder: "key id" });
  const params = new URLSearchParams(before ? before.params : "");
  pathInput.value = params.get("externalIdPrefix") || "";
  keyInput.value = params.get("keyId") || "";
  const form = el("form", { class: "toolbar", id: "audit-filter" },
    el("label", { for: "audit-path" }, "Path"), pathInput,
    el("label", { for: "audit-key" }, "Key"), keyInput,
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    if (pathInput.value) p.set("externalIdPrefix", pathInput.value);
    if (keyInput.value) p.set("keyId", keyInput.value);
    run(() => audit({ params: p.toString() }));
  });
  const query = new URLSearchParams(params);
  query.set("limit", "100");
  if (before && before.cursor) query.set("cursor", before.cursor);
  const { body } = await api(`/api/audit?${query}`);
  const rows = body.entries.map((e) =>
    el("tr", {},
      el("td", { class: "num" }, e.seq),
      el("td", {}, e.createdAt),
      el("td", {}, e.action),
      el("td", {}, e.externalId || e.slug || e.entityId),
      el("td", { class: "num" }, e.version === null || e.version === undefined ? "" : e.version),
      el("td", {}, e.keyLast4 ? `sk_live_…${e.keyLast4}` : "(operator)"),
      el("td", { class: "muted" }, e.keyId || "")));
  const more = body.nextCursor
    ? el("button", { type: "button", onclick: () => run(() => audit({ params: params.toString(), cursor: body.nextCursor })) }, "Older")
    : null;
  show(el("h2", {}, "Audit trail"), form,
    el("table", { id: "audit" },
      el("thead", {}, el("tr", {}, ...["#", "time", "action", "what", "version", "key", "key id"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)),
    more);
}

// ---- Sign-in -----------------------------------------------------------------------------

function signOut(message) {
  const key = sessionStorage.getItem(KEY);
  if (key && sessionStorage.getItem(SESSION)) {
    // A session key minted for this tab: revoke it (a key typed in is never revoked here).
    fetch("/ui/session", { method: "DELETE", headers: { "authorization": "Bearer " + key } }).catch(() => {});
  }
  sessionStorage.removeItem(SESSION);
  sessionStorage.removeItem(KEY);
  $("nav").hidden = true;
  $("sign-in").hidden = false;
  $("view").replaceChildren();
  status(message || "");
  $("api-key").focus();
}

async function signedIn() {
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  await workspaces();
}

async function run(action) {
  try { await action(); } catch (e) { status(e.message, true); }
}

async function start() {
  $("nav-workspaces").addEventListener("click", () => run(workspaces));
  $("nav-audit").addEventListener("click", () => run(() => audit()));
  $("sign-out").addEventListener("click", () => signOut("Signed out."));
  $("sign-in").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.removeItem(SESSION);
    sessionStorage.setItem(KEY, $("api-key").value.trim());
    $("api-key").value = "";
    run(signedIn);
  });
  // A one-time token in the fragment (never sent to the server in a URL), exchanged once for
  // this tab's key.
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  if (token) {
    window.history.replaceState(null, "", location.pathname);
    const response = await fetch("/ui/session", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token }),
    });
    if (response.ok) {
      sessionStorage.setItem(KEY, (await response.json()).apiKey);
      sessionStorage.setItem(SESSION, "1");
    } else {
      status("This sign-in link was already used or has expired: sign in with an API key.", true);
    }
  }
  if (sessionStorage.getItem(KEY)) await run(signedIn);
  else signOut($("status").textContent);
}

document.addEventListener("DOMContentLoaded", () => run(start));
})();
