//! The local store's cost table (docs/costs.md, second table) held by a test: for each
//! memory-tool command on `--store local:DIR`, at each `--durability`, the flushes
//! (`fsync`/`fdatasync`), the bytes written and the file-system changes (`rename`, `link`,
//! `unlink`, `mkdir`) the `contextq-memory exec` process makes under the store's directory,
//! counted by `strace` (with `--seccomp-bpf`, so that untraced calls run at full speed). The
//! local store has no background work, so the counts are deterministic: one that grows fails
//! with the difference, one that shrinks asks for the table to be updated
//! (`CONTEXTQ_UPDATE_COSTS=1 cargo test -p contextq-memory-cli --test integration costs::`).
//! Needs strace; without it the test says so and passes, unless `CONTEXTQ_STRACE_TESTS=required`
//! (CI).

use crate::common::{embedded, run_with_input};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use contextq_memory_tool::testing::costs::{self, Case};
use serde_json::{Value, json};

/// What one command costs on the local store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cost {
    flushes: u64,
    bytes_written: u64,
    changes: u64,
}

impl Cost {
    fn cells(&self) -> costs::Counts {
        vec![
            Some(self.flushes),
            Some(self.bytes_written),
            Some(self.changes),
        ]
    }
}

/// The shared `memory` commands (`contextq_memory_tool::testing::costs`, as in the in-process
/// table), and a create in a new directory (which flushes the directories it makes).
fn cases() -> Vec<Case> {
    let mut cases = costs::tool_cases("/memories");
    let at = cases
        .iter()
        .position(|c| c.name == "create a new file")
        .expect("a create");
    cases.insert(
        at + 1,
        Case {
            name: "create a new file in a new directory",
            setup: vec![],
            run: json!({"command": "create", "path": "/memories/a/b/n.md", "file_text": "new\n"}),
        },
    );
    cases
}

/// `exec` of `input` (one line each) on the local store at `root`, at `durability`; under
/// strace writing to `trace` when given. Every result must be as `refused` says.
fn exec(root: &Path, durability: &str, input: &[Value], trace: Option<&Path>, refused: bool) {
    let data = root.join("data");
    let inner = embedded(&data);
    let store = format!("local:{}", root.join("store").display());
    let mut cmd = match trace {
        Some(trace) => {
            let mut cmd = Command::new("strace");
            // `-ff`: one file per thread (`TRACE.<tid>`), so that no call is split into
            // "unfinished" and "resumed" lines by another thread's.
            cmd.args(["--seccomp-bpf", "-ff", "-qq", "-y", "-e"])
                .arg(
                    "trace=fsync,fdatasync,write,pwrite64,writev,rename,renameat,renameat2,\
                     link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir",
                )
                .arg("-o")
                .arg(trace)
                .arg(inner.get_program());
            for (k, v) in inner.get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            cmd
        }
        None => inner,
    };
    cmd.args(["--durability", durability, "exec", "--store", &store]);
    let lines: String = input.iter().map(|v| format!("{v}\n")).collect();
    let out = run_with_input(&mut cmd, lines.as_bytes());
    assert!(out.status.success(), "{out:?}");
    let results: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), input.len());
    for r in results {
        assert_eq!(r["is_error"] == true, refused, "{r}");
    }
}

/// The counts of a strace output (`-ff`: the files `trace.<tid>`), for the calls on paths
/// under `under`.
fn count(trace: &Path, under: &Path) -> Cost {
    let under = under.display().to_string();
    let mut cost = Cost {
        flushes: 0,
        bytes_written: 0,
        changes: 0,
    };
    let dir = trace.parent().expect("a directory");
    let prefix = format!("{}.", trace.file_name().unwrap().to_string_lossy());
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    for line in text.lines() {
        // `call(fd</path>, ...) = result`, or a path argument: `unlinkat(AT_FDCWD, "/path", 0)`.
        if !line.contains(&under) {
            continue;
        }
        let call = line.trim_start().split('(').next().unwrap_or_default();
        let result: i64 = line
            .rsplit_once(" = ")
            .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(-1);
        match call {
            "fsync" | "fdatasync" => cost.flushes += 1,
            "write" | "pwrite64" | "writev" if result > 0 => cost.bytes_written += result as u64,
            "write" | "pwrite64" | "writev" => {}
            _ if result == 0 => cost.changes += 1,
            _ => {}
        }
    }
    cost
}

/// The cost of one case at `durability`: its setup run first (in a process of its own), then
/// its command under strace.
fn measure(case: &Case, durability: &str) -> Cost {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    // Always run (even with nothing to set up): the store makes its directory when it opens.
    exec(&root, durability, &case.setup, None, false);
    let trace = root.join("strace.txt");
    exec(
        &root,
        durability,
        std::slice::from_ref(&case.run),
        Some(&trace),
        case.name.contains("refused"),
    );
    count(&trace, &root.join("store"))
}

fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/costs.md")
}

/// The local store's table in docs/costs.md.
fn table() -> costs::Table {
    costs::Table {
        path: table_path(),
        begin: "<!-- local-costs:begin (written by the test costs::the_local_cost_table_holds) -->",
        end: "<!-- local-costs:end -->",
        keys: ["command", "store"],
        columns: vec!["flushes", "bytes written", "files and directories changed"],
    }
}

const STORES: [(&str, &str); 2] = [
    ("synced", "local, --durability synced"),
    ("ordered", "local, --durability ordered"),
];

