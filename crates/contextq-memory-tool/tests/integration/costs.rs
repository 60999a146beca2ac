//! The cost table (docs/costs.md) held by a test: for each memory-tool command (and a search, a
//! listing page) on each ContextQ store, the work that decides its cost, counted: the HTTP
//! requests the adapter sends, the SQL statements the database runs (SQLite's own count, or
//! PostgreSQL's `CommandComplete` messages seen by a proxy), round trips to PostgreSQL, the
//! write transactions the server commits, the flushes SQLite makes (a counting VFS), the rows it writes and the bytes sent to the
//! database. Counts are deterministic (one client, a fixed sequence, the key cache kept warm;
//! the second of two passes is counted, so that the adapter has learnt the server's extensions
//! and the server prepared its statements), so a change that makes a command do more fails here
//! with the difference; one that makes it cheaper asks for the table to be updated:
//! `CONTEXTQ_UPDATE_COSTS=1 cargo test -p contextq-memory-tool --all-features --test integration costs::`.
//! PostgreSQL's rows are counted when the tests run with `CONTEXTQ_TEST_DATABASE_URL` (CI).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::contextq::client::ListParams;
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::contextq::local::{LocalAnswer, LocalService, RouterService};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_server::testing::sqlite_counts::{self, SqliteCounts};
use contextq_server::testing::{TcpProxy, TestDatabase, TestServer};
use contextq_server::{AppState, Backend, DbOptions, Plan, ServerConfig};
use serde_json::{Value, json};

use crate::common::{ALL, options};

/// What one command costs on one store; `None` where a count does not apply (no round trips
/// on SQLite, no rows counted on PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Cost {
    requests: u64,
    statements: Option<u64>,
    round_trips: Option<u64>,
    commits: u64,
    flushes: Option<u64>,
    rows: Option<u64>,
    bytes: Option<u64>,
}

impl Cost {
    fn cells(&self) -> [Option<u64>; 7] {
        [
            Some(self.requests),
            self.statements,
            self.round_trips,
            Some(self.commits),
            self.flushes,
            self.rows,
            self.bytes,
        ]
    }

    fn from_cells(cells: [Option<u64>; 7]) -> Option<Cost> {
        Some(Cost {
            requests: cells[0]?,
            statements: cells[1],
            round_trips: cells[2],
            commits: cells[3]?,
            flushes: cells[4],
            rows: cells[5],
            bytes: cells[6],
        })
    }

    /// Whether some count of `self` is above `was`'s (or counted where it was not), and
    /// whether some is below. Bytes to PostgreSQL vary by a few with the names of prepared
    /// statements (`sqlx_s_9` or `sqlx_s_10`, by which pooled connection answered), so bytes
    /// move only past a slack of 1% or 16 bytes; every other count is exact.
    fn compare(&self, was: &Cost) -> (bool, bool) {
        let (mut grew, mut shrank) = (false, false);
        for (i, (now, was)) in self.cells().iter().zip(was.cells()).enumerate() {
            let slack = if i == 6 {
                was.map_or(0, |w| (w / 100).max(16))
            } else {
                0
            };
            match (now, was) {
                (Some(n), Some(w)) if *n > w + slack => grew = true,
                (Some(n), Some(w)) if n + slack < w => shrank = true,
                (Some(_), None) | (None, Some(_)) => grew = true,
                _ => {}
            }
        }
        (grew, shrank)
    }
}

/// What a case runs.
enum Run {
    /// A `memory` tool command.
    Tool(Value),
    /// A `memory_search` call.
    Search(Value),
    /// One page of `GET /api/contexts` (100 rows).
    ListPage,
}

/// A case of the table: its name, what sets it up (tool inputs), and what it runs.
struct Case {
    name: &'static str,
    setup: Vec<Value>,
    run: Run,
}

/// 64 KiB of words, in lines.
fn big_text() -> String {
    let mut text = String::new();
    let mut i = 0u64;
    while text.len() < 64 << 10 {
        text.push_str(&format!(
            "line {i}: the deploy of service-{i} moved to rack r{}\n",
            i % 17
        ));
        i += 1;
    }
    text
}

