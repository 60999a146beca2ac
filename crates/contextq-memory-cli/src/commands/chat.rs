//! `contextq-memory chat`: its arguments; the conversation with Claude is `crate::chat`.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::chat;
use crate::stores::{self, StoreChoice};

/// Talk to Claude with the memory tool (one user turn per stdin line; needs ANTHROPIC_API_KEY).
#[derive(clap::Args)]
pub(crate) struct Chat {
    /// Model id.
    #[arg(long, env = "ANTHROPIC_MODEL", default_value = "claude-opus-5")]
    pub(crate) model: String,
    /// System prompt.
    #[arg(long)]
    pub(crate) system: Option<String>,
    /// Output cap per response.
    #[arg(long, default_value_t = 4096)]
    pub(crate) max_tokens: u32,
    #[command(flatten)]
    pub(crate) policy: Policy,
}

impl Chat {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Chat {
            model,
            system,
            max_tokens,
            policy,
        } = self;
        let options = chat::ChatOptions {
            model,
            system,
            max_tokens,
        };
        let settings = cx.settings(policy);
        stores::with_opened(&StoreChoice::ContextQ, &settings, async |o| {
            chat::run(o, options).await
        })
        .await?;
        Ok(ExitCode::SUCCESS)
    }
}
