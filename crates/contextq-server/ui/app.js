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

/** One level of a directory, the server adding up sizes (extension `tree`, depth 1): folders
 * with their file counts and sizes, and files. One request however much lies beneath. */
async function level(workspace, dir) {
  const prefix = `${TAG}:${workspace}/${dir}`;
  const { body } = await api(`/api/contexts/tree?prefix=${seg(prefix)}&requireTag=${TAG}&workspace=${seg(workspace)}&depth=1`);
  return body;
}

/** Most rows one level shows; the path filter finds the rest. */
const LEVEL_ROWS = 1000;

/** The rows of one level (`dir` ends with "/" or is ""), `depth` levels in. A folder's row
 * expands in place (its level is fetched then) and collapses again. */
function levelRows(workspace, dir, body, depth) {
  const indent = el("span", { class: "muted" }, "\u00a0\u00a0\u00a0\u00a0".repeat(depth));
  const rows = body.entries.slice(0, LEVEL_ROWS).map((e) => {
    const full = dir + e.path;
    let button;
    if (e.path.endsWith("/")) {
      button = el("button", { type: "button", class: "link folder", "aria-expanded": "false", "data-dir": full }, `▸ ${e.path}`);
      button.addEventListener("click", () => run(async () => {
        const row = button.closest("tr");
        if (button.getAttribute("aria-expanded") === "true") {
          let next = row.nextElementSibling;
          while (next && (next.dataset.parent || "").startsWith(full)) { const gone = next; next = next.nextElementSibling; gone.remove(); }
          button.setAttribute("aria-expanded", "false");
          button.textContent = `▸ ${e.path}`;
          return;
        }
        const children = levelRows(workspace, full, await level(workspace, full), depth + 1);
        row.after(...children);
        button.setAttribute("aria-expanded", "true");
        button.textContent = `▾ ${e.path}`;
      }));
    } else {
      button = el("button", { type: "button", class: "link file", onclick: () => run(() => file(workspace, `${TAG}:${workspace}/${full}`)) }, e.path);
    }
    const row = el("tr", {},
      el("td", {}, indent.cloneNode(true), button),
      el("td", { class: "num" }, e.path.endsWith("/") ? e.files : ""),
      el("td", { class: "num" }, size(e.sizeBytes)),
      el("td", {}, e.updatedAt));
    row.dataset.parent = dir;
    return row;
  });
  if (body.entries.length > LEVEL_ROWS) {
    const more = el("tr", {}, el("td", { colspan: "4", class: "muted" },
      `${body.entries.length - LEVEL_ROWS} more entries here: use the path filter to find them.`));
    more.dataset.parent = dir;
    rows.push(more);
  }
  return rows;
}

/** A one-field form (`id`, its input `inputId`) that runs `submit` with the text typed. */
function toolbar(id, inputId, label, placeholder, button, submit) {
  const input = el("input", { id: inputId, placeholder });
  const form = el("form", { class: "toolbar", id },
    el("label", { for: inputId }, label), input, el("button", { type: "submit" }, button));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(() => submit(input.value));
  });
  return form;
}

async function tree(workspace) {
  status("");
  const root = await level(workspace, "");
  const filter = toolbar("tree-filter", "tree-filter-path", "Find files", "path starts with, e.g. projects/", "Find",
    (text) => search(workspace, text));
  const contentForm = toolbar("content-search", "content-search-query", "Search contents",
    "words in the files, e.g. staging password or OPS-4471", "Search", (text) => contentSearch(workspace, text));
  show(el("h2", {}, `Memory of workspace ${workspace}`),
    el("p", { class: "muted", id: "tree-summary" }, `${root.files} files, ${size(root.sizeBytes)}`),
    contentForm,
    filter,
    el("table", { id: "tree" }, el("thead", {}, el("tr", {}, el("th", {}, "name"), el("th", {}, "files"), el("th", {}, "size"), el("th", {}, "last change"))),
      el("tbody", {}, levelRows(workspace, "", root, 0))));
}

/** Files whose path (below /memories/) starts with `text`, a page of 100 at a time. */
async function search(workspace, text, cursor) {
  status("");
  const prefix = `${TAG}:${workspace}/${text.replace(/^\/?(memories\/)?/, "")}`;
  const query = `workspace=${seg(workspace)}&tag=${TAG}&externalIdPrefix=${seg(prefix)}&limit=100${cursor ? `&cursor=${seg(cursor)}` : ""}`;
  const { body } = await api(`/api/contexts?${query}`);
  const rows = body.contexts.filter((c) => c.workspace === workspace).map((c) =>
    el("tr", {},
      el("td", {}, el("button", { type: "button", class: "link file", onclick: () => run(() => file(workspace, c.externalId)) }, memoryPath(workspace, c.externalId))),
      el("td", { class: "num" }, size(c.sizeBytes)),
      el("td", {}, c.updatedAt)));
  const more = body.nextCursor
    ? el("button", { type: "button", id: "search-more", onclick: () => run(() => search(workspace, text, body.nextCursor)) }, "Next 100")
    : null;
  show(el("h2", {}, `Files of ${workspace} starting with ${text || "(anything)"}`),
    el("div", { class: "toolbar" }, el("button", { type: "button", onclick: () => run(() => tree(workspace)) }, "Back to the tree"), more),
    el("table", { id: "search" }, el("thead", {}, el("tr", {}, el("th", {}, "file"), el("th", {}, "size"), el("th", {}, "last change"))),
      el("tbody", {}, rows)));
}

