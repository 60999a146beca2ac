//! Keyed writes (extension `idempotency`), through HTTP on SQLite and PostgreSQL: every write
//! endpoint records its outcome with the write and answers a repeat with it, whatever another
//! writer did in between (the two cases a lossy network showed: a create applied twice after a
//! delete, and a delete that found nothing reported as done); refusals are outcomes too; a key
//! bound to another request is refused; records past the window do not replay, and a tenant
//! keeps a bounded number of them.

use crate::common;

use common::{ALL, Keyed, TestServer, seg};
use contextq_server::{Backend, Plan};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn item(ext: &str, content: &str, if_absent: bool) -> Value {
    json!({"contexts": [{"externalId": ext, "workspace": "ws", "type": "reference", "content": content, "tags": ["m"], "ifAbsent": if_absent}]})
}

/// `again` is `first`'s answer: status, body and `ETag`.
fn assert_replayed(first: &common::Reply, again: &common::Reply) {
    assert_eq!(
        (again.status, &again.body, &again.etag),
        (first.status, &first.body, &first.etag)
    );
}

/// The content at `ext` now, if any.
async fn content(c: &common::Api, ext: &str) -> Option<Value> {
    let r = c
        .get(&format!("/api/contexts/by-external/{}", seg(ext)))
        .await;
    (r.status == StatusCode::OK).then(|| r.body["content"].clone())
}

