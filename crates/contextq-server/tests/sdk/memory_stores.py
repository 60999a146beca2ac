"""Anthropic's official Python SDK (anthropic==2.17.0) against contextq-server's Memory Stores door.

Usage: memory_stores.py BASE_URL KEY READ_ONLY_KEY OTHER_TENANT_KEY LIMITED_KEY LIMITED_SLUG
Every endpoint the SDK has, through the SDK's own methods, paging and exceptions; an assertion
that fails exits non-zero. Prints one JSON line of what it saw.
"""

import hashlib
import json
import sys

import anthropic

base, key, ro_key, other_key, limited_key, limited_slug = sys.argv[1:7]


def client(k):
    return anthropic.Anthropic(api_key=k, base_url=base, max_retries=0)


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def refused(cls, f):
    try:
        f()
    except cls as e:
        assert e.body["type"] == "error", e.body
        return e
    raise AssertionError(f"expected {cls.__name__}")


ms = client(key).beta.memory_stores
seen = {}

# Stores: create (the slug from the name), retrieve, update (metadata as a patch), list.
store = ms.create(name="SDK Store (python)", description="from the SDK", metadata={"owner": "py", "gone": "x"})
assert store.id.startswith("memstore_") and store.name == "SDK Store (python)" and store.archived_at is None
assert ms.retrieve(store.id).description == "from the SDK"
store = ms.update(store.id, metadata={"gone": None, "team": "a"})
assert store.metadata == {"owner": "py", "team": "a"}, store.metadata
assert store.id in [s.id for s in ms.list(limit=1)], "auto-paging over stores of one item a page"

# Memories: create (basic by default), retrieve (full by default), sizes and hashes.
text = "café notes\r\nno final newline"
m = ms.memories.create(store.id, path="/projects/foo/notes.md", content=text)
assert m.content is None and m.content_sha256 == sha(text), m
assert m.content_size_bytes == len(text.encode("utf-8"))
assert ms.memories.retrieve(m.id, memory_store_id=store.id).content == text
assert ms.memories.retrieve(m.id, memory_store_id=store.id, view="basic").content is None
top = ms.memories.create(store.id, path="/top.md", content="top", view="full")
assert top.content == "top"

# Path conflicts: a 409 memory_path_conflict_error naming the memory in the way, not retried.
e = refused(anthropic.ConflictError, lambda: ms.memories.create(store.id, path="/projects/foo/notes.md/x.md", content=""))
assert e.body["error"]["type"] == "memory_path_conflict_error" and e.body["error"]["conflicting_memory_id"] == m.id, e.body
assert e.response.headers.get("x-should-retry") == "false"
refused(anthropic.ConflictError, lambda: ms.memories.create(store.id, path="/projects", content=""))
refused(anthropic.ConflictError, lambda: ms.memories.create(store.id, path="/top.md", content=""))
# Limits of the door: 400 invalid_request_error.
for bad in ["top.md", "/a//b", "/a/../b", "/e\u0301.md", "/a\u200bb", "/" + "/".join(["s"] * 21), "/" + "x" * 1025]:
    e = refused(anthropic.BadRequestError, lambda: ms.memories.create(store.id, path=bad, content=""))
    assert e.body["error"]["type"] == "invalid_request_error", e.body
refused(anthropic.BadRequestError, lambda: ms.memories.create(store.id, path="/big.md", content="x" * 102401))

# Update: a precondition that holds, one that does not, one that is stale but already true.
m = ms.memories.update(m.id, memory_store_id=store.id, content="v2", precondition={"type": "content_sha256", "content_sha256": sha(text)})
assert m.content_sha256 == sha("v2")
e = refused(anthropic.ConflictError, lambda: ms.memories.update(m.id, memory_store_id=store.id, content="v3", precondition={"type": "content_sha256", "content_sha256": sha(text)}))
assert e.body["error"]["type"] == "memory_precondition_failed_error", e.body
same = ms.memories.update(m.id, memory_store_id=store.id, content="v2", precondition={"type": "content_sha256", "content_sha256": sha(text)})
assert same.memory_version_id == m.memory_version_id, "a stale precondition already met writes nothing"
# A rename keeps the id.
moved = ms.memories.update(m.id, memory_store_id=store.id, path="/projects/bar.md")
assert moved.id == m.id and moved.path == "/projects/bar.md"

# Listing: whole store, a prefix of whole segments, depth 1, view=full capped at 20.
for i in range(25):
    ms.memories.create(store.id, path=f"/many/n{i:02}.md", content=f"n{i}")
