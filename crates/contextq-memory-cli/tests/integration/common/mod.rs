//! Test harness of the CLI's tests: the shared test server (`contextq_server::testing`) with a
//! bootstrapped tenant, and the CLI binary.
#![allow(dead_code)]

use contextq_server::testing::{ALL_SCOPES, TestServer};
use contextq_server::{Backend, Plan, admin};

pub const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

/// A child process killed (and reaped) when dropped: a server a test started.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `content` of one `exec` result.
pub fn text(result: &serde_json::Value) -> &str {
    result["content"].as_str().expect("a result has content")
}

/// Runs `command` with `input` on its stdin (then closed) and its stdout and stderr captured.
pub fn run_with_input(command: &mut std::process::Command, input: &[u8]) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// The binary with no ContextQ in its environment and `data` as its data directory: the
/// embedded default.
pub fn embedded(data: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(BIN);
    c.env("CONTEXTQ_MEMORY_DATA_DIR", data)
        .env_remove("CONTEXT_API_URL")
        .env_remove("CONTEXT_API_KEY");
    c
}

/// A running server with one tenant (workspace `ws`, a read+write+admin key).
pub struct Served {
    pub url: String,
    pub key: String,
    pub server: TestServer,
}

impl Served {
    pub async fn start(b: Backend, plan: Plan) -> Served {
        let server = TestServer::start(b).await;
        let boot = admin::bootstrap(&server.db, "cli-test", plan, "ws", ALL_SCOPES)
            .await
            .unwrap();
        Served {
            url: server.url().to_string(),
            key: boot.key.api_key,
            server,
        }
    }

    /// The content of the row at `external_id`, if any.
    pub async fn content(&self, external_id: &str) -> Option<String> {
        let encoded: String =
            percent_encoding::utf8_percent_encode(external_id, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let r = reqwest::Client::new()
            .get(format!("{}/api/contexts/by-external/{encoded}", self.url))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => Some(
                r.json::<serde_json::Value>().await.unwrap()["content"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            404 => None,
            s => panic!("GET {external_id}: {s}"),
        }
    }
}

/// Whether `strace` runs here; when it does not, says that the caller's test is skipped (and
/// fails instead when `CONTEXTQ_STRACE_TESTS=required`, as in CI).
pub fn has_strace() -> bool {
    let has = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        contextq_server::testing::skip_unless_required(
            "CONTEXTQ_STRACE_TESTS",
            "strace is not installed (apt-get install strace)",
        );
    }
    has
}
