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

use serde_json::{Value, json};

/// What one command costs on the local store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cost {
    flushes: u64,
    bytes_written: u64,
    changes: u64,
}

impl Cost {
    fn cells(&self) -> [u64; 3] {
        [self.flushes, self.bytes_written, self.changes]
    }
}

/// A case: its name, the tool inputs that set it up, and the command counted.
struct Case {
    name: &'static str,
    setup: Vec<Value>,
    run: Value,
}

fn create(p: &str, text: &str) -> Value {
    json!({"command": "create", "path": format!("/memories/{p}"), "file_text": text})
}

/// 64 KiB of lines (the in-process table's).
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

/// The cases, as in the in-process table (crates/contextq-memory-tool/tests/integration/costs.rs).
fn cases() -> Vec<Case> {
    let big = big_text();
    vec![
        Case {
            name: "view a file",
            setup: vec![create("v.md", "one\n")],
            run: json!({"command": "view", "path": "/memories/v.md"}),
        },
        Case {
            name: "view a directory (3 files)",
            setup: (0..3)
                .map(|i| create(&format!("d/f{i}.md"), "x\n"))
                .collect(),
            run: json!({"command": "view", "path": "/memories/d"}),
        },
        Case {
            name: "create a new file",
            setup: vec![create("keep.md", "x\n")],
            run: create("n.md", "new\n"),
        },
        Case {
            name: "create a new file in a new directory",
            setup: vec![create("keep.md", "x\n")],
            run: create("a/b/n.md", "new\n"),
        },
        Case {
            name: "create over a file (refused)",
            setup: vec![create("o.md", "old\n")],
            run: create("o.md", "again\n"),
        },
        Case {
            name: "str_replace",
            setup: vec![create("s.md", "one\ntwo\n")],
            run: json!({"command": "str_replace", "path": "/memories/s.md", "old_str": "two", "new_str": "2"}),
        },
        Case {
            name: "insert",
            setup: vec![create("i.md", "one\n")],
            run: json!({"command": "insert", "path": "/memories/i.md", "insert_line": 1, "insert_text": "two\n"}),
        },
        Case {
            name: "delete a file",
            setup: vec![create("x.md", "gone\n")],
            run: json!({"command": "delete", "path": "/memories/x.md"}),
        },
        Case {
            name: "delete a directory of 10",
            setup: (0..10)
                .map(|i| create(&format!("ten/f{i}.md"), "x\n"))
                .collect(),
            run: json!({"command": "delete", "path": "/memories/ten"}),
        },
        Case {
            name: "rename a file",
            setup: vec![create("r.md", "moved\n")],
            run: json!({"command": "rename", "old_path": "/memories/r.md", "new_path": "/memories/r2.md"}),
        },
        Case {
            name: "view a 64 KiB file",
            setup: vec![create("big-v.md", &big)],
            run: json!({"command": "view", "path": "/memories/big-v.md"}),
        },
        Case {
            name: "create a 64 KiB file",
            setup: vec![create("keep.md", "x\n")],
            run: create("big-n.md", &big),
        },
        Case {
            name: "str_replace in a 64 KiB file",
            setup: vec![create("big-s.md", &big)],
            run: json!({"command": "str_replace", "path": "/memories/big-s.md", "old_str": "line 7: ", "new_str": "line seven: "}),
        },
    ]
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

/// The cost of one case at `durability`: its setup run first, then its command under strace.
fn measure(case: &Case, durability: &str) -> Cost {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    if !case.setup.is_empty() {
        exec(&root, durability, &case.setup, None, false);
    }
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

const BEGIN: &str =
    "<!-- local-costs:begin (written by the test costs::the_local_cost_table_holds) -->";
const END: &str = "<!-- local-costs:end -->";
const HEADER: &str = "| command | store | flushes | bytes written | files and directories changed |\n|---|---|---|---|---|";
const STORES: [(&str, &str); 2] = [
    ("synced", "local, --durability synced"),
    ("ordered", "local, --durability ordered"),
];

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
            let [command, store, flushes, bytes, changes] = cells.as_slice() else {
                return None;
            };
            let cost = Cost {
                flushes: flushes.parse().ok()?,
                bytes_written: bytes.parse().ok()?,
                changes: changes.parse().ok()?,
            };
            Some(((command.to_string(), store.to_string()), cost))
        })
        .collect()
}

