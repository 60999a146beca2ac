// Anthropic's official TypeScript SDK (@anthropic-ai/sdk@1.17.0) against contextq-server's Memory
// Stores door. Usage: node memory_stores.mjs SDK_DIR BASE_URL KEY READ_ONLY_KEY OTHER_TENANT_KEY
// Every endpoint through the SDK's own methods, paging and error classes; a failed assertion
// exits non-zero. Prints one JSON line of what it saw.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';

const [sdkDir, baseURL, key, roKey, otherKey] = process.argv.slice(2);
const require = createRequire(path.join(sdkDir, 'package.json'));
const { default: Anthropic } = await import(require.resolve('@anthropic-ai/sdk'));

const client = (apiKey) => new Anthropic({ apiKey, baseURL, maxRetries: 0 });
const sha = (t) => createHash('sha256').update(t, 'utf8').digest('hex');
async function refused(cls, f) {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof cls, `${e}`);
    assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
    return e;
  }
  assert.fail(`expected ${cls.name}`);
}

const ms = client(key).beta.memoryStores;
let store = await ms.create({ name: 'SDK Store (ts)', metadata: { owner: 'ts' } });
assert.match(store.id, /^memstore_/);
assert.equal((await ms.retrieve(store.id)).name, 'SDK Store (ts)');
store = await ms.update(store.id, { description: 'typed', metadata: { owner: null, k: 'v' } });
assert.deepEqual(store.metadata, { k: 'v' });
const listed = [];
for await (const s of ms.list({ limit: 1 })) listed.push(s.id);
assert.ok(listed.includes(store.id));

const m = await ms.memories.create(store.id, { path: '/a/b.md', content: 'one' });
assert.equal(m.content, null);
assert.equal(m.content_sha256, sha('one'));
assert.equal((await ms.memories.retrieve(m.id, { memory_store_id: store.id })).content, 'one');
const c = await refused(Anthropic.ConflictError, () => ms.memories.create(store.id, { path: '/a', content: '' }));
assert.equal(c.error.error.type, 'memory_path_conflict_error');
await refused(Anthropic.BadRequestError, () => ms.memories.create(store.id, { path: '/a/./b', content: '' }));
const u = await ms.memories.update(m.id, {
  memory_store_id: store.id,
  content: 'two',
  precondition: { type: 'content_sha256', content_sha256: sha('one') },
});
assert.equal(u.content_sha256, sha('two'));
const p = await refused(Anthropic.ConflictError, () =>
  ms.memories.update(m.id, { memory_store_id: store.id, content: 'three', precondition: { type: 'content_sha256', content_sha256: sha('one') } }),
);
assert.equal(p.error.error.type, 'memory_precondition_failed_error');
for (let i = 0; i < 5; i++) await ms.memories.create(store.id, { path: `/d/n${i}.md`, content: `${i}` });
const paths = [];
for await (const item of ms.memories.list(store.id, { limit: 2 })) paths.push(item.path);
assert.deepEqual(paths, ['/a/b.md', '/d/n0.md', '/d/n1.md', '/d/n2.md', '/d/n3.md', '/d/n4.md']);
const tops = [];
for await (const item of ms.memories.list(store.id, { depth: 1 })) tops.push(`${item.type} ${item.path}`);
assert.deepEqual(tops, ['memory_prefix /a/', 'memory_prefix /d/']);

const versions = [];
for await (const v of ms.memoryVersions.list(store.id, { memory_id: m.id })) versions.push(v);
assert.deepEqual(versions.map((v) => v.operation), ['modified', 'created']);
const first = versions[1];
assert.equal((await ms.memoryVersions.retrieve(first.id, { memory_store_id: store.id })).content, 'one');
const red = await ms.memoryVersions.redact(first.id, { memory_store_id: store.id });
assert.equal(red.content, null);
assert.equal(red.path, null);
assert.notEqual(red.redacted_at, null);

const ro = client(roKey).beta.memoryStores;
await refused(Anthropic.PermissionDeniedError, () => ro.memories.create(store.id, { path: '/ro.md', content: '' }));
const other = client(otherKey).beta.memoryStores;
await refused(Anthropic.NotFoundError, () => other.retrieve(store.id));
await refused(Anthropic.NotFoundError, () => other.memories.retrieve(m.id, { memory_store_id: store.id }));
await refused(Anthropic.NotFoundError, () => other.memoryVersions.list(store.id));

const deleted = await ms.memories.delete(m.id, { memory_store_id: store.id, expected_content_sha256: sha('two') });
assert.equal(deleted.type, 'memory_deleted');
const archived = await ms.archive(store.id);
assert.notEqual(archived.archived_at, null);
await refused(Anthropic.ConflictError, () => ms.memories.create(store.id, { path: '/late.md', content: '' }));
assert.equal((await ms.delete(store.id)).type, 'memory_store_deleted');
await refused(Anthropic.NotFoundError, () => ms.retrieve(store.id));
console.log(JSON.stringify({ ok: true, versions: versions.length, paths: paths.length }));
