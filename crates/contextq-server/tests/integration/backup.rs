//! `admin backup` and `admin restore`: a team's database (a keyed audit log, a named key
//! limited to a workspace, an empty workspace, files with several versions, a redaction) backed
//! up while a server keeps writing to it, restored into a new database, verified there by the
//! restore itself (with the audit key's MACs), served again: the same keys work, the versions
//! and the redaction mark are there, the empty workspace too. A restore never writes over a
//! database, a backup never over a file, and a file that is no backup is refused.

use std::process::Command;
use std::time::Duration;

use contextq_server::Backend;
use contextq_server::testing::{TestDatabase, spawn_serving};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");

fn admin(db: &str, key: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["admin", "--database-url", db])
        .arg("--audit-key-file")
        .arg(key)
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap_or_default()
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(db: &str, key: &std::path::Path) -> (Killed, String) {
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args(["serve", "--database-url", db, "--listen", "127.0.0.1:0"])
            .arg("--audit-key-file")
            .arg(key),
    );
    (Killed(child), url)
}

async fn a_backup_restores_a_team(b: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("audit.key");
    let database = TestDatabase::fresh(b).await;
    let db = database.url.clone();
    ok(&admin(&db, &key_file, &["init-audit-key"]));
    let boot = ok(&admin(
        &db,
        &key_file,
        &["bootstrap", "--tenant", "team", "--workspace", "ws"],
    ));
    let (tenant, owner) = (
        boot["tenantId"].as_str().unwrap().to_string(),
        boot["apiKey"].as_str().unwrap().to_string(),
    );
    let agent = ok(&admin(
        &db,
        &key_file,
        &[
            "create-key",
            "--tenant-id",
            &tenant,
            "--name",
            "agent-ws",
            "--workspaces",
            "ws",
        ],
    ));
    let agent = agent["apiKey"].as_str().unwrap().to_string();
    ok(&admin(
        &db,
        &key_file,
        &[
            "create-workspace",
            "--tenant-id",
            &tenant,
            "--slug",
            "empty",
        ],
    ));

    let (server, url) = serve(&db, &key_file);
    let http = reqwest::Client::new();
    let upsert = |key: &str, id: &str, content: &str| {
        http.post(format!("{url}/api/contexts/bulk-upsert"))
            .bearer_auth(key)
            .json(&json!({"contexts": [{"externalId": id, "workspace": "ws", "type": "reference", "content": content}]}))
            .send()
    };
    for content in ["one", "two secret", "three"] {
        assert_eq!(upsert(&agent, "f.md", content).await.unwrap().status(), 200);
    }
    let r = http
        .post(format!("{url}/api/redactions"))
        .bearer_auth(&owner)
        .json(&json!({"externalId": "f.md", "version": 2, "workspace": "ws"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    // Backed up while a writer keeps writing.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, url, agent) = (stop.clone(), url.clone(), agent.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = http
                    .post(format!("{url}/api/contexts/bulk-upsert"))
                    .bearer_auth(&agent)
                    .json(&json!({"contexts": [{"externalId": format!("w{}.md", n % 20), "workspace": "ws", "type": "reference", "content": format!("write {n}")}]}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let backup = dir.path().join("team.backup");
    let said = ok(&admin(
        &db,
        &key_file,
        &["backup", "--out", backup.to_str().unwrap()],
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.await.unwrap() > 0);
    drop(server);
    assert_eq!(said["tenants"], 1, "{said}");
    assert_eq!(said["workspaces"], 2, "{said}");
    assert!(said["versions"].as_i64().unwrap() >= 3, "{said}");
    assert_eq!(said["redacted"], 1, "{said}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&backup).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a backup holds key hashes and content");
    }
    // Never over a file.
    let again = admin(
        &db,
        &key_file,
        &["backup", "--out", backup.to_str().unwrap()],
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    // Restored into a new database: verified there, the same contents.
    let (target, _cleanup) = match b {
        Backend::Sqlite => (
            format!("sqlite:{}", dir.path().join("restored.db").display()),
            None,
        ),
        Backend::Postgres => {
            let name = format!("cqtest_restore_{}", std::process::id());
            let admin_url = std::env::var("CONTEXTQ_TEST_DATABASE_URL").unwrap();
            let url = contextq_server::db::create_postgres_database(&admin_url, &name)
                .await
                .unwrap();
            (url, Some((admin_url, name)))
        }
    };
    let out = admin(&target, &key_file, &["restore", backup.to_str().unwrap()]);
    let restored = ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("audit chain ok") && err.contains("MACs checked"),
        "{err}"
    );
    assert_eq!(restored, said, "the restore holds what the backup counted");
    // Keys with their names and workspaces; the empty workspace.
    let keys = String::from_utf8_lossy(
        &admin(
            &target,
            &key_file,
            &["list-keys", "--tenant-id", &tenant, "--json"],
        )
        .stdout,
    )
    .to_string();
    assert!(
        keys.contains("\"name\":\"agent-ws\"") && keys.contains("[\"ws\"]"),
        "{keys}"
    );
    let workspaces = String::from_utf8_lossy(
        &admin(
            &target,
            &key_file,
            &["list-workspaces", "--tenant-id", &tenant, "--json"],
        )
        .stdout,
    )
    .to_string();
    assert!(workspaces.contains("\"empty\""), "{workspaces}");
    // Served again: the same keys, every version, the redaction mark.
    let (_server, url) = serve(&target, &key_file);
    let versions: serde_json::Value = http
        .get(format!("{url}/api/contexts/by-external/f.md/versions"))
        .bearer_auth(&agent)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let v = versions["versions"].as_array().unwrap();
    assert_eq!(v.len(), 3, "{versions}");
    assert!(v[1]["redactedAt"].is_string(), "{versions}");
    assert_eq!(v[0]["keyName"], "agent-ws", "{versions}");
    let r = http
        .get(format!("{url}/api/contexts/by-external/f.md/versions/2"))
        .bearer_auth(&owner)
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(!text.contains("two secret"), "{text}");
    // And it goes on: a write, and the log still verifies.
    let r = http
        .post(format!("{url}/api/contexts/bulk-upsert"))
        .bearer_auth(&agent)
        .json(&json!({"contexts": [{"externalId": "after.md", "workspace": "ws", "type": "reference", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(_server);
    let verified = admin(&target, &key_file, &["verify-audit"]);
    assert!(verified.status.success(), "{verified:?}");

    // Never over a database; nothing that is no backup; never into another kind.
    let over = admin(&target, &key_file, &["restore", backup.to_str().unwrap()]);
    assert!(!over.status.success());
    let said = String::from_utf8_lossy(&over.stderr);
    assert!(
        said.contains("exists") || said.contains("has tables"),
        "{said}"
    );
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "not a backup").unwrap();
    let fresh = format!("sqlite:{}", dir.path().join("other.db").display());
    let out = admin(&fresh, &key_file, &["restore", junk.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a backup"));
    assert!(!dir.path().join("other.db").exists());
    if b == Backend::Postgres {
        let out = admin(&fresh, &key_file, &["restore", backup.to_str().unwrap()]);
        assert!(String::from_utf8_lossy(&out.stderr).contains("same kind"));
    }
    if let Some((admin_url, name)) = _cleanup {
        contextq_server::db::drop_postgres_database(&admin_url, &name)
            .await
            .unwrap();
    }
}

contextq_server::database_tests!(a_backup_restores_a_team);