fn render(rows: &BTreeMap<(String, String), Cost>) -> String {
    let mut out = format!("{BEGIN}\n{HEADER}\n");
    for case in cases() {
        for (_, store) in STORES {
            if let Some(c) = rows.get(&(case.name.to_string(), store.to_string())) {
                let cells: Vec<String> = c.cells().iter().map(u64::to_string).collect();
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

#[test]
fn the_local_cost_table_holds() {
    let has_strace = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_strace {
        contextq_server::testing::skip_unless_required(
            "CONTEXTQ_STRACE_TESTS",
            "strace is not installed (apt-get install strace)",
        );
        return;
    }
    let mut measured = BTreeMap::new();
    for case in cases() {
        for (durability, store) in STORES {
            measured.insert(
                (case.name.to_string(), store.to_string()),
                measure(&case, durability),
            );
        }
    }
    let path = table_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if std::env::var("CONTEXTQ_UPDATE_COSTS").as_deref() == Ok("1") {
        let block = render(&measured);
        let updated = match (text.find(BEGIN), text.find(END)) {
            (Some(b), Some(e)) => format!("{}{block}{}", &text[..b], &text[e + END.len()..]),
            _ => format!("{text}\n{block}\n"),
        };
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let recorded = read_table(&text);
    let (mut grew, mut shrank) = (Vec::new(), Vec::new());
    for (row, cost) in &measured {
        let Some(was) = recorded.get(row) else {
            grew.push(format!(
                "{} on {}: {cost:?}, not in the table",
                row.0, row.1
            ));
            continue;
        };
        let pairs = cost.cells().into_iter().zip(was.cells());
        if pairs.clone().any(|(n, w)| n > w) {
            grew.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1));
        } else if pairs.into_iter().any(|(n, w)| n < w) {
            shrank.push(format!("{} on {}: {was:?} -> {cost:?}", row.0, row.1));
        }
    }
    assert!(
        grew.is_empty(),
        "a command costs more on the local store than docs/costs.md says (say why there, then update it with CONTEXTQ_UPDATE_COSTS=1):\n{}",
        grew.join("\n")
    );
    assert!(
        shrank.is_empty(),
        "a command costs less on the local store than docs/costs.md says: update the table (CONTEXTQ_UPDATE_COSTS=1):\n{}",
        shrank.join("\n")
    );
}

/// An MCP tool call costs what the same tool call costs through the library: the same HTTP
/// requests, SQL statements, write transactions, flushes and rows as the in-process table's
/// `server, SQLite` rows (docs/costs.md; bytes differ with the paths' lengths and are left
/// out). `contextq-memory mcp` is driven by rmcp's client over stdio, against a server on
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
    let call = async |tool: &'static str, input: Value| {
        let params = CallToolRequestParams::new(tool)
            .with_arguments(input.as_object().expect("an object").clone());
        let r = client.call_tool(params).await.unwrap();
        let text = r.content[0].as_text().expect("text").text.clone();
        assert!(!r.is_error.unwrap_or(false), "{tool} {input}: {text}");
        text
    };
    call("memory", json!({"command": "view", "path": "/memories"})).await;
    // The server opens its search connection at the first search.
    call("memory_search", json!({"query": "warm"})).await;
    loop {
        let keys = contextq_server::store::tenants::list_keys(&server.db, &tenant.tenant_id)
            .await
            .unwrap();
        if keys.iter().all(|k| k.last_used_at.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let text = std::fs::read_to_string(table_path()).unwrap();
    let table = tool_table(&text);
    let dir = "/memories/mcp";
    let create = |p: &str, text: &str| json!({"command": "create", "path": format!("{dir}/{p}"), "file_text": text});
    let zebras: Vec<Value> = (0..10)
        .map(|i| {
            create(
                &format!("find/f{i}.md"),
                if i < 3 {
                    "a zebra crossed\n"
                } else {
                    "nothing here\n"
                },
            )
        })
        .collect();
    let cases: Vec<(&str, Vec<Value>, &'static str, Value)> = vec![
        (
            "view a file",
            vec![create("v.md", "one\n")],
            "memory",
            json!({"command": "view", "path": format!("{dir}/v.md")}),
        ),
        (
            "create a new file",
            vec![],
            "memory",
            create("n.md", "new\n"),
        ),
        (
            "str_replace",
            vec![create("s.md", "one\ntwo\n")],
            "memory",
            json!({"command": "str_replace", "path": format!("{dir}/s.md"), "old_str": "two", "new_str": "2"}),
        ),
        (
            "insert",
            vec![create("i.md", "one\n")],
            "memory",
            json!({"command": "insert", "path": format!("{dir}/i.md"), "insert_line": 1, "insert_text": "two\n"}),
        ),
        (
            "delete a file",
            vec![create("x.md", "gone\n")],
            "memory",
            json!({"command": "delete", "path": format!("{dir}/x.md")}),
        ),
        (
            "search (3 of 10 files match)",
            zebras,
            "memory_search",
            json!({"query": "zebra", "path": format!("{dir}/find")}),
        ),
    ];
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
        call(tool, input).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c = sqlite_counts::counts(&file) - before;
        let mcp = [
            proxy.requests() as u64 - requests,
            c.statements,
            server.db.commits() - commits,
            c.flushes,
            c.rows_written,
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
        "an MCP call costs other than the tool call (HTTP requests, statements, transactions, flushes, rows):\n{}",
        differ.join("\n")
    );
    client.cancel().await.unwrap();
}

/// The in-process table's `server, SQLite` rows: command -> (HTTP requests, SQL statements,
/// write transactions, flushes, rows written), found by the header's names.
#[cfg(feature = "mcp")]
fn tool_table(text: &str) -> BTreeMap<String, [u64; 5]> {
    let start = text
        .find("<!-- costs:begin")
        .expect("docs/costs.md has the cost table");
    let mut lines = text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("<!--"));
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = cells(lines.next().expect("a header"));
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column `{name}` in the cost table"))
    };
    let columns = [
        at("HTTP requests"),
        at("SQL statements"),
        at("write transactions"),
        at("flushes"),
        at("rows written"),
    ];
    lines
        .map(cells)
        .filter(|c| c.len() == header.len() && c[1] == "server, SQLite")
        .map(|c| {
            (
                c[0].clone(),
                columns.map(|i| c[i].parse().expect("a count")),
            )
        })
        .collect()
}
