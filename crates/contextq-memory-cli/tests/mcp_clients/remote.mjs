// Drives `contextq-memory mcp --http` with the official TypeScript MCP SDK client over
// streamable HTTP with a ContextQ key: the six memory commands in WORKSPACE, the resources, and
// one write outside WORKSPACE; prints one JSON line of what each returned.
//
// Usage: node remote.mjs SDK_DIR URL KEY WORKSPACE OTHER_WORKSPACE PREFIX  (PREFIX starts its file names)

import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, url, key, ws, other, P] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "http", version: "1.0.0" });
await client.connect(transport);
const base = `/memories/${ws}`;
const steps = [
  { command: "create", path: `${base}/${P}notes.md`, file_text: "Prefers Rust\n" },
  { command: "str_replace", path: `${base}/${P}notes.md`, old_str: "Rust", new_str: "Rust and tests" },
  { command: "insert", path: `${base}/${P}notes.md`, insert_line: 0, insert_text: "# Notes" },
  { command: "view", path: `${base}/${P}notes.md` },
  { command: "rename", old_path: `${base}/${P}notes.md`, new_path: `${base}/${P}kept.md` },
  { command: "create", path: `${base}/${P}gone.md`, file_text: "x\n" },
  { command: "delete", path: `${base}/${P}gone.md` },
  { command: "view", path: base },
  { command: "create", path: `/memories/${other}/x.md`, file_text: "not mine\n" },
];
const results = [];
for (const step of steps) {
  const r = await client.callTool({ name: "memory", arguments: step });
  results.push({ text: r.content[0].text, is_error: Boolean(r.isError) });
}
const listed = await client.listResources();
const read = await client.readResource({ uri: `memory://${base}/${P}kept.md` });
console.log(JSON.stringify({
  client: "typescript",
  results,
  resources: listed.resources.map((r) => r.uri),
  read: read.contents[0].text,
}));
await client.close();
