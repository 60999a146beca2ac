//! `chat` and `e2e` against the scripted Messages API stand-in (which checks every request as
//! the real API would), on SQLite and, when configured, PostgreSQL.

use std::io::Write;
use std::process::{Command, Stdio};

use contextq_memory_tool::testing::ScriptedClaude;
use sqlx::{Connection, Row};

const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

#[tokio::test]
async fn chat_talks_to_claude_with_the_embedded_memory() {
    let claude = ScriptedClaude::start().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .arg("chat")
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        .env("ANTHROPIC_BASE_URL", &claude.url)
        .env_remove("CONTEXT_API_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Remember under /memories/team/ that FACT: standup is at 9:30\n\nWhat is under /memories/team/?\n")
        .unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
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

async fn database_urls() -> Vec<(String, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let mut urls = vec![(
        format!("sqlite:{}", dir.path().join("e2e.db").display()),
        Some(dir),
    )];
    if let Ok(admin) = std::env::var("CONTEXTQ_TEST_DATABASE_URL")
        && !admin.is_empty()
    {
        let name = format!("cqe2e_{:016x}", fastrand::u64(..));
        urls.push((
            contextq_server::db::create_postgres_database(&admin, &name)
                .await
                .unwrap(),
            None,
        ));
    }
    urls
}

#[tokio::test]
async fn e2e_runs_end_to_end_against_the_stand_in() {
    let claude = ScriptedClaude::start().await.unwrap();
    for (url, _dir) in database_urls().await {
        let url2 = url.clone();
        let claude_url = claude.url.clone();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(BIN)
                .args(["e2e", "--database-url", &url2])
                .env("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
                .env("ANTHROPIC_BASE_URL", &claude_url)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{url}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for needle in [
            &format!("anthropic base url: {}", claude.url),
            "throwaway tenant ten_",
            "workspace e2e-",
            "verified with GET /api/contexts",
            "recall: Claude's answer contains the fact",
            "deleted 1 context(s) via the API",
            "deleted the API key row",
            "deleted the user row",
            "left tenant row",
        ] {
            assert!(
                stdout.contains(needle),
                "{url}: missing {needle:?} in\n{stdout}"
            );
        }
        assert!(
            !stdout.contains("sk_live_") || stdout.contains("sk_live_…"),
            "a key leaked: {stdout}"
        );
        // What is left in the database: the tenant row (chained audit rows), nothing else.
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
        let count = |sql: &'static str| sqlx::query(sql);
        let n = |row: sqlx::any::AnyRow| row.try_get::<i64, _>("n").unwrap();
        assert_eq!(
            n(count("SELECT COUNT(*) AS n FROM tenants")
                .fetch_one(&mut conn)
                .await
                .unwrap()),
            1
        );
        for table in [
            "SELECT COUNT(*) AS n FROM users",
            "SELECT COUNT(*) AS n FROM api_keys",
            "SELECT COUNT(*) AS n FROM contexts",
            "SELECT COUNT(*) AS n FROM workspaces",
        ] {
            assert_eq!(
                n(count(table).fetch_one(&mut conn).await.unwrap()),
                0,
                "{table}"
            );
        }
    }
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
}
