//! Options of the memory tool on ContextQ ([`ContextQMemoryToolOptions`]) and the function that
//! builds it, [`contextq_memory_tool`].

use std::time::Duration;

use super::client::{ApiKey, Client};
use super::store::ContextQStore;
use crate::budget::AnswerBudget;
use crate::error::{Error, Result};
use crate::retry::RetryConfig;
use crate::tool::MemoryTool;

/// The memory tool on ContextQ.
pub type ContextQMemoryTool = MemoryTool<ContextQStore>;

/// Default ContextQ base URL.
pub const DEFAULT_BASE_URL: &str = "http://localhost:38200";
/// Default type of every memory row.
pub const DEFAULT_CONTEXT_TYPE: &str = "reference";
/// Default reserved tag (and external id namespace).
pub const DEFAULT_TAG: &str = "mem-tool";
/// Default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of [`ContextQMemoryTool`]; see the README's options table.
///
/// [`Default`] reads nothing from the environment; [`ContextQMemoryToolOptions::from_env`] fills
/// `api_key` from `CONTEXT_API_KEY` and `base_url` from `CONTEXT_API_URL`.
#[derive(Clone)]
#[non_exhaustive]
pub struct ContextQMemoryToolOptions {
    /// `sk_live_` + 40 lowercase hex. Required.
    pub api_key: Option<String>,
    /// Base URL; default [`DEFAULT_BASE_URL`].
    pub base_url: Option<String>,
    /// ContextQ type of every row; default `reference`.
    pub context_type: String,
    /// Reserved tag on every row and namespace of external ids; default `mem-tool`.
    pub tag: String,
    /// Retries and backoff; default 3 retries (see [`RetryConfig`]).
    pub retry: RetryConfig,
    /// Timeout of one request; default 30 s.
    pub timeout: Duration,
    /// A caller's own HTTP client (proxies, TLS roots, connection pool settings).
    pub http_client: Option<reqwest::Client>,
    /// Pin `/memories` to this workspace (then `/memories/a.md` is `<tag>:<ws>/a.md`).
    pub workspace: Option<String>,
    /// Create a missing workspace on first write (needs the key's `admin` scope); default off.
    pub create_workspaces: bool,
    /// How long an edit (or delete, or rename) that keeps losing races to other writers keeps
    /// retrying, with exponential backoff and jitter, before Claude is told the file kept
    /// changing; default 10 s ([`crate::store::steps::DEFAULT_EDIT_BUDGET`]). Edits applied by the
    /// server (`text-edit` extension) never lose such races.
    pub edit_budget: Duration,
    /// Read-only use: every write command is refused with an error result that tells Claude
    /// the memory is read-only here; default off ([`MemoryTool::read_only`]).
    pub read_only: bool,
    /// Refuse to store credential-shaped strings (API keys, tokens, private keys); default on
    /// ([`MemoryTool::secret_guard`], [`crate::secrets::PATTERNS`]).
    pub secret_guard: bool,
    /// How much a directory listing or a file read may hold ([`MemoryTool::answer_budget`]);
    /// default [`AnswerBudget::default`].
    pub answer_budget: AnswerBudget,
    /// A ContextQ server in this process, called instead of the network (default none:
    /// requests go over HTTP to `base_url`). See [`super::local`].
    pub local_service: Option<std::sync::Arc<dyn super::local::LocalService>>,
}

impl Default for ContextQMemoryToolOptions {
    fn default() -> Self {
        ContextQMemoryToolOptions {
            api_key: None,
            base_url: None,
            context_type: DEFAULT_CONTEXT_TYPE.into(),
            tag: DEFAULT_TAG.into(),
            retry: RetryConfig::default(),
            timeout: DEFAULT_TIMEOUT,
            http_client: None,
            workspace: None,
            create_workspaces: false,
            edit_budget: crate::store::steps::DEFAULT_EDIT_BUDGET,
            read_only: false,
            secret_guard: true,
            answer_budget: AnswerBudget::default(),
            local_service: None,
        }
    }
}

impl std::fmt::Debug for ContextQMemoryToolOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextQMemoryToolOptions")
            .field(
                "api_key",
                &self.api_key.as_deref().map(contextq_api::mask_secret),
            )
            .field("base_url", &self.base_url)
            .field("context_type", &self.context_type)
            .field("tag", &self.tag)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .field("http_client", &self.http_client.is_some())
            .field("workspace", &self.workspace)
            .field("create_workspaces", &self.create_workspaces)
            .field("edit_budget", &self.edit_budget)
            .field("read_only", &self.read_only)
            .field("secret_guard", &self.secret_guard)
            .field("answer_budget", &self.answer_budget)
            .field("local_service", &self.local_service)
            .finish()
    }
}

