//! Test harness of the CLI's tests: contextq-server in this process on 127.0.0.1:0 over a fresh
//! database (see `contextq_server::testing`), with a bootstrapped tenant.
#![allow(dead_code)]

use contextq_server::model::{Plan, Scope};
use contextq_server::testing::TestDatabase;
use contextq_server::{AppState, Backend, Db, admin};

pub const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

/// A running server with one tenant (workspace `ws`, a read+write+admin key).
pub struct Served {
    pub url: String,
    pub key: String,
    pub db: Db,
    pub database: TestDatabase,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Served {
    pub async fn start(b: Backend, plan: Plan) -> Served {
        let database = TestDatabase::fresh(b).await;
        let db = Db::connect(&database.url, &Default::default())
            .await
            .unwrap();
        let boot = admin::bootstrap(
            &db,
            "cli-test",
            plan,
            "ws",
            &[Scope::Read, Scope::Write, Scope::Admin],
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(contextq_server::serve(
            listener,
            AppState::new(db.clone(), Default::default()),
            async {
                let _ = rx.await;
            },
        ));
        Served {
            url,
            key: boot.key.api_key,
            db,
            database,
            _stop: tx,
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
