//! `contextq-server`: serve the ContextQ API, or run an operator command.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use contextq_server::admin::TenantDeletion;
use contextq_server::{AppState, Db, DbOptions, ServerConfig, admin};
use contextq_server::{Plan, Scope};

#[derive(Parser)]
#[command(
    name = "contextq-server",
    version,
    about = "A ContextQ-compatible context store server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API; prints the bound address on stdout once listening.
    Serve {
        /// sqlite:PATH (created and migrated) or postgres://USER:PASSWORD@HOST/DB.
        #[arg(
            long,
            env = "CONTEXTQ_DATABASE_URL",
            default_value = "sqlite:contextq.db"
        )]
        database_url: String,
        /// Address to listen on (port 0 picks a free port).
        #[arg(long, env = "CONTEXTQ_LISTEN", default_value = "127.0.0.1:38200")]
        listen: String,
        /// Largest body of a one-context request (PUT, text edit, workspace create), in bytes.
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// Largest body of a bulk upsert, in bytes.
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BULK_BODY_BYTES)]
        max_bulk_body_bytes: usize,
        /// Request bodies in flight at once over all connections, in bytes (bounds memory).
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_BODY_BUDGET_BYTES)]
        body_budget_bytes: usize,
        /// Request timeout in seconds (reading the body and answering).
        #[arg(long, default_value_t = 30)]
        request_timeout_secs: u64,
        /// Seconds a client has to send a complete request head, counted from when the server
        /// waits for one (also how long an idle keep-alive connection is kept).
        #[arg(long, default_value_t = 20)]
        header_read_timeout_secs: u64,
        /// Seconds without a byte moving on a connection before it is closed.
        #[arg(long, default_value_t = 60)]
        idle_timeout_secs: u64,
        /// Most connections at once (lowered to fit the file descriptor limit).
        #[arg(long, default_value_t = 4096)]
        max_connections: usize,
    },
    /// Operator commands, run directly on the database.
    Admin {
        /// sqlite:PATH or postgres://USER:PASSWORD@HOST/DB.
        #[arg(
            long,
            env = "CONTEXTQ_DATABASE_URL",
            global = true,
            default_value = "sqlite:contextq.db"
        )]
        database_url: String,
        #[command(subcommand)]
        command: Admin,
    },
}

#[derive(Subcommand)]
enum Admin {
    /// Tenant + owner user + key + workspace; prints {"tenantId","apiKey","workspace"}.
    Bootstrap {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "free")]
        plan: Plan,
        #[arg(long, default_value = "default")]
        workspace: String,
        /// Comma-separated: read,write,admin.
        #[arg(long, default_value = "read,write,admin")]
        scopes: String,
    },
    /// Create a tenant; prints its id.
    CreateTenant {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "free")]
        plan: Plan,
    },
    /// Mint a key for a tenant; prints {"keyId","apiKey"} (the key is shown only this once).
    CreateKey {
        #[arg(long)]
        tenant_id: String,
        #[arg(long, default_value = "read,write")]
        scopes: String,
    },
    /// Revoke a key, given its id or the key itself.
    RevokeKey { key: String },
    /// Create a workspace for a tenant.
    CreateWorkspace {
        #[arg(long)]
        tenant_id: String,
        #[arg(long)]
        slug: String,
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Delete a tenant and its data; refused when it has chained audit rows.
    DeleteTenant {
        #[arg(long)]
        tenant_id: String,
    },
    /// Verify the audit hash chains (every tenant's, or one); exits 1 and names the first bad
    /// row if one was tampered with.
    VerifyAudit {
        /// Only this tenant's chain.
        #[arg(long)]
        tenant: Option<String>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: piped or redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Serve {
            database_url,
            listen,
            max_body_bytes,
            max_bulk_body_bytes,
            body_budget_bytes,
            request_timeout_secs,
            header_read_timeout_secs,
            idle_timeout_secs,
            max_connections,
        } => {
            let secs = std::time::Duration::from_secs;
            let connections = contextq_server::ConnectionLimits {
                header_read_timeout: secs(header_read_timeout_secs),
                idle_timeout: secs(idle_timeout_secs),
                max_connections,
            }
            .for_this_process();
            let db = Db::connect(&database_url, &DbOptions::default()).await?;
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            let addr = listener.local_addr()?;
            println!("{addr}");
            tracing::info!(%addr, database = %contextq_server::db::redact_url(&database_url), "listening");
            let config = ServerConfig {
                max_body_bytes,
                max_bulk_body_bytes,
                body_budget_bytes,
                request_timeout: secs(request_timeout_secs),
                connections,
            };
            contextq_server::serve(
                listener,
                AppState::new(db.clone(), config),
                shutdown_signal(),
            )
            .await?;
            db.close().await;
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        }
        Command::Admin {
            database_url,
            command,
        } => {
            let db = Db::connect(&database_url, &DbOptions::default()).await?;
            let code = admin_command(&db, command).await?;
            db.close().await;
            Ok(code)
        }
    }
}

async fn admin_command(db: &Db, command: Admin) -> Result<ExitCode> {
    match command {
        Admin::Bootstrap {
            tenant,
            plan,
            workspace,
            scopes,
        } => {
            let scopes = Scope::parse_list(&scopes)?;
            let b = admin::bootstrap(db, &tenant, plan, &workspace, &scopes).await?;
            println!("{}", b.to_json_line());
        }
        Admin::CreateTenant { name, plan } => {
            println!("{}", admin::create_tenant(db, &name, plan).await?);
        }
        Admin::CreateKey { tenant_id, scopes } => {
            let scopes = Scope::parse_list(&scopes)?;
            let key = admin::create_key(db, &tenant_id, None, &scopes).await?;
            println!("{}", serde_json::to_string(&key)?);
        }
        Admin::RevokeKey { key } => {
            if !admin::revoke_key(db, &key).await? {
                eprintln!("no active key matched");
                return Ok(ExitCode::FAILURE);
            }
            eprintln!("revoked");
        }
        Admin::CreateWorkspace {
            tenant_id,
            slug,
            name,
        } => {
            let ws = admin::create_workspace(db, &tenant_id, &slug, &name).await?;
            println!("{}", serde_json::to_string(&ws)?);
        }
        Admin::DeleteTenant { tenant_id } => match admin::delete_tenant(db, &tenant_id).await? {
            TenantDeletion::Deleted => eprintln!("deleted tenant {tenant_id}"),
            TenantDeletion::KeptForAudit { audit_rows } => {
                eprintln!(
                    "tenant {tenant_id} was not deleted: {} ({audit_rows} rows)",
                    admin::CHAINED_AUDIT_REFUSAL
                );
                return Ok(ExitCode::FAILURE);
            }
        },
        Admin::VerifyAudit { tenant } => {
            let v = admin::verify_audit(db, tenant.as_deref()).await?;
            match &v.first_bad {
                None => println!(
                    "audit chain ok: {} rows verified in {} chains",
                    v.rows, v.chains
                ),
                Some(bad) => {
                    println!(
                        "audit chain BROKEN at {bad} ({} rows verified before it)",
                        v.rows
                    );
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down: finishing in-flight requests");
}
