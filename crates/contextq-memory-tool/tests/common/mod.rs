//! Test harness: contextq-server in-process on 127.0.0.1:0 (temp-file SQLite, or a fresh
//! PostgreSQL database when CONTEXTQ_TEST_DATABASE_URL is set), tenants, and a loopback proxy
//! that counts requests and injects faults.
#![allow(dead_code)]

pub mod proxy;

use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, RetryConfig};
use contextq_server::model::{Plan, Scope};
use contextq_server::{AppState, Backend, Db, DbOptions, ServerConfig, admin};
use std::time::Duration;

pub fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Sqlite];
    if std::env::var("CONTEXTQ_TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) {
        b.push(Backend::Postgres);
    }
    b
}

pub struct Server {
    pub url: String,
    pub db: Db,
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    pub async fn start(backend: Backend) -> Server {
        let (database_url, dir) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                (
                    format!("sqlite:{}", dir.path().join("cq.db").display()),
                    Some(dir),
                )
            }
            Backend::Postgres => {
                let admin_url = std::env::var("CONTEXTQ_TEST_DATABASE_URL").unwrap();
                let name = format!("cqtool_{:016x}", fastrand::u64(..));
                let url = contextq_server::db::create_postgres_database(&admin_url, &name)
                    .await
                    .unwrap();
                (url, None)
            }
        };
        let db = Db::connect(&database_url, &DbOptions::default())
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(contextq_server::serve(
            listener,
            AppState::new(db.clone(), ServerConfig::default()),
            async {
                let _ = rx.await;
            },
        ));
        Server {
            url,
            db,
            backend,
            _dir: dir,
            _stop: tx,
        }
    }

    /// A tenant with a key of `scopes` and workspace `ws`; returns (tenant id, key).
    pub async fn tenant(&self, plan: Plan, scopes: &[Scope], ws: &str) -> (String, String) {
        let tenant = admin::create_tenant(&self.db, &format!("t{:016x}", fastrand::u64(..)), plan)
            .await
            .unwrap();
        let key = admin::create_key(&self.db, &tenant, None, scopes)
            .await
            .unwrap();
        admin::create_workspace(&self.db, &tenant, ws, ws)
            .await
            .unwrap();
        (tenant, key.api_key)
    }

    pub async fn workspace(&self, tenant: &str, ws: &str) {
        admin::create_workspace(&self.db, tenant, ws, ws)
            .await
            .unwrap();
    }
}

pub const ALL: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];

/// Options for `url` with `key`, fast retries for tests.
pub fn options(url: &str, key: &str) -> ContextQMemoryToolOptions {
    let mut o = ContextQMemoryToolOptions::new(key).base_url(url);
    o.retry = RetryConfig {
        max_retries: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        retry_timeout: Duration::from_secs(10),
    };
    o
}

pub fn ws_name() -> String {
    format!("w{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}
