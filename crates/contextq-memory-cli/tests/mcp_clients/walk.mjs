// Walks every page of `resources/list` of `contextq-memory mcp` with the official TypeScript MCP
// SDK client (`npm install @modelcontextprotocol/sdk`), then views /memories with the memory
// tool; prints one JSON line.
//
// Usage: node walk.mjs SDK_DIR BIN STORE   (SDK_DIR: where node_modules/@modelcontextprotocol/sdk is)

import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, binary, store] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const transport = new StdioClientTransport({
  command: binary,
  args: ["mcp", "--store", store],
  env: { ...process.env, CONTEXT_API_URL: "", CONTEXT_API_KEY: "" },
});
const client = new Client({ name: "walk", version: "1.0.0" });
await client.connect(transport);
const uris = [];
let pages = 0;
let cursor;
do {
  const page = await client.listResources(cursor === undefined ? {} : { cursor });
  pages += 1;
  for (const r of page.resources) uris.push(r.uri);
  cursor = page.nextCursor;
} while (cursor !== undefined);
const view = await client.callTool({ name: "memory", arguments: { command: "view", path: "/memories" } });
const text = view.content[0].text;
const sorted = [...uris].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
console.log(
  JSON.stringify({
    client: "typescript",
    pages,
    resources: uris.length,
    unique: new Set(uris).size,
    sorted: uris.every((u, i) => u === sorted[i]),
    first: uris[0] ?? null,
    last: uris[uris.length - 1] ?? null,
    view_chars: text.length,
    view_last_line: text.split("\n").at(-1),
    view_is_error: Boolean(view.isError),
  }),
);
await client.close();
