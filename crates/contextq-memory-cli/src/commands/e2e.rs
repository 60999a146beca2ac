//! `contextq-memory e2e`: its arguments and exit code; the live check is `crate::e2e`.

use std::process::ExitCode;

use anyhow::Result;

use super::Context;
use crate::e2e;

/// The live end-to-end check: throwaway tenant, two Claude turns, independent verification.
#[derive(clap::Args)]
pub(crate) struct E2e {
    /// The server's database (default: a temporary SQLite file).
    #[arg(long)]
    pub(crate) database_url: Option<String>,
    /// A running server on that database (default: one in this process).
    #[arg(long)]
    pub(crate) contextq_url: Option<String>,
    /// Model id.
    #[arg(long, env = "ANTHROPIC_MODEL", default_value = "claude-opus-5")]
    pub(crate) model: String,
}

impl E2e {
    pub(crate) async fn run(self, _cx: &Context) -> Result<ExitCode> {
        let E2e {
            database_url,
            contextq_url,
            model,
        } = self;
        let ok = e2e::run(e2e::E2eOptions {
            database_url,
            contextq_url,
            model,
        })
        .await?;
        if !ok {
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }
}