/// The cases, under `dir`.
fn cases(dir: &str) -> Vec<Case> {
    let create = |p: &str, text: &str| json!({"command": "create", "path": format!("{dir}/{p}"), "file_text": text});
    let tool = |v: Value| Run::Tool(v);
    let big = big_text();
    vec![
        Case {
            name: "view a file",
            setup: vec![create("v.md", "one\n")],
            run: tool(json!({"command": "view", "path": format!("{dir}/v.md")})),
        },
        Case {
            name: "view a directory (3 files)",
            setup: (0..3)
                .map(|i| create(&format!("d/f{i}.md"), "x\n"))
                .collect(),
            run: tool(json!({"command": "view", "path": format!("{dir}/d")})),
        },
        Case {
            name: "create a new file",
            setup: vec![],
            run: tool(create("n.md", "new\n")),
        },
        Case {
            name: "create over a file (refused)",
            setup: vec![create("o.md", "old\n")],
            run: tool(create("o.md", "again\n")),
        },
        Case {
            name: "str_replace",
            setup: vec![create("s.md", "one\ntwo\n")],
            run: tool(
                json!({"command": "str_replace", "path": format!("{dir}/s.md"), "old_str": "two", "new_str": "2"}),
            ),
        },
        Case {
            name: "insert",
            setup: vec![create("i.md", "one\n")],
            run: tool(
                json!({"command": "insert", "path": format!("{dir}/i.md"), "insert_line": 1, "insert_text": "two\n"}),
            ),
        },
        Case {
            name: "delete a file",
            setup: vec![create("x.md", "gone\n")],
            run: tool(json!({"command": "delete", "path": format!("{dir}/x.md")})),
        },
        Case {
            name: "delete a directory of 10",
            setup: (0..10)
                .map(|i| create(&format!("ten/f{i}.md"), "x\n"))
                .collect(),
            run: tool(json!({"command": "delete", "path": format!("{dir}/ten")})),
        },
        Case {
            name: "rename a file",
            setup: vec![create("r.md", "moved\n")],
            run: tool(
                json!({"command": "rename", "old_path": format!("{dir}/r.md"), "new_path": format!("{dir}/r2.md")}),
            ),
        },
        Case {
            name: "view a 64 KiB file",
            setup: vec![create("big-v.md", &big)],
            run: tool(json!({"command": "view", "path": format!("{dir}/big-v.md")})),
        },
        Case {
            name: "create a 64 KiB file",
            setup: vec![],
            run: tool(create("big-n.md", &big)),
        },
        Case {
            name: "str_replace in a 64 KiB file",
            setup: vec![create("big-s.md", &big)],
            run: tool(
                json!({"command": "str_replace", "path": format!("{dir}/big-s.md"), "old_str": "line 7: ", "new_str": "line seven: "}),
            ),
        },
        Case {
            name: "search (3 of 10 files match)",
            setup: (0..10)
                .map(|i| {
                    let text = if i < 3 {
                        "a zebra crossed\n"
                    } else {
                        "nothing here\n"
                    };
                    create(&format!("find/f{i}.md"), text)
                })
                .collect(),
            run: Run::Search(json!({"query": "zebra", "path": format!("{dir}/find")})),
        },
        Case {
            name: "list a page (100 rows)",
            setup: (0..100)
                .map(|i| create(&format!("page/f{i:03}.md"), "x\n"))
                .collect(),
            run: Run::ListPage,
        },
    ]
}

/// What the database did so far, as the counts of a [`Cost`] see it.
enum Meter {
    Sqlite(PathBuf),
    Postgres(TcpProxy),
}

impl Meter {
    /// (statements, round trips, flushes, rows, bytes) so far.
    fn read(&self) -> [Option<u64>; 5] {
        match self {
            Meter::Sqlite(file) => {
                let SqliteCounts {
                    statements,
                    rows_written,
                    bytes_bound,
                    flushes,
                    ..
                } = sqlite_counts::counts(file);
                [
                    Some(statements),
                    None,
                    Some(flushes),
                    Some(rows_written),
                    Some(bytes_bound),
                ]
            }
            Meter::Postgres(proxy) => [
                Some(proxy.statements()),
                Some(proxy.round_trips()),
                None,
                None,
                Some(proxy.bytes_to_database()),
            ],
        }
    }
}

/// Counts the requests a local service answers.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn LocalService>,
    calls: Arc<AtomicU64>,
}

impl LocalService for Counting {
    fn call(&self, request: http::Request<Vec<u8>>) -> LocalAnswer {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(request)
    }
}

/// How the adapter reaches the server: over HTTP through a counting proxy (plain: hiding
/// every extension), or in this process (the CLI's embedded default).
enum Door {
    Http { plain: bool },
    InProcess,
}

