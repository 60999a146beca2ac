//! The embedded default: contextq-server in this process on 127.0.0.1:0, over SQLite in the
//! user's data directory, with a local tenant, key and workspace created on first use.
//!
//! Layout of the data directory (`--data-dir`, `CONTEXTQ_MEMORY_DATA_DIR`, or the platform data
//! directory + `contextq-memory`):
//! - `contextq.db`: the SQLite database (WAL);
//! - `embedded.json` (mode 0600): `{"tenantId", "apiKey", "workspace"}` of the local tenant.
//!
//! Several processes may use one data directory at once: each runs its own server over the same
//! database file, and SQLite serialises their writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use contextq_memory_tool::Durability;
use contextq_memory_tool::contextq::local::{LocalService, RouterService};
use contextq_server::audit::AuditKey;
use contextq_server::{
    AppState, ConnectionLimits, Db, DbOptions, Plan, RunningServer, Scope, ServerConfig, admin,
};
use serde::{Deserialize, Serialize};

/// The server in this process, called without a socket.
pub type Local = Arc<dyn LocalService>;

/// The local tenant's credentials, as stored in `embedded.json`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The local tenant.
    pub tenant_id: String,
    /// Its key (read, write, admin).
    pub api_key: String,
    /// The default workspace.
    pub workspace: String,
}

/// The default data directory.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("contextq-memory"))
        .unwrap_or_else(|| PathBuf::from(".contextq-memory"))
}

/// How the embedded server runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mode {
    /// Refuse every write (`serve --read-only`).
    pub read_only: bool,
    /// How far a write goes before it is answered (`--durability`): `ordered` commits with
    /// SQLite's `synchronous = NORMAL`.
    pub durability: Durability,
}

/// A running embedded server.
pub struct Embedded {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The local tenant.
    pub credentials: Credentials,
    /// The database (for admin operations).
    pub db: Db,
    /// The inspector's one-time sign-in tokens.
    sign_in: std::sync::Arc<contextq_server::ui::SignInTokens>,
    /// The server's router, for this process's own requests ([`Embedded::local_service`]).
    router: axum::Router,
    server: RunningServer,
}

impl Embedded {
    /// Opens (creating on first use) the data directory and serves it on `listen`.
    pub async fn start(data_dir: &Path, listen: &str, mode: Mode) -> Result<Embedded> {
        Self::start_with(data_dir, listen, mode, |_, _, _| axum::Router::new()).await
    }

    /// [`Embedded::start`], with the routes `extra` makes, for the server's URL, the server
    /// itself in this process and the local tenant's workspace, served beside the API
    /// (`serve`'s MCP endpoint).
    pub async fn start_with(
        data_dir: &Path,
        listen: &str,
        mode: Mode,
        extra: impl FnOnce(&str, Local, &str) -> axum::Router,
    ) -> Result<Embedded> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700));
        }
        let db_url = format!("sqlite:{}", data_dir.join("contextq.db").display());
        // The audit key lives beside the database, outside it (0600); created on first use, and
        // a database from before keys is keyed from then on.
        let key_file = data_dir.join("audit.key");
        let (audit_key, created) = AuditKey::load_or_create(&key_file)
            .with_context(|| format!("cannot use the audit key {}", key_file.display()))?;
        let options = DbOptions::default()
            .audit_key(Some(audit_key))
            .adopt_audit_key(created)
            .sync_commits(mode.durability == Durability::Synced)
            // A one-client command runs on one thread (`main`): its commits wait for the disk
            // there, two thread wake-ups a write fewer. No effect in `serve` and `import`,
            // whose runtimes are multi-thread.
            .flush_on_calling_thread(true);
        let db = Db::connect(&db_url, &options)
            .await
            .with_context(|| format!("cannot open {}", data_dir.join("contextq.db").display()))?;
        let credentials = credentials(&db, data_dir).await?;
        // Raises the descriptor limit and fits the connection cap under it: `serve` answers other
        // processes with the server's own connection limits.
        let config = ServerConfig::default()
            .connections(ConnectionLimits::default().for_this_process())
            .read_only(mode.read_only);
        let state = AppState::new(db.clone(), config);
        let sign_in = state.sign_in.clone();
        let router = contextq_server::app(state.clone());
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| contextq_server::listen::bind_error(listen, e))?;
        let url = format!("http://{}", listener.local_addr()?);
        let local: Local = Arc::new(RouterService::new(router.clone()));
        let routes = extra(&url, local, &credentials.workspace);
        let server = RunningServer::spawn_with(listener, state, routes)?;
        Ok(Embedded {
            url: server.url().to_string(),
            credentials,
            db,
            sign_in,
            router,
            server,
        })
    }

    /// The server called in this process, without its socket (for this process's own
    /// client: `ContextQMemoryToolOptions::local_service`).
    pub fn local_service(&self) -> Arc<dyn LocalService> {
        Arc::new(RouterService::new(self.router.clone()))
    }

    /// A one-time sign-in link of the inspector for the local tenant's key: the token is in the
    /// fragment, which browsers never send to the server.
    pub fn inspector_link(&self) -> String {
        format!(
            "{}/ui/#token={}",
            self.url,
            self.sign_in.issue(&self.credentials.api_key)
        )
    }

    /// Makes sure workspace `slug` exists for the local tenant.
    pub async fn ensure_workspace(&self, slug: &str) -> Result<()> {
        let workspaces = admin::workspaces(&self.db, &self.credentials.tenant_id).await?;
        if !workspaces.iter().any(|w| w.slug == slug) {
            admin::create_workspace(&self.db, &self.credentials.tenant_id, slug, slug).await?;
        }
        Ok(())
    }

    /// Stops the server after in-flight requests finish.
    pub async fn stop(self) {
        if let Err(e) = self.server.stop().await {
            tracing::warn!(error = %e, "the embedded server stopped with an error");
        }
        self.db.close().await;
    }

    /// Serves until the server fails or `shutdown` resolves, then stops it (for `serve`).
    pub async fn serve_until(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let failed = tokio::select! {
            r = self.server.wait() => Some(r),
            () = shutdown => None,
        };
        match failed {
            Some(r) => {
                self.db.close().await;
                r?;
            }
            None => self.stop().await,
        }
        Ok(())
    }
}

