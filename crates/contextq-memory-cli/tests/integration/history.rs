//! `contextq-memory history | show | diff | restore`, `--read-only` and the secret guard, through
//! the binary against a real server on 127.0.0.1:0 (SQLite, and PostgreSQL when
//! CONTEXTQ_TEST_DATABASE_URL is set): the README's worked example (a wrong fact stored, seen in
//! the diff, restored), a directory restored to a point in time, read-only use through `exec` and
//! MCP.

use crate::common;
use common::{BIN, run_with_input, text};

use std::process::Command;

use contextq_server::testing::TestServer;
use contextq_server::{Backend, Plan, Scope};
use serde_json::{Value, json};

struct Cli {
    url: String,
    key: String,
}

struct Out {
    stdout: String,
    stderr: String,
    ok: bool,
}

impl Cli {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(["--workspace", "ws"])
            .args(args)
            .env("CONTEXT_API_URL", &self.url)
            .env("CONTEXT_API_KEY", &self.key)
            .env("NO_COLOR", "1");
        c
    }

    fn run(&self, args: &[&str]) -> Out {
        let out = self.command(args).output().unwrap();
        Out {
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
            ok: out.status.success(),
        }
    }

    /// Creates `path` with `text` through `exec`, which must succeed.
    fn create(&self, path: &str, text: &str) {
        let create = json!({"command": "create", "path": path, "file_text": text});
        ok(&self.exec(&[], &[create]));
    }

    /// `exec` with `inputs` (one JSON per line); the results.
    fn exec(&self, extra: &[&str], inputs: &[Value]) -> Vec<Value> {
        let mut args = vec!["exec"];
        args.extend_from_slice(extra);
        let text: String = inputs.iter().map(|i| format!("{i}\n")).collect();
        let out = run_with_input(&mut self.command(&args), text.as_bytes());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

async fn cli(b: Backend) -> (TestServer, Cli, String) {
    let server = TestServer::start(b).await;
    let t = server
        .tenant(Plan::Free, &[Scope::Read, Scope::Write], "ws")
        .await;
    let cli = Cli {
        url: server.url().to_string(),
        key: t.api_key.clone(),
    };
    (server, cli, t.tenant_id)
}

fn ok(results: &[Value]) {
    for r in results {
        assert_eq!(r["is_error"], false, "{r}");
    }
}

async fn a_wrong_fact_seen_and_restored(b: Backend) {
    let (server, cli, _) = cli(b).await;
    ok(&cli.exec(
        &[],
        &[
            json!({"command": "create", "path": "/memories/user.md", "file_text": "Name: Ada\nTimezone: Europe/London\n"}),
            json!({"command": "str_replace", "path": "/memories/user.md", "old_str": "Europe/London", "new_str": "America/New_York"}),
        ],
    ));
    let j = cli.run(&["history", "/memories/user.md", "--json"]);
    let versions: Vec<Value> = j
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(versions.len(), 2, "{}", j.stdout);
    assert_eq!(
        (
            &versions[0]["version"],
            &versions[0]["action"],
            &versions[0]["path"]
        ),
        (&json!(2), &json!("update"), &json!("/memories/user.md"))
    );
    let h = cli.run(&["history", "/memories/user.md"]);
    assert!(h.ok, "{}", h.stderr);
    let lines: Vec<&str> = h.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", h.stdout);
    assert!(lines[0].starts_with("VERSION  TIME"), "{}", h.stdout);
    assert!(
        lines[1].starts_with("2 ") && lines[1].contains(" update "),
        "{}",
        h.stdout
    );
    assert!(
        lines[2].starts_with("1 ") && lines[2].contains(" create "),
        "{}",
        h.stdout
    );
    let masked = format!("sk_live_…{}", &cli.key[cli.key.len() - 4..]);
    assert!(lines[1].ends_with(&masked), "{}", h.stdout);
    assert!(!h.stdout.contains(&cli.key));

    let d = cli.run(&["diff", "/memories/user.md"]);
    assert!(d.ok, "{}", d.stderr);
    assert!(
        d.stdout
            .contains("\n-Timezone: Europe/London\n+Timezone: America/New_York\n"),
        "{}",
        d.stdout
    );
    assert!(!d.stdout.contains('\x1b'), "piped: no colour");
    assert_eq!(
        cli.run(&["diff", "/memories/user.md", "1", "2"]).stdout,
        d.stdout
    );

    let s = cli.run(&["show", "/memories/user.md", "--version", "1"]);
    assert_eq!(s.stdout, "Name: Ada\nTimezone: Europe/London\n");
    let missing = cli.run(&["show", "/memories/user.md", "--version", "7"]);
    assert!(!missing.ok);
    assert!(
        missing.stderr.contains("no version 7"),
        "{}",
        missing.stderr
    );

    let r = cli.run(&["restore", "/memories/user.md", "--version", "1"]);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("Restored /memories/user.md to version 1 (now version 3)."),
        "{}",
        r.stdout
    );
    let view = cli.exec(
        &[],
        &[json!({"command": "view", "path": "/memories/user.md"})],
    );
    assert!(text(&view[0]).contains("Europe/London"));
    server.stop().await;
}