/// Waits until a command's work has reached the database (a PostgreSQL answer is counted when
/// the proxy forwards it, a hair before the server reads it).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// The costs of every case on one store.
async fn measure(backend: Backend, door: Door) -> Vec<(&'static str, Cost)> {
    sqlite_counts::install();
    let database = TestDatabase::fresh(backend).await;
    let (meter, url) = match backend {
        Backend::Sqlite => {
            let url = database.url.clone();
            (None, url)
        }
        Backend::Postgres => {
            let (proxy, url) = TcpProxy::in_front_of(&database.url, Duration::ZERO).await;
            (Some(proxy), url)
        }
    };
    // The key's lookup is cached for the run: a real server pays it once per key per
    // `key_cache_ttl` (5 s), not per command.
    let config = ServerConfig::default().key_cache_ttl(Duration::from_secs(3600));
    // One pooled connection: each statement is prepared on it once, in the first pass, so the
    // second pass never pays a preparation that depends on which connection answered.
    let mut db_options = DbOptions::default();
    db_options.max_connections = 1;
    let server = TestServer::start_over(database, &url, config.clone(), db_options).await;
    let meter = match meter {
        Some(proxy) => Meter::Postgres(proxy),
        None => Meter::Sqlite(server.db.sqlite_file().expect("a SQLite file")),
    };
    let tenant = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let requests = Arc::new(AtomicU64::new(0));
    let (options, _proxy) = match door {
        Door::Http { plain } => {
            let proxy = if plain {
                Proxy::plain(server.url()).await
            } else {
                Proxy::start(server.url()).await
            };
            (options(&proxy.url, &tenant.api_key), Some(proxy))
        }
        Door::InProcess => {
            let state = AppState::new(server.db.clone(), config);
            let service = Counting {
                inner: Arc::new(RouterService::new(contextq_server::app(state))),
                calls: requests.clone(),
            };
            let options = options(server.url(), &tenant.api_key).local_service(Arc::new(service));
            (options, None)
        }
    };
    let sent = || match &_proxy {
        Some(p) => p.requests() as u64,
        None => requests.load(Ordering::SeqCst),
    };
    let tool = contextq_memory_tool(options.workspace("ws")).unwrap();
    let plain = matches!(door, Door::Http { plain: true });
    let mut counted = Vec::new();
    for pass in 0..2 {
        let dir = format!("/memories/pass{pass}");
        counted.clear();
        for case in cases(&dir) {
            for input in case.setup {
                let r = tool.execute(input.clone()).await;
                assert!(!r.is_error, "{input}: {}", r.content);
            }
            settle().await;
            let (requests, commits, db) = (sent(), server.db.commits(), meter.read());
            match &case.run {
                Run::Tool(command) => {
                    let r = tool.execute(command.clone()).await;
                    assert_eq!(
                        r.is_error,
                        case.name.contains("refused"),
                        "{}: {command}: {}",
                        case.name,
                        r.content
                    );
                }
                Run::Search(input) => {
                    let r = tool.execute_search(input.clone()).await;
                    // A ContextQ without the `search` extension answers that search is not
                    // available there.
                    assert_eq!(r.is_error, plain, "{}: {}", case.name, r.content);
                    if !plain {
                        assert_eq!(
                            r.content.matches("a zebra crossed").count(),
                            3,
                            "{}",
                            r.content
                        );
                    }
                }
                Run::ListPage => {
                    let page = tool
                        .store()
                        .client()
                        .list_contexts(&ListParams {
                            workspace: Some("ws".into()),
                            limit: Some(100),
                            ..ListParams::default()
                        })
                        .await
                        .unwrap();
                    assert_eq!(page.contexts.len(), 100);
                }
            }
            settle().await;
            let now = meter.read();
            let diff = |i: usize| match (now[i], db[i]) {
                (Some(n), Some(b)) => Some(n - b),
                _ => None,
            };
            counted.push((
                case.name,
                Cost {
                    requests: sent() - requests,
                    statements: diff(0),
                    round_trips: diff(1),
                    commits: server.db.commits() - commits,
                    flushes: diff(2),
                    rows: diff(3),
                    bytes: diff(4),
                },
            ));
        }
    }
    counted
}

/// The table's file.
fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/costs.md")
}

const BEGIN: &str = "<!-- costs:begin (written by the test costs::the_cost_table_holds) -->";
const END: &str = "<!-- costs:end -->";
const HEADER: &str = "| command | store | HTTP requests | SQL statements | round trips | write transactions | flushes | rows written | bytes to the database |\n|---|---|---|---|---|---|---|---|---|";

fn read_table(text: &str) -> BTreeMap<(String, String), Cost> {
    let Some(start) = text.find(BEGIN) else {
        return BTreeMap::new();
    };
    let end = text[start..].find(END).map_or(text.len(), |e| start + e);
    text[start + BEGIN.len()..end]
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| command"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let [command, store, counts @ ..] = cells.as_slice() else {
                return None;
            };
            let counts: Vec<Option<u64>> = counts.iter().map(|c| c.parse().ok()).collect();
            let cost = Cost::from_cells(counts.try_into().ok()?)?;
            Some(((command.to_string(), store.to_string()), cost))
        })
        .collect()
}

