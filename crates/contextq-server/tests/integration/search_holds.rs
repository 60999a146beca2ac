//! Search that holds, on SQLite and (when CONTEXTQ_TEST_DATABASE_URL is set) PostgreSQL: the
//! plan starts from the full-text index on a database never analysed (and one analysed while
//! the tenant was small); another tenant's words change nothing of a tenant's scores, order or
//! `capped`; `capped` and every count are of what the key may read; a search past its budget is
//! stopped and answered with how to narrow it; an abandoned statement stops; one tenant's
//! searches beyond its limit are 429 while another tenant's reads and searches go on; and an
//! answer's snippets read a bounded part of each file.

use crate::common;

use std::time::{Duration, Instant};

use common::{ALL, RW, TestServer, seg};
use contextq_api::search::{MAX_RANKED, Query};
use contextq_server::db::search::{SearchFailure, SearchLimits};
use contextq_server::store::search::{SearchQuery, explain};
use contextq_server::{Backend, DbOptions, Plan, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Loads `n` files `{dir}/f{i}.md` into `workspace`, `content(i)` each, 100 a request.
async fn load(
    c: &common::Api,
    workspace: &str,
    dir: &str,
    n: usize,
    content: impl Fn(usize) -> String,
) {
    let all: Vec<usize> = (0..n).collect();
    for chunk in all.chunks(100) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"externalId": format!("{dir}/f{i:05}.md"), "workspace": workspace, "type": "reference", "content": content(*i), "tags": ["t"]}))
            .collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": items}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
}

fn query(q: &str) -> SearchQuery {
    SearchQuery {
        query: Query::parse(q).unwrap(),
        workspace: None,
        within: None,
        tag: None,
        prefix: None,
        limit: 10,
        offset: 0,
    }
}

/// Every way a search can be scoped.
fn scoped_queries() -> Vec<SearchQuery> {
    let mut all = vec![query("common"), query("\"common word\""), query("comm*")];
    all.push(SearchQuery {
        tag: Some("t".into()),
        ..query("common")
    });
    all.push(SearchQuery {
        prefix: Some("mem:ws/d/".into()),
        ..query("common")
    });
    all.push(SearchQuery {
        within: Some(vec!["ws".into()]),
        workspace: Some("ws".into()),
        ..query("common")
    });
    all
}

/// The plan reads the index first and each context by its key; never the tenant's contexts.
fn assert_index_first(b: Backend, plan: &[String]) {
    let text = plan.join("\n");
    match b {
        Backend::Sqlite => {
            let first = plan
                .iter()
                .find(|l| l.contains("SCAN") || l.contains("SEARCH"))
                .unwrap();
            assert!(first.contains("context_fts VIRTUAL TABLE"), "{text}");
            for table in [" c ", " s ", " w "] {
                assert!(
                    !plan.iter().any(|l| l.contains("SCAN") && l.contains(table)),
                    "a scan of{table}:\n{text}"
                );
            }
            assert!(
                plan.iter()
                    .any(|l| l.starts_with("SEARCH c USING") && l.contains("(id=?)")),
                "{text}"
            );
            // One sort only, the page's by score over at most 2,000 candidates: the cap takes
            // FTS5's rowids in order (a sort there would rank every match first).
            assert_eq!(
                plan.iter()
                    .filter(|l| l.contains("USE TEMP B-TREE FOR ORDER BY"))
                    .count(),
                1,
                "{text}"
            );
        }
        Backend::Postgres => {
            assert!(!text.contains("Seq Scan"), "{text}");
            assert!(
                text.contains("Bitmap Index Scan on context_search_doc"),
                "{text}"
            );
            assert!(text.contains("contexts_pkey"), "{text}");
            // The match list comes before the contexts: a nested loop over it.
            let m = text.find("context_search").unwrap();
            let c = text.find("contexts_pkey").unwrap();
            assert!(m < c, "{text}");
        }
    }
}