#[test]
fn the_local_cost_table_holds() {
    if !crate::common::has_strace() {
        return;
    }
    let mut measured = BTreeMap::new();
    for case in cases() {
        for (durability, store) in STORES {
            measured.insert(
                (case.name.to_string(), store.to_string()),
                measure(&case, durability).cells(),
            );
        }
    }
    let commands: Vec<&str> = cases().iter().map(|c| c.name).collect();
    let stores = STORES.map(|(_, store)| store);
    table().hold(&measured, &commands, &stores, |_, _| 0);
}

/// An MCP tool call costs what the same tool call costs through the library: the same HTTP
/// requests, SQL statements, write transactions and flushes as the in-process table's
/// `server, SQLite` rows (docs/costs.md), for every command of that table and a search. Bytes
/// differ with the paths' lengths, and rows with the index's history (FTS5 merges its segments
/// when enough have been written), so both are held by that table only. `contextq-memory mcp` is driven by rmcp's client over stdio, against a server on
/// SQLite through a counting proxy; the first calls (the adapter learns the server's
/// extensions, the key records its last use, the server opens its search connection) are not
/// counted.
#[cfg(feature = "mcp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_costs_what_the_tool_call_costs() {
    use contextq_memory_tool::testing::proxy::Proxy;
    use contextq_server::testing::sqlite_counts;
    use contextq_server::testing::{ALL_SCOPES, TestDatabase, TestServer};
    use contextq_server::{Backend, DbOptions, Plan, ServerConfig};
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use std::time::Duration;

    sqlite_counts::install();
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let url = database.url.clone();
    // As the in-process table's server: the key's lookup cached for the run, one connection.
    let config = ServerConfig::default().key_cache_ttl(Duration::from_secs(3600));
    let mut db_options = DbOptions::default();
    db_options.max_connections = 1;
    // As the in-process table's server: no background merge of the search index.
    db_options.index_merge_interval = None;
    let server = TestServer::start_over(database, &url, config, db_options).await;
    let file = server.db.sqlite_file().expect("a SQLite file");
    let tenant = server.tenant(Plan::Unlimited, ALL_SCOPES, "ws").await;
    let proxy = Proxy::start(server.url()).await;
    let mut cmd = tokio::process::Command::new(crate::common::BIN);
    cmd.args(["--workspace", "ws", "mcp"])
        .env("CONTEXT_API_URL", &proxy.url)
        .env("CONTEXT_API_KEY", &tenant.api_key)
        .env_remove("CONTEXTQ_MEMORY_DATA_DIR");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let call_as = async |tool: &'static str, input: Value, refused: bool| {
        let params = CallToolRequestParams::new(tool)
            .with_arguments(input.as_object().expect("an object").clone());
        let r = client.call_tool(params).await.unwrap();
        let text = r.content[0].as_text().expect("text").text.clone();
        assert_eq!(
            r.is_error.unwrap_or(false),
            refused,
            "{tool} {input}: {text}"
        );
    };
    let call = async |tool: &'static str, input: Value| call_as(tool, input, false).await;
    call("memory", json!({"command": "view", "path": "/memories"})).await;
    // The server opens its search connection at the first search.
    call("memory_search", json!({"query": "warm"})).await;
    server.until_keys_used(&tenant.tenant_id).await;

    let text = std::fs::read_to_string(table_path()).unwrap();
    let table = tool_table(&text);
    let dir = "/memories/mcp";
    let mut cases: Vec<(&str, Vec<Value>, &'static str, Value)> = costs::tool_cases(dir)
        .into_iter()
        .map(|c| (c.name, c.setup, "memory", c.run))
        .collect();
    let zebras = (0..10)
        .map(|i| {
            let text = if i < 3 {
                "a zebra crossed\n"
            } else {
                "nothing here\n"
            };
            json!({"command": "create", "path": format!("{dir}/find/f{i}.md"), "file_text": text})
        })
        .collect();
    cases.push((
        "search (3 of 10 files match)",
        zebras,
        "memory_search",
        json!({"query": "zebra", "path": format!("{dir}/find")}),
    ));
    let mut differ = Vec::new();
    for (name, setup, tool, input) in cases {
        for s in setup {
            call("memory", s).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (requests, commits, before) = (
            proxy.requests() as u64,
            server.db.commits(),
            sqlite_counts::counts(&file),
        );
        call_as(tool, input, name.contains("refused")).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c = sqlite_counts::counts(&file) - before;
        let mcp = [
            proxy.requests() as u64 - requests,
            c.statements,
            server.db.commits() - commits,
            c.flushes,
        ];
        let tool_row = table
            .get(name)
            .unwrap_or_else(|| panic!("no `{name} | server, SQLite` row in docs/costs.md"));
        if mcp != *tool_row {
            differ.push(format!("{name}: the tool {tool_row:?}, MCP {mcp:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "an MCP call costs other than the tool call (HTTP requests, statements, transactions, flushes):\n{}",
        differ.join("\n")
    );
    client.cancel().await.unwrap();
}

/// The in-process table's `server, SQLite` rows: command -> (HTTP requests, SQL statements,
/// write transactions, flushes).
#[cfg(feature = "mcp")]
fn tool_table(text: &str) -> BTreeMap<String, [u64; 4]> {
    let table = costs::contextq_table(table_path());
    let at = |name: &str| table.columns.iter().position(|c| *c == name).unwrap();
    let columns = [
        at("HTTP requests"),
        at("SQL statements"),
        at("write transactions"),
        at("flushes"),
    ];
    let rows = table.read(text);
    assert!(
        !rows.is_empty(),
        "docs/costs.md has the cost table, of these columns"
    );
    rows.into_iter()
        .filter(|((_, store), _)| store == "server, SQLite")
        .map(|((command, _), counts)| (command, columns.map(|i| counts[i].expect("a count"))))
        .collect()
}