fn render(rows: &BTreeMap<(String, String), Cost>, order: &[&str]) -> String {
    let mut out = format!("{BEGIN}\n{HEADER}\n");
    for case in cases("") {
        for store in order {
            if let Some(c) = rows.get(&(case.name.to_string(), store.to_string())) {
                let cells: Vec<String> = c
                    .cells()
                    .iter()
                    .map(|n| n.map_or("-".to_string(), |n| n.to_string()))
                    .collect();
                out.push_str(&format!(
                    "| {} | {store} | {} |\n",
                    case.name,
                    cells.join(" | ")
                ));
            }
        }
    }
    out.push_str(END);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_table_holds() {
    let stores = [
        "embedded (in process, SQLite)",
        "server, SQLite",
        "server, PostgreSQL",
        "ContextQ without extensions (SQLite)",
    ];
    let mut measured: BTreeMap<(String, String), Cost> = BTreeMap::new();
    let mut record = |store: &str, costs: Vec<(&'static str, Cost)>| {
        for (command, cost) in costs {
            measured.insert((command.to_string(), store.to_string()), cost);
        }
    };
    record(stores[0], measure(Backend::Sqlite, Door::InProcess).await);
    record(
        stores[1],
        measure(Backend::Sqlite, Door::Http { plain: false }).await,
    );
    if cfg!(contextq_postgres) {
        record(
            stores[2],
            measure(Backend::Postgres, Door::Http { plain: false }).await,
        );
    }
    record(
        stores[3],
        measure(Backend::Sqlite, Door::Http { plain: true }).await,
    );

    let path = table_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let recorded = read_table(&text);
    if std::env::var("CONTEXTQ_UPDATE_COSTS").as_deref() == Ok("1") {
        // Rows of stores not measured in this run (PostgreSQL without a database) are kept.
        let mut rows = recorded.clone();
        rows.extend(measured.clone());
        let block = render(&rows, &stores);
        let updated = match (text.find(BEGIN), text.find(END)) {
            (Some(b), Some(e)) => format!("{}{block}{}", &text[..b], &text[e + END.len()..]),
            _ => format!("{text}\n{block}\n"),
        };
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let mut grew = Vec::new();
    let mut shrank = Vec::new();
    for (row, cost) in &measured {
        match recorded.get(row) {
            None => grew.push(format!(
                "{} on {}: {cost:?}, not in the table",
                row.0, row.1
            )),
            Some(was) => match cost.compare(was) {
                (true, _) => grew.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1)),
                (false, true) => {
                    shrank.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1))
                }
                (false, false) => {}
            },
        }
    }
    assert!(
        grew.is_empty(),
        "a command costs more than docs/costs.md says (say why there, then update it with CONTEXTQ_UPDATE_COSTS=1):\n{}",
        grew.join("\n")
    );
    assert!(
        shrank.is_empty(),
        "a command costs less than docs/costs.md says: update the table (CONTEXTQ_UPDATE_COSTS=1):\n{}",
        shrank.join("\n")
    );
}

/// The flush count is SQLite's, not the server's idea of it: the same ten creates flush once
/// each with `sync_commits` (the default, `--durability synced`) and never without it
/// (`ordered`, whose flushes are the background checkpoint's, counted apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_are_counted_by_sqlite() {
    sqlite_counts::install();
    for sync_commits in [true, false] {
        let database = TestDatabase::fresh(Backend::Sqlite).await;
        let url = database.url.clone();
        let mut db_options = DbOptions::default();
        db_options.sync_commits = sync_commits;
        let server =
            TestServer::start_over(database, &url, ServerConfig::default(), db_options).await;
        let file = server.db.sqlite_file().expect("a SQLite file");
        let tenant = server.tenant(Plan::Unlimited, ALL, "ws").await;
        let tool =
            contextq_memory_tool(options(server.url(), &tenant.api_key).workspace("ws")).unwrap();
        // A key's first request in a minute also records its last use (one UPDATE, in the
        // background): made here, so that only the creates are counted.
        let r = tool
            .execute(json!({"command": "view", "path": "/memories"}))
            .await;
        assert!(!r.is_error, "{}", r.content);
        loop {
            let keys = contextq_server::store::tenants::list_keys(&server.db, &tenant.tenant_id)
                .await
                .unwrap();
            if keys.iter().all(|k| k.last_used_at.is_some()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let before = sqlite_counts::counts(&file);
        let commits = server.db.commits();
        for i in 0..10 {
            let r = tool
                .execute(json!({"command": "create", "path": format!("/memories/f{i}.md"), "file_text": "x\n"}))
                .await;
            assert!(!r.is_error, "{}", r.content);
        }
        let counted = sqlite_counts::counts(&file) - before;
        assert_eq!(server.db.commits() - commits, 10);
        let expected = if sync_commits { 10 } else { 0 };
        assert_eq!(
            counted.flushes, expected,
            "sync_commits {sync_commits}: {counted:?}"
        );
    }
}