async fn a_directory_restored_to_a_point_in_time(b: Backend) {
    let (server, cli, _) = cli(b).await;
    ok(&cli.exec(
        &[],
        &[
            json!({"command": "create", "path": "/memories/p/a.md", "file_text": "a1\n"}),
            json!({"command": "create", "path": "/memories/p/b.md", "file_text": "b1\n"}),
        ],
    ));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let then = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    std::thread::sleep(std::time::Duration::from_millis(20));
    ok(&cli.exec(
        &[],
        &[
            json!({"command": "str_replace", "path": "/memories/p/a.md", "old_str": "a1", "new_str": "a2"}),
            json!({"command": "delete", "path": "/memories/p/b.md"}),
            json!({"command": "create", "path": "/memories/p/c.md", "file_text": "c\n"}),
        ],
    ));
    let dry = cli.run(&["restore", "/memories/p", "--at", &then, "--dry-run"]);
    assert!(dry.ok, "{}", dry.stderr);
    for line in [
        "revert    /memories/p/a.md",
        "recreate  /memories/p/b.md",
        "remove    /memories/p/c.md",
        "3 changes, 0 unchanged, 0 unknown.",
        "Dry run: nothing was changed.",
    ] {
        assert!(dry.stdout.contains(line), "{line}: {}", dry.stdout);
    }
    let view = |p: &str| {
        cli.exec(&[], &[json!({"command": "view", "path": p})])[0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(view("/memories/p/a.md").contains("a2"));
    // On a terminal it asks first; "n" changes nothing (`script` gives it a terminal).
    let line = format!(
        "CONTEXT_API_URL={} CONTEXT_API_KEY={} NO_COLOR=1 {BIN} --workspace ws restore /memories/p --at {then}",
        cli.url, cli.key
    );
    let mut asked = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        asked.stdin.take().unwrap().write_all(b"n\n").unwrap();
    }
    let asked = asked.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&asked.stdout);
    assert!(shown.contains("as planned above? [y/N]"), "{shown}");
    assert!(shown.contains("Nothing was changed."), "{shown}");
    assert!(view("/memories/p/a.md").contains("a2"), "nothing restored");
    // Times as people write them.
    let relative = cli.run(&["restore", "/memories/p", "--at", "1 day ago", "--dry-run"]);
    assert!(
        relative.ok && relative.stdout.contains("Dry run"),
        "{}",
        relative.stderr
    );
    let done = cli.run(&["restore", "/memories/p", "--at", &then]);
    assert!(done.ok, "{}", done.stderr);
    assert!(
        done.stdout
            .contains("Done: 1 reverted, 1 recreated, 1 removed."),
        "{}",
        done.stdout
    );
    assert!(view("/memories/p/a.md").contains("a1"));
    assert!(view("/memories/p/b.md").contains("b1"));
    assert!(view("/memories/p/c.md").contains("does not exist"));
    let bad = cli.run(&["restore", "/memories/p", "--at", "yesterday"]);
    assert!(!bad.ok);
    assert!(bad.stderr.contains("10 minutes ago"), "{}", bad.stderr);
    server.stop().await;
}

async fn read_only_and_secrets_through_exec(b: Backend) {
    let (server, cli, _) = cli(b).await;
    cli.create("/memories/a.md", "a\n");
    let writes = [
        json!({"command": "create", "path": "/memories/b.md", "file_text": "b"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}),
        json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "b"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
    ];
    let mut inputs = vec![json!({"command": "view", "path": "/memories/a.md"})];
    inputs.extend(writes.iter().cloned());
    let results = cli.exec(&["--read-only"], &inputs);
    assert_eq!(results[0]["is_error"], false);
    for r in &results[1..] {
        assert_eq!(r["is_error"], true);
        assert!(
            r["content"]
                .as_str()
                .unwrap()
                .contains("The memory is read-only here"),
            "{r}"
        );
    }
    let h = cli.run(&["history", "/memories/a.md"]);
    assert_eq!(h.stdout.lines().count(), 2, "only the create: {}", h.stdout);
    let r = cli.run(&["restore", "/memories/a.md", "--version", "1", "--read-only"]);
    assert!(!r.ok);
    assert!(r.stderr.contains("read-only"), "{}", r.stderr);

    let secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n";
    let r = cli.exec(
        &[],
        &[json!({"command": "create", "path": "/memories/k.md", "file_text": secret})],
    );
    assert_eq!(r[0]["is_error"], true);
    assert!(text(&r[0]).contains("Do not store credentials"));
    let h = cli.run(&["history", "/memories/k.md"]);
    assert!(!h.ok, "nothing was written: {}", h.stdout);
    ok(&cli.exec(
        &["--allow-secrets"],
        &[json!({"command": "create", "path": "/memories/k.md", "file_text": secret})],
    ));
    server.stop().await;
}

