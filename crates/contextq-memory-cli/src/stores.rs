//! Which store a command runs on: the embedded ContextQ (default), a configured ContextQ
//! (`CONTEXT_API_URL` + `CONTEXT_API_KEY`), memory, a local directory, or a store of a Memory
//! Stores service (`memory-stores:ID`: Anthropic's, or contextq-server's `/v1`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use contextq_memory_tool::contextq::{
    ContextQMemoryTool, ContextQMemoryToolOptions, KeyReach, path_model,
};
use contextq_memory_tool::{LocalStore, MemoryStore, MemoryTool, Store};

use crate::embedded::Embedded;

/// `--store` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// ContextQ: embedded unless `CONTEXT_API_URL` is set.
    ContextQ,
    /// In this process only.
    Memory,
    /// A directory (`/memories` is `DIR/memories`).
    Local(PathBuf),
    /// A store of a Memory Stores service, by id (`memstore_...`).
    MemoryStores(String),
}

impl std::str::FromStr for StoreChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "contextq" => Ok(StoreChoice::ContextQ),
            "memory" => Ok(StoreChoice::Memory),
            other => {
                if let Some(dir) = other.strip_prefix("local:").filter(|d| !d.is_empty()) {
                    return Ok(StoreChoice::Local(PathBuf::from(dir)));
                }
                if let Some(id) = other
                    .strip_prefix("memory-stores:")
                    .filter(|d| !d.is_empty())
                {
                    return Ok(StoreChoice::MemoryStores(id.to_string()));
                }
                Err(format!(
                    "unknown store {other:?}: use contextq (default), memory, local:DIR, or memory-stores:STORE_ID"
                ))
            }
        }
    }
}

/// Settings shared by the commands.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The embedded default's data directory.
    pub data_dir: PathBuf,
    /// Pin the tree to this workspace.
    pub workspace: Option<String>,
    /// Refuse every write command (`--read-only`).
    pub read_only: bool,
    /// Refuse credential-shaped content (default; `--allow-secrets` turns it off).
    pub secret_guard: bool,
    /// How much one answer to Claude may hold (`--max-listing-entries`, ...).
    pub answer_budget: contextq_memory_tool::AnswerBudget,
    /// How far a write to the embedded default or a local directory goes before it is
    /// answered (`--durability`).
    pub durability: contextq_memory_tool::Durability,
    /// Every workspace the key reaches, each as the first folder under `/memories`, instead of
    /// one pinned workspace (`export`/`import --all-workspaces`); missing ones are created.
    pub every_workspace: bool,
    /// The key decides the path model ([`fn@contextq_memory_tool::contextq::path_model`]): a
    /// key of one workspace sees it as `/memories` whatever `workspace` says (the MCP
    /// transports). The other commands take `workspace` as it is.
    pub key_decides_path_model: bool,
}

/// Where ContextQ is, for messages.
#[derive(Debug, Clone)]
pub struct ContextQInfo {
    /// Base URL.
    pub url: String,
    /// Key (for the demo's independent read-back; never printed).
    pub api_key: String,
    /// The pinned workspace, if any.
    pub workspace: Option<String>,
    /// Whether it is the embedded server.
    pub embedded: bool,
}

/// An opened store: the tool over it, the store itself, and the embedded server to stop.
pub struct Opened {
    /// The memory tool.
    pub tool: Arc<MemoryTool<Arc<dyn Store>>>,
    /// The store under the tool (for resources, export and import).
    pub store: Arc<dyn Store>,
    /// ContextQ details, when on ContextQ.
    pub contextq: Option<ContextQInfo>,
    /// The embedded server, when used.
    pub embedded: Option<Embedded>,
    /// The same memory as a typed ContextQ tool (history, versions, restores), when on
    /// ContextQ.
    pub history: Option<ContextQMemoryTool>,
    /// What the store is, when not ContextQ (for [`Opened::describe`]).
    pub label: &'static str,
}

impl Opened {
    /// Stops the embedded server, if any.
    pub async fn close(self) {
        if let Some(e) = self.embedded {
            e.stop().await;
        }
    }

    /// One line saying where the memory lives.
    pub fn describe(&self) -> String {
        match &self.contextq {
            Some(c) if c.embedded => format!(
                "ContextQ: {} (embedded, workspace {})",
                c.url,
                c.workspace.as_deref().unwrap_or("-")
            ),
            Some(c) => format!(
                "ContextQ: {} ({})",
                c.url,
                c.workspace
                    .as_deref()
                    .map(|w| format!("workspace {w}"))
                    .unwrap_or_else(|| "first folder under /memories = workspace".into())
            ),
            None => self.label.to_string(),
        }
    }
}