/** A snippet's text with its matched terms in <mark> (marks are code-point offsets). */
function marked(text, marks) {
  const chars = Array.from(text);
  const out = [];
  let at = 0;
  for (const [start, end] of marks || []) {
    if (start < at || end > chars.length) continue;
    out.push(chars.slice(at, start).join(""), el("mark", {}, chars.slice(start, end).join("")));
    at = end;
  }
  out.push(chars.slice(at).join(""));
  return out;
}

/** Files whose content or path matches `text` (extension `search`), best first, each with its
 * matching lines; a line opens the file there. */
async function contentSearch(workspace, text, cursor) {
  status("");
  const query = `q=${seg(text)}&workspace=${seg(workspace)}&tag=${TAG}&prefix=${seg(`${TAG}:${workspace}/`)}&limit=20${cursor ? `&cursor=${seg(cursor)}` : ""}`;
  const { body } = await api(`/api/contexts/search?${query}`);
  const hits = body.hits.filter((h) => h.workspace === workspace).map((h) =>
    el("li", { class: "hit" },
      el("button", { type: "button", class: "link file", onclick: () => run(() => file(workspace, h.externalId)) }, memoryPath(workspace, h.externalId)),
      el("ul", {}, h.snippets.map((s) =>
        el("li", {}, el("button", {
          type: "button", class: "link snippet", "data-line": String(s.line),
          onclick: () => run(() => file(workspace, h.externalId, s.line)),
        }, el("span", { class: "muted" }, `${s.line}: `), ...marked(s.text, s.marks)))))));
  const more = body.nextCursor
    ? el("button", { type: "button", id: "content-search-more", onclick: () => run(() => contentSearch(workspace, text, body.nextCursor)) }, "Next 20")
    : null;
  show(el("h2", {}, `Files of ${workspace} matching ${text}`),
    el("div", { class: "toolbar" }, el("button", { type: "button", onclick: () => run(() => tree(workspace)) }, "Back to the tree"), more),
    hits.length ? el("ol", { id: "content-hits" }, hits) : el("p", { id: "content-hits-none" }, "No file matches."));
}

/** The content with line numbers, as Claude's view shows it: one element per line (`L<n>`). */
function numbered(content) {
  const lines = content.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.flatMap((l, i) => [
    el("span", { id: `L${i + 1}` }, `${String(i + 1).padStart(6, " ")}\t${l}`),
    i + 1 < lines.length ? "\n" : null,
  ]);
}

async function file(workspace, externalId, line) {
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
  const at = line ? document.getElementById(`L${line}`) : null;
  if (at) { at.classList.add("at"); at.scrollIntoView({ block: "center" }); }
}

/** Versions per history page; "Older" and "Newest" move between pages. */
const HISTORY_PAGE = 50;

