//! The shared conformance suite on `ContextQStore` against the real contextq-server, pinned and
//! per-workspace, on SQLite and PostgreSQL: directly, and through a proxy that hides every
//! extension of the contract (the ContextQ the seed describes: no ETag, If-Match, ifAbsent,
//! externalIdPrefix, cursors or sizeBytes), where the suite expects the same strings except
//! that sizes are last-change times; and called in this process through the server's router
//! (`contextq::local::RouterService`, no socket), where it expects exactly what HTTP gives.

use crate::common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{ALL, Server, options, ws_name};
use contextq_memory_tool::conformance::{self, Profile};
use contextq_memory_tool::contextq::local::{LocalService, RouterService};
use contextq_memory_tool::search::{Query, Searched};
use contextq_memory_tool::store::{
    Edited, Entry, FileMeta, Listing, Page, PutMode, Store, TextEdit, Version, Viewed,
};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{ContextQStore, Error, MemoryPath, Result};
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
/// Every method of the store is passed through (the ContextQ store's own view, outline,
/// paging, edit, rename and deletes, never the trait's fallbacks), the paths of its answers
/// and errors mapped back.
struct UnderWorkspace {
    inner: ContextQStore,
    ws: MemoryPath,
}

impl UnderWorkspace {
    fn inside(&self, p: &MemoryPath) -> MemoryPath {
        p.rebase(&MemoryPath::root(), &self.ws).unwrap()
    }
    /// The workspace's segment is matched in any case: a path the store built from an
    /// external id (a search hit) spells it as the workspace's slug.
    fn outside(&self, p: &MemoryPath) -> MemoryPath {
        let slug = MemoryPath::parse(&self.ws.raw().to_lowercase()).unwrap();
        p.rebase(&self.ws, &MemoryPath::root())
            .or_else(|| p.rebase(&slug, &MemoryPath::root()))
            .unwrap_or_else(|| panic!("{} is not beneath {}", p.raw(), self.ws.raw()))
    }
    /// A path an error names, as the suite wrote it (the workspace's segment in any case).
    fn outside_str(&self, p: &str) -> String {
        let ws = self.ws.raw();
        match p.get(..ws.len()) {
            Some(head) if head.eq_ignore_ascii_case(ws) => format!("/memories{}", &p[ws.len()..]),
            _ => p.to_string(),
        }
    }
    fn listing(&self, mut l: Listing) -> Listing {
        for f in &mut l.files {
            f.path = self.outside(&f.path);
        }
        for d in &mut l.dirs {
            d.path = self.outside(&d.path);
        }
        l
    }
    fn error(&self, e: Error) -> Error {
        let o = |p: String| self.outside_str(&p);
        match e {
            Error::NotFound { path } => Error::NotFound { path: o(path) },
            Error::AlreadyExists { path } => Error::AlreadyExists { path: o(path) },
            Error::Precondition { path } => Error::Precondition { path: o(path) },
            Error::EditRefused { path, failure } => Error::EditRefused {
                path: o(path),
                failure,
            },
            Error::IsADirectory { path } => Error::IsADirectory { path: o(path) },
            Error::ParentIsAFile { path, operation } => Error::ParentIsAFile {
                path: o(path),
                operation,
            },
            Error::OutcomeUnknown {
                path,
                operation,
                cause,
            } => Error::OutcomeUnknown {
                path: o(path),
                operation,
                cause: Box::new(self.error(*cause)),
            },
            Error::SecretRefused { path, kind, line } => Error::SecretRefused {
                path: o(path),
                kind,
                line,
            },
            other => other,
        }
    }
    fn mapped<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.error(e))
    }
}

#[async_trait]
impl Store for UnderWorkspace {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        if path.is_root() {
            return Ok(None);
        }
        self.mapped(self.inner.get(&self.inside(path)).await)
    }
    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let listed = self.mapped(self.inner.list(&self.inside(dir)).await)?;
        Ok(listed.map(|l| self.listing(l)))
    }
    async fn outline(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let listed = self.mapped(self.inner.outline(&self.inside(dir)).await)?;
        Ok(listed.map(|l| self.listing(l)))
    }
    async fn view(&self, path: &MemoryPath) -> Result<Viewed> {
        if path.is_root() {
            return Ok(match self.outline(path).await? {
                Some(l) => Viewed::Directory(l),
                None => Viewed::Missing,
            });
        }
        Ok(
            match self.mapped(self.inner.view(&self.inside(path)).await)? {
                Viewed::Directory(l) => Viewed::Directory(self.listing(l)),
                other => other,
            },
        )
    }
    async fn list_after(&self, dir: &MemoryPath, page: Page<'_>) -> Result<Vec<FileMeta>> {
        let after = page.after.map(|p| self.inside(p));
        let page = Page {
            after: after.as_ref(),
            limit: page.limit,
        };
        let files = self.mapped(self.inner.list_after(&self.inside(dir), page).await)?;
        Ok(files
            .into_iter()
            .map(|mut f| {
                f.path = self.outside(&f.path);
                f
            })
            .collect())
    }
    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        if path.is_root() {
            return Err(contextq_memory_tool::Error::AlreadyExists {
                path: path.normalized(),
            });
        }
        self.mapped(self.inner.put(&self.inside(path), text, mode).await)
    }
    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        self.mapped(self.inner.delete(&self.inside(path), expected).await)
    }
    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        self.mapped(
            self.inner
                .rename(&self.inside(from), &self.inside(to))
                .await,
        )
    }
    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        self.mapped(self.inner.edit(&self.inside(path), edit).await)
    }
    async fn delete_file(&self, path: &MemoryPath) -> Result<bool> {
        self.mapped(self.inner.delete_file(&self.inside(path)).await)
    }
    async fn delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        self.mapped(self.inner.delete_dir(&self.inside(dir)).await)
    }
    async fn remove_dir(&self, dir: &MemoryPath) -> Result<()> {
        self.mapped(self.inner.remove_dir(&self.inside(dir)).await)
    }
    async fn create_many(&self, files: &[(MemoryPath, String)]) -> Vec<Result<Option<Version>>> {
        let inside: Vec<(MemoryPath, String)> = files
            .iter()
            .map(|(p, t)| (self.inside(p), t.clone()))
            .collect();
        self.inner
            .create_many(&inside)
            .await
            .into_iter()
            .map(|r| self.mapped(r))
            .collect()
    }
    async fn search(&self, query: &Query, dir: &MemoryPath, limit: usize) -> Result<Searched> {
        let mut found = self.mapped(self.inner.search(query, &self.inside(dir), limit).await)?;
        for f in &mut found.found {
            f.path = self.outside(&f.path);
        }
        Ok(found)
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

/// One test of the suite per path mode (pinned to a workspace, or a workspace per first
/// folder) and way of reaching the server (HTTP, HTTP with every extension hidden, in process).
macro_rules! suites {
    ($($name:ident: $reach:ident, $pinned:literal;)*) => {
        $(
            async fn $name(b: Backend) {
                suite(b, Reach::$reach, $pinned).await;
            }
        )*
        contextq_server::database_tests!($($name),*);
    };
}

suites! {
    pinned_mode_conforms_in_process: InProcess, true;
    per_workspace_mode_conforms_in_process: InProcess, false;
    pinned_mode_conforms: Http, true;
    pinned_mode_conforms_on_a_plain_contextq: Plain, true;
    per_workspace_mode_conforms: Http, false;
    per_workspace_mode_conforms_on_a_plain_contextq: Plain, false;
}
