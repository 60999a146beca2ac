//! What other local users and logs can see: a database the server creates is readable by its
//! user only (directories 0700, files 0600, SQLite's `-wal` and `-shm` included), and no form
//! of password in a database URL reaches an error message.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;

use contextq_server::{Db, DbOptions, Plan, admin};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn a_new_sqlite_database_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new").join("dir");
    let file = dir.join("cq.db");
    let db = Db::connect(&format!("sqlite:{}", file.display()), &DbOptions::default())
        .await
        .unwrap();
    // A write, so that the WAL and its index exist.
    let tenant = admin::create_tenant(&db, "t", Plan::Free).await.unwrap();
    admin::create_workspace(&db, &tenant, "ws", "ws")
        .await
        .unwrap();
    for d in [tmp.path().join("new"), dir.clone()] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in ["cq.db", "cq.db-wal", "cq.db-shm"] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    db.pool().close().await;
}

#[tokio::test]
async fn an_existing_file_keeps_its_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("shared.db");
    std::fs::write(&file, b"").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let db = Db::connect(&format!("sqlite:{}", file.display()), &DbOptions::default())
        .await
        .unwrap();
    assert_eq!(mode(&file), 0o640);
    db.pool().close().await;
}

#[tokio::test]
async fn no_password_reaches_an_error() {
    // Nothing listens on port 1: connecting fails, and the error names the URL.
    for url in [
        "postgres://user:hunter2@127.0.0.1:1/db",
        "postgres://user@127.0.0.1:1/db?password=hunter2",
        "postgres://user@127.0.0.1:1/db?sslmode=disable&password=hunter2",
    ] {
        let options = DbOptions::default().acquire_timeout(std::time::Duration::from_secs(2));
        let err = Db::connect(url, &options).await.unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("127.0.0.1:1"), "{err}");
    }
}