async function history(workspace, externalId, page) {
  status("");
  const path = memoryPath(workspace, externalId);
  const cursor = page ? `&cursor=${seg(page.cursor)}` : "";
  const { body } = await api(`/api/contexts/by-external/${seg(externalId)}/versions?workspace=${seg(workspace)}&limit=${HISTORY_PAGE}${cursor}`);
  const versions = body.versions.filter((v) => v.tags.includes(TAG) || v.action === "delete");
  // The newest version of the file, seen on the first page (a restore is conditional on it).
  const newest = page ? page.newest : (versions.length ? versions[0].version : null);
  const older = body.nextCursor
    ? el("button", { type: "button", id: "history-older", onclick: () => run(() => history(workspace, externalId, { cursor: body.nextCursor, newest })) }, "Older")
    : null;
  const first = page
    ? el("button", { type: "button", id: "history-newest", onclick: () => run(() => history(workspace, externalId)) }, "Newest")
    : null;
  const confirmOut = el("div", { id: "confirm" });
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
      el("td", {}, actionText(v)),
      el("td", { class: "num" }, v.action === "delete" ? "-" : v.redactedAt ? "redacted" : size(v.sizeBytes)),
      el("td", {}, keyText(v)),
      el("td", {}, v.version === newest ? "" : v.redactedAt
        ? el("span", { class: "muted redacted", title: `redacted ${v.redactedAt}` }, "redacted")
        : el("button", {
        type: "button", class: "restore", "data-version": String(v.version),
        onclick: () => ask(confirmOut, `Restore ${path} to version ${v.version}? Its current content stays in the history as a version of its own.`,
          `Restore ${v.version}`, () => restore(workspace, externalId, v.version, newest)),
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
      showDiff, el("span", { class: "muted" }, "A: older, B: newer"), first, older),
    confirmOut,
    el("table", { id: "versions" },
      el("thead", {}, el("tr", {}, ...["version", "A", "B", "time", "action", "size", "key", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)),
    diffOut);
}

async function version(externalId, workspace, n) {
  const { body } = await api(`/api/contexts/by-external/${seg(externalId)}/versions/${n}?workspace=${seg(workspace)}`);
  return body;
}

/** The line diff of two versions, computed by the server (extension `diff`: Myers, linear in
 * practice), shown as lines kept, removed and added. */
async function diff(externalId, workspace, a, b) {
  const { body } = await api(`/api/contexts/by-external/${seg(externalId)}/diff?from=${a}&to=${b}&workspace=${seg(workspace)}`);
  const sign = { same: "  ", add: "+ ", del: "- " };
  return el("div", {},
    el("h2", {}, `Version ${a} → version ${b}`),
    el("pre", { class: "diff", tabindex: "0" }, body.lines.map((l) => el("span", { class: l.op }, sign[l.op] + l.text))));
}

/** The header that marks a write as the restore of a version (extension `restore-marks`). */
const RESTORED_FROM = "contextq-restored-from";

/** A version's or audit row's action: a restore names the version it put back. */
function actionText(v) {
  return v.restoredFrom ? `restore of ${v.restoredFrom}` : v.action;
}

/** Who made a change: the key's name when it has one, and the key masked. */
function keyText(v) {
  if (!v.keyLast4) return "(operator)";
  const masked = `sk_live_…${v.keyLast4}`;
  return v.keyName ? `${v.keyName} (${masked})` : masked;
}

/** Asks before an action that changes the memory: `question` in `into`, with a button `yes`
 * that runs `action` and one that cancels (nothing is changed until `yes` is pressed). */
function ask(into, question, yes, action) {
  const done = () => into.replaceChildren();
  into.replaceChildren(el("div", { class: "confirm", role: "alertdialog", "aria-label": question },
    el("p", {}, question),
    el("button", { type: "button", id: "confirm-yes", onclick: () => { done(); run(action); } }, yes),
    el("button", { type: "button", id: "confirm-no", onclick: () => { done(); status("Nothing was changed."); } }, "Cancel")));
  into.querySelector("#confirm-no").focus();
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
  if (target.redactedAt) {
    status(`Version ${n} of ${path} was redacted (${target.redactedAt}): its content is gone, so it cannot be restored; nothing was changed.`, true);
    return history(workspace, externalId);
  }
  try {
    if (target.action === "delete") {
      if (current) await api(`/api/contexts/${seg(current.id)}`, { method: "DELETE", headers: { "if-match": `"${current.version}"` } });
    } else if (current) {
      await api(`/api/contexts/${seg(current.id)}`, {
        method: "PUT", headers: { "if-match": `"${current.version}"`, [RESTORED_FROM]: String(n) }, body: JSON.stringify({ content: target.content }),
      });
    } else {
      await api("/api/contexts/bulk-upsert", {
        method: "POST",
        headers: { [RESTORED_FROM]: String(n) },
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

/** A memory path as the audit filter takes it: `/memories/WORKSPACE/rest` (the workspace's
 * files, as they are listed per workspace) becomes the store's external-id prefix; anything
 * else is taken as an external-id prefix as it is. */
function auditPrefix(text) {
  const m = /^\/memories\/([^/]+)(?:\/(.*))?$/.exec(text.trim());
  if (!m) return text.trim();
  return `${TAG}:${m[1]}/${m[2] || ""}`;
}

/** An external id as people read it: `/memories/WORKSPACE/rest` for the memory tool's. */
function readablePath(externalId) {
  const m = new RegExp(`^${TAG}:([^/]+)/(.*)$`).exec(externalId);
  return m ? `/memories/${m[1]}/${m[2]}` : externalId;
}

async function audit(before) {
  status("");
  const pathInput = el("input", { id: "audit-path", placeholder: "path or prefix, e.g. /memories/default/notes" });
  const keyInput = el("input", { id: "audit-key", placeholder: "key id" });
  const params = new URLSearchParams(before ? before.params : "");
  pathInput.value = params.get("externalIdPrefix") ? readablePath(params.get("externalIdPrefix")) : "";
  keyInput.value = params.get("keyId") || "";
  const form = el("form", { class: "toolbar", id: "audit-filter" },
    el("label", { for: "audit-path" }, "Path"), pathInput,
    el("label", { for: "audit-key" }, "Key"), keyInput,
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    if (pathInput.value) p.set("externalIdPrefix", auditPrefix(pathInput.value));
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
      el("td", {}, e.restoredFrom ? `${e.action} (of version ${e.restoredFrom})` : e.action),
      el("td", {}, e.externalId ? readablePath(e.externalId) : (e.slug || e.entityId)),
      el("td", { class: "num" }, e.version === null || e.version === undefined ? "" : e.version),
      el("td", {}, keyText(e)),
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