async fn a_repeat_gets_the_first_outcome_whatever_happened_since(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let (c, other) = (&t.client, &t.client);
    let advertised = c.get("/api/workspaces").await.headers["contextq-extensions"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(advertised.contains("idempotency"), "{advertised}");
    let bulk = "/api/contexts/bulk-upsert";

    // 1. A create whose answer was lost, then deleted by another writer: its repeat is the
    // create's own answer, and the file stays deleted (it was re-created before).
    let create = Keyed::post(bulk, item("f0", "[c6]", true), "c6-1");
    let first = c.once(&create).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let r = other
        .delete(&format!("/api/contexts/by-external/{}", seg("f0")), None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let again = c.once(&create).await;
    assert_replayed(&first, &again);
    assert_eq!(again.headers["idempotency-replayed"], "true");
    assert_eq!(
        content(c, "f0").await,
        None,
        "a repeat resurrected a deleted file"
    );

    // 2. A delete that found nothing (404), repeated after another writer created the file:
    // still 404, and the file stays.
    let delete = Keyed::delete(&format!("/api/contexts/by-external/{}", seg("f1")), "c3-1");
    let gone = c.once(&delete).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    other.upsert("f1", "[c1]", &["m"]).await;
    let again = c.once(&delete).await;
    assert_replayed(&gone, &again);
    assert_eq!(content(c, "f1").await, Some(json!("[c1]")));

    // 3. Every other write endpoint: a repeat after another writer changed the file answers
    // as the first run did, and applies nothing.
    c.upsert("f2", "a\nb\n", &["m"]).await;
    let edit_path = format!("/api/contexts/by-external/{}/edit", seg("f2"));
    let edit = json!({"edit": {"strReplace": {"oldStr": "b", "newStr": "B"}}, "snippetLines": 1});
    let edit = Keyed::post(&edit_path, edit, "e-1");
    let first = c.once(&edit).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    other.upsert("f2", "a\nb\n", &["m"]).await;
    let again = c.once(&edit).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["snippet"], first.body["snippet"]);
    assert_eq!(
        again.body["context"]["version"],
        first.body["context"]["version"]
    );
    assert_eq!(again.body["replayed"], true);
    assert_eq!(again.etag, first.etag);
    assert_eq!(
        content(c, "f2").await,
        Some(json!("a\nb\n")),
        "applied twice"
    );

    // PUT with If-Match: the repeat is the first answer (content included), not a 412.
    let row = c
        .get(&format!("/api/contexts/by-external/{}", seg("f2")))
        .await;
    let (row_id, v) = (
        row.body["id"].as_str().unwrap().to_string(),
        row.body["version"].as_i64().unwrap(),
    );
    let put = Keyed::put(
        &format!("/api/contexts/{row_id}"),
        json!({"content": "put\n"}),
        "p-1",
    )
    .if_match(v);
    let first = c.once(&put).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    other.put_content(&row_id, "theirs\n", None).await;
    let again = c.once(&put).await;
    assert_replayed(&first, &again);
    assert_eq!(content(c, "f2").await, Some(json!("theirs\n")));

    // Rename, then the old name is created again: the repeat is the rename's answer.
    other.upsert("f3", "r\n", &["m"]).await;
    let rename_path = format!("/api/contexts/by-external/{}/rename", seg("f3"));
    let rename = Keyed::post(&rename_path, json!({"to": "f3-moved"}), "r-1");
    let first = c.once(&rename).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    other.upsert("f3", "new life\n", &["m"]).await;
    let again = c.once(&rename).await;
    assert_replayed(&first, &again);
    assert_eq!(content(c, "f3").await, Some(json!("new life\n")));

    // By-prefix delete and rename.
    other.upsert("d/x", "x\n", &["m"]).await;
    let delete = Keyed::post(
        "/api/contexts/by-prefix/delete",
        json!({"prefix": "d/"}),
        "pd-1",
    );
    let first = c.once(&delete).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    other.upsert("d/y", "y\n", &["m"]).await;
    let again = c.once(&delete).await;
    assert_replayed(&first, &again);
    assert_eq!(content(c, "d/y").await, Some(json!("y\n")));
    let mv = json!({"from": "d/", "to": "e/"});
    let rename = Keyed::post("/api/contexts/by-prefix/rename", mv, "pr-1");
    let first = c.once(&rename).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    other.upsert("d/y", "back\n", &["m"]).await;
    let again = c.once(&rename).await;
    assert_replayed(&first, &again);
    assert_eq!(content(c, "d/y").await, Some(json!("back\n")));

    // Delete by id: the repeat is 204 though the row is gone now; its refusal (a stale
    // If-Match, 412) is an outcome too.
    let r = other.upsert("f4", "4\n", &["m"]).await;
    let f4 = r.body["results"][0]["id"].as_str().unwrap().to_string();
    let stale_delete = Keyed::delete(&format!("/api/contexts/{f4}"), "dd-0").if_match(9);
    let stale = c.once(&stale_delete).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    let delete = Keyed::delete(&format!("/api/contexts/{f4}"), "dd-1");
    let first = c.once(&delete).await;
    assert_eq!(first.status, StatusCode::NO_CONTENT);
    let again = c.once(&delete).await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    let again = c.once(&stale_delete).await;
    assert_replayed(&stale, &again);

    // A create refused (it exists), repeated after the file was deleted: still refused.
    other.upsert("f5", "5\n", &["m"]).await;
    let create = Keyed::post(bulk, item("f5", "mine", true), "c-5");
    let first = c.once(&create).await;
    assert_eq!(first.status, StatusCode::CONFLICT);
    other
        .delete(&format!("/api/contexts/by-external/{}", seg("f5")), None)
        .await;
    let again = c.once(&create).await;
    assert_replayed(&first, &again);
    assert_eq!(content(c, "f5").await, None);

    // Redaction.
    let redact = json!({"externalId": "f2", "version": 1});
    let redact = Keyed::post("/api/redactions", redact, "x-1");
    let first = c.once(&redact).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    let again = c.once(&redact).await;
    // (`walTruncated` says what happened to SQLite's log after that commit: not replayed.)
    assert_eq!(
        (again.status, &again.body["redacted"]),
        (first.status, &first.body["redacted"])
    );
    assert_eq!(again.body["redacted"][0]["already"], false, "redacted once");

    // Keys of another tenant are its own: the same key there is a new request.
    let u = s.tenant(Plan::Free, ALL).await;
    let r = u
        .client
        .once(&Keyed::post(bulk, item("f0", "[u]", true), "c6-1"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.headers.get("idempotency-replayed").is_none());
    assert_eq!(content(&u.client, "f0").await, Some(json!("[u]")));
    assert_eq!(content(c, "f0").await, None);
    s.stop().await;
}

async fn a_key_stands_for_one_request_for_an_hour(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let bulk = "/api/contexts/bulk-upsert";
    let r = c
        .once(&Keyed::post(bulk, item("g", "one", false), "k"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // The same key with another request: refused, nothing applied.
    for other in [
        Keyed::post(bulk, item("g", "two", false), "k"),
        Keyed::post(bulk, item("h", "one", false), "k"),
        Keyed::delete(&format!("/api/contexts/by-external/{}", seg("g")), "k"),
    ] {
        let (r, path) = (c.once(&other).await, other.path());
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            "{path}: {:?}",
            r.body
        );
        assert!(r.message().contains("\"k\""), "{}", r.message());
    }
    assert_eq!(content(c, "g").await, Some(json!("one")));
    assert_eq!(content(c, "h").await, None);
    // A malformed key: 400, nothing applied.
    let r = c
        .once(&Keyed::post(bulk, item("h", "x", false), "a b"))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(content(c, "h").await, None);
    // Past its hour, the key is a new request: applied again.
    let two_hours_ago = (chrono::Utc::now() - chrono::Duration::hours(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    common::sql(
        &s.db,
        "UPDATE write_outcomes SET created_at = $1 WHERE key = 'k'",
        &[&two_hours_ago],
    )
    .await;
    let r = c
        .once(&Keyed::post(bulk, item("g", "two", false), "k"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(content(c, "g").await, Some(json!("two")));

    // A tenant keeps at most 10,000 records: the oldest go as new ones come. Its record is
    // numbered 1 and another 10,000 (as if 9,999 keyed writes had come between).
    common::sql(&s.db, "UPDATE write_outcomes SET n = 1", &[]).await;
    common::sql(
        &s.db,
        "INSERT INTO write_outcomes (tenant_id, key, n, request_sha256, status, answer, created_at) \
         SELECT tenant_id, 'filler', 10000, request_sha256, status, answer, created_at FROM write_outcomes",
        &[],
    )
    .await;
    let keys = || async {
        let mut keys = common::texts(&s.db, "SELECT key FROM write_outcomes", &[]).await;
        keys.sort();
        keys
    };
    assert_eq!(keys().await, ["filler", "k"]);
    let r = c
        .once(&Keyed::post(bulk, item("i", "x", false), "after"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        keys().await,
        ["after", "filler"],
        "the record 10,000 behind was pruned"
    );
    s.stop().await;
}

/// A repeat of a keyed edit whose version was redacted since: the outcome stands, and no
/// content comes back from the record (it never held any).
async fn a_replay_holds_no_content_of_its_own(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    c.upsert("s", "password: hunter2\n", &["m"]).await;
    let path = format!("/api/contexts/by-external/{}/edit", seg("s"));
    let edit =
        json!({"edit": {"strReplace": {"oldStr": "password", "newStr": "pw"}}, "snippetLines": 2});
    let edit = Keyed::post(&path, edit, "e");
    let first = c.once(&edit).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(first.body.to_string().contains("hunter2"));
    let stored = common::texts(&s.db, "SELECT answer FROM write_outcomes", &[]).await;
    assert!(stored.iter().all(|a| !a.contains("hunter2")), "{stored:?}");
    // The live content is never redacted: change it, then redact the edit's version.
    c.upsert("s", "clean\n", &["m"]).await;
    let r = c
        .post("/api/redactions", json!({"externalId": "s", "version": 2}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let again = c.once(&edit).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["replayed"], true);
    assert_eq!(again.body["context"]["version"], 2);
    assert!(again.body.get("snippet").is_none(), "{:?}", again.body);
    assert!(!again.body.to_string().contains("hunter2"));
    s.stop().await;
}

/// Eight copies of one keyed request at once (a client's retries racing its first attempt):
/// applied once, and all eight get the same answer.
async fn concurrent_repeats_apply_once(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let edit_path = format!("/api/contexts/by-external/{}/edit", seg("n"));
    t.client.upsert("n", "0\n", &["m"]).await;
    let edit = json!({"edit": {"insert": {"line": 0, "text": "+\n"}}, "snippetLines": 0});
    let answers = futures::future::join_all((0..8).map(|_| {
        let (c, edit) = (
            t.client.clone(),
            Keyed::post(&edit_path, edit.clone(), "once"),
        );
        async move {
            let r = c.once(&edit).await;
            (r.status, r.body["context"]["version"].clone())
        }
    }))
    .await;
    assert!(
        answers.iter().all(|a| *a == (StatusCode::OK, json!(2))),
        "{answers:?}"
    );
    assert_eq!(content(&t.client, "n").await, Some(json!("+\n0\n")));
    s.stop().await;
}

contextq_server::database_tests!(
    a_repeat_gets_the_first_outcome_whatever_happened_since,
    a_key_stands_for_one_request_for_an_hour,
    a_replay_holds_no_content_of_its_own,
    concurrent_repeats_apply_once
);
