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
    #[command(flatten)]
    logs: contextq_server::logs::LogArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API; prints its URL (http://ADDR:PORT) on stdout once listening.
    Serve {
        /// sqlite:PATH (created and migrated) or postgres://USER:PASSWORD@HOST/DB. Required
        /// when --listen is beyond loopback; on loopback the default is sqlite:contextq.db in
        /// the working directory.
        #[arg(long, env = "CONTEXTQ_DATABASE_URL")]
        database_url: Option<String>,
        /// Address to listen on (port 0 picks a free port).
        /// (38200 is the TypeScript package's default port, kept so that its default URL works; it lies in
        /// Linux's ephemeral range 32768-60999, so pick another with --listen if it is taken.)
        #[arg(long, env = "CONTEXTQ_LISTEN", default_value = "127.0.0.1:38200")]
        listen: String,
        /// The audit key file (outside the database): every audit row and chain head gets a
        /// MAC. Create it with `admin init-audit-key`. Without it the log is hash-chained only.
        #[arg(long, env = "CONTEXTQ_AUDIT_KEY_FILE")]
        audit_key_file: Option<std::path::PathBuf>,
        /// Largest body of a one-context request (PUT, text edit, workspace create), in bytes.
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// Largest body of a bulk upsert, in bytes.
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BULK_BODY_BYTES)]
        max_bulk_body_bytes: usize,
        /// Request bodies in flight at once over all connections, in bytes (bounds memory).
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_BODY_BUDGET_BYTES)]
        body_budget_bytes: usize,
        /// Each tenant's share of the body budget, in bytes (one tenant's bodies in flight
        /// never hold more).
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_BODY_SHARE_BYTES)]
        body_share_bytes: usize,
        /// Slowest a request body may arrive after its first 5 s, in bytes a second (slower:
        /// 408); 0 for no minimum.
        #[arg(long, default_value_t = contextq_server::api::DEFAULT_MIN_BODY_RATE)]
        min_body_rate: u64,
        /// Serve read-only: every request that needs the write or admin scope is refused with
        /// 403, whatever its key.
        #[arg(long)]
        read_only: bool,
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
        /// On SIGTERM or Ctrl-C: seconds requests in flight may take to finish before their
        /// connections are closed anyway (no new connection is accepted meanwhile).
        #[arg(long, default_value_t = 30)]
        shutdown_grace_secs: u64,
        /// Versions kept of each external id (extension `history`; at least 1). A tenant keeps
        /// at most its plan's context cap times this many in all.
        #[arg(long, default_value_t = contextq_server::db::DEFAULT_VERSIONS_KEPT)]
        versions_kept: u32,
        /// Milliseconds one search may run before it is stopped and answered 400 "too broad"
        /// (extension `search`).
        #[arg(long, default_value_t = 2000)]
        search_budget_ms: u64,
        /// Database connections only searches use (reads and writes never wait for them).
        #[arg(long, default_value_t = 4)]
        search_connections: u32,
        /// Searches one tenant may have in flight; the next is answered 429 (at most
        /// --search-connections).
        #[arg(long, default_value_t = 2)]
        searches_per_tenant: u32,
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
        /// The audit key file, for a database whose audit log is keyed (see `serve`).
        #[arg(long, env = "CONTEXTQ_AUDIT_KEY_FILE", global = true)]
        audit_key_file: Option<std::path::PathBuf>,
        #[command(subcommand)]
        command: Admin,
    },
}

