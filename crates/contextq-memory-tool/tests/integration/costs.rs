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

use contextq_memory_tool::contextq::client::ListParams;
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::contextq::local::{LocalAnswer, LocalService, RouterService};
use contextq_memory_tool::testing::costs;
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{MemoryPath, MemoryToolHandlers};
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
    fn cells(&self) -> costs::Counts {
        vec![
            Some(self.requests),
            self.statements,
            self.round_trips,
            Some(self.commits),
            self.flushes,
            self.rows,
            self.bytes,
        ]
    }
}

/// Bytes to PostgreSQL vary by a few with the names of prepared statements (`sqlx_s_9` or
/// `sqlx_s_10`, by which pooled connection answered), so bytes move only past a slack of 1% or
/// 16 bytes; every other count is exact.
fn slack(column: usize, was: u64) -> u64 {
    if column == 6 { (was / 100).max(16) } else { 0 }
}

/// What a case runs.
enum Run {
    /// A `memory` tool command.
    Tool(Value),
    /// A `memory_search` call.
    Search(Value),
    /// One page of `GET /api/contexts` (100 rows).
    ListPage,
    /// [`MemoryTool::create_many`](contextq_memory_tool::MemoryTool::create_many) of these
    /// files (what `contextq-memory import` writes with).
    Import(Vec<(MemoryPath, String)>),
    /// One call of the Memory Stores door (`/v1`, extension `memory-stores`) of contextq-server
    /// over HTTP, on the workspace's store; not measured on other stores.
    Door(DoorCall),
}

/// A Memory Stores call (paths in the store: `/memories/x` is `/x`).
enum DoorCall {
    /// Create the memory at this path.
    Create(String),
    /// Update the memory at this path, which holds this content, with a precondition on it.
    Update(String, &'static str),
    /// A page of 100 memories under this prefix.
    ListPage(String),
    /// A page of 100 versions of the store.
    Versions,
}

/// A case of the table: its name, what sets it up (tool inputs), and what it runs.
struct Case {
    name: &'static str,
    setup: Vec<Value>,
    run: Run,
}

/// The cases, under `dir`: the shared `memory` commands, then a search and a listing page.
fn cases(dir: &str) -> Vec<Case> {
    let create = |p: &str, text: &str| json!({"command": "create", "path": format!("{dir}/{p}"), "file_text": text});
    let mut cases: Vec<Case> = costs::tool_cases(dir)
        .into_iter()
        .map(|c| Case {
            name: c.name,
            setup: c.setup,
            run: Run::Tool(c.run),
        })
        .collect();
    cases.extend([
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
            name: "import 100 files of 1 KiB (one bulk upsert)",
            setup: vec![],
            run: Run::Import(
                (0..100)
                    .map(|i| {
                        // (`cases("")` only names the rows.)
                        let root = if dir.is_empty() { "/memories" } else { dir };
                        let path = format!("{root}/import/d{}/f{i:03}.md", i % 10);
                        (MemoryPath::parse(&path).unwrap(), prose(i))
                    })
                    .collect(),
            ),
        },
        Case {
            name: "list a page (100 rows)",
            setup: (0..100)
                .map(|i| create(&format!("page/f{i:03}.md"), "x\n"))
                .collect(),
            run: Run::ListPage,
        },
    ]);
    // The same memory through the Memory Stores door (docs/memory-stores.md).
    let api = dir.strip_prefix("/memories").unwrap_or(dir).to_string();
    cases.extend([
        Case {
            name: "Memory Stores: create a memory",
            setup: vec![],
            run: Run::Door(DoorCall::Create(format!("{api}/door/new.md"))),
        },
        Case {
            name: "Memory Stores: update a memory (content_sha256 precondition)",
            setup: vec![create("door/upd.md", "old\n")],
            run: Run::Door(DoorCall::Update(format!("{api}/door/upd.md"), "old\n")),
        },
        Case {
            name: "Memory Stores: list a page (100 memories)",
            setup: vec![],
            run: Run::Door(DoorCall::ListPage(format!("{api}/page/"))),
        },
        Case {
            name: "Memory Stores: list a page of versions (100)",
            setup: vec![],
            run: Run::Door(DoorCall::Versions),
        },
    ]);
    cases
}

/// Sends `call` to the door at `url` (the counting proxy) with `key`. What a call needs first
/// (the store's id, a memory's id) is read before `counted` is called, which starts the count.
async fn door_call(url: &str, key: &str, call: &DoorCall, counted: impl FnOnce()) {
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("{url}{path}"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "GET {path}: {}", r.status());
            r.json::<Value>().await.unwrap()
        }
    };
    let stores = get("/v1/memory_stores".into()).await;
    let store = stores["data"][0]["id"].as_str().unwrap().to_string();
    let base = format!("{url}/v1/memory_stores/{store}");
    let send = |r: reqwest::RequestBuilder| async move {
        let r = r.bearer_auth(key).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "{status}: {body}");
        body
    };
    match call {
        DoorCall::Create(path) => {
            counted();
            send(
                http.post(format!("{base}/memories"))
                    .json(&json!({"path": path, "content": "new\n"})),
            )
            .await;
        }
        DoorCall::Update(path, old) => {
            let dir = &path[..=path.rfind('/').unwrap()];
            let listed = get(format!(
                "/v1/memory_stores/{store}/memories?path_prefix={dir}"
            ))
            .await;
            let memory = listed["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["path"] == path.as_str())
                .unwrap()
                .clone();
            let (id, sha) = (
                memory["id"].as_str().unwrap().to_string(),
                memory["content_sha256"].clone(),
            );
            assert_eq!(memory["content_size_bytes"], old.len());
            counted();
            send(http.post(format!("{base}/memories/{id}")).json(&json!({"content": "new\n", "precondition": {"type": "content_sha256", "content_sha256": sha}}))).await;
        }
        DoorCall::ListPage(prefix) => {
            counted();
            let page =
                send(http.get(format!("{base}/memories?limit=100&path_prefix={prefix}"))).await;
            assert_eq!(page["data"].as_array().unwrap().len(), 100, "{page}");
        }
        DoorCall::Versions => {
            counted();
            let page = send(http.get(format!("{base}/memory_versions?limit=100"))).await;
            assert_eq!(page["data"].as_array().unwrap().len(), 100, "{page}");
        }
    }
}