async fn read_only_through_mcp(b: Backend) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    let (server, cli, _) = cli(b).await;
    cli.create("/memories/a.md", "a\n");
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--workspace", "ws", "mcp", "--read-only"])
        .env("CONTEXT_API_URL", &cli.url)
        .env("CONTEXT_API_KEY", &cli.key);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let call = |input: Value| {
        let client = &client;
        async move {
            let r = client
                .call_tool(
                    CallToolRequestParams::new("memory")
                        .with_arguments(input.as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            (
                r.content[0].as_text().unwrap().text.clone(),
                r.is_error.unwrap_or(false),
            )
        }
    };
    let (text, error) = call(json!({"command": "view", "path": "/memories/a.md"})).await;
    assert!(!error && text.contains("     1\ta"), "{text}");
    let (text, error) =
        call(json!({"command": "create", "path": "/memories/b.md", "file_text": "b"})).await;
    assert!(error);
    assert_eq!(
        text,
        "Error: The memory is read-only here: create is not allowed and nothing was changed. Memory can still be viewed."
    );
    let (text, error) = call(
        json!({"command": "create", "path": "/memories/b.md", "file_text": "AKIAIOSFODNN7EXAMPLE"}),
    )
    .await;
    assert!(error && text.contains("read-only"), "{text}");
    client.cancel().await.unwrap();

    // Writable, the secret guard refuses a credential through MCP too.
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--workspace", "ws", "mcp"])
        .env("CONTEXT_API_URL", &cli.url)
        .env("CONTEXT_API_KEY", &cli.key);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let r = client
        .call_tool(CallToolRequestParams::new("memory").with_arguments(
            json!({"command": "create", "path": "/memories/aws.md", "file_text": "id AKIAIOSFODNN7EXAMPLE\n"})
                .as_object()
                .unwrap()
                .clone(),
        ))
        .await
        .unwrap();
    let text = r.content[0].as_text().unwrap().text.clone();
    assert!(r.is_error.unwrap_or(false));
    assert!(text.contains("looks like an AWS access key id"), "{text}");
    let r = client
        .call_tool(
            CallToolRequestParams::new("memory").with_arguments(
                json!({"command": "view", "path": "/memories/aws.md"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert!(
        r.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("does not exist")
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

/// The gaps a newcomer met: `history DIR`, `--version 0`, `restore` without a target, `--at` in
/// the future, and `restore FILE --at TIME` (the file as it was then).
async fn history_and_restore_say_what_they_do(b: Backend) {
    let (server, cli, _) = cli(b).await;
    cli.create("/memories/d/a.md", "one\n");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    ok(&cli.exec(
        &[],
        &[json!({"command": "str_replace", "path": "/memories/d/a.md", "old_str": "one", "new_str": "two"})],
    ));
    let r = cli.run(&["history", "/memories/d"]);
    assert!(!r.ok && r.stderr.contains("is a directory"), "{}", r.stderr);
    let r = cli.run(&["show", "/memories/d/a.md", "--version", "0"]);
    assert!(
        !r.ok && r.stderr.contains("0 is not in 1.."),
        "{}",
        r.stderr
    );
    let r = cli.run(&["restore", "/memories/d/a.md"]);
    assert!(
        !r.ok && r.stderr.contains("--version") && r.stderr.contains("--at"),
        "{}",
        r.stderr
    );
    let future = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let r = cli.run(&["restore", "/memories/d/a.md", "--at", &future]);
    assert!(!r.ok && r.stderr.contains("in the future"), "{}", r.stderr);
    let r = cli.run(&[
        "restore",
        "/memories/d/a.md",
        "--at",
        "2000-01-01T00:00:00Z",
    ]);
    assert!(
        !r.ok && r.stderr.contains("no version kept"),
        "{}",
        r.stderr
    );
    // A file restored to a point in time: its version then.
    let r = cli.run(&["restore", "/memories/d/a.md", "--at", &between]);
    assert!(r.ok, "{}", r.stderr);
    assert!(r.stdout.contains("to version 1"), "{}", r.stdout);
    let r = cli.run(&["show", "/memories/d/a.md", "--version", "3"]);
    assert_eq!(r.stdout, "one\n");
    // Per-workspace mode (no --workspace): the root spans workspaces, and restore says to
    // restore one (not "/memories/<workspace> is not inside a workspace").
    let out = Command::new(BIN)
        .args(["restore", "/memories", "--at", &between])
        .env("CONTEXT_API_URL", &cli.url)
        .env("CONTEXT_API_KEY", &cli.key)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("spans workspaces") && !err.contains("<workspace>"),
        "{err}"
    );
    server.stop().await;
}

contextq_server::database_tests!(
    history_and_restore_say_what_they_do,
    a_wrong_fact_seen_and_restored,
    a_directory_restored_to_a_point_in_time,
    read_only_and_secrets_through_exec,
    read_only_through_mcp,
);