/// Opens `choice`, runs `job` on it, and closes it whatever the job's result (so that an
/// embedded server always stops cleanly).
pub async fn with_opened<T>(
    choice: &StoreChoice,
    settings: &Settings,
    job: impl AsyncFnOnce(&Opened) -> Result<T>,
) -> Result<T> {
    let opened = open(choice, settings).await?;
    let result = job(&opened).await;
    opened.close().await;
    result
}

/// Opens `choice`.
pub async fn open(choice: &StoreChoice, settings: &Settings) -> Result<Opened> {
    match choice {
        StoreChoice::Memory => Ok(opened(
            Arc::new(MemoryStore::new()),
            settings,
            None,
            None,
            None,
        )),
        StoreChoice::Local(dir) => {
            let store = LocalStore::new(dir)
                .with_context(|| format!("cannot use {}", dir.display()))?
                .with_durability(settings.durability)
                // One client at a time: no hand-off to the blocking pool per call.
                .with_file_io(contextq_memory_tool::store::FileIo::Inline);
            Ok(opened(Arc::new(store), settings, None, None, None))
        }
        StoreChoice::ContextQ => open_contextq(settings).await,
        StoreChoice::MemoryStores(id) => {
            let options = memory_stores_options(id, |k| std::env::var(k).ok())?;
            let store = contextq_memory_tool::memory_stores::MemoryStoresStore::new(options)?;
            let mut o = opened(Arc::new(store), settings, None, None, None);
            o.label = "a Memory Stores store";
            Ok(o)
        }
    }
}

