//! `contextq-memory e2e`: the TypeScript package's live end-to-end check with a real Claude and a real ContextQ.
//!
//! 1. A throwaway tenant, owner user and API key (read+write+admin) are created directly in the
//!    server's database (SQLite or PostgreSQL), with contextq-server's admin functions: the
//!    TypeScript package's direct-INSERT pattern, without SQL of our own that a schema change could break.
//! 2. A workspace is created through the API.
//! 3. Turn 1 asks Claude to remember a fact under `/memories/<ws>/`; turn 2, a separate
//!    conversation, asks it to recall the fact.
//! 4. `GET /api/contexts` checks independently that the fact landed in ContextQ.
//! 5. Cleanup runs whatever happened, in the TypeScript package's order: the contexts and the workspace via the
//!    API, then the key row, the user row, and the tenant row only when no chained audit row
//!    forbids it (then it is left in place and the run says so).
//!
//! The resolved Anthropic base URL is logged on every run; without `ANTHROPIC_API_KEY` it says
//! why it cannot run and exits 0.

use crate::out::outln;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use std::sync::Arc;

use contextq_memory_tool::anthropic::{
    AnthropicConfig, MemoryRunnableTool, MessageParam, MessageRequest, MessagesClient, ToolRunner,
};
use contextq_memory_tool::contextq::{
    ContextQMemoryTool, ContextQMemoryToolOptions, ErrorCode, client::ListParams,
    contextq_memory_tool,
};
use contextq_server::admin::{self, TenantDeletion};
use contextq_server::{AppState, Db, DbOptions, Plan, RunningServer, Scope, ServerConfig};

/// Options of `e2e`.
pub struct E2eOptions {
    /// The server's database (default: a new temporary SQLite file).
    pub database_url: Option<String>,
    /// A running server on that database (default: one started in this process).
    pub contextq_url: Option<String>,
    /// Model id.
    pub model: String,
}

struct Throwaway {
    tenant_id: String,
    user_id: String,
    key_id: String,
    api_key: String,
}

/// The throwaway tenant, its owner user and its key (read, write, admin).
async fn create_throwaway(db: &Db, tag: &str) -> Result<Throwaway> {
    let tenant_id = admin::create_tenant(db, &format!("e2e-{tag}"), Plan::Free).await?;
    let user_id = admin::create_user(db, &tenant_id, &format!("e2e-{tag}@example.invalid")).await?;
    let key = admin::create_key(
        db,
        &tenant_id,
        Some(&user_id),
        &[Scope::Read, Scope::Write, Scope::Admin],
    )
    .await?;
    Ok(Throwaway {
        tenant_id,
        user_id,
        key_id: key.key_id,
        api_key: key.api_key,
    })
}

/// Runs the e2e; `Ok(true)` when the fact was saved, recalled and verified.
pub async fn run(options: E2eOptions) -> Result<bool> {
    let anthropic = AnthropicConfig::from_env();
    let base = anthropic
        .as_ref()
        .map(|c| c.base_url.clone())
        .unwrap_or_else(|_| {
            std::env::var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|_| contextq_memory_tool::anthropic::DEFAULT_BASE_URL.into())
        });
    outln!("anthropic base url: {base}");
    let Ok(anthropic) = anthropic else {
        outln!(
            "ANTHROPIC_API_KEY is not set: the live e2e needs a real Claude API key, so nothing was run (not a failure)."
        );
        return Ok(true);
    };

    let tmp = tempfile::tempdir()?;
    let database_url = options.database_url.unwrap_or_else(|| {
        format!(
            "sqlite:{}",
            PathBuf::from(tmp.path()).join("e2e.db").display()
        )
    });
    let db = Db::connect(&database_url, &DbOptions::default())
        .await
        .with_context(|| {
            format!(
                "cannot open {}",
                contextq_server::db::redact_url(&database_url)
            )
        })?;
    let (url, server) = match options.contextq_url {
        Some(u) => (u, None),
        None => {
            let server = RunningServer::bind(
                "127.0.0.1:0",
                AppState::new(db.clone(), ServerConfig::default()),
            )
            .await?;
            (server.url().to_string(), Some(server))
        }
    };
    outln!("contextq: {url}");
    let tag = format!("{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff);
    let t = create_throwaway(&db, &tag).await?;
    outln!(
        "throwaway tenant {} with key {} (read, write, admin)",
        t.tenant_id,
        contextq_api::mask_secret(&t.api_key)
    );
    let workspace = format!("e2e-{tag}");
    let fact = format!("the e2e code word is {}", &tag[..8]);
    let tool = Arc::new(contextq_memory_tool(
        ContextQMemoryToolOptions::new(t.api_key.clone()).base_url(url.clone()),
    )?);

    let outcome = conversation(&anthropic, &options.model, &tool, &workspace, &fact).await;
    let cleanup = cleanup(&db, &tool, &t, &workspace).await;
    if let Some(server) = server {
        server.stop().await?;
    }
    db.close().await;
    let verified = match outcome {
        Ok(v) => v,
        Err(e) => {
            outln!("FAILED: {e:#}");
            false
        }
    };
    if let Err(e) = cleanup {
        outln!("cleanup failed: {e:#}");
        return Ok(false);
    }
    Ok(verified)
}