async fn the_plan_starts_from_the_index_whatever_the_statistics(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    load(&t.client, "ws", "mem:ws/d", 300, |i| {
        format!("common word {i}")
    })
    .await;
    // Never analysed.
    for q in scoped_queries() {
        assert_index_first(b, &explain(&s.db, &t.tenant_id, &q).await.unwrap());
    }
    // Analysed while the tenant was small, then grown tenfold.
    sqlx::query("ANALYZE").execute(s.db.pool()).await.unwrap();
    load(&t.client, "ws", "mem:ws/e", 3_000, |i| {
        format!("common word more {i}")
    })
    .await;
    for q in scoped_queries() {
        assert_index_first(b, &explain(&s.db, &t.tenant_id, &q).await.unwrap());
    }
    s.stop().await;
}

/// What a search answers, as compared: each hit's path and score, and `capped`.
async fn answer(c: &common::Api, q: &str) -> (Vec<(String, String)>, Value) {
    let r = c
        .get(&format!("/api/contexts/search?q={}&limit=100", seg(q)))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{q}: {:?}", r.body);
    let hits = r.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["externalId"].as_str().unwrap().to_string(),
                format!("{:.12}", h["score"].as_f64().unwrap()),
            )
        })
        .collect();
    (hits, r.body["capped"].clone())
}

async fn another_tenants_words_change_nothing_of_yours(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Unlimited, RW).await;
    let victim = s.tenant(Plan::Unlimited, RW).await;
    // A third tenant's unrelated files, so that the shared index is mostly other words (as it
    // is in production; a word in most rows gets no weight from a whole-index statistic).
    let bystander = s.tenant(Plan::Unlimited, RW).await;
    load(&bystander.client, "ws", "mem:ws/x", 1_000, |i| {
        format!("unrelated notes number {i}")
    })
    .await;
    for (i, text) in [
        "zqbluefalcon notes about the red kite",
        "zqbluefalcon zqbluefalcon report, a red kite and a red car",
        "a longer file that mentions zqbluefalcon once among many other words of no interest",
        "red kite",
    ]
    .iter()
    .enumerate()
    {
        let r = victim
            .client
            .upsert(&format!("mem:ws/b{i}.md"), text, &[])
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let queries = [
        "zqbluefalcon",
        "\"red kite\"",
        "red",
        "zqblue*",
        "kite zqbluefalcon",
    ];
    let mut before = Vec::new();
    for q in queries {
        before.push(answer(&victim.client, q).await);
    }
    // Another tenant fills the shared index with the same words and phrases.
    load(&a.client, "ws", "mem:ws/a", 400, |i| {
        format!("zqbluefalcon red kite red kite {i} zqbluefalcon")
    })
    .await;
    for (q, was) in queries.iter().zip(&before) {
        assert_eq!(&answer(&victim.client, q).await, was, "{q}");
    }
    s.stop().await;
}