impl ContextQMemoryToolOptions {
    /// Defaults with `api_key`.
    pub fn new(api_key: impl Into<String>) -> Self {
        ContextQMemoryToolOptions {
            api_key: Some(api_key.into()),
            ..Default::default()
        }
    }

    /// Defaults, with `api_key` from `CONTEXT_API_KEY` and `base_url` from `CONTEXT_API_URL`.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        ContextQMemoryToolOptions {
            api_key: var("CONTEXT_API_KEY"),
            base_url: var("CONTEXT_API_URL"),
            ..Default::default()
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Pins the tree to a workspace.
    pub fn workspace(mut self, slug: impl Into<String>) -> Self {
        self.workspace = Some(slug.into());
        self
    }

    /// Sets the tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = tag.into();
        self
    }

    /// Sets the context type.
    pub fn context_type(mut self, t: impl Into<String>) -> Self {
        self.context_type = t.into();
        self
    }

    /// Sets the number of retries (the rest of [`RetryConfig`] stays).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.retry.max_retries = n;
        self
    }

    /// Uses the caller's HTTP client.
    pub fn http_client(mut self, c: reqwest::Client) -> Self {
        self.http_client = Some(c);
        self
    }

    /// Calls `service`, a ContextQ server in this process, instead of the network.
    pub fn local_service(
        mut self,
        service: std::sync::Arc<dyn super::local::LocalService>,
    ) -> Self {
        self.local_service = Some(service);
        self
    }

    /// Builds the client these options describe.
    pub fn client(&self) -> Result<Client> {
        let key = self.api_key.clone().ok_or_else(|| Error::Config {
            message: "no ContextQ API key: set api_key or CONTEXT_API_KEY (sk_live_ followed by 40 lowercase hex)".into(),
        })?;
        let key = ApiKey::new(key).map_err(|e| Error::Config {
            message: format!(
                "{e}: set api_key or CONTEXT_API_KEY to a key from `contextq-server admin create-key`"
            ),
        })?;
        let base_url = self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        let client = Client::new(
            base_url,
            key,
            self.retry.clone(),
            self.timeout,
            self.http_client.clone(),
        )?;
        Ok(match &self.local_service {
            Some(service) => client.with_local_service(service.clone()),
            None => client,
        })
    }

    /// Builds the store these options describe.
    pub fn store(&self) -> Result<ContextQStore> {
        ContextQStore::new(
            self.client()?,
            self.tag.clone(),
            self.context_type.clone(),
            self.workspace.clone(),
            self.create_workspaces,
        )
        .map(|store| store.with_edit_budget(self.edit_budget))
    }
}

contextq_api::setters!(ContextQMemoryToolOptions {
    retry: RetryConfig,
    timeout: Duration,
    create_workspaces: bool,
    edit_budget: Duration,
    read_only: bool,
    secret_guard: bool,
    answer_budget: AnswerBudget,
});

/// The memory tool on ContextQ (the TypeScript package's `contextQMemoryTool(options)`).
pub fn contextq_memory_tool(options: ContextQMemoryToolOptions) -> Result<ContextQMemoryTool> {
    Ok(MemoryTool::new(options.store()?)
        .read_only(options.read_only)
        .secret_guard(options.secret_guard)
        .answer_budget(options.answer_budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_never_show_the_key() {
        let o = ContextQMemoryToolOptions::new("sk_live_0123456789abcdef0123456789abcdef0123abcd");
        let dbg = format!("{o:?}");
        assert!(dbg.contains("sk_live_…abcd"), "{dbg}");
        assert!(!dbg.contains("0123456789abcdef"), "{dbg}");
    }

    #[test]
    fn missing_or_bad_settings_name_what_to_change() {
        let err = contextq_memory_tool(ContextQMemoryToolOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("CONTEXT_API_KEY"), "{err}");
        let err = contextq_memory_tool(ContextQMemoryToolOptions::new("nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("sk_live_"), "{err}");
        let upper = "sk_live_0123456789ABCDEF0123456789abcdef0123ABCD";
        let err = contextq_memory_tool(ContextQMemoryToolOptions::new(upper))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CONTEXT_API_KEY") && err.contains("sk_live_…ABCD"),
            "{err}"
        );
        assert!(!err.contains("0123456789ABCDEF"), "{err}");
        let key = "sk_live_0123456789abcdef0123456789abcdef0123abcd";
        let err = contextq_memory_tool(ContextQMemoryToolOptions::new(key).workspace("Not A Slug"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("slug"), "{err}");
        let err = contextq_memory_tool(ContextQMemoryToolOptions::new(key).tag("a/b"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tag"), "{err}");
        assert!(
            contextq_memory_tool(ContextQMemoryToolOptions::new(key).workspace("Acme")).is_ok()
        );
    }
}