/// About 1 KiB of words, different for each `seed` (the index holds a few hundred distinct
/// terms per file, as in a note): the same on every run.
fn prose(seed: usize) -> String {
    let mut text = String::new();
    let mut x = seed as u64 + 1;
    while text.len() < 1024 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!("w{} ", (x >> 33) % 5000));
        if text.len() % 80 < 6 {
            text.push('\n');
        }
    }
    text.push('\n');
    text
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
    // No background merge of the search index: when it runs would decide how many index rows
    // a later write touches (docs/costs.md).
    db_options.index_merge_interval = None;
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
            // The door is contextq-server's, over HTTP: not a store of the others.
            let door_url = match (&case.run, &_proxy) {
                (Run::Door(_), Some(p)) if !plain => Some(p.url.clone()),
                (Run::Door(_), _) => continue,
                _ => None,
            };
            for input in case.setup {
                let r = tool.execute(input.clone()).await;
                assert!(!r.is_error, "{input}: {}", r.content);
            }
            settle().await;
            let (mut requests, mut commits, mut db) = (sent(), server.db.commits(), meter.read());
            if let (Run::Door(call), Some(url)) = (&case.run, &door_url) {
                // What the call reads first is not counted: the count starts at `counted`.
                let started = std::sync::Mutex::new(None);
                door_call(url, &tenant.api_key, call, || {
                    std::thread::sleep(Duration::from_millis(20));
                    *started.lock().unwrap() = Some((sent(), server.db.commits(), meter.read()));
                })
                .await;
                (requests, commits, db) = started.into_inner().unwrap().unwrap();
            }
            match &case.run {
                Run::Door(_) => {}
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
                Run::Import(files) => {
                    let created = tool.create_many("import", files).await;
                    assert!(created.iter().all(Result::is_ok), "{}", case.name);
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

/// The table in docs/costs.md.
fn table() -> costs::Table {
    costs::contextq_table(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/costs.md"))
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

    let commands: Vec<&str> = cases("").iter().map(|c| c.name).collect();
    let measured = measured
        .into_iter()
        .map(|(row, cost)| (row, cost.cells()))
        .collect();
    table().hold(&measured, &commands, &stores, slack);
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
        server.until_keys_used(&tenant.tenant_id).await;
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

/// Which tables and indexes a write touches, page by page: on a server on SQLite, after the
/// first file of the workspace, one create, one str_replace and one delete of a short note, each
/// held (pages written to the log, by SQLite's `dbstat` name of the page's table or index)
/// against docs/costs.md's third table. A B-tree added to a write's path shows up here by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_a_write_touches_hold() {
    sqlite_counts::install();
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let url = database.url.clone();
    let config = ServerConfig::default().key_cache_ttl(Duration::from_secs(3600));
    let server = TestServer::start_over(
        database,
        &url,
        config,
        DbOptions::default().index_merge_interval(None),
    )
    .await;
    let file = server.db.sqlite_file().expect("a SQLite file");
    let tenant = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let tool =
        contextq_memory_tool(options(server.url(), &tenant.api_key).workspace("ws")).unwrap();
    let run = async |input: Value| {
        let r = tool.execute(input).await;
        assert!(!r.is_error, "{}", r.content);
    };
    run(json!({"command": "create", "path": "/memories/first.md", "file_text": "first\n"})).await;
    server.until_keys_used(&tenant.tenant_id).await;
    let steps = [
        (
            "create a new file",
            json!({"command": "create", "path": "/memories/n.md", "file_text": "new\n"}),
        ),
        (
            "str_replace",
            json!({"command": "str_replace", "path": "/memories/n.md", "old_str": "new", "new_str": "old"}),
        ),
        (
            "delete a file",
            json!({"command": "delete", "path": "/memories/n.md"}),
        ),
    ];
    // Pages by table or index, one count per step ("-": not written by it).
    let mut written: BTreeMap<String, costs::Counts> = BTreeMap::new();
    for (i, (_, input)) in steps.iter().enumerate() {
        let before = sqlite_counts::log_pages(&file).len();
        run(input.clone()).await;
        let pages = sqlite_counts::log_pages(&file)[before..].to_vec();
        for (table, n) in sqlite_counts::tables_of(&file, &pages).unwrap() {
            written
                .entry(table)
                .or_insert_with(|| vec![None; steps.len()])[i] = Some(n as u64);
        }
    }
    let measured: BTreeMap<(String, String), costs::Counts> = written
        .into_iter()
        .map(|(table, pages)| ((table, "server, SQLite".to_string()), pages))
        .collect();
    let table = costs::Table {
        path: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/costs.md"),
        begin: "<!-- pages:begin (written by the test costs::the_tables_a_write_touches_hold) -->",
        end: "<!-- pages:end -->",
        keys: ["table or index", "store"],
        columns: steps.iter().map(|(name, _)| *name).collect(),
    };
    let tables: Vec<&str> = measured
        .keys()
        .map(|(t, _): &(String, String)| t.as_str())
        .collect();
    table.hold(&measured, &tables, &["server, SQLite"], |_, _| 0);
}
