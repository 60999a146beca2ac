//! `contextq-memory exec`: its arguments, and the exit code when the store failed a command
//! (the loop itself is `crate::exec`).

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::exec;
use crate::stores::{self, StoreChoice};

/// Run tool inputs (JSON, one per line, from stdin); print one result per line.
#[derive(clap::Args)]
pub(crate) struct Exec {
    /// contextq (the embedded store unless CONTEXT_API_URL or CONTEXT_API_KEY is set; a key
    /// alone means http://localhost:38200), memory, local:DIR, or memory-stores:STORE_ID.
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    /// At the end, print {"commands": N, "seconds": S} (the loop alone) on stderr.
    #[arg(long)]
    pub(crate) timing: bool,
    #[command(flatten)]
    pub(crate) policy: Policy,
}

impl Exec {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Exec {
            store,
            timing,
            policy,
        } = self;
        let failed = stores::with_opened(&store, &cx.settings(policy), async |o| {
            exec::run(o.tool.as_ref(), timing).await
        })
        .await?;
        if failed > 0 {
            eprintln!(
                "contextq-memory exec: {failed} command(s) failed because of the memory store (see their results); exit code 1"
            );
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }
}
