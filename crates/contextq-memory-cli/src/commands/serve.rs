//! `contextq-memory serve`, and the commands that go with a served data directory: `keys`,
//! `sign-in-link`.

use std::process::ExitCode;

use anyhow::Result;

#[cfg(feature = "mcp")]
use super::mcp::McpSessionArgs;
use super::{Context, Policy};
use crate::out::outln;
use crate::{embedded, keys};

/// The keys of the embedded data directory: one per teammate or agent of a `serve`
/// (create, list, revoke, expire).
#[derive(clap::Args)]
pub(crate) struct Keys {
    #[command(subcommand)]
    pub(crate) command: keys::KeysCommand,
}

impl Keys {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Keys { command } = self;
        keys::run(&cx.data_dir, command).await?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Print a new one-time sign-in link to the inspector of a running `serve` (the one it
/// printed at start is valid 10 minutes).
#[derive(clap::Args)]
pub(crate) struct SignInLink {
    /// The server's URL [default: the one `serve` recorded in the data directory].
    #[arg(long)]
    pub(crate) url: Option<String>,
}

impl SignInLink {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let SignInLink { url } = self;
        let link = embedded::sign_in_link(&cx.data_dir, url.as_deref()).await?;
        outln!("{link}");
        Ok(ExitCode::SUCCESS)
    }
}

/// Serve the embedded store over HTTP so other processes can share it, with the memory
/// inspector at /ui/ (prints a one-time sign-in link).
#[derive(clap::Args)]
pub(crate) struct Serve {
    /// Address to listen on (38200 is the TypeScript package's default port, kept so that its default URL
    /// works; it lies in Linux's ephemeral range 32768-60999, so pick another if it is taken).
    #[arg(long, default_value = "127.0.0.1:38200")]
    pub(crate) listen: String,
    /// Serve read-only: every write over HTTP (the API, the inspector's restore) is refused
    /// with 403, whatever the key.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// A Host MCP clients use to reach /mcp, besides loopback and --listen (repeat it).
    #[arg(long, value_name = "HOST")]
    pub(crate) allowed_host: Vec<String>,
    /// A browser origin allowed to call /mcp (repeat it). Without one, an MCP request
    /// carrying Origin is refused.
    #[arg(long, value_name = "ORIGIN")]
    pub(crate) allowed_origin: Vec<String>,
    #[cfg(feature = "mcp")]
    #[command(flatten)]
    pub(crate) sessions: McpSessionArgs,
}

impl Serve {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let settings = cx.settings(Policy::default());
        #[cfg(feature = "mcp")]
        let mcp = mcp_endpoint(
            &settings,
            self.allowed_host,
            self.allowed_origin,
            self.sessions.limits(),
        );
        #[cfg(not(feature = "mcp"))]
        let mcp = mcp_endpoint(&settings, self.allowed_host, self.allowed_origin);
        let (listen, read_only) = (self.listen, self.read_only);
        let mode = embedded::Mode {
            read_only,
            durability: settings.durability,
        };
        let server = embedded::Embedded::start_with(&settings.data_dir, &listen, mode, mcp).await?;
        // Recorded before it is printed: whoever read the URL finds it recorded.
        embedded::record_url(&settings.data_dir, &server.url);
        outln!("{}", server.url);
        contextq_server::logs::notice(&format!(
            "inspector: open {} (a one-time sign-in link, valid 10 minutes; `contextq-memory sign-in-link` prints a new one)",
            server.inspector_link()
        ));
        contextq_server::logs::notice(&format!(
            "serving {} ; use CONTEXT_API_URL={} and the apiKey in {} (or a key of `contextq-memory keys create` per teammate)",
            settings.data_dir.join("contextq.db").display(),
            server.url,
            settings.data_dir.join("embedded.json").display()
        ));
        #[cfg(feature = "mcp")]
        contextq_server::logs::notice(&format!(
            "MCP over HTTP: {}/mcp (each client sends Authorization: Bearer <its key>)",
            server.url
        ));
        server
            .serve_until(contextq_server::listen::stop_signal())
            .await?;
        Ok(ExitCode::SUCCESS)
    }
}

/// `serve`'s MCP endpoint at `/mcp` (feature `mcp`): each client's key is its memory's, checked
/// with the server in this process (no socket) on every request. Its paths are the embedded
/// store's, pinned to its workspace (or `--workspace`) as over stdio: one store, one path model.
#[cfg(feature = "mcp")]
fn mcp_endpoint(
    settings: &crate::stores::Settings,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    sessions: crate::mcp::sessions::SessionLimits,
) -> impl FnOnce(&str, crate::embedded::Local, &str) -> axum::Router {
    let mut settings = settings.clone();
    move |url: &str, local: crate::embedded::Local, workspace: &str| {
        settings
            .workspace
            .get_or_insert_with(|| workspace.to_string());
        let addr = url
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let options = crate::mcp::http::HttpOptions {
            listen: addr.to_string(),
            contextq_url: url.to_string(),
            allowed_hosts,
            allowed_origins,
            sessions,
        };
        crate::mcp::http::router(url, Some(local), addr, &options, settings)
    }
}

#[cfg(not(feature = "mcp"))]
fn mcp_endpoint(
    _settings: &crate::stores::Settings,
    _allowed_hosts: Vec<String>,
    _allowed_origins: Vec<String>,
) -> impl FnOnce(&str, crate::embedded::Local, &str) -> axum::Router {
    |_: &str, _: crate::embedded::Local, _: &str| axum::Router::new()
}