async fn capped_and_counts_are_of_what_the_key_may_read(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    s.workspace(&t.tenant_id, "acme").await;
    s.workspace(&t.tenant_id, "acme-secret").await;
    load(
        &t.client,
        "acme-secret",
        "mem:secret",
        MAX_RANKED + 50,
        |i| format!("zqsecretword zqonlysecret {i}"),
    )
    .await;
    load(&t.client, "acme", "mem:acme", 3, |i| {
        format!("zqsecretword public {i}")
    })
    .await;
    let key = s.limited_key(&t.tenant_id, RW, &["acme"]).await.api_key;
    let limited = t.client.with_key(&key);
    for (c, path) in [
        (&limited, "/api/contexts/search?q=zqsecretword&limit=2"),
        (
            &t.client,
            "/api/contexts/search?q=zqsecretword&limit=2&workspace=acme",
        ),
        (
            &t.client,
            "/api/contexts/search?q=zqsecretword&limit=2&prefix=mem%3Aacme%2F",
        ),
    ] {
        let r = c.get(path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {:?}", r.body);
        assert_eq!(r.body["capped"], false, "{path}: {}", r.body);
        assert_eq!(r.body["hits"].as_array().unwrap().len(), 2, "{path}");
        // The cursor leads to the third and last.
        let next = r.body["nextCursor"].as_str().unwrap();
        let r = c.get(&format!("{path}&cursor={next}")).await;
        assert_eq!(r.body["hits"].as_array().unwrap().len(), 1, "{path}");
        assert_eq!(r.body["nextCursor"], Value::Null, "{path}");
    }
    // A word only the other workspace holds: the limited key sees what it would if that
    // workspace did not exist.
    let r = limited.get("/api/contexts/search?q=zqonlysecret").await;
    assert_eq!(
        r.body,
        json!({"hits": [], "nextCursor": null, "capped": false})
    );
    // The whole tenant does see the cap (so the assertions above can fail).
    let r = t.client.get("/api/contexts/search?q=zqsecretword").await;
    assert_eq!(r.body["capped"], true);
    s.stop().await;
}

async fn a_search_past_its_budget_is_stopped_with_how_to_narrow(b: Backend) {
    let options = DbOptions::default().search(SearchLimits {
        budget: Duration::from_millis(1),
        ..SearchLimits::default()
    });
    let s = TestServer::start_with_options(b, ServerConfig::default(), options).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    load(&t.client, "ws", "mem:ws/d", 3_000, |i| {
        format!("common words in a note {i}, common again")
    })
    .await;
    let r = t
        .client
        .get("/api/contexts/search?q=common&limit=100")
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    r.assert_error(contextq_api::ErrorCode::BadRequest);
    assert!(r.message().contains("too broad"), "{}", r.message());
    assert!(r.message().contains("Narrow it"), "{}", r.message());
    // Reads go on.
    assert_eq!(
        t.client.get("/api/contexts?limit=1").await.status,
        StatusCode::OK
    );
    s.stop().await;
}

async fn an_abandoned_search_stops(b: Backend) {
    let options = DbOptions::default().search(SearchLimits {
        connections: 1,
        per_tenant: 1,
        budget: Duration::from_secs(120),
    });
    let s = TestServer::start_with_options(b, ServerConfig::default(), options).await;
    // A statement that would run for a minute or more.
    let slow = match b {
        Backend::Sqlite => {
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 4000000000) \
             SELECT COUNT(*) AS n FROM r"
        }
        Backend::Postgres => "SELECT pg_sleep(60)::text AS n",
    };
    let db = s.db.clone();
    let task = tokio::spawn(async move {
        let mut conn = db.begin_search("tenant-1").await.unwrap();
        conn.fetch(slow.to_string(), vec![]).await.map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished());
    task.abort();
    let dropped = Instant::now();
    match b {
        // The only search connection is free again once the statement has stopped.
        Backend::Sqlite => {
            let again = s.db.begin_search("tenant-2").await;
            assert!(again.is_ok(), "{:?}", again.err());
        }
        // The server stops the statement of a connection that was closed under it.
        Backend::Postgres => loop {
            let running = common::scalar(
                &s.db,
                "SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60)%' AND state = 'active'",
            )
            .await;
            if running == 0 {
                break;
            }
            assert!(dropped.elapsed() < Duration::from_secs(10), "still running");
            tokio::time::sleep(Duration::from_millis(20)).await;
        },
    }
    // Well inside the minute the statement would have run (docs/search.md says 100 ms).
    assert!(
        dropped.elapsed() < Duration::from_secs(10),
        "{:?}",
        dropped.elapsed()
    );
    s.stop().await;
}

async fn one_tenants_searches_leave_others_alone(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Unlimited, RW).await;
    let other = s.tenant(Plan::Unlimited, RW).await;
    a.client.upsert("mem:ws/a.md", "common", &[]).await;
    other.client.upsert("mem:ws/o.md", "common", &[]).await;
    // Tenant a has its limit of searches in flight.
    let limit = s.db.search_limits().per_tenant;
    let mut held = Vec::new();
    for _ in 0..limit {
        held.push(s.db.begin_search(&a.tenant_id).await.unwrap());
    }
    assert!(matches!(
        s.db.begin_search(&a.tenant_id).await,
        Err(SearchFailure::Busy { .. })
    ));
    let r = a.client.get("/api/contexts/search?q=common").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{:?}", r.body);
    r.assert_error(contextq_api::ErrorCode::RateLimited);
    assert_eq!(r.headers["retry-after"], "1");
    // Its reads, and the other tenant's reads and searches, go on.
    assert_eq!(
        a.client.get("/api/contexts?limit=1").await.status,
        StatusCode::OK
    );
    let r = other.client.get("/api/contexts/search?q=common").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        common::strings(&r.body["hits"], "externalId"),
        ["mem:ws/o.md"]
    );
    drop(held);
    assert_eq!(
        a.client.get("/api/contexts/search?q=common").await.status,
        StatusCode::OK
    );
    // A flood of one tenant: every answer is a 200 or a 429, never a 503.
    let statuses = futures::future::join_all(
        (0..32).map(|_| async { a.client.get("/api/contexts/search?q=common").await.status }),
    )
    .await;
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    s.stop().await;
}

