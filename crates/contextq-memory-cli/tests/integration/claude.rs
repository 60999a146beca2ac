//! `chat` and `e2e` against the scripted Messages API stand-in (which checks every request as
//! the real API would); the e2e on SQLite and PostgreSQL, its cleanup order asserted, also after
//! a failed conversation.

use crate::common;
use common::{BIN, embedded, run_with_input};

use std::process::{Command, Stdio};

use contextq_memory_tool::testing::ScriptedClaude;
use contextq_server::Backend;
use contextq_server::testing::TestDatabase;
use sqlx::{Connection, Row};

#[tokio::test]
async fn chat_talks_to_claude_with_the_embedded_memory() {
    let claude = ScriptedClaude::start().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut chat = embedded(data.path());
    chat.arg("chat")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        .env("ANTHROPIC_BASE_URL", &claude.url);
    let out = tokio::task::spawn_blocking(move || {
        run_with_input(
            &mut chat,
            b"Remember under /memories/team/ that FACT: standup is at 9:30\n\nWhat is under /memories/team/?\n",
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("anthropic base url: {}", claude.url)),
        "{stderr}"
    );
    assert!(stderr.contains("ContextQ: http://127.0.0.1:"), "{stderr}");
    assert!(
        stdout.contains("[memory create /memories/team/fact.md] ok"),
        "{stdout}"
    );
    assert!(stdout.contains("Saved it."), "{stdout}");
    assert!(
        stdout.contains("You told me: standup is at 9:30"),
        "{stdout}"
    );
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
    // The second turn carried the first turn's conversation.
    let last = claude.requests().last().unwrap().body.clone();
    assert_eq!(last["messages"].as_array().unwrap().len(), 7, "{last}");
    assert_eq!(
        last["context_management"]["edits"][0]["exclude_tools"][0],
        "memory"
    );
}

/// A turn that fails (the Messages API unreachable) is said on stderr, naming the service it
/// could not reach (not ContextQ), and the command exits 1.
#[test]
fn chat_exits_1_after_a_failed_turn() {
    let data = tempfile::tempdir().unwrap();
    let out = run_with_input(
        embedded(data.path())
            .arg("chat")
            .env("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        b"hello\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("could not reach http://127.0.0.1:9"),
        "{stderr}"
    );
    assert!(!stderr.contains("could not reach ContextQ"), "{stderr}");
}

#[test]
fn chat_and_e2e_without_a_key_exit_0_and_say_why() {
    let data = tempfile::tempdir().unwrap();
    for cmd in ["chat", "e2e"] {
        let out = Command::new(BIN)
            .arg(cmd)
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("CONTEXT_API_URL")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{cmd}: {stdout}");
        assert!(
            stdout.contains("ANTHROPIC_API_KEY is not set"),
            "{cmd}: {stdout}"
        );
    }
}

/// Runs `contextq-memory e2e` on `database`'s URL against the stand-in, with extra arguments.
async fn e2e(database: &TestDatabase, claude: &ScriptedClaude, extra: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(BIN)
        .args(["e2e", "--database-url", &database.url])
        .args(extra)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        .env("ANTHROPIC_BASE_URL", &claude.url)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.success(),
        format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// The seed's cleanup, in its order: contexts and workspace via the API, the key row, the user
/// row, and the tenant row left in place because its audit rows are chained.
fn assert_cleanup_in_order(stdout: &str, contexts: usize) {
    let steps = [
        format!("  deleted {contexts} context(s) via the API"),
        "  deleted workspace e2e-".to_string(),
        "  deleted the API key row".to_string(),
        "  deleted the user row".to_string(),
        "  left tenant row ten_".to_string(),
    ];
    let cleanup = stdout
        .split_once("\ncleanup\n")
        .expect("a cleanup section")
        .1;
    let mut at = 0;
    for step in &steps {
        let found = cleanup[at..]
            .find(step.as_str())
            .unwrap_or_else(|| panic!("{step:?} missing or out of order in:\n{cleanup}"));
        at += found + step.len();
    }
}

/// What the e2e leaves in its database: the tenant row, nothing else.
async fn assert_only_the_tenant_is_left(database: &TestDatabase) {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&database.url).await.unwrap();
    for (table, want) in [
        ("tenants", 1),
        ("users", 0),
        ("api_keys", 0),
        ("contexts", 0),
        ("workspaces", 0),
    ] {
        let n: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM {table}"
        )))
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .try_get("n")
        .unwrap();
        assert_eq!(n, want, "{table}");
    }
}

async fn e2e_runs_end_to_end_against_the_stand_in(b: Backend) {
    let claude = ScriptedClaude::start().await.unwrap();
    let database = TestDatabase::fresh(b).await;
    let (ok, stdout) = e2e(&database, &claude, &[]).await;
    assert!(ok, "{stdout}");
    for needle in [
        &format!("anthropic base url: {}", claude.url),
        "throwaway tenant ten_",
        "workspace e2e-",
        "verified with GET /api/contexts",
        "recall: Claude's answer contains the fact",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    assert_cleanup_in_order(&stdout, 1);
    assert!(
        !stdout.contains("sk_live_") || stdout.contains("sk_live_…"),
        "a key leaked: {stdout}"
    );
    assert_only_the_tenant_is_left(&database).await;
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
}

/// A conversation that fails (the API refuses the request) still cleans up, in order, and the
/// run fails.
async fn e2e_cleans_up_after_a_failed_conversation(b: Backend) {
    let claude = ScriptedClaude::start().await.unwrap();
    let database = TestDatabase::fresh(b).await;
    let (ok, stdout) = e2e(&database, &claude, &["--model", ""]).await;
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains("FAILED: the conversation failed"),
        "{stdout}"
    );
    assert!(!stdout.contains("verified with GET"), "{stdout}");
    assert_cleanup_in_order(&stdout, 0);
    assert_only_the_tenant_is_left(&database).await;
}

contextq_server::database_tests!(
    e2e_runs_end_to_end_against_the_stand_in,
    e2e_cleans_up_after_a_failed_conversation,
);
