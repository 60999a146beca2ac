//! `contextq-memory demo`: its arguments; the session it runs is `crate::demo`.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::demo;
use crate::stores::{self, StoreChoice};

/// Run a realistic memory session through the adapter and server, and show the rows.
#[derive(clap::Args)]
pub(crate) struct Demo {
    #[command(flatten)]
    pub(crate) policy: Policy,
}

impl Demo {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Demo { policy } = self;
        stores::with_opened(&StoreChoice::ContextQ, &cx.settings(policy), demo::run).await?;
        Ok(ExitCode::SUCCESS)
    }
}
