//! `contextq-memory mcp`: over stdio on any store, or over streamable HTTP in front of a
//! ContextQ (each client's key its memory's); the session limits `serve`'s /mcp shares.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::mcp;
use crate::stores::{self, Settings, StoreChoice};

/// Serve the memory as an MCP server (tool `memory`, files as resources) over stdio, or with
/// --http over streamable HTTP at /mcp, where each client's `Authorization: Bearer <ContextQ
/// key>` is the key of its memory.
#[derive(clap::Args)]
pub(crate) struct Mcp {
    /// contextq (the embedded store unless CONTEXT_API_URL or CONTEXT_API_KEY is set),
    /// memory, local:DIR, or memory-stores:STORE_ID.
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    #[command(flatten)]
    pub(crate) policy: Policy,
    /// Serve MCP over streamable HTTP on this address (e.g. 127.0.0.1:38300; port 0 picks
    /// one) in front of CONTEXT_API_URL (else the embedded store), instead of stdio; prints
    /// http://ADDR/mcp on stdout once listening.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
    /// With --http: a Host clients use to reach this server, besides loopback (repeat it;
    /// e.g. memory.internal or memory.internal:38300).
    #[arg(long, value_name = "HOST", requires = "http")]
    pub(crate) allowed_host: Vec<String>,
    /// With --http: a browser origin allowed to call it (repeat it; e.g.
    /// `https://app.example.com:443`). Without one, a request carrying Origin is refused.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub(crate) allowed_origin: Vec<String>,
    #[command(flatten)]
    pub(crate) sessions: McpSessionArgs,
}

impl Mcp {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Mcp {
            store,
            policy,
            http,
            allowed_host,
            allowed_origin,
            sessions,
        } = self;
        let Some(listen) = http else {
            // Over stdio: the key decides the path model, as an MCP client's memory.
            let settings = Settings {
                key_decides_path_model: true,
                ..cx.settings(policy)
            };
            stores::with_opened(&store, &settings, mcp::run).await?;
            return Ok(ExitCode::SUCCESS);
        };
        if !matches!(store, StoreChoice::ContextQ) {
            anyhow::bail!(
                "--http serves a ContextQ's memories, each client with its own key: drop --store"
            );
        }
        let mut settings = cx.settings(policy);
        // In front of CONTEXT_API_URL, or of the embedded store (started here).
        let url = std::env::var("CONTEXT_API_URL")
            .ok()
            .filter(|u| !u.trim().is_empty());
        let (url, embedded) = match url {
            Some(url) => (url, None),
            None => {
                let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
                let url = opened
                    .contextq
                    .as_ref()
                    .map(|c| c.url.clone())
                    .ok_or_else(|| anyhow::anyhow!("the embedded store has no URL"))?;
                (url, Some(opened))
            }
        };
        let options = mcp::http::HttpOptions {
            listen,
            contextq_url: url,
            allowed_hosts: allowed_host,
            allowed_origins: allowed_origin,
            sessions: sessions.limits(),
        };
        // The embedded store is called in this process, without a socket.
        let local = embedded
            .as_ref()
            .and_then(|o| o.embedded.as_ref())
            .map(|e| e.local_service());
        // The embedded store's paths are pinned to its workspace whatever the transport.
        if let Some(pinned) = embedded
            .as_ref()
            .and_then(|o| o.contextq.as_ref())
            .and_then(|c| c.workspace.clone())
        {
            settings.workspace.get_or_insert(pinned);
        }
        let result = mcp::http::run(options, local, settings).await;
        if let Some(opened) = embedded {
            opened.close().await;
        }
        result?;
        Ok(ExitCode::SUCCESS)
    }
}

/// How many MCP sessions over HTTP may live, and for how long unused (`serve`'s /mcp and
/// `mcp --http`; docs/reliability.md).
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct McpSessionArgs {
    /// Live MCP sessions one key may hold; one more closes the key's longest idle session, or
    /// is refused (429) when all are in use.
    #[arg(long, value_name = "N", default_value_t = mcp::sessions::SessionLimits::default().per_key, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mcp_sessions_per_key: usize,
    /// Live MCP sessions in all; when full, a key below its fair share still gets in.
    #[arg(long, value_name = "N", default_value_t = mcp::sessions::SessionLimits::default().total, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mcp_sessions: usize,
    /// Seconds an MCP session may go without a request (and no stream open) before it ends.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().idle.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_session_idle_secs: u64,
    /// Seconds a new MCP session has to send its first request after `initialize`.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().unconfirmed.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_session_confirm_secs: u64,
    /// Seconds between checks of a key that holds MCP sessions but makes no request: a key
    /// revoked or expired meanwhile has its sessions (and their open streams) ended.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().key_recheck.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_key_recheck_secs: u64,
}

impl McpSessionArgs {
    pub(crate) fn limits(self) -> mcp::sessions::SessionLimits {
        mcp::sessions::SessionLimits {
            per_key: self.mcp_sessions_per_key,
            total: self.mcp_sessions,
            idle: std::time::Duration::from_secs(self.mcp_session_idle_secs),
            unconfirmed: std::time::Duration::from_secs(self.mcp_session_confirm_secs),
            key_recheck: std::time::Duration::from_secs(self.mcp_key_recheck_secs),
        }
    }
}