async fn conversation(
    anthropic: &AnthropicConfig,
    model: &str,
    tool: &Arc<ContextQMemoryTool>,
    workspace: &str,
    fact: &str,
) -> Result<bool> {
    let client = MessagesClient::new(anthropic.clone())?;
    tool.store()
        .client()
        .create_workspace(workspace, "e2e")
        .await
        .context("creating the workspace through the API")?;
    outln!("workspace {workspace} created through the API");
    let turns = [
        format!(
            "Remember this fact under /memories/{workspace}/ with your memory tool, in a file there. FACT: {fact}"
        ),
        format!(
            "What fact did I ask you to remember under /memories/{workspace}/? Check your memory to answer."
        ),
    ];
    let mut last_text = String::new();
    for (i, prompt) in turns.iter().enumerate() {
        outln!("\nturn {} (a new conversation): {prompt}", i + 1);
        let mut request = MessageRequest::new(model, 2048);
        request.messages.push(MessageParam::user(prompt.clone()));
        let mut runner = ToolRunner::new(client.clone(), request)
            .tool(MemoryRunnableTool::from_arc(tool.clone()))
            .on_tool_call(|c| outln!("{}", crate::chat::describe_call(c)));
        let last = runner.run().await.context("the conversation failed")?;
        last_text = last.text();
        outln!("claude: {last_text}");
    }
    let rows = tool
        .store()
        .client()
        .list_all(&ListParams {
            workspace: Some(workspace.to_string()),
            tag: Some("mem-tool".into()),
            ..Default::default()
        })
        .await?
        .contexts;
    let mut landed = false;
    for row in &rows {
        if let Some(f) = tool.store().client().get(&row.id).await?
            && f.context.content.contains(fact)
        {
            outln!(
                "verified with GET /api/contexts: {} (version {}) holds the fact",
                row.external_id,
                row.version
            );
            landed = true;
        }
    }
    if !landed {
        bail!(
            "no context in workspace {workspace} holds the fact ({} rows)",
            rows.len()
        );
    }
    let code = fact.rsplit(' ').next().unwrap_or(fact);
    let recalled = last_text.contains(code);
    outln!(
        "{}",
        if recalled {
            "recall: Claude's answer contains the fact"
        } else {
            "recall: Claude's answer does NOT contain the fact"
        }
    );
    Ok(recalled)
}

async fn cleanup(db: &Db, tool: &ContextQMemoryTool, t: &Throwaway, workspace: &str) -> Result<()> {
    outln!("\ncleanup");
    let client = tool.store().client();
    let rows = client
        .list_all(&ListParams {
            workspace: Some(workspace.to_string()),
            ..Default::default()
        })
        .await
        .unwrap_or_default()
        .contexts;
    for row in &rows {
        client.delete(&row.id, None).await?;
    }
    outln!("  deleted {} context(s) via the API", rows.len());
    match client.delete_workspace(workspace).await {
        Ok(()) => outln!("  deleted workspace {workspace} via the API"),
        Err(e) if e.contextq_code() == Some(ErrorCode::NotFound) => {}
        Err(e) => return Err(e.into()),
    }
    admin::delete_key(db, &t.key_id).await?;
    outln!("  deleted the API key row");
    admin::delete_user(db, &t.user_id).await?;
    outln!("  deleted the user row");
    match admin::delete_tenant(db, &t.tenant_id).await? {
        TenantDeletion::Deleted => outln!("  deleted the tenant row"),
        TenantDeletion::KeptForAudit { audit_rows } => outln!(
            "  left tenant row {} in place: it has {audit_rows} chained audit rows (its own hash chain), which an audit trail keeps: deleting them would break that chain's verification",
            t.tenant_id
        ),
    }
    Ok(())
}