/// Reads `embedded.json`, or provisions the local tenant and writes it (atomically: a second
/// process racing to do the same uses whichever file landed first).
async fn credentials(db: &Db, data_dir: &Path) -> Result<Credentials> {
    let file = data_dir.join("embedded.json");
    if let Ok(text) = std::fs::read_to_string(&file) {
        return serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is damaged: delete it to provision a new local tenant",
                file.display()
            )
        });
    }
    let name = format!("local-{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff);
    let made = admin::bootstrap(
        db,
        &name,
        Plan::Unlimited,
        "default",
        &[Scope::Read, Scope::Write, Scope::Admin],
    )
    .await?;
    let creds = Credentials {
        tenant_id: made.tenant_id,
        api_key: made.key.api_key.clone(),
        workspace: made.workspace,
    };
    let tmp = data_dir.join(format!(".embedded.json.{}", std::process::id()));
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(&tmp)?;
        f.write_all(serde_json::to_string_pretty(&creds)?.as_bytes())?;
        f.sync_all()?;
    }
    let linked = std::fs::hard_link(&tmp, &file);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(creds),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&file)?;
            Ok(serde_json::from_str(&text)?)
        }
        Err(e) => Err(e).with_context(|| format!("cannot write {}", file.display())),
    }
}

/// Records the URL a `serve` listens on (`serve.json` in the data directory), so that
/// `sign-in-link` can reach it; best effort (a failure is logged, serving goes on).
pub fn record_url(data_dir: &Path, url: &str) {
    let file = data_dir.join("serve.json");
    let text = serde_json::json!({ "url": url }).to_string();
    // Written whole, then renamed into place: `sign-in-link` never reads half a file.
    let tmp = data_dir.join(format!(".serve.json.{}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(error = %e, file = %file.display(), "cannot record the served URL; sign-in-link will need --url");
    }
}

/// A new one-time sign-in link to the inspector of the `serve` running on `data_dir` (or at
/// `url`), asked of that server with the local key.
pub async fn sign_in_link(data_dir: &Path, url: Option<&str>) -> Result<String> {
    let url = match url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            let file = data_dir.join("serve.json");
            let text = std::fs::read_to_string(&file).with_context(|| {
                format!(
                    "no `contextq-memory serve` recorded in {} ({} is missing): start one, or pass --url",
                    data_dir.display(),
                    file.display()
                )
            })?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is damaged: pass --url", file.display()))?;
            v["url"]
                .as_str()
                .with_context(|| format!("{} names no url: pass --url", file.display()))?
                .to_string()
        }
    };
    let text = std::fs::read_to_string(data_dir.join("embedded.json")).with_context(|| {
        format!(
            "no local key in {} (embedded.json): run `contextq-memory serve` on it first",
            data_dir.display()
        )
    })?;
    let credentials: Credentials =
        serde_json::from_str(&text).context("embedded.json is damaged")?;
    let answer = reqwest::Client::new()
        .post(format!("{url}/ui/sign-in-tokens"))
        .bearer_auth(&credentials.api_key)
        .send()
        .await
        .with_context(|| {
            format!("cannot reach the server at {url}: is `contextq-memory serve` running?")
        })?;
    let status = answer.status();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    if !status.is_success() {
        anyhow::bail!(
            "the server at {url} refused a sign-in token ({status}: {})",
            body["error"]["message"].as_str().unwrap_or("no message")
        );
    }
    let token = body["token"]
        .as_str()
        .context("the server answered no token")?;
    Ok(format!("{url}/ui/#token={token}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};
    use contextq_memory_tool::{MemoryToolHandlers as _, ToolResult};

    /// A one-client command's writes (this runtime has one thread, as the CLI's has) wait for
    /// the disk on that thread: none goes to the write connection's thread and back.
    #[tokio::test(flavor = "current_thread")]
    async fn a_one_client_commands_synced_writes_hand_nothing_to_another_thread() {
        let dir = tempfile::tempdir().unwrap();
        let embedded = Embedded::start(dir.path(), "127.0.0.1:0", Mode::default())
            .await
            .unwrap();
        embedded
            .ensure_workspace(&embedded.credentials.workspace)
            .await
            .unwrap();
        let options = ContextQMemoryToolOptions::new(embedded.credentials.api_key.clone())
            .base_url(embedded.url.clone())
            .local_service(embedded.local_service())
            .workspace(embedded.credentials.workspace.clone());
        let tool = contextq_memory_tool(options).unwrap();
        // The key's first use is recorded in the background, on a connection of the pool, once
        // a minute: a write that met it would wait for its lock on the writer's thread.
        let warm = tool
            .execute(serde_json::json!({"command": "view", "path": "/memories"}))
            .await;
        assert!(!warm.is_error, "{}", warm.content);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let (handoffs, commits) = (embedded.db.thread_handoffs(), embedded.db.commits());
        for n in 0..10 {
            let created: ToolResult = tool
                .execute(serde_json::json!({
                    "command": "create",
                    "path": format!("/memories/n{n}.md"),
                    "file_text": "a note\n",
                }))
                .await;
            assert!(!created.is_error, "{}", created.content);
        }
        assert!(embedded.db.commits() - commits >= 10);
        assert_eq!(embedded.db.thread_handoffs() - handoffs, 0);
    }
}
