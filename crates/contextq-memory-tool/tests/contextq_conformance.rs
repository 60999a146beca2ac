//! The shared conformance suite on `ContextQStore` against the real contextq-server, pinned and
//! per-workspace, on SQLite and PostgreSQL: directly, and through a proxy that hides every
//! extension of the contract (the ContextQ the seed describes: no ETag, If-Match, ifAbsent,
//! externalIdPrefix, cursors or sizeBytes), where the suite expects the same strings except
//! that sizes are last-change times; and called in this process through the server's router
//! (`contextq::local::RouterService`, no socket), where it expects exactly what HTTP gives.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{ALL, Server, options, ws_name};
use contextq_memory_tool::conformance::{self, Profile};
use contextq_memory_tool::contextq::local::{LocalService, RouterService};
use contextq_memory_tool::store::{Entry, Listing, PutMode, Store, Version};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{ContextQStore, MemoryPath, Result};
use contextq_server::Backend;
use contextq_server::{AppState, Plan, ServerConfig};

/// What the suite talks to: contextq-server through a pass-through proxy and expecting sizes,
/// or through a plain-ContextQ proxy and expecting times in their place.
async fn front(url: &str, plain: bool) -> (Proxy, Profile) {
    if plain {
        (Proxy::plain(url).await, Profile::DERIVED_WITHOUT_SIZES)
    } else {
        (Proxy::start(url).await, Profile::DERIVED)
    }
}

/// Per-workspace mode: `/memories/X` of the suite becomes `/memories/<fresh ws>/X` of an
/// unpinned store, so every command goes through the first-segment-is-the-workspace mapping.
struct UnderWorkspace {
    inner: ContextQStore,
    ws: MemoryPath,
}

impl UnderWorkspace {
    fn inside(&self, p: &MemoryPath) -> MemoryPath {
        p.rebase(&MemoryPath::root(), &self.ws).unwrap()
    }
    fn outside(&self, p: &MemoryPath) -> MemoryPath {
        p.rebase(&self.ws, &MemoryPath::root()).unwrap()
    }
}

#[async_trait]
impl Store for UnderWorkspace {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        if path.is_root() {
            return Ok(None);
        }
        self.inner.get(&self.inside(path)).await
    }
    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        Ok(self.inner.list(&self.inside(dir)).await?.map(|mut l| {
            for f in &mut l.files {
                f.path = self.outside(&f.path);
            }
            for d in &mut l.dirs {
                d.path = self.outside(&d.path);
            }
            l
        }))
    }
    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        if path.is_root() {
            return Err(contextq_memory_tool::Error::AlreadyExists {
                path: path.normalized(),
            });
        }
        self.inner.put(&self.inside(path), text, mode).await
    }
    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        self.inner.delete(&self.inside(path), expected).await
    }
}

/// How the suite's stores reach the server.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reach {
    /// Over HTTP through a pass-through proxy.
    Http,
    /// Over HTTP through a proxy that hides every extension.
    Plain,
    /// In this process, through the server's router (no socket).
    InProcess,
}

/// The suite on a pinned store or an unpinned one, reaching the server as `reach` says.
async fn suite(b: Backend, reach: Reach, pinned: bool) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Unlimited, ALL, "first").await;
    let plain = reach == Reach::Plain;
    let (proxy, profile) = front(&server.url, plain).await;
    let local: Option<Arc<dyn LocalService>> = (reach == Reach::InProcess).then(|| {
        let state = AppState::new(server.db.clone(), ServerConfig::default());
        Arc::new(RouterService::new(contextq_server::app(state))) as Arc<dyn LocalService>
    });
    // In this process no request may reach the proxy: the URL only names the server.
    let options = |url: &str, key: &str| match &local {
        Some(service) => options(url, key).local_service(service.clone()),
        None => options(url, key),
    };
    let (server, tenant, key, url) = (&server, &tenant, &key, &proxy.url);
    conformance::run_all(
        || async move {
            let ws = ws_name();
            server.workspace(tenant, &ws).await;
            let store: Arc<dyn Store> = if pinned {
                Arc::new(options(url, key).workspace(ws).store().unwrap())
            } else {
                Arc::new(UnderWorkspace {
                    inner: options(url, key).store().unwrap(),
                    ws: MemoryPath::parse(&format!("/memories/{}", ws.to_uppercase())).unwrap(),
                })
            };
            store
        },
        profile,
    )
    .await;
    // The stores saw what the server offers.
    let store = options(url, key).workspace("first").store().unwrap();
    assert!(store.list(&MemoryPath::root()).await.unwrap().is_some());
    assert_eq!(store.conditional_requests(), Some(!plain));
    if reach == Reach::InProcess {
        assert_eq!(proxy.requests(), 0, "a request went over the network");
    }
}

async fn pinned_mode_conforms(b: Backend) {
    suite(b, Reach::Http, true).await;
}

async fn pinned_mode_conforms_on_a_plain_contextq(b: Backend) {
    suite(b, Reach::Plain, true).await;
}

async fn per_workspace_mode_conforms(b: Backend) {
    suite(b, Reach::Http, false).await;
}

async fn per_workspace_mode_conforms_on_a_plain_contextq(b: Backend) {
    suite(b, Reach::Plain, false).await;
}

async fn pinned_mode_conforms_in_process(b: Backend) {
    suite(b, Reach::InProcess, true).await;
}

async fn per_workspace_mode_conforms_in_process(b: Backend) {
    suite(b, Reach::InProcess, false).await;
}

contextq_server::database_tests!(
    pinned_mode_conforms_in_process,
    per_workspace_mode_conforms_in_process,
    pinned_mode_conforms,
    pinned_mode_conforms_on_a_plain_contextq,
    per_workspace_mode_conforms,
    per_workspace_mode_conforms_on_a_plain_contextq,
);