#[derive(Subcommand)]
enum Admin {
    /// Tenant + owner user + key + workspace; prints {"tenantId","apiKey","workspace"}.
    Bootstrap {
        /// The new tenant's name (unique; other commands take its id, printed as tenantId).
        #[arg(long = "tenant-name", visible_alias = "tenant")]
        tenant: String,
        /// The tenant's plan: free (100 contexts), pro (10,000) or unlimited.
        #[arg(long, default_value = "free")]
        plan: Plan,
        /// The first workspace's slug ([a-z0-9][a-z0-9-]{0,62}).
        #[arg(long, default_value = "default")]
        workspace: String,
        /// Comma-separated: read,write,admin.
        #[arg(long, default_value = "read,write,admin")]
        scopes: String,
    },
    /// Create a tenant; prints its id.
    CreateTenant {
        /// The tenant's name (unique).
        #[arg(long)]
        name: String,
        /// The tenant's plan: free (100 contexts), pro (10,000) or unlimited.
        #[arg(long, default_value = "free")]
        plan: Plan,
    },
    /// Mint a key for a tenant; prints {"keyId","apiKey"} (the key is shown only this once).
    CreateKey {
        /// The tenant's id (tenantId, as bootstrap and create-tenant print it).
        #[arg(long)]
        tenant_id: String,
        /// Comma-separated: read, write, admin.
        #[arg(long, default_value = "read,write")]
        scopes: String,
        /// The key stops working this long after its creation (e.g. 90m, 8h, 30d; a number
        /// and s, m, h or d). Checked on every request. Default: never expires.
        #[arg(long, value_parser = admin::text::parse_duration)]
        expires_in: Option<std::time::Duration>,
        /// Comma-separated workspace slugs: the key reads and writes only these (the server
        /// answers 404 for reads and 403 for writes elsewhere; the audit trail is refused).
        /// Each must exist (either case). Default: every workspace of the tenant.
        #[arg(long)]
        workspaces: Option<String>,
        /// A name for the key (1 to 64 characters), shown by list-keys and in the audit log.
        #[arg(long)]
        name: Option<String>,
    },
    /// List a tenant's keys: id, name, last four characters, scopes, workspaces, expiry, last
    /// use (never the key). No audit key needed.
    ListKeys {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the tenants: id, name, plan, contexts. No audit key needed.
    ListTenants {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List a tenant's workspaces. No audit key needed.
    ListWorkspaces {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key, given its id or the key itself, with the inspector sessions minted from
    /// it (audited).
    RevokeKey {
        /// The key's id (keyId) or the key itself (sk_live_...).
        key: String,
    },
    /// Make a key stop working after a while (e.g. 1h), with its sessions (audited).
    ExpireKey {
        /// The key's id (keyId) or the key itself (sk_live_...).
        key: String,
        /// How long from now (a number and s, m, h or d; 0s: now).
        #[arg(long = "in", value_parser = admin::text::parse_duration_or_zero)]
        expires_in: std::time::Duration,
    },
    /// Archive a workspace: read-only from now on (audited).
    ArchiveWorkspace {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// The workspace's slug.
        #[arg(long)]
        slug: String,
    },
    /// Delete an empty workspace (refused while it holds contexts; audited).
    DeleteWorkspace {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// The workspace's slug.
        #[arg(long)]
        slug: String,
    },
    /// Change a tenant's plan: free (100 contexts), pro (10,000) or unlimited (audited). A
    /// lower cap than it holds refuses new contexts only.
    SetPlan {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// The new plan.
        #[arg(long)]
        plan: Plan,
    },
    /// Create a workspace for a tenant.
    CreateWorkspace {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
        /// The workspace's slug: [a-z0-9][a-z0-9-]{0,62}, the first folder under /memories.
        #[arg(long)]
        slug: String,
        /// A display name (at most 256 bytes).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Delete a tenant and its data; refused when it has chained audit rows.
    DeleteTenant {
        /// The tenant's id (tenantId).
        #[arg(long)]
        tenant_id: String,
    },
    /// Count every tenant's contexts and versions and check them against the counts writes
    /// keep (for plan caps and version retention); set right and print (JSON) the tenants
    /// whose counts differed, which only an edit around the server makes. Scans the database.
    Recount,
    /// Verify the audit chains (every tenant's, or one): hashes, links, heads, and with the
    /// audit key every MAC; with --checkpoint also that nothing the checkpoint saw was removed,
    /// rolled back or re-written. Exits 1 and names the first bad row.
    VerifyAudit {
        /// Only this tenant's chain (its id, tenantId).
        #[arg(
            long = "tenant-id",
            visible_alias = "tenant",
            conflicts_with = "checkpoint"
        )]
        tenant: Option<String>,
        /// A checkpoint written by `audit-checkpoint` (needs the audit key).
        #[arg(long)]
        checkpoint: Option<std::path::PathBuf>,
        /// An empty log (no rows, no tenants) is what you expect: exit 0 for it. Without this
        /// flag an empty log exits 1, since it is more often the wrong database than a new one.
        #[arg(long)]
        allow_empty: bool,
    },
    /// Print a checkpoint of every audit chain head, signed with the audit key, as JSON; keep it
    /// outside the database (refused when the log does not verify).
    AuditCheckpoint,
    /// Recovery for a tenant's chain that a server without the audit key extended after the
    /// log was keyed (its head no longer verifies): if its hashes and links verify, key it again
    /// from its next row (the rows since it was keyed stay hash-chained only). Never for a
    /// chain you suspect was tampered with (docs/schema.md).
    RepairAuditKeying {
        /// The tenant whose chain to repair.
        #[arg(long)]
        tenant_id: String,
    },
    /// Copy the whole database to a new file (0600) while servers keep serving: tenants,
    /// workspaces (empty ones too), keys (names, scopes, workspaces; hashes only), every
    /// context and version, redaction marks, the audit log. SQLite: `VACUUM INTO` (a SQLite
    /// file); PostgreSQL: `pg_dump --format=custom` (needs PostgreSQL's client programs). Keep
    /// the audit key file with it: a restored log verifies with that key.
    Backup {
        /// The backup file to write (must not exist).
        #[arg(long)]
        out: std::path::PathBuf,
        /// Where pg_dump is, when not on PATH (PostgreSQL).
        #[arg(long)]
        pg_bin_dir: Option<std::path::PathBuf>,
    },
    /// Put a backup (of `admin backup`) into a new database at --database-url (a SQLite path
    /// where nothing is, or an empty PostgreSQL database), bring its schema up to date and
    /// verify its audit log (with --audit-key-file, the key it was keyed with). Exits 1 if the
    /// log does not verify.
    Restore {
        /// The backup file.
        file: std::path::PathBuf,
        /// Where pg_restore is, when not on PATH (PostgreSQL).
        #[arg(long)]
        pg_bin_dir: Option<std::path::PathBuf>,
    },
    /// Create the audit key file given by --audit-key-file (0600; an existing one is kept) and
    /// key the database's audit log with it from each chain's next row on. A log that already
    /// has rows is keyed only with --never-keyed: a log stripped of its keying looks the same.
    InitAuditKey {
        /// The log has rows and you know it was never keyed (its rows so far stay
        /// hash-chained only). Never pass it for a log that was keyed once: keying it again
        /// would bless whatever was rewritten while the keying was stripped.
        #[arg(long)]
        never_keyed: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    contextq_server::logs::init("warn,contextq=info", cli.logs.log_format);
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            contextq_server::logs::fatal(&format!("{e:#}"));
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
            body_share_bytes,
            min_body_rate,
            read_only,
            request_timeout_secs,
            header_read_timeout_secs,
            idle_timeout_secs,
            max_connections,
            shutdown_grace_secs,
            audit_key_file,
            versions_kept,
            search_budget_ms,
            search_connections,
            searches_per_tenant,
        } => {
            let secs = std::time::Duration::from_secs;
            let connections = contextq_server::ConnectionLimits::default()
                .header_read_timeout(secs(header_read_timeout_secs))
                .idle_timeout(secs(idle_timeout_secs))
                .max_connections(max_connections)
                .shutdown_grace(secs(shutdown_grace_secs))
                .for_this_process();
            let database_url = contextq_server::db::database_url_for(database_url, &listen)?;
            let options = db_options(audit_key_file.as_deref())?
                .versions_kept(versions_kept)
                .search(contextq_server::db::search::SearchLimits {
                    connections: search_connections,
                    per_tenant: searches_per_tenant,
                    budget: std::time::Duration::from_millis(search_budget_ms),
                });
            let db = Db::connect(&database_url, &options).await?;
            if db.audit_key().is_none() {
                tracing::warn!(
                    "the audit log is hash-chained but not keyed: anyone who can write the database can rewrite it undetected; see --audit-key-file"
                );
            }
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .map_err(|e| contextq_server::listen::bind_error(&listen, e))?;
            let addr = listener.local_addr()?;
            // A URL, as clients (CONTEXT_API_URL) and browsers take it.
            println!("http://{addr}");
            tracing::info!(%addr, database = %contextq_server::db::redact_url(&database_url), "listening");
            let config = ServerConfig::default()
                .max_body_bytes(max_body_bytes)
                .max_bulk_body_bytes(max_bulk_body_bytes)
                .body_budget_bytes(body_budget_bytes)
                .body_share_bytes(body_share_bytes)
                .min_body_rate(min_body_rate)
                .request_timeout(secs(request_timeout_secs))
                .connections(connections)
                .read_only(read_only);
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
            audit_key_file,
            command,
        } => {
            // A restore writes a new database: nothing may open (and so create) it before.
            if let Admin::Restore { file, pg_bin_dir } = &command {
                return restore(&database_url, audit_key_file.as_deref(), file, pg_bin_dir).await;
            }
            let init = matches!(command, Admin::InitAuditKey { .. });
            let never_keyed = matches!(command, Admin::InitAuditKey { never_keyed: true });
            let mut options = if init {
                DbOptions::default()
            } else {
                db_options(audit_key_file.as_deref())?
            };
            if init {
                let path = audit_key_file.as_deref().context(
                    "init-audit-key needs --audit-key-file PATH (or CONTEXTQ_AUDIT_KEY_FILE)",
                )?;
                let (key, created) = contextq_server::audit::AuditKey::load_or_create(path)?;
                eprintln!(
                    "{} audit key {} (fingerprint {})",
                    if created { "created" } else { "using" },
                    path.display(),
                    key.fingerprint()
                );
                options.audit_key = Some(key);
                options.adopt_audit_key = never_keyed;
            }
            // verify-audit opens a log that lost its keying, to report it.
            options.inspect_audit = matches!(command, Admin::VerifyAudit { .. });
            // Only these create a database; the others open an existing one (a typo in the URL
            // must not make a new, empty database that then "verifies").
            options.existing_only = !matches!(
                command,
                Admin::Bootstrap { .. } | Admin::CreateTenant { .. } | Admin::InitAuditKey { .. }
            );
            // Listings change nothing: they need no audit key.
            options.reads_only = matches!(
                command,
                Admin::ListKeys { .. }
                    | Admin::ListTenants { .. }
                    | Admin::ListWorkspaces { .. }
                    | Admin::Backup { .. }
            );
            let db = Db::connect(&database_url, &options).await?;
            if let Admin::Backup { out, pg_bin_dir } = &command {
                let tools = admin::backup::PgTools {
                    bin_dir: pg_bin_dir.clone(),
                };
                let contents = admin::backup::backup(&db, &database_url, out, &tools).await?;
                db.close().await;
                println!("{}", serde_json::to_string(&contents)?);
                eprintln!("backed up {} to {}", contents.line(), out.display());
                return Ok(ExitCode::SUCCESS);
            }
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
        Admin::CreateKey {
            tenant_id,
            scopes,
            expires_in,
            workspaces,
            name,
        } => {
            let scopes = Scope::parse_list(&scopes)?;
            let workspaces = workspaces.as_deref().map(admin::text::slug_list);
            let key = admin::create_key_named(
                db,
                &tenant_id,
                &scopes,
                expires_in,
                workspaces.as_deref(),
                name.as_deref(),
            )
            .await?;
            println!("{}", serde_json::to_string(&key)?);
        }
        Admin::ListKeys { tenant_id, json } => {
            let keys = admin::list_keys(db, &tenant_id).await?;
            print_listing(json, &keys, &admin::text::KEY_HEADER, admin::text::key_row)?;
        }
        Admin::ListTenants { json } => {
            let tenants = admin::list_tenants(db).await?;
            let header = ["TENANT", "NAME", "PLAN", "CONTEXTS", "CREATED"];
            print_listing(json, &tenants, &header, |t| {
                vec![
                    t.tenant_id.clone(),
                    t.name.clone(),
                    t.plan.clone(),
                    t.contexts.to_string(),
                    t.created_at.clone(),
                ]
            })?;
        }
        Admin::ListWorkspaces { tenant_id, json } => {
            let list = admin::list_workspaces(db, &tenant_id).await?;
            print_listing(json, &list, &["SLUG", "NAME", "STATE", "CREATED"], |w| {
                let state = if w.archived { "archived" } else { "active" };
                vec![
                    w.slug.clone(),
                    w.name.clone(),
                    state.into(),
                    w.created_at.clone(),
                ]
            })?;
        }
        Admin::ExpireKey { key, expires_in } => {
            if !admin::expire_key(db, &key, expires_in).await? {
                eprintln!("no active key matched");
                return Ok(ExitCode::FAILURE);
            }
            eprintln!("the key stops working in {}s", expires_in.as_secs());
        }
        Admin::ArchiveWorkspace { tenant_id, slug } => {
            let ws = admin::archive_workspace(db, &tenant_id, &slug).await?;
            println!("{}", serde_json::to_string(&ws)?);
        }
        Admin::DeleteWorkspace { tenant_id, slug } => {
            admin::delete_workspace(db, &tenant_id, &slug).await?;
            eprintln!("deleted workspace {slug}");
        }
        Admin::SetPlan { tenant_id, plan } => {
            admin::set_plan(db, &tenant_id, plan).await?;
            eprintln!("tenant {tenant_id} is on plan {}", plan.as_str());
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
        Admin::RepairAuditKeying { tenant_id } => {
            let r = admin::repair_audit_keying(db, &tenant_id).await?;
            eprintln!(
                "tenant {}: keyed again from row {}; rows {}..={} are hash-chained only from now on (they were written, or chained, without the key)",
                r.tenant_id,
                r.last + 1,
                r.first,
                r.last
            );
        }
        Admin::InitAuditKey { .. } => {
            eprintln!("the audit log is keyed: new rows and heads carry a MAC");
        }
        // Handled before a database is opened for the other commands (`run`).
        Admin::Backup { .. } | Admin::Restore { .. } => {}
        Admin::Recount => {
            let wrong = admin::recount(db).await?;
            for r in &wrong {
                println!("{}", serde_json::to_string(r)?);
            }
            eprintln!(
                "{} tenant(s) had counts that differed from their rows; set right",
                wrong.len()
            );
        }
        Admin::AuditCheckpoint => {
            let c = contextq_server::audit::checkpoint::take(db).await?;
            println!("{}", serde_json::to_string_pretty(&c)?);
        }
        Admin::VerifyAudit {
            tenant,
            checkpoint,
            allow_empty,
        } => {
            let v = match checkpoint {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    let c: contextq_server::audit::checkpoint::Checkpoint =
                        serde_json::from_str(&text).with_context(|| {
                            format!("{} is not an audit checkpoint", path.display())
                        })?;
                    contextq_server::audit::checkpoint::verify_against(db, &c).await?
                }
                None => admin::verify_audit(db, tenant.as_deref()).await?,
            };
            let macs = if v.macs_checked {
                format!("{} rows' MACs checked", v.keyed_rows)
            } else {
                "MACs not checked: no audit key given".to_string()
            };
            match &v.first_bad {
                None if v.rows == 0 && v.chains == 0 && !allow_empty => {
                    println!(
                        "audit log EMPTY: no rows and no tenants in this database (is --database-url the right one?); pass --allow-empty if an empty log is expected"
                    );
                    return Ok(ExitCode::FAILURE);
                }
                None => println!(
                    "audit chain ok: {} rows verified in {} chains ({macs})",
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

/// Database options with the audit key in `key_file`, if given.
/// `admin restore`: the backup into the new database, its schema brought up to date, its
/// audit log verified (exit 1 when it does not verify).
async fn restore(
    database_url: &str,
    audit_key_file: Option<&std::path::Path>,
    file: &std::path::Path,
    pg_bin_dir: &Option<std::path::PathBuf>,
) -> Result<ExitCode> {
    let tools = admin::backup::PgTools {
        bin_dir: pg_bin_dir.clone(),
    };
    admin::backup::restore(file, database_url, &tools).await?;
    let mut options = db_options(audit_key_file)?;
    options.inspect_audit = true;
    options.existing_only = true;
    let db = Db::connect(database_url, &options).await?;
    let v = admin::verify_audit(&db, None).await?;
    db.close().await;
    let contents = admin::backup::contents(database_url).await?;
    println!("{}", serde_json::to_string(&contents)?);
    eprintln!("restored {}", contents.line());
    let macs = if v.macs_checked {
        format!("{} rows' MACs checked", v.keyed_rows)
    } else {
        "MACs not checked: no audit key given (pass --audit-key-file with the key the backup's log was keyed with)".to_string()
    };
    match &v.first_bad {
        None => {
            eprintln!(
                "audit chain ok: {} rows verified in {} chains ({macs})",
                v.rows, v.chains
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(bad) => {
            eprintln!(
                "audit chain BROKEN at {bad} ({} rows verified before it): the restored database is not the one backed up",
                v.rows
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

fn db_options(key_file: Option<&std::path::Path>) -> Result<DbOptions> {
    let key = key_file
        .map(contextq_server::audit::AuditKey::load)
        .transpose()?;
    Ok(DbOptions::default().audit_key(key))
}

async fn shutdown_signal() {
    contextq_server::listen::stop_signal().await;
    tracing::info!("shutting down: finishing in-flight requests");
}

/// A listing printed: [`admin::text::listing`].
fn print_listing<T: serde::Serialize>(
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<()> {
    print!("{}", admin::text::listing(json, items, header, row)?);
    Ok(())
}
