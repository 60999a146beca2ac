//! `contextq-memory mcp` driven by the official MCP clients, Python (`mcp`) and TypeScript
//! (`@modelcontextprotocol/sdk`): each walks every page of `resources/list` over a 20,000-file
//! memory directory (20 pages, each file once, in order) and views `/memories`, which the answer
//! budget cuts to a listing that fits Claude's context.
//!
//! The clients come from the package registries: `CONTEXTQ_MCP_PYTHON` names a Python with `mcp`
//! installed and `CONTEXTQ_MCP_TS_SDK` a directory holding `node_modules/@modelcontextprotocol/sdk`
//! (`.ci/run` installs both). Without them the test says so and passes, unless
//! `CONTEXTQ_MCP_CLIENT_TESTS=required` (CI), where a missing client fails it.
#![cfg(feature = "mcp")]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

fn clients_required() -> bool {
    std::env::var("CONTEXTQ_MCP_CLIENT_TESTS").as_deref() == Ok("required")
}

/// 20 directories of 1,000 one-byte files under `dir/memories`.
fn twenty_thousand_files(dir: &Path) {
    for d in 0..20 {
        let sub = dir.join(format!("memories/d{d:02}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("f{f:04}.md")), "x").unwrap();
        }
    }
}

fn check(client: &str, mut command: Command) {
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{client}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(r["pages"], 20, "{r}");
    assert_eq!(r["resources"], 20_000, "{r}");
    assert_eq!(r["unique"], 20_000, "{r}");
    assert_eq!(r["sorted"], true, "{r}");
    assert_eq!(r["first"], "memory:///memories/d00/f0000.md", "{r}");
    assert_eq!(r["last"], "memory:///memories/d19/f0999.md", "{r}");
    assert_eq!(r["view_is_error"], false, "{r}");
    assert!(r["view_chars"].as_u64().unwrap() <= 40_000, "{r}");
    assert_eq!(
        r["view_last_line"],
        "Note: 19020 of 20020 entries (494520 characters) are not shown, to keep this answer short; view a subdirectory to see its entries, e.g. /memories/d00.",
        "{r}"
    );
}

#[test]
fn official_clients_walk_every_page_of_twenty_thousand_files() {
    let python = std::env::var("CONTEXTQ_MCP_PYTHON").ok();
    let sdk = std::env::var("CONTEXTQ_MCP_TS_SDK").ok();
    if python.is_none() || sdk.is_none() {
        assert!(
            !clients_required(),
            "CONTEXTQ_MCP_CLIENT_TESTS=required but CONTEXTQ_MCP_PYTHON or CONTEXTQ_MCP_TS_SDK is not set"
        );
        eprintln!("skipped: set CONTEXTQ_MCP_PYTHON and CONTEXTQ_MCP_TS_SDK (see .ci/run)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    twenty_thousand_files(dir.path());
    let store = format!("local:{}", dir.path().display());
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_clients");

    let mut py = Command::new(python.unwrap());
    py.arg(scripts.join("walk.py")).args([BIN, &store]);
    check("python", py);

    let mut ts = Command::new("node");
    ts.arg(scripts.join("walk.mjs"))
        .args([sdk.as_deref().unwrap(), BIN, &store]);
    check("typescript", ts);
}