async fn searches_all_in_use_are_load_not_an_outage(b: Backend) {
    let options = DbOptions::default()
        .acquire_timeout(Duration::from_millis(300))
        .search(SearchLimits {
            connections: 2,
            per_tenant: 1,
            ..SearchLimits::default()
        });
    let s = TestServer::start_with_options(b, ServerConfig::default(), options).await;
    let c = s.tenant(Plan::Unlimited, RW).await;
    c.client.upsert("mem:ws/c.md", "common", &[]).await;
    // Two other tenants hold both search connections.
    let held = [
        s.db.begin_search("tenant-a").await.unwrap(),
        s.db.begin_search("tenant-b").await.unwrap(),
    ];
    let r = c.client.get("/api/contexts/search?q=common").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{:?}", r.body);
    assert_eq!(r.headers["retry-after"], "1");
    assert!(r.message().contains("search connection"), "{}", r.message());
    assert_eq!(
        c.client.get("/api/contexts?limit=1").await.status,
        StatusCode::OK
    );
    assert!(!s.db.outage().is_on(), "a busy search slice is no outage");
    drop(held);
    assert_eq!(
        c.client.get("/api/contexts/search?q=common").await.status,
        StatusCode::OK
    );
    s.stop().await;
}

async fn an_answers_snippets_read_a_bounded_part_of_each_file(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    // The late word stands after 30,000 characters: within what one hit reads (200,000), past
    // what each of 100 hits reads (2,000,000 / 100).
    let filler = "lorem ipsum dolor\n".repeat(30_000 / 18 + 1);
    load(&t.client, "ws", "mem:ws/big", 100, |i| {
        format!("zqneedle {i}\n{filler}zqneedle zqlate\n")
    })
    .await;
    let lines = |body: &Value| -> Vec<String> {
        body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h["snippets"].as_array().unwrap().clone())
            .map(|m| m["text"].as_str().unwrap().to_string())
            .collect()
    };
    let r = t
        .client
        .get("/api/contexts/search?q=zqneedle&limit=100")
        .await;
    assert_eq!(r.body["hits"].as_array().unwrap().len(), 100);
    let all = lines(&r.body);
    assert!(all.iter().any(|l| l.starts_with("zqneedle ")));
    assert!(
        !all.iter().any(|l| l.contains("zqlate")),
        "read past the cap"
    );
    let r = t
        .client
        .get("/api/contexts/search?q=zqneedle&limit=1")
        .await;
    assert!(
        lines(&r.body).iter().any(|l| l.contains("zqlate")),
        "{}",
        r.body
    );
    s.stop().await;
}

contextq_server::database_tests!(
    the_plan_starts_from_the_index_whatever_the_statistics,
    another_tenants_words_change_nothing_of_yours,
    capped_and_counts_are_of_what_the_key_may_read,
    a_search_past_its_budget_is_stopped_with_how_to_narrow,
    an_abandoned_search_stops,
    one_tenants_searches_leave_others_alone,
    an_answers_snippets_read_a_bounded_part_of_each_file,
    searches_all_in_use_are_load_not_an_outage,
);
