//! The `contextq-server` binary: serve prints its address, logs never contain keys, admin
//! commands print what they promise and fail loudly; on SQLite and PostgreSQL.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use contextq_server::Backend;
use contextq_server::testing::TestDatabase;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");

fn admin(db: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["admin", "--database-url", db])
        .args(args)
        .output()
        .unwrap()
}

async fn serve_bootstrap_and_logs_without_keys(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.url.clone();
    let out = admin(
        &db,
        &[
            "bootstrap",
            "--tenant",
            "acme",
            "--plan",
            "pro",
            "--workspace",
            "notes",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = line["apiKey"].as_str().unwrap().to_string();
    assert!(key.starts_with("sk_live_") && key.len() == 48);
    assert_eq!(line["workspace"], "notes");
    assert!(line["tenantId"].as_str().unwrap().starts_with("ten_"));

    let mut child = Command::new(BIN)
        .args(["serve", "--database-url", &db, "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Trace logs can outgrow a pipe's buffer: read them while the server runs.
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut addr = String::new();
    stdout.read_line(&mut addr).unwrap();
    // The printed line is the server's URL.
    assert!(addr.trim().starts_with("http://127.0.0.1:"), "{addr}");
    let addr = addr.trim().trim_start_matches("http://").to_string();

    {
        let http = reqwest::Client::new();
        let r = http
            .post(format!("http://{addr}/api/contexts/bulk-upsert"))
            .bearer_auth(&key)
            .json(&serde_json::json!({"contexts": [{"externalId": "x", "workspace": "notes", "type": "reference", "content": "the staging password is zebra-7741-quokka"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let r = http
            .get(format!("http://{addr}/api/workspaces"))
            .bearer_auth("sk_live_0000000000000000000000000000000000000000")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    // Graceful stop on SIGTERM.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let logs = logs.join().unwrap();
    assert!(logs.contains("listening"), "{logs}");
    assert!(
        logs.contains("/api/contexts/bulk-upsert"),
        "requests are logged: {logs}"
    );
    assert!(!logs.contains(&key), "the key leaked into the log");
    // Nor a file's content, even at trace level (sqlx, hyper and axum included).
    assert!(
        !logs.contains("zebra-7741-quokka"),
        "a file's content leaked into the log"
    );
    assert!(
        !logs.contains(&key[8..]),
        "the key's secret part leaked into the log"
    );
    assert!(!logs.contains("0000000000000000000000000000000000000000"));

    let out = admin(&db, &["verify-audit"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("2 rows verified in 1 chains"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

async fn delete_tenant_and_tampered_audit_fail_loudly(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.url.clone();
    let out = admin(&db, &["bootstrap", "--tenant", "acme"]);
    let tenant = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["tenantId"]
        .as_str()
        .unwrap()
        .to_string();
    let out = admin(&db, &["delete-tenant", "--tenant-id", &tenant]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chained audit rows"), "{err}");

    let plain = admin(&db, &["create-tenant", "--name", "plain"]);
    let plain_id = String::from_utf8_lossy(&plain.stdout).trim().to_string();
    let key = admin(
        &db,
        &["create-key", "--tenant-id", &plain_id, "--scopes", "read"],
    );
    let key: serde_json::Value = serde_json::from_slice(&key.stdout).unwrap();
    assert!(
        admin(&db, &["revoke-key", key["keyId"].as_str().unwrap()])
            .status
            .success()
    );
    assert!(
        !admin(&db, &["revoke-key", key["keyId"].as_str().unwrap()])
            .status
            .success()
    );
    assert!(
        admin(
            &db,
            &["create-workspace", "--tenant-id", &plain_id, "--slug", "w2"]
        )
        .status
        .success()
    );
    assert!(
        !admin(&db, &["create-key", "--tenant-id", "ten_nope"])
            .status
            .success()
    );
    // A key limited to a workspace, listed with its limit (never the key itself).
    let limited = admin(
        &db,
        &["create-key", "--tenant-id", &plain_id, "--workspaces", "w2"],
    );
    assert!(limited.status.success(), "{limited:?}");
    let limited: serde_json::Value = serde_json::from_slice(&limited.stdout).unwrap();
    let listed = admin(&db, &["list-keys", "--tenant-id", &plain_id, "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let listed = String::from_utf8_lossy(&listed.stdout);
    let lines: Vec<serde_json::Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert_eq!(lines[1]["workspaces"], serde_json::json!(["w2"]));
    assert!(lines[0]["revokedAt"].is_string(), "{listed}");
    assert!(!listed.contains(limited["apiKey"].as_str().unwrap()));
    assert!(
        !admin(
            &db,
            &[
                "create-key",
                "--tenant-id",
                &plain_id,
                "--workspaces",
                "Bad Slug"
            ]
        )
        .status
        .success()
    );

    // Tamper with the chain directly in the database.
    {
        let d = contextq_server::Db::connect(&db, &Default::default())
            .await
            .unwrap();
        common::sql(
            &d,
            "UPDATE activity_logs SET entity_id = 'forged' WHERE tenant_seq = 1",
            &[],
        )
        .await;
        d.close().await;
    }
    let out = admin(&db, &["verify-audit"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("BROKEN at tenant ten_") && text.contains(", row 1: its contents"),
        "{text}"
    );
    let bad = Command::new(BIN)
        .args([
            "admin",
            "--database-url",
            "mysql://u:secret@h/db",
            "verify-audit",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("sqlite:PATH") && !err.contains("secret"),
        "{err}"
    );
}

/// The keyed audit log through the binary: `init-audit-key` creates the key file (0600) and keys
/// the database; `audit-checkpoint` prints a checkpoint; `verify-audit --checkpoint` exits 0 on
/// an untouched log and 1 after a roll-back the MACs alone cannot show.
async fn audit_key_checkpoint_and_verify(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("keys").join("audit.key");
    let key_file = key_file.to_str().unwrap();
    let keyed = |args: &[&str]| {
        Command::new(BIN)
            .args(["admin", "--database-url", &db, "--audit-key-file", key_file])
            .args(args)
            .output()
            .unwrap()
    };
    let out = admin(&db, &["bootstrap", "--tenant", "acme"]);
    assert!(out.status.success());
    let tenant = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["tenantId"]
        .as_str()
        .unwrap()
        .to_string();
    // Written without a key: verify-audit with one reports it (never keyed, or stripped), and
    // init-audit-key keys a log that has rows only when told it never was keyed.
    let out = keyed(&["verify-audit"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("init-audit-key"));
    let out = keyed(&["init-audit-key"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--never-keyed"));
    // The key file exists now; the log is still not keyed, and verify-audit says so.
    let out = keyed(&["verify-audit"]);
    assert!(!out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("never keyed"), "{said}");
    let out = keyed(&["init-audit-key", "--never-keyed"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(key_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Now the key is required.
    let out = admin(&db, &["verify-audit"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--audit-key-file"));
    let w = |slug: &str| {
        let out = keyed(&["create-workspace", "--tenant-id", &tenant, "--slug", slug]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    w("one");
    let saved = {
        let d = open_keyed(&db, key_file.as_ref()).await;
        let row = sqlx::query("SELECT seq, last_hash, keyed_from, mac FROM audit_heads")
            .fetch_one(d.pool())
            .await
            .unwrap();
        d.close().await;
        row
    };
    w("two");
    let out = keyed(&["audit-checkpoint"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checkpoint = dir.path().join("checkpoint.json");
    std::fs::write(&checkpoint, &out.stdout).unwrap();
    let cp = checkpoint.to_str().unwrap();
    let out = keyed(&["verify-audit", "--checkpoint", cp]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("MACs checked"),
        "{text}"
    );

    // Roll the chain back to the head saved after "one" (rows after it removed).
    {
        use sqlx::Row;
        let d = open_keyed(&db, key_file.as_ref()).await;
        let seq: i64 = saved.get("seq");
        sqlx::query("DELETE FROM activity_logs WHERE tenant_seq > $1")
            .bind(seq)
            .execute(d.pool())
            .await
            .unwrap();
        sqlx::query("UPDATE audit_heads SET seq = $1, last_hash = $2, keyed_from = $3, mac = $4")
            .bind(seq)
            .bind(saved.get::<Option<String>, _>("last_hash"))
            .bind(saved.get::<Option<i64>, _>("keyed_from"))
            .bind(saved.get::<Option<String>, _>("mac"))
            .execute(d.pool())
            .await
            .unwrap();
        d.close().await;
    }
    let out = keyed(&["verify-audit"]);
    assert!(
        out.status.success(),
        "documented: a replayed head verifies without a checkpoint"
    );
    let out = keyed(&["verify-audit", "--checkpoint", cp]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rolled back"), "{text}");
}

/// The database at `url`, opened with the audit key in `key_file`.
async fn open_keyed(url: &str, key_file: &std::path::Path) -> contextq_server::Db {
    contextq_server::Db::connect(
        url,
        &contextq_server::DbOptions::default().audit_key(Some(
            contextq_server::audit::AuditKey::load(key_file).unwrap(),
        )),
    )
    .await
    .unwrap()
}

contextq_server::database_tests!(
    keying_cannot_race_a_running_writer,
    audit_key_checkpoint_and_verify,
    serve_bootstrap_and_logs_without_keys,
    delete_tenant_and_tampered_audit_fail_loudly,
);

/// Operator commands other than bootstrap, create-tenant and init-audit-key never create a
/// database: a typo in the URL is an error, not a new empty database that "verifies"; and
/// verify-audit on an empty log says so and exits 1 unless told an empty log is expected.
#[test]
fn admin_commands_do_not_create_a_missing_database() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no").join("such").join("typo.db");
    let url = format!("sqlite:{}", missing.display());
    for args in [
        &["verify-audit"][..],
        &["audit-checkpoint"][..],
        &["create-key", "--tenant-id", "t"][..],
        &["delete-tenant", "--tenant-id", "t"][..],
    ] {
        let out = admin(&url, args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no database at"), "{args:?}: {err}");
        assert!(
            !missing.exists() && !missing.parent().unwrap().exists(),
            "{args:?}"
        );
    }
    // An existing database with nothing in it (created and migrated by a server's first open):
    // verify-audit says EMPTY and exits 1, unless an empty log is expected.
    let empty = dir.path().join("empty.db");
    let url = format!("sqlite:{}", empty.display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        contextq_server::Db::connect(&url, &Default::default())
            .await
            .unwrap()
            .close()
            .await;
    });
    let out = admin(&url, &["verify-audit"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("EMPTY"));
    let out = admin(&url, &["verify-audit", "--allow-empty"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A PostgreSQL database that does not exist: the message names it, without PostgreSQL's own
/// source line number (`... at line 948`), and creates nothing.
#[test]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
fn a_missing_postgres_database_is_named_without_line_numbers() {
    let admin_url = std::env::var("CONTEXTQ_TEST_DATABASE_URL").unwrap();
    let base = admin_url.rsplit_once('/').unwrap().0;
    let url = format!("{base}/cqtest_never_created_{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("audit.key");
    let key = key.to_str().unwrap();
    for args in [
        &["--audit-key-file", key, "init-audit-key"][..],
        &["list-tenants"][..],
    ] {
        let out = admin(&url, args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not exist"), "{args:?}: {err}");
        assert!(!err.contains(" at line "), "{args:?}: {err}");
    }
}

/// `init-audit-key` while a server without the key runs: the server's next write is refused
/// (nothing written) instead of breaking the chain for good; restarted with the key, it writes
/// again. A chain broken that way by an older server (a row and head without MACs after the
/// keying) is recovered with `repair-audit-keying`, and only a chain that verifies without MACs.
async fn keying_cannot_race_a_running_writer(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("audit.key");
    let key_file = key_file.to_str().unwrap().to_string();
    let keyed = |args: &[&str]| {
        Command::new(BIN)
            .args([
                "admin",
                "--database-url",
                &db,
                "--audit-key-file",
                &key_file,
            ])
            .args(args)
            .output()
            .unwrap()
    };
    let out = admin(
        &db,
        &["bootstrap", "--tenant", "acme", "--workspace", "notes"],
    );
    assert!(out.status.success());
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = line["apiKey"].as_str().unwrap().to_string();
    let tenant = line["tenantId"].as_str().unwrap().to_string();
    let serve = |with_key: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--database-url", &db, "--listen", "127.0.0.1:0"]);
        if with_key {
            cmd.args(["--audit-key-file", &key_file]);
        }
        contextq_server::testing::spawn_serving(cmd.env("RUST_LOG", "error"))
    };
    let write = |url: String, key: String, n: usize| async move {
        reqwest::Client::new()
            .post(format!("{url}/api/contexts/bulk-upsert"))
            .bearer_auth(key)
            .json(&serde_json::json!({"contexts": [{"externalId": format!("x{n}"), "workspace": "notes", "type": "reference", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let (mut unkeyed, url) = serve(false);
    assert_eq!(write(url.clone(), key.clone(), 1).await, 200);
    let out = keyed(&["init-audit-key", "--never-keyed"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The running server has no key: its write is refused, nothing written.
    assert_eq!(write(url.clone(), key.clone(), 2).await, 500);
    unkeyed.kill().unwrap();
    unkeyed.wait().unwrap();
    let out = keyed(&["verify-audit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (mut server, url) = serve(true);
    assert_eq!(write(url.clone(), key.clone(), 3).await, 200);
    server.kill().unwrap();
    server.wait().unwrap();

    // What an older server without the key did: a row and a head without MACs after keying.
    let conn = open_keyed(&db, std::path::Path::new(&key_file)).await;
    let (seq, last): (i64, Option<String>) = {
        use sqlx::Row;
        let r = sqlx::query("SELECT seq, last_hash FROM audit_heads WHERE tenant_id = $1")
            .bind(tenant.clone())
            .fetch_one(conn.pool())
            .await
            .unwrap();
        (r.get("seq"), r.get("last_hash"))
    };
    common::append_chained_row(&conn, &tenant, (seq, last), "ws_late", None, true).await;
    conn.close().await;
    assert!(!keyed(&["verify-audit"]).status.success());
    let out = keyed(&["repair-audit-keying", "--tenant-id", &tenant]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("hash-chained only"), "{err}");
    let out = keyed(&["verify-audit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Nothing left to repair; and the server writes again.
    assert!(
        !keyed(&["repair-audit-keying", "--tenant-id", &tenant])
            .status
            .success()
    );
    let (mut server, url) = serve(true);
    assert_eq!(write(url.clone(), key.clone(), 4).await, 200);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A port in use is an error that says what to change (`--listen`), from both binaries.
#[test]
fn a_port_in_use_suggests_listen() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("p.db").display());
    let out = Command::new(BIN)
        .args(["serve", "--database-url", &db, "--listen", &addr])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen") && err.contains("ephemeral"),
        "{err}"
    );
    drop(taken);
}

/// Admin ergonomics: every argument has help, plans are listed, `--tenant-id` everywhere an id
/// is meant; an unreachable database is said within seconds, once, with the URL redacted; a
/// missing key file does not send the operator to create a different key.
#[test]
fn admin_commands_say_what_they_take() {
    let help = |args: &[&str]| {
        let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let h = help(&["admin", "bootstrap"]);
    assert!(
        h.contains("--tenant-name") && h.contains("free (100 contexts), pro (10,000) or unlimited"),
        "{h}"
    );
    let h = help(&["admin", "create-workspace"]);
    assert!(
        h.contains("[a-z0-9][a-z0-9-]{0,62}") && h.contains("display name"),
        "{h}"
    );
    let h = help(&["admin", "revoke-key"]);
    assert!(h.contains("sk_live_"), "{h}");
    let h = help(&["admin", "verify-audit"]);
    assert!(h.contains("--tenant-id"), "{h}");

    let started = std::time::Instant::now();
    let out = admin(
        "postgres://postgres:secretpw@127.0.0.1:9/nowhere",
        &["verify-audit"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect to the database at"), "{err}");
    assert!(!err.contains("secretpw"), "{err}");
    assert_eq!(
        err.matches("timed out")
            .count()
            .max(err.matches("refused").count()),
        1,
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("k.db").display());
    assert!(
        admin(&db, &["create-tenant", "--name", "t"])
            .status
            .success()
    );
    let out = Command::new(BIN)
        .args(["admin", "--database-url", &db, "--audit-key-file"])
        .arg(dir.path().join("missing.key"))
        .arg("verify-audit")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("a new key cannot open it"),
        "{err}"
    );
}

/// What an operator does in a first week: keys with names, listed without the audit key (a
/// table, or JSON lines with --json), tenants and workspaces listed, a workspace archived and
/// deleted, a plan changed, a key made to expire; every change to a key, a workspace or a plan
/// is a row of the tenant's audit log, which still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_commands_are_named_listed_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("op.db").display());
    let key_file = dir.path().join("audit.key");
    let keyed = |args: &[&str]| {
        Command::new(BIN)
            .args(["admin", "--database-url", &db, "--audit-key-file"])
            .arg(&key_file)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(keyed(&["init-audit-key"]).status.success());
    let boot = keyed(&["bootstrap", "--tenant", "acme", "--workspace", "billing"]);
    assert!(boot.status.success(), "{boot:?}");
    let tenant = serde_json::from_slice::<serde_json::Value>(&boot.stdout).unwrap()["tenantId"]
        .as_str()
        .unwrap()
        .to_string();
    let t = tenant.as_str();
    assert!(
        keyed(&["create-workspace", "--tenant-id", t, "--slug", "scratch"])
            .status
            .success()
    );
    let named = keyed(&[
        "create-key",
        "--tenant-id",
        t,
        "--name",
        "billing-agent",
        "--workspaces",
        "Billing",
    ]);
    assert!(named.status.success(), "{named:?}");
    let named: serde_json::Value = serde_json::from_slice(&named.stdout).unwrap();
    let key_id = named["keyId"].as_str().unwrap();
    // A typo is refused, naming what exists.
    let typo = keyed(&["create-key", "--tenant-id", t, "--workspaces", "biling"]);
    assert!(!typo.status.success());
    let err = String::from_utf8_lossy(&typo.stderr);
    assert!(
        err.contains("biling") && err.contains("billing, scratch"),
        "{err}"
    );

    // Listings need no audit key.
    let table = admin(&db, &["list-keys", "--tenant-id", t]);
    assert!(table.status.success(), "{table:?}");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.starts_with("KEY"), "{table}");
    assert!(
        table.contains("billing-agent") && table.contains("billing"),
        "{table}"
    );
    assert!(!table.contains(named["apiKey"].as_str().unwrap()));
    let tenants =
        String::from_utf8_lossy(&admin(&db, &["list-tenants", "--json"]).stdout).to_string();
    let tenants: serde_json::Value = serde_json::from_str(tenants.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&tenants["name"], &tenants["plan"], &tenants["contexts"]),
        (
            &serde_json::json!("acme"),
            &serde_json::json!("free"),
            &serde_json::json!(0)
        )
    );
    assert_eq!(tenants["tenantId"], *t, "{tenants}");
    assert!(tenants["createdAt"].as_str().is_some_and(|c| c.len() > 10));
    let ws = String::from_utf8_lossy(&admin(&db, &["list-workspaces", "--tenant-id", t]).stdout)
        .to_string();
    assert!(ws.contains("billing") && ws.contains("scratch"), "{ws}");
    // A change without the key is refused (it would extend the log unkeyed).
    assert!(
        !admin(&db, &["set-plan", "--tenant-id", t, "--plan", "pro"])
            .status
            .success()
    );

    assert!(
        keyed(&["set-plan", "--tenant-id", t, "--plan", "pro"])
            .status
            .success()
    );
    assert!(
        keyed(&["archive-workspace", "--tenant-id", t, "--slug", "scratch"])
            .status
            .success()
    );
    let ws = String::from_utf8_lossy(
        &admin(&db, &["list-workspaces", "--tenant-id", t, "--json"]).stdout,
    )
    .to_string();
    assert!(ws.contains("\"archived\":true"), "{ws}");
    assert!(
        keyed(&["delete-workspace", "--tenant-id", t, "--slug", "scratch"])
            .status
            .success()
    );
    assert!(
        keyed(&["expire-key", key_id, "--in", "2h"])
            .status
            .success()
    );
    assert!(keyed(&["revoke-key", key_id]).status.success());
    let listed =
        String::from_utf8_lossy(&admin(&db, &["list-keys", "--tenant-id", t, "--json"]).stdout)
            .to_string();
    let mine: serde_json::Value = listed
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|k| k["keyId"] == key_id)
        .unwrap();
    assert_eq!(mine["name"], "billing-agent");
    assert!(
        mine["expiresAt"].is_string() && mine["revokedAt"].is_string(),
        "{mine}"
    );

    // Each change is an audit row; the log verifies with its key.
    let d = contextq_server::Db::connect(
        &db,
        &contextq_server::DbOptions::default().audit_key(Some(
            contextq_server::audit::AuditKey::load(&key_file).unwrap(),
        )),
    )
    .await
    .unwrap();
    let actions = common::texts(
        &d,
        "SELECT action FROM activity_logs WHERE tenant_id = $1 ORDER BY tenant_seq",
        &[&tenant],
    )
    .await;
    for action in [
        "workspace.create",
        "key.create",
        "tenant.plan",
        "workspace.archive",
        "workspace.delete",
        "key.expire",
        "key.revoke",
    ] {
        assert!(
            actions.iter().any(|a| a == action),
            "{action} not in {actions:?}"
        );
    }
    let verified = keyed(&["verify-audit"]);
    assert!(verified.status.success(), "{verified:?}");
}

/// A PostgreSQL URL with a wrong port is said at once, as the database's own error, not after
/// the pool's timeout as "pool timed out".
#[test]
fn a_wrong_database_port_is_refused_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres:secret@127.0.0.1:{port}/postgres");
    let started = std::time::Instant::now();
    let out = admin(&url, &["list-tenants"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused"), "{err}");
    assert!(!err.contains("secret"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}
