//! Export and import: a sample tree round-trips byte for byte, a second run changes nothing,
//! and an import into a store over its quota stops with a clear error and a correct summary.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

fn run(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data)
        .env_remove("CONTEXT_API_URL")
        .env_remove("CONTEXT_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn sample(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> = vec![
        ("notes.md".into(), b"top level\n".to_vec()),
        ("projects/alpha/plan.md".into(), b"nested\ntwice\n".to_vec()),
        (
            "people/z\u{fc}rich \u{65e5}\u{672c}.md".into(),
            "unicode: h\u{e9}llo \u{2192} \u{4e16}\u{754c}\n"
                .as_bytes()
                .to_vec(),
        ),
        ("empty.md".into(), Vec::new()),
        ("big/one-mebibyte.txt".into(), vec![b'm'; 1 << 20]),
    ];
    for (rel, bytes) in &files {
        let p = dir.join("memories").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    files
}

#[test]
fn round_trip_is_byte_identical_and_idempotent() {
    let data = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let files = sample(src.path());
    let src_arg = src.path().to_str().unwrap();
    let out_arg = out.path().to_str().unwrap();

    let o = run(data.path(), &["import", src_arg], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), "imported 5 files (1.0M), skipped 0, failed 0");
    let o = run(data.path(), &["import", src_arg], &[]);
    assert_eq!(
        stdout(&o),
        "imported 0 files (0B), skipped 5, failed 0",
        "a second import changes nothing"
    );

    let o = run(data.path(), &["export", "--out", out_arg], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), "exported 5 files (1.0M), skipped 0, failed 0");
    for (rel, bytes) in &files {
        assert_eq!(
            &std::fs::read(out.path().join("memories").join(rel)).unwrap(),
            bytes,
            "{rel}"
        );
    }
    let o = run(data.path(), &["export", "--out", out_arg], &[]);
    assert_eq!(stdout(&o), "exported 0 files (0B), skipped 5, failed 0");

    // A changed source file is left alone without --overwrite, replaced with it.
    std::fs::write(src.path().join("memories/notes.md"), b"changed\n").unwrap();
    let o = run(data.path(), &["import", src_arg], &[]);
    assert_eq!(stdout(&o), "imported 0 files (0B), skipped 5, failed 0");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/memories/notes.md exists with other content")
    );
    let o = run(data.path(), &["import", src_arg, "--overwrite"], &[]);
    assert_eq!(stdout(&o), "imported 1 files (8B), skipped 4, failed 0");

    // The same commands move memories between stores: the embedded store to a local directory.
    let local = tempfile::tempdir().unwrap();
    let o = run(
        data.path(),
        &[
            "import",
            out_arg,
            "--store",
            &format!("local:{}", local.path().display()),
        ],
        &[],
    );
    assert_eq!(stdout(&o), "imported 5 files (1.0M), skipped 0, failed 0");
    assert_eq!(
        std::fs::read(local.path().join("memories/empty.md")).unwrap(),
        b""
    );
}

#[tokio::test]
async fn import_over_quota_stops_with_a_clear_error() {
    use contextq_server::model::{Plan, Scope};
    let dir = tempfile::tempdir().unwrap();
    let db = contextq_server::Db::connect(
        &format!("sqlite:{}", dir.path().join("q.db").display()),
        &Default::default(),
    )
    .await
    .unwrap();
    let boot = contextq_server::admin::bootstrap(
        &db,
        "small",
        Plan::Free,
        "ws",
        &[Scope::Read, Scope::Write, Scope::Admin],
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(contextq_server::serve(
        listener,
        contextq_server::AppState::new(db, Default::default()),
        std::future::pending(),
    ));
    let items: Vec<_> = (0..98)
        .map(|i| serde_json::json!({"externalId": format!("x{i}"), "workspace": "ws", "type": "note", "content": ""}))
        .collect();
    let r = reqwest::Client::new()
        .post(format!("{url}/api/contexts/bulk-upsert"))
        .bearer_auth(&boot.key.api_key)
        .json(&serde_json::json!({"contexts": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let src = tempfile::tempdir().unwrap();
    sample(src.path());
    let data = tempfile::tempdir().unwrap();
    let (key, src_arg) = (
        boot.key.api_key.clone(),
        src.path().to_str().unwrap().to_string(),
    );
    let o = tokio::task::spawn_blocking(move || {
        run(
            data.path(),
            &["--workspace", "ws", "import", &src_arg],
            &[("CONTEXT_API_URL", &url), ("CONTEXT_API_KEY", &key)],
        )
    })
    .await
    .unwrap();
    assert!(!o.status.success());
    let line = stdout(&o);
    assert!(line.starts_with("imported 2 files"), "{line}");
    assert!(
        line.contains("skipped 0, failed 1; stopped early: The memory store is full"),
        "{line}"
    );
    assert!(line.contains("plan free allows 100"), "{line}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("failed: ") && err.contains("memories"),
        "{err}"
    );
}
