//! The shared conformance suite on `ContextQStore` against the real contextq-server, pinned and
//! per-workspace, on SQLite and (when configured) PostgreSQL.

mod common;

use async_trait::async_trait;
use common::{ALL, Server, backends, options, ws_name};
use contextq_memory_tool::conformance::{self, Dirs};
use contextq_memory_tool::store::{Entry, Listing, PutMode, Store, Version};
use contextq_memory_tool::{ContextQStore, MemoryPath, Result};
use contextq_server::model::Plan;

#[tokio::test]
async fn pinned_mode_conforms() {
    for b in backends() {
        let server = Server::start(b).await;
        let (tenant, key) = server.tenant(Plan::Unlimited, ALL, "first").await;
        let (server, tenant, key) = (&server, &tenant, &key);
        conformance::run_all(
            || async move {
                let ws = ws_name();
                server.workspace(tenant, &ws).await;
                options(&server.url, key).workspace(ws).store().unwrap()
            },
            Dirs::Derived,
        )
        .await;
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
    async fn put(
        &self,
        path: &MemoryPath,
        content: &str,
        mode: PutMode,
    ) -> Result<Option<Version>> {
        if path.is_root() {
            return Err(contextq_memory_tool::Error::AlreadyExists {
                path: path.normalized(),
            });
        }
        self.inner.put(&self.inside(path), content, mode).await
    }
    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        self.inner.delete(&self.inside(path), expected).await
    }
}

#[tokio::test]
async fn per_workspace_mode_conforms() {
    for b in backends() {
        let server = Server::start(b).await;
        let (tenant, key) = server.tenant(Plan::Unlimited, ALL, "first").await;
        let (server, tenant, key) = (&server, &tenant, &key);
        conformance::run_all(
            || async move {
                let ws = ws_name();
                server.workspace(tenant, &ws).await;
                UnderWorkspace {
                    inner: options(&server.url, key).store().unwrap(),
                    ws: MemoryPath::parse(&format!("/memories/{}", ws.to_uppercase())).unwrap(),
                }
            },
            Dirs::Derived,
        )
        .await;
    }
}
