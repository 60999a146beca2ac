//! The cost table (docs/costs.md) held by a test: for each memory-tool command on each ContextQ
//! store, the HTTP requests the adapter sends and the write transactions the server commits.
//! Counts are deterministic (one client, a fixed sequence; the second of two passes is counted,
//! so that the adapter has learnt the server's extensions and prepared what it prepares), so a
//! change that makes a command send one more request or commit one more transaction fails here
//! with the table's difference; one that makes it cheaper asks for the table to be updated:
//! `CONTEXTQ_UPDATE_COSTS=1 cargo test -p contextq-memory-tool --all-features --test integration costs::`.
//! PostgreSQL's rows are counted when the tests run with `CONTEXTQ_TEST_DATABASE_URL` (CI).

use std::collections::BTreeMap;
use std::path::PathBuf;

use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_server::{Backend, Plan};
use serde_json::{Value, json};

use crate::common::{ALL, Server, options};

/// What one command costs on one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cost {
    requests: usize,
    commits: u64,
}

/// The commands of the table: the name, what sets it up (under `dir`), and the command.
fn cases(dir: &str) -> Vec<(&'static str, Vec<Value>, Value)> {
    let create = |p: &str, text: &str| json!({"command": "create", "path": format!("{dir}/{p}"), "file_text": text});
    let ten: Vec<Value> = (0..10)
        .map(|i| create(&format!("ten/f{i}.md"), "x\n"))
        .collect();
    vec![
        (
            "view a file",
            vec![create("v.md", "one\n")],
            json!({"command": "view", "path": format!("{dir}/v.md")}),
        ),
        (
            "view a directory (3 files)",
            (0..3)
                .map(|i| create(&format!("d/f{i}.md"), "x\n"))
                .collect(),
            json!({"command": "view", "path": format!("{dir}/d")}),
        ),
        ("create a new file", vec![], create("n.md", "new\n")),
        (
            "create over a file (refused)",
            vec![create("o.md", "old\n")],
            create("o.md", "again\n"),
        ),
        (
            "str_replace",
            vec![create("s.md", "one\ntwo\n")],
            json!({"command": "str_replace", "path": format!("{dir}/s.md"), "old_str": "two", "new_str": "2"}),
        ),
        (
            "insert",
            vec![create("i.md", "one\n")],
            json!({"command": "insert", "path": format!("{dir}/i.md"), "insert_line": 1, "insert_text": "two\n"}),
        ),
        (
            "delete a file",
            vec![create("x.md", "gone\n")],
            json!({"command": "delete", "path": format!("{dir}/x.md")}),
        ),
        (
            "delete a directory of 10",
            ten,
            json!({"command": "delete", "path": format!("{dir}/ten")}),
        ),
        (
            "rename a file",
            vec![create("r.md", "moved\n")],
            json!({"command": "rename", "old_path": format!("{dir}/r.md"), "new_path": format!("{dir}/r2.md")}),
        ),
    ]
}

/// The costs of every command on `store` (a proxy in front of `server`, counting requests).
async fn measure(server: &Server, proxy: &Proxy, key: &str) -> Vec<(&'static str, Cost)> {
    let tool = contextq_memory_tool(options(&proxy.url, key).workspace("ws")).unwrap();
    let mut counted = Vec::new();
    for pass in 0..2 {
        let dir = format!("/memories/pass{pass}");
        counted.clear();
        for (name, setup, command) in cases(&dir) {
            for input in setup {
                let r = tool.execute(input.clone()).await;
                assert!(!r.is_error, "{input}: {}", r.content);
            }
            let (requests, commits) = (proxy.requests(), server.db.commits());
            let r = tool.execute(command.clone()).await;
            assert_eq!(
                r.is_error,
                name.contains("refused"),
                "{name}: {command}: {}",
                r.content
            );
            counted.push((
                name,
                Cost {
                    requests: proxy.requests() - requests,
                    commits: server.db.commits() - commits,
                },
            ));
        }
    }
    counted
}

/// The table's file, and its rows between the markers: (command, store) -> cost.
fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/costs.md")
}

const BEGIN: &str = "<!-- costs:begin (written by the test costs::the_cost_table_holds) -->";
const END: &str = "<!-- costs:end -->";
const HEADER: &str = "| command | store | HTTP requests | write transactions |\n|---|---|---|---|";

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
            match cells.as_slice() {
                [command, store, requests, commits] => Some((
                    (command.to_string(), store.to_string()),
                    Cost {
                        requests: requests.parse().ok()?,
                        commits: commits.parse().ok()?,
                    },
                )),
                _ => None,
            }
        })
        .collect()
}

fn render(rows: &BTreeMap<(String, String), Cost>, order: &[&str]) -> String {
    let mut out = format!("{BEGIN}\n{HEADER}\n");
    // In the order of the cases, then of the stores.
    let commands: Vec<&str> = cases("").iter().map(|(n, _, _)| *n).collect();
    for command in &commands {
        for store in order {
            if let Some(c) = rows.get(&(command.to_string(), store.to_string())) {
                out.push_str(&format!(
                    "| {command} | {store} | {} | {} |\n",
                    c.requests, c.commits
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
        "server, SQLite",
        "server, PostgreSQL",
        "ContextQ without extensions (SQLite)",
    ];
    let mut measured: BTreeMap<(String, String), Cost> = BTreeMap::new();
    let mut record = async |store: &str, backend: Backend, plain: bool| {
        let server = Server::start(backend).await;
        let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
        let proxy = if plain {
            Proxy::plain(&server.url).await
        } else {
            Proxy::start(&server.url).await
        };
        for (command, cost) in measure(&server, &proxy, &key).await {
            measured.insert((command.to_string(), store.to_string()), cost);
        }
    };
    record(stores[0], Backend::Sqlite, false).await;
    if cfg!(contextq_postgres) {
        record(stores[1], Backend::Postgres, false).await;
    }
    record(stores[2], Backend::Sqlite, true).await;

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
            Some(was) if cost.requests > was.requests || cost.commits > was.commits => {
                grew.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1))
            }
            Some(was) if cost != was => {
                shrank.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1))
            }
            Some(_) => {}
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