ms.memories.create(store.id, path="/many-archive/x.md", content="x")
paths = [x.path for x in ms.memories.list(store.id, path_prefix="/many/", limit=7)]
assert paths == [f"/many/n{i:02}.md" for i in range(25)], paths
first = ms.memories.list(store.id, view="full", limit=100)
assert len(first.data) == 20 and all(x.content is not None for x in first.data)
top_level = [(x.type, x.path) for x in ms.memories.list(store.id, depth=1)]
assert top_level == [("memory_prefix", "/many-archive/"), ("memory_prefix", "/many/"), ("memory_prefix", "/projects/"), ("memory", "/top.md")], top_level
refused(anthropic.BadRequestError, lambda: ms.memories.list(store.id, path_prefix="/many"))
refused(anthropic.BadRequestError, lambda: ms.memories.list(store.id, limit=101))

# Versions: newest first, filters, retrieve, redact.
versions = list(ms.memory_versions.list(store.id, memory_id=m.id))
assert [v.operation for v in versions] == ["modified", "modified", "created"], [v.operation for v in versions]
assert all(v.created_by.type == "api_actor" for v in versions)
created = list(ms.memory_versions.list(store.id, operation="created", limit=5))
assert len(created) == 28, len(created)
oldest = versions[-1]
assert ms.memory_versions.retrieve(oldest.id, memory_store_id=store.id).content == text
red = ms.memory_versions.redact(oldest.id, memory_store_id=store.id)
assert red.redacted_at is not None and red.content is None and red.path is None and red.content_sha256 is None
assert red.redacted_by.type == "api_actor"
e = refused(anthropic.ConflictError, lambda: ms.memory_versions.redact(moved.memory_version_id, memory_store_id=store.id))

# Delete: conditional, then unconditional; the versions stay, with a deleted one.
refused(anthropic.ConflictError, lambda: ms.memories.delete(top.id, memory_store_id=store.id, expected_content_sha256=sha("nope")))
assert ms.memories.delete(top.id, memory_store_id=store.id, expected_content_sha256=sha("top")).type == "memory_deleted"
refused(anthropic.NotFoundError, lambda: ms.memories.retrieve(top.id, memory_store_id=store.id))
assert [v.operation for v in ms.memory_versions.list(store.id, memory_id=top.id)] == ["deleted", "created"]

# Keys: read-only (403), another tenant's (404 on every id), a key limited to another workspace.
ro = client(ro_key).beta.memory_stores
assert ro.retrieve(store.id).id == store.id
refused(anthropic.PermissionDeniedError, lambda: ro.memories.create(store.id, path="/ro.md", content=""))
refused(anthropic.PermissionDeniedError, lambda: ro.create(name="nope"))
other = client(other_key).beta.memory_stores
assert store.id not in [s.id for s in other.list()]
refused(anthropic.NotFoundError, lambda: other.retrieve(store.id))
refused(anthropic.NotFoundError, lambda: other.memories.retrieve(m.id, memory_store_id=store.id))
refused(anthropic.NotFoundError, lambda: other.memories.delete(m.id, memory_store_id=store.id))
refused(anthropic.NotFoundError, lambda: other.memory_versions.retrieve(oldest.id, memory_store_id=store.id))
refused(anthropic.NotFoundError, lambda: other.memory_versions.redact(versions[1].id, memory_store_id=store.id))
refused(anthropic.NotFoundError, lambda: other.archive(store.id))
limited = client(limited_key).beta.memory_stores
assert [s.name for s in limited.list()] == [limited_slug], [s.name for s in limited.list()]
refused(anthropic.NotFoundError, lambda: limited.retrieve(store.id))
refused(anthropic.AuthenticationError, lambda: client("sk_live_" + "0" * 40).beta.memory_stores.list())

# A page token is bound to its tenant and its query.
page = ms.memories.list(store.id, path_prefix="/many/", limit=3)
assert page.next_page
refused(anthropic.BadRequestError, lambda: ms.memories.list(store.id, path_prefix="/projects/", page=page.next_page))
forged = page.next_page[:-1] + ("1" if page.next_page.endswith("0") else "0")
refused(anthropic.BadRequestError, lambda: ms.memories.list(store.id, path_prefix="/many/", page=forged))

# Archive: reads, version listing, redaction and deletes work; other writes are refused.
archived = ms.archive(store.id)
assert archived.archived_at is not None
assert store.id not in [s.id for s in ms.list()] and store.id in [s.id for s in ms.list(include_archived=True)]
assert ms.memories.retrieve(moved.id, memory_store_id=store.id).content == "v2"
refused(anthropic.ConflictError, lambda: ms.memories.create(store.id, path="/late.md", content=""))
refused(anthropic.ConflictError, lambda: ms.memories.update(moved.id, memory_store_id=store.id, content="late"))
ms.memories.delete(moved.id, memory_store_id=store.id)
assert ms.delete(store.id).type == "memory_store_deleted"
refused(anthropic.NotFoundError, lambda: ms.retrieve(store.id))

print(json.dumps({"ok": True, "sdk": anthropic.__version__, "versions": len(versions), "created": len(created)}))