/// Where a `memory-stores:ID` store is, from the environment (`var`): `ANTHROPIC_BASE_URL` with
/// `ANTHROPIC_API_KEY` (the official SDKs' variables: Anthropic's service, or any), or else
/// `CONTEXT_API_URL` with `CONTEXT_API_KEY` (a contextq-server, which serves the API at `/v1`).
/// A URL is taken only with its own pair's key, so that a key is never sent to the other
/// pair's server.
fn memory_stores_options(
    id: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<contextq_memory_tool::memory_stores::MemoryStoresOptions> {
    let set = |k: &str| {
        var(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let (url, key, key_var) = match (set("ANTHROPIC_BASE_URL"), set("CONTEXT_API_URL")) {
        (Some(url), _) => (url, set("ANTHROPIC_API_KEY"), "ANTHROPIC_API_KEY"),
        (None, Some(url)) => (url, set("CONTEXT_API_KEY"), "CONTEXT_API_KEY"),
        (None, None) => bail!(
            "--store memory-stores:{id}: set ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (https://api.anthropic.com for Anthropic's service), or CONTEXT_API_URL and CONTEXT_API_KEY for a contextq-server"
        ),
    };
    let Some(key) = key else {
        bail!("--store memory-stores:{id}: the service is {url}; set {key_var} to its key");
    };
    Ok(contextq_memory_tool::memory_stores::MemoryStoresOptions::new(&url, &key, id))
}

fn opened(
    store: Arc<dyn Store>,
    settings: &Settings,
    options: Option<&ContextQMemoryToolOptions>,
    contextq: Option<ContextQInfo>,
    embedded: Option<Embedded>,
) -> Opened {
    let tool = MemoryTool::new(store.clone())
        .read_only(settings.read_only)
        .secret_guard(settings.secret_guard)
        .answer_budget(settings.answer_budget);
    let history = options.and_then(|o| {
        contextq_memory_tool::contextq_memory_tool(
            o.clone()
                .read_only(settings.read_only)
                .secret_guard(settings.secret_guard)
                .answer_budget(settings.answer_budget),
        )
        .ok()
    });
    Opened {
        tool: Arc::new(tool),
        store,
        contextq,
        embedded,
        history,
        label: "local store",
    }
}

async fn open_contextq(settings: &Settings) -> Result<Opened> {
    // One rule, the library's: either variable set means a ContextQ server; a key without a URL
    // means the library's default URL (where `contextq-memory serve` listens); neither means
    // the embedded store.
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    if set("CONTEXT_API_URL") || set("CONTEXT_API_KEY") {
        let mut options = ContextQMemoryToolOptions::from_env();
        if options.api_key.is_none() {
            bail!(
                "CONTEXT_API_URL is set but CONTEXT_API_KEY is not: set CONTEXT_API_KEY to a ContextQ key (sk_live_ + 40 hex), or unset CONTEXT_API_URL to use the embedded store"
            );
        }
        if options.base_url.is_none() {
            eprintln!(
                "contextq-memory: CONTEXT_API_KEY is set without CONTEXT_API_URL: using the default {} (unset CONTEXT_API_KEY to use the embedded store)",
                contextq_memory_tool::contextq::DEFAULT_BASE_URL
            );
        }
        options.workspace = settings.workspace.clone();
        if settings.every_workspace {
            options.workspace = None;
            options.create_workspaces = true;
        } else if settings.key_decides_path_model {
            // One request: what the key reaches (which also checks that ContextQ takes it).
            let reach = options.client()?.key_reach().await.context(
                "cannot ask ContextQ which workspaces CONTEXT_API_KEY reaches (it decides the path model)",
            )?;
            let model = path_model(&reach, settings.workspace.as_deref());
            options.workspace = model.pinned().map(str::to_string);
        }
        let info = ContextQInfo {
            url: options
                .base_url
                .clone()
                .unwrap_or_else(|| contextq_memory_tool::contextq::DEFAULT_BASE_URL.to_string()),
            api_key: options.api_key.clone().unwrap_or_default(),
            workspace: options.workspace.clone(),
            embedded: false,
        };
        return Ok(opened(
            Arc::new(options.store()?),
            settings,
            Some(&options),
            Some(info),
            None,
        ));
    }
    let mode = crate::embedded::Mode {
        read_only: false,
        durability: settings.durability,
    };
    let embedded = Embedded::start(&settings.data_dir, "127.0.0.1:0", mode).await?;
    // This process's requests skip the socket; other processes use the URL.
    let mut options = ContextQMemoryToolOptions::new(embedded.credentials.api_key.clone())
        .base_url(embedded.url.clone())
        .local_service(embedded.local_service());
    let workspace = if settings.every_workspace {
        options.create_workspaces = true;
        None
    } else {
        // The local key reaches the whole tenant: the model is the pinned workspace's.
        let pin = settings
            .workspace
            .clone()
            .unwrap_or_else(|| embedded.credentials.workspace.clone());
        let model = path_model(&KeyReach::Tenant, Some(&pin));
        let workspace = model.pinned().unwrap_or(&pin).to_string();
        embedded.ensure_workspace(&workspace).await?;
        options = options.workspace(workspace.clone());
        Some(workspace)
    };
    let info = ContextQInfo {
        url: embedded.url.clone(),
        api_key: embedded.credentials.api_key.clone(),
        workspace,
        embedded: true,
    };
    Ok(opened(
        Arc::new(options.store()?),
        settings,
        Some(&options),
        Some(info),
        Some(embedded),
    ))
}

/// What a CLI user can change when the store refused or could not be reached: the environment
/// variables that chose it (the tool's own messages, written for Claude, say "the operator").
pub fn hint(e: &contextq_memory_tool::Error) -> Option<&'static str> {
    use contextq_memory_tool::contextq::{ContextQError, ErrorCode};
    if let Some(ContextQError::Transport(_)) = e.contextq() {
        return Some(
            "check CONTEXT_API_URL (the ContextQ this command talks to; a key alone means http://localhost:38200), or unset CONTEXT_API_URL and CONTEXT_API_KEY to use the embedded store",
        );
    }
    match e.contextq_code()? {
        ErrorCode::Unauthorized => Some(
            "check CONTEXT_API_KEY: it must be a key (sk_live_ + 40 hex) of the ContextQ at CONTEXT_API_URL, not revoked or expired",
        ),
        ErrorCode::Forbidden => Some(
            "the key in CONTEXT_API_KEY lacks the scope this needs (write, or admin to create workspaces)",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn memory_stores_take_a_url_with_its_own_key() {
        let o = memory_stores_options(
            "memstore_1",
            env(&[
                ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
                ("ANTHROPIC_API_KEY", "sk-ant-x"),
                ("CONTEXT_API_URL", "http://127.0.0.1:1"),
                ("CONTEXT_API_KEY", "sk_live_y"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (o.base_url.as_str(), o.api_key.as_str()),
            ("https://api.anthropic.com", "sk-ant-x")
        );
        let o = memory_stores_options(
            "memstore_1",
            env(&[
                ("ANTHROPIC_API_KEY", "sk-ant-x"),
                ("CONTEXT_API_URL", "http://127.0.0.1:1"),
                ("CONTEXT_API_KEY", "sk_live_y"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (o.base_url.as_str(), o.api_key.as_str()),
            ("http://127.0.0.1:1", "sk_live_y")
        );
        // Claude's own key is never sent to a ContextQ server's URL.
        let e = memory_stores_options(
            "memstore_1",
            env(&[
                ("ANTHROPIC_API_KEY", "sk-ant-x"),
                ("CONTEXT_API_URL", "http://127.0.0.1:1"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("set CONTEXT_API_KEY"), "{e}");
        assert!(!e.contains("sk-ant"), "{e}");
        let e = memory_stores_options("memstore_1", env(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ANTHROPIC_BASE_URL"), "{e}");
    }

    #[test]
    fn store_choices_parse() {
        assert_eq!(
            "memory-stores:memstore_ab".parse::<StoreChoice>(),
            Ok(StoreChoice::MemoryStores("memstore_ab".into()))
        );
        assert!("memory-stores:".parse::<StoreChoice>().is_err());
    }
}
