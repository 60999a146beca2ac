//! `contextq-memory search`: its arguments; the query and its answer are `crate::search`.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::search;
use crate::stores::{self, StoreChoice};

/// Search the memory files for words (the memory_search tool's query language: words in any
/// order and case, "quoted phrases", prefix*; identifiers such as OPS-4471 as written).
#[derive(clap::Args)]
pub(crate) struct Search {
    /// What to look for.
    pub(crate) query: String,
    /// A directory under /memories to search in.
    #[arg(long, default_value = "/memories")]
    pub(crate) path: String,
    /// Most files shown.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub(crate) limit: u64,
    /// One JSON object per file per line: path, score, lines ([{line, text, marks}]).
    #[arg(long)]
    pub(crate) json: bool,
    /// contextq (default), memory, local:DIR, or memory-stores:STORE_ID (docs/memory-stores.md).
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
}

impl Search {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Search {
            query,
            path,
            limit,
            json,
            store,
        } = self;
        stores::with_opened(&store, &cx.settings(Policy::default()), async |o| {
            search::command(o, &query, &path, limit as usize, json).await
        })
        .await
    }
}
