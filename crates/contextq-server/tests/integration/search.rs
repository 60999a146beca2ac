//! The `search` extension through real HTTP on 127.0.0.1:0, on SQLite and (when
//! CONTEXTQ_TEST_DATABASE_URL is set) PostgreSQL: what a query finds (words, phrases,
//! prefixes, identifiers as written, accents, Japanese), hostile queries refused with 400 and
//! never a 500, the listing's scopes and workspace-limited keys, other tenants never seen, the
//! index following every write (update, edit, rename, by-prefix moves and deletes, delete and
//! re-create, concurrent writers; the index holding exactly the live contexts), replaced text gone from SQLite's files,
//! and a seeded random workload on which search and a scan of the same files agree.

use crate::common;

use std::collections::BTreeSet;

use futures::StreamExt as _;

use common::{ALL, RW, TestServer, seg};
use contextq_api::search::{MAX_CONTENT_TERMS, MAX_PATH_TERMS, Query, index_terms};
use contextq_server::{Backend, Plan, Scope};
use reqwest::StatusCode;
use serde_json::json;

/// The external ids a search finds, best first.
async fn found(c: &common::Api, q: &str) -> Vec<String> {
    let r = c
        .get(&format!("/api/contexts/search?q={}&limit=100", seg(q)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{q}: {:?}", r.body);
    common::strings(&r.body["hits"], "externalId")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn upsert_in(c: &common::Api, workspace: &str, ext: &str, content: &str, tags: &[&str]) {
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [{"externalId": ext, "workspace": workspace, "type": "reference", "content": content, "tags": tags}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
}

async fn what_a_query_finds(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let c = &t.client;
    assert!(common::has_extension(&c.get("/health").await, "search"));
    let files = [
        (
            "mem:ws/ops/incidents.md",
            "# Incidents\nTicket OPS-4471: the staging password rotated.\nDeploy deploy_v2 shipped in v1.31.4 (commit 9f3ab27).\n",
        ),
        (
            "mem:ws/people/contacts.md",
            "Ana: a.b@example.pt\nHerr Müller prefers Straße names\n",
        ),
        (
            "mem:ws/probes.md",
            "The probe /healthz/deep answers 200\nstaging and production differ\n",
        ),
        ("mem:ws/ja/notes.md", "明日は東京タワーで会議があります\n"),
        (
            "mem:ws/passwords-policy.md",
            "nothing about the stage here\n",
        ),
    ];
    for (ext, content) in files {
        assert_eq!(c.upsert(ext, content, &[]).await.status, StatusCode::OK);
    }
    let cases: &[(&str, &[&str])] = &[
        ("staging password", &["mem:ws/ops/incidents.md"]),
        ("PASSWORD staging", &["mem:ws/ops/incidents.md"]),
        ("\"staging password\"", &["mem:ws/ops/incidents.md"]),
        ("\"password staging\"", &[]),
        ("OPS-4471", &["mem:ws/ops/incidents.md"]),
        ("deploy_v2", &["mem:ws/ops/incidents.md"]),
        ("v1.31.4", &["mem:ws/ops/incidents.md"]),
        ("v1.31.5", &[]),
        ("9f3ab27", &["mem:ws/ops/incidents.md"]),
        ("a.b@example.pt", &["mem:ws/people/contacts.md"]),
        ("/healthz/deep", &["mem:ws/probes.md"]),
        ("muller strasse", &["mem:ws/people/contacts.md"]),
        ("MÜLLER", &["mem:ws/people/contacts.md"]),
        ("東京タワー", &["mem:ws/ja/notes.md"]),
        ("会議", &["mem:ws/ja/notes.md"]),
        ("京都", &[]),
        (
            "stag*",
            &[
                "mem:ws/ops/incidents.md",
                "mem:ws/passwords-policy.md",
                "mem:ws/probes.md",
            ],
        ),
        // The path is searched too.
        ("contacts", &["mem:ws/people/contacts.md"]),
        ("policy", &["mem:ws/passwords-policy.md"]),
        // Engine syntax is literal: these are words no file holds.
        ("NEAR(", &[]),
        ("staging OR nothing", &[]),
    ];
    for (q, want) in cases {
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(sorted(found(c, q).await), want, "{q}");
    }
    // A hit: ids, workspace, a score, lines numbered as view numbers them, terms marked.
    let r = c.get("/api/contexts/search?q=staging%20password").await;
    let hit = &r.body["hits"][0];
    assert_eq!(hit["workspace"], "ws");
    assert!(hit["id"].as_str().unwrap().starts_with("ctx_"));
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    assert_eq!(hit["snippets"][0]["line"], 2);
    let text = hit["snippets"][0]["text"].as_str().unwrap();
    let marked: Vec<String> = hit["snippets"][0]["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let chars: Vec<char> = text.chars().collect();
            chars[m[0].as_u64().unwrap() as usize..m[1].as_u64().unwrap() as usize]
                .iter()
                .collect()
        })
        .collect();
    assert_eq!(marked, ["staging", "password"]);
    assert!(r.body["nextCursor"].is_null());
    // Ranking: the file with the words in its path and its text comes first.
    upsert_in(c, "ws", "mem:ws/staging.md", "staging staging staging", &[]).await;
    assert_eq!(found(c, "staging").await[0], "mem:ws/staging.md");
    s.stop().await;
}

async fn hostile_queries_are_400_never_500(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, RW).await;
    let c = &t.client;
    c.upsert("mem:ws/a.md", "near or not - star * quote", &[])
        .await;
    let refused = [
        ("", "no letters or digits"),
        ("-", "no letters or digits"),
        ("*", "a * must end a word"),
        ("\"unbalanced", "without its closing"),
        ("a\u{0}b", "control character"),
    ];
    for (q, says) in refused {
        let r = c.get(&format!("/api/contexts/search?q={}", seg(q))).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{q:?}"
        );
        assert!(r.message().contains(says), "{q:?}: {}", r.message());
    }
    let long = "x".repeat(10 * 1024);
    let r = c.get(&format!("/api/contexts/search?q={long}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.message().contains("at most 512"), "{}", r.message());
    // Literal: engine operators are words.
    for q in [
        "NEAR(",
        "near OR not",
        "(star) AND quote",
        "-star",
        "a:b",
        "'",
        "\\",
        "%",
        "^",
    ] {
        let r = c.get(&format!("/api/contexts/search?q={}", seg(q))).await;
        assert!(
            r.status == StatusCode::OK || r.status == StatusCode::BAD_REQUEST,
            "{q:?}: {:?}",
            r.body
        );
    }
    assert_eq!(found(c, "NEAR(").await, ["mem:ws/a.md"]);
    for bad in [
        "limit=0",
        "limit=101",
        "limit=x",
        "cursor=zzz",
        "cursor=o99999",
    ] {
        let r = c.get(&format!("/api/contexts/search?q=near&{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let r = c
        .with_key("sk_live_0000000000000000000000000000000000000000")
        .get("/api/contexts/search?q=near")
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

async fn scopes_keys_and_tenants(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    s.workspace(&t.tenant_id, "secret").await;
    let c = &t.client;
    upsert_in(c, "ws", "mem:ws/a.md", "quartz shared word", &["mem-tool"]).await;
    upsert_in(c, "ws", "mem:ws/deep/b.md", "quartz", &["other"]).await;
    upsert_in(
        c,
        "secret",
        "mem:secret/c.md",
        "quartz classified",
        &["mem-tool"],
    )
    .await;
    assert_eq!(found(c, "quartz").await.len(), 3);
    let scoped = |q: &str| format!("/api/contexts/search?q=quartz&{q}");
    let ids = |r: &common::Reply| sorted(common::strings(&r.body["hits"], "externalId"));
    assert_eq!(
        ids(&c.get(&scoped("workspace=ws")).await),
        ["mem:ws/a.md", "mem:ws/deep/b.md"]
    );
    assert_eq!(
        ids(&c.get(&scoped("tag=other")).await),
        ["mem:ws/deep/b.md"]
    );
    assert_eq!(
        ids(&c.get(&scoped("prefix=mem:ws/deep/")).await),
        ["mem:ws/deep/b.md"]
    );
    // Paging: a cursor, the next page, the end.
    let r = c.get(&scoped("limit=2")).await;
    assert_eq!(r.body["hits"].as_array().unwrap().len(), 2);
    let cursor = r.body["nextCursor"].as_str().unwrap().to_string();
    let r2 = c.get(&scoped(&format!("limit=2&cursor={cursor}"))).await;
    assert_eq!(r2.body["hits"].as_array().unwrap().len(), 1);
    assert!(r2.body["nextCursor"].is_null());
    let mut all = ids(&r);
    all.extend(ids(&r2));
    assert_eq!(
        sorted(all),
        ["mem:secret/c.md", "mem:ws/a.md", "mem:ws/deep/b.md"]
    );
    // A key limited to `ws` never sees `secret`: not in hits, and asking for it is the 404 of
    // a workspace it does not have.
    let limited = s.limited_key(&t.tenant_id, &[Scope::Read], &["ws"]).await;
    let l = c.with_key(&limited.api_key);
    assert_eq!(
        sorted(found(&l, "quartz").await),
        ["mem:ws/a.md", "mem:ws/deep/b.md"]
    );
    assert_eq!(found(&l, "classified").await, Vec::<String>::new());
    let secret = l.get(&scoped("workspace=secret")).await;
    let unknown = l.get(&scoped("workspace=nosuch")).await;
    assert_eq!(secret.status, StatusCode::NOT_FOUND);
    assert_eq!(
        (secret.status, secret.code()),
        (unknown.status, unknown.code())
    );
    // Another tenant: the same answer as for a word nobody wrote.
    let other = s.tenant(Plan::Unlimited, ALL).await;
    upsert_in(&other.client, "ws", "mem:ws/theirs.md", "quartz", &[]).await;
    let mine = c.get("/api/contexts/search?q=classified").await;
    let theirs = other.client.get("/api/contexts/search?q=classified").await;
    let nobody = other.client.get("/api/contexts/search?q=zzyzx").await;
    assert_eq!(theirs.body, nobody.body);
    assert_eq!(mine.body["hits"].as_array().unwrap().len(), 1);
    assert_eq!(found(&other.client, "quartz").await, ["mem:ws/theirs.md"]);
    // A revoked key searches nothing, once the revocation is heard (at once on SQLite; on
    // PostgreSQL a notification that arrives within milliseconds, so allow it five seconds).
    contextq_server::admin::revoke_key(&s.db, &limited.key_id)
        .await
        .unwrap();
    let mut status = l.get(&scoped("")).await.status;
    for _ in 0..100 {
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        status = l.get(&scoped("")).await.status;
    }
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

async fn the_index_follows_every_write(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let c = &t.client;
    let r = c.upsert("mem:ws/notes/a.md", "alpha bravo", &[]).await;
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(found(c, "alpha").await, ["mem:ws/notes/a.md"]);
    // Upsert with new content: the old words are gone at once.
    c.upsert("mem:ws/notes/a.md", "charlie bravo", &[]).await;
    assert!(found(c, "alpha").await.is_empty());
    assert_eq!(found(c, "charlie").await, ["mem:ws/notes/a.md"]);
    // PUT.
    let r = c.put_content(&id, "delta", None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(found(c, "charlie").await.is_empty());
    assert_eq!(found(c, "delta").await, ["mem:ws/notes/a.md"]);
    // Text edit.
    let r = c
        .edit(
            "mem:ws/notes/a.md",
            json!({"edit": {"strReplace": {"oldStr": "delta", "newStr": "echo"}}}),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(found(c, "delta").await.is_empty());
    assert_eq!(found(c, "echo").await, ["mem:ws/notes/a.md"]);
    // Rename: the path's words move, the content stays found.
    let r = c
        .post(
            &format!(
                "/api/contexts/by-external/{}/rename",
                seg("mem:ws/notes/a.md")
            ),
            json!({"to": "mem:ws/notes/foxtrot.md"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(found(c, "foxtrot").await, ["mem:ws/notes/foxtrot.md"]);
    assert_eq!(found(c, "echo").await, ["mem:ws/notes/foxtrot.md"]);
    // By-prefix rename and delete.
    c.upsert("mem:ws/notes/g.md", "golf", &[]).await;
    let r = c
        .post(
            "/api/contexts/by-prefix/rename",
            json!({"from": "mem:ws/notes/", "to": "mem:ws/hotel/"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        sorted(found(c, "hotel").await),
        ["mem:ws/hotel/foxtrot.md", "mem:ws/hotel/g.md"]
    );
    assert!(found(c, "notes").await.is_empty());
    assert_eq!(found(c, "golf").await, ["mem:ws/hotel/g.md"]);
    let r = c
        .post(
            "/api/contexts/by-prefix/delete",
            json!({"prefix": "mem:ws/hotel/"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(found(c, "golf").await.is_empty());
    assert!(found(c, "echo").await.is_empty());
    // Delete by id and by external id; deleted and re-created under the same path.
    let r = c.upsert("mem:ws/x.md", "india", &[]).await;
    let x = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        c.delete(&format!("/api/contexts/{x}"), None).await.status,
        StatusCode::NO_CONTENT
    );
    assert!(found(c, "india").await.is_empty());
    c.upsert("mem:ws/x.md", "juliet", &[]).await;
    assert_eq!(found(c, "juliet").await, ["mem:ws/x.md"]);
    assert!(found(c, "india").await.is_empty());
    let r = c
        .delete(
            &format!("/api/contexts/by-external/{}", seg("mem:ws/x.md")),
            None,
        )
        .await;
    assert!(r.status.is_success(), "{:?}", r.body);
    assert!(found(c, "juliet").await.is_empty());
    // Concurrent writers on distinct files: each file's last content is what is found.
    let writers = (0..8).map(|w| {
        let c = c.clone();
        async move {
            for round in 0..5 {
                c.upsert(
                    &format!("mem:ws/w{w}.md"),
                    &format!("writer{w} round{round}"),
                    &[],
                )
                .await;
            }
        }
    });
    futures::future::join_all(writers).await;
    assert_eq!(found(c, "round4").await.len(), 8);
    assert!(found(c, "round3").await.is_empty());
    s.stop_consistent().await;
}

async fn replaced_and_redacted_text_leaves_the_index(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    // A term no other term shares its first letters with (the index compresses shared
    // prefixes): its tail is what the bytes are searched for.
    let secret = "zqxjvaultkeyhunterpassword";
    let tail = &secret[3..];
    let ext = "mem:ws/db.md";
    c.upsert(ext, &format!("db: prod\npassword {secret}\n"), &[])
        .await;
    assert_eq!(found(c, secret).await, [ext]);
    c.upsert(ext, "db: prod\npassword (in the vault)\n", &[])
        .await;
    assert!(found(c, secret).await.is_empty());
    let r = c
        .post("/api/redactions", json!({"externalId": ext, "version": 1}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    if b == Backend::Sqlite {
        assert!(
            common::sqlite_files_holding(&s.database_url, tail).is_empty(),
            "the index's pages still hold it"
        );
        // The check can fail: a live file's term is in the bytes.
        c.upsert("mem:ws/live.md", &format!("password {secret}"), &[])
            .await;
        assert!(!common::sqlite_files_holding(&s.database_url, tail).is_empty());
    }
    s.stop().await;
}

/// A seeded random workload of creates, edits, renames and deletes over a small vocabulary;
/// after each step, for a set of queries, the server's hits are exactly the files that a scan
/// of the tenant's current contents (with the same query rules) says match.
async fn search_agrees_with_a_scan(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    let c = &t.client;
    let words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "Müller",
        "muller",
        "OPS-12",
        "ops",
        "12",
        "東京",
        "京都",
        "v1.2",
        "deploy_v2",
        "über",
        "uber",
    ];
    let queries = [
        "alpha",
        "beta gamma",
        "\"alpha beta\"",
        "muller",
        "OPS-12",
        "ops",
        "東京",
        "京",
        "v1.2",
        "del*",
        "deploy_v2",
        "uber",
        "f3",
        "gam*",
        "\"12 alpha\"",
    ];
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for seed in [7u64, 42] {
        let mut rng = fastrand::Rng::with_seed(seed);
        for step in 0..40 {
            let name = format!("mem:ws/d{}/f{}.md", rng.usize(0..3), rng.usize(0..6));
            let text: Vec<&str> = (0..rng.usize(1..12))
                .map(|_| words[rng.usize(0..words.len())])
                .collect();
            let text = text.join(if rng.bool() { " " } else { "\n" });
            match rng.u8(0..10) {
                0..=5 => {
                    assert_eq!(c.upsert(&name, &text, &[]).await.status, StatusCode::OK);
                    files.insert(name, text);
                }
                6 | 7 if files.contains_key(&name) => {
                    let r = c
                        .delete(&format!("/api/contexts/by-external/{}", seg(&name)), None)
                        .await;
                    assert!(r.status.is_success(), "{:?}", r.body);
                    files.remove(&name);
                }
                _ if files.contains_key(&name) => {
                    let to = format!("mem:ws/moved/s{seed}-{step}.md");
                    let r = c
                        .post(
                            &format!("/api/contexts/by-external/{}/rename", seg(&name)),
                            json!({"to": to}),
                        )
                        .await;
                    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
                    let text = files.remove(&name).unwrap();
                    files.insert(to, text);
                }
                _ => {}
            }
            for q in queries {
                let parsed = Query::parse(q).unwrap();
                let scan: BTreeSet<String> = files
                    .iter()
                    .filter(|(path, text)| {
                        parsed.matches(
                            &index_terms(path, MAX_PATH_TERMS),
                            &index_terms(text, MAX_CONTENT_TERMS),
                        )
                    })
                    .map(|(path, _)| path.clone())
                    .collect();
                let hits: BTreeSet<String> = found(c, q).await.into_iter().collect();
                assert_eq!(hits, scan, "seed {seed} step {step} query {q:?}");
            }
        }
    }
    s.stop_consistent().await;
}

/// A word in more files than one query ranks: 2,000 of them are ranked (`capped`; the newest on
/// SQLite), pages still follow; a scope that leaves fewer than a page among them is ranked in full, so a
/// scoped search never misses its files.
async fn a_common_word_is_ranked_among_some(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    let c = &t.client;
    let old: Vec<serde_json::Value> = (0..5)
        .map(|i| json!({"externalId": format!("mem:ws/old/f{i}.md"), "workspace": "ws", "type": "reference", "content": "common old", "tags": ["rare"]}))
        .collect();
    assert_eq!(
        c.post("/api/contexts/bulk-upsert", json!({"contexts": old}))
            .await
            .status,
        StatusCode::OK
    );
    let n = contextq_api::search::MAX_RANKED + 100;
    let all: Vec<usize> = (0..n).collect();
    for chunk in all.chunks(100) {
        let items: Vec<serde_json::Value> = chunk
            .iter()
            .map(|i| json!({"externalId": format!("mem:ws/new/f{i:05}.md"), "workspace": "ws", "type": "reference", "content": format!("common {i}"), "tags": ["mem-tool"]}))
            .collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": items}))
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let r = c.get("/api/contexts/search?q=common&limit=100").await;
    assert_eq!(r.body["hits"].as_array().unwrap().len(), 100);
    assert_eq!(r.body["capped"], true, "{:?}", r.body["capped"]);
    if b == Backend::Sqlite {
        // The newest are ranked: none of the five oldest is among the hits.
        assert!(
            common::strings(&r.body["hits"], "externalId")
                .iter()
                .all(|p| p.starts_with("mem:ws/new/")),
            "{}",
            r.body
        );
    }
    // Past the first page too, and the next page follows the first without a repeat.
    let next = r.body["nextCursor"].as_str().unwrap().to_string();
    let r2 = c
        .get(&format!(
            "/api/contexts/search?q=common&limit=100&cursor={next}"
        ))
        .await;
    assert_eq!(r2.body["capped"], true);
    let first: BTreeSet<String> = common::strings(&r.body["hits"], "externalId")
        .into_iter()
        .collect();
    let second = common::strings(&r2.body["hits"], "externalId");
    assert_eq!(second.len(), 100);
    assert!(second.iter().all(|p| !first.contains(p)), "pages overlap");
    assert!(r.body["nextCursor"].is_string());
    for scope in ["tag=rare", "prefix=mem:ws/old/", "prefix=mem:ws/ol"] {
        let r = c
            .get(&format!("/api/contexts/search?q=common&{scope}"))
            .await;
        assert_eq!(r.body["capped"], false, "{scope}: ranked in full");
        assert_eq!(
            sorted(common::strings(&r.body["hits"], "externalId")),
            (0..5)
                .map(|i| format!("mem:ws/old/f{i}.md"))
                .collect::<Vec<_>>(),
            "{scope}"
        );
    }
    assert_eq!(found(c, "old").await.len(), 5);
    s.stop().await;
}

/// Ten thousand distinct queries, unknown words, bad ones: nothing of them is kept (the
/// metrics keep their series, the answers stay the same).
#[tokio::test]
async fn ten_thousand_queries_leave_nothing_behind() {
    let s = TestServer::start(Backend::Sqlite).await;
    let t = s.tenant(Plan::Free, RW).await;
    let c = &t.client;
    c.upsert("mem:ws/a.md", "kept word", &[]).await;
    let metrics = || async {
        let text = reqwest::get(format!("{}/metrics", s.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                l.rsplit_once(' ')
                    .map_or(l, |(series, _)| series)
                    .to_string()
            })
            .collect::<BTreeSet<String>>()
    };
    // Every kind of answer once, so that each series exists.
    found(c, "kept").await;
    c.get("/api/contexts/search?q=%22open").await;
    metrics().await; // the scrape's own series
    let before = metrics().await;
    let queries = futures::stream::iter(0..10_000).map(|i| {
        let c = c.clone();
        async move {
            let q = if i % 10 == 0 {
                format!("%22unbalanced{i}")
            } else {
                format!("word{i}%20other{i}*")
            };
            c.get(&format!("/api/contexts/search?q={q}")).await.status
        }
    });
    // At the tenant's limit of searches in flight (more are answered 429: `fair_under_load`).
    let in_flight = s.db.search_limits().per_tenant as usize;
    let statuses: Vec<StatusCode> = futures::StreamExt::buffer_unordered(queries, in_flight)
        .collect()
        .await;
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        9_000
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::BAD_REQUEST)
            .count(),
        1_000
    );
    assert_eq!(metrics().await, before, "no series was added");
    assert_eq!(found(c, "kept").await, ["mem:ws/a.md"]);
    s.stop().await;
}

/// Someone who can write the database points another tenant's index entry at tenant A (its
/// tenant's term and a word of A's query): A's search still never shows that file, a snippet
/// or a count of it, because every hit is joined to its context and its tenant checked there.
/// (Such a writer can also damage A's own results; that is not a read of another tenant.)
async fn a_forged_index_row_never_shows_another_tenants_file(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Unlimited, ALL).await;
    let victim = s.tenant(Plan::Unlimited, ALL).await;
    upsert_in(&a.client, "ws", "mem:ws/mine.md", "ordinary notes", &[]).await;
    upsert_in(
        &victim.client,
        "ws",
        "mem:ws/payroll.md",
        "zebrasecret salaries",
        &[],
    )
    .await;
    let victim_id: String = victim
        .client
        .get("/api/contexts/by-external/mem%3Aws%2Fpayroll.md")
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        found(&victim.client, "zebrasecret").await,
        ["mem:ws/payroll.md"]
    );
    let forged = match b {
        Backend::Sqlite => {
            // The victim's document number, its entry replaced by one under A's term.
            common::sql(
                &s.db,
                "INSERT OR REPLACE INTO context_fts (rowid, scope, path, body) \
                 SELECT n, $1, 'mem ws payroll md', 'zebrasecret ordinary' FROM search_docs WHERE context_id = $2",
                &[&format!("t_{}", a.tenant_id), &victim_id],
            )
            .await
        }
        Backend::Postgres => common::sql(
            &s.db,
            "UPDATE context_search SET tenant_id = $1, doc = $2::tsvector WHERE context_id = $3",
            &[
                &a.tenant_id,
                &format!("'t_{}' 'zebrasecret':301 'ordinary':302", a.tenant_id),
                &victim_id,
            ],
        )
        .await,
    };
    assert_eq!(forged, 1, "the forged row was written");
    for q in ["zebrasecret", "zebrasecret ordinary", "zebra*", "ordinary"] {
        let r = a
            .client
            .get(&format!("/api/contexts/search?q={}&limit=100", seg(q)))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{q}: {:?}", r.body);
        let text = r.body.to_string();
        assert!(
            !text.contains("payroll") && !text.contains("salaries") && !text.contains(&victim_id),
            "{q}: {text}"
        );
    }
    assert_eq!(found(&a.client, "ordinary").await, ["mem:ws/mine.md"]);
}

contextq_server::database_tests!(
    a_common_word_is_ranked_among_some,
    a_forged_index_row_never_shows_another_tenants_file,
    what_a_query_finds,
    hostile_queries_are_400_never_500,
    scopes_keys_and_tenants,
    the_index_follows_every_write,
    replaced_and_redacted_text_leaves_the_index,
    search_agrees_with_a_scan,
);
