//! `contextq-server admin ...`: operator commands, run directly on the database. Each command
//! is a type of its family's module (`tenants`, `keys`, `workspaces`, `audit`, `backup`) with
//! its arguments and its `run`; this module opens the database the way the command needs.

mod audit;
mod backup;
mod keys;
mod tenants;
mod workspaces;

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Subcommand;
use contextq_server::{Db, DbOptions, admin};

#[derive(clap::Args)]
pub(crate) struct AdminArgs {
    /// sqlite:PATH or postgres://USER:PASSWORD@HOST/DB.
    #[arg(
        long,
        env = "CONTEXTQ_DATABASE_URL",
        global = true,
        default_value = "sqlite:contextq.db"
    )]
    pub(crate) database_url: String,
    /// The audit key file, for a database whose audit log is keyed (see `serve`).
    #[arg(long, env = "CONTEXTQ_AUDIT_KEY_FILE", global = true)]
    pub(crate) audit_key_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Admin,
}

#[derive(Subcommand)]
pub(crate) enum Admin {
    /// Tenant + owner user + key + workspace; prints {"tenantId","apiKey","workspace"}.
    Bootstrap(tenants::Bootstrap),
    /// Create a tenant; prints its id.
    CreateTenant(tenants::CreateTenant),
    /// Mint a key for a tenant; prints {"keyId","apiKey"} (the key is shown only this once).
    CreateKey(keys::CreateKey),
    /// List a tenant's keys: id, name, last four characters, scopes, workspaces, expiry, last
    /// use (never the key). No audit key needed.
    ListKeys(keys::ListKeys),
    /// List the tenants: id, name, plan, contexts. No audit key needed.
    ListTenants(tenants::ListTenants),
    /// List a tenant's workspaces. No audit key needed.
    ListWorkspaces(workspaces::ListWorkspaces),
    /// Revoke a key, given its id or the key itself, with the inspector sessions minted from
    /// it (audited).
    RevokeKey(keys::RevokeKey),
    /// Make a key stop working after a while (e.g. 1h), with its sessions (audited).
    ExpireKey(keys::ExpireKey),
    /// Archive a workspace: read-only from now on (audited).
    ArchiveWorkspace(workspaces::ArchiveWorkspace),
    /// Delete an empty workspace (refused while it holds contexts; audited).
    DeleteWorkspace(workspaces::DeleteWorkspace),
    /// Change a tenant's plan: free (100 contexts), pro (10,000) or unlimited (audited). A
    /// lower cap than it holds refuses new contexts only.
    SetPlan(tenants::SetPlan),
    /// Create a workspace for a tenant.
    CreateWorkspace(workspaces::CreateWorkspace),
    /// Delete a tenant and its data; refused when it has chained audit rows.
    DeleteTenant(tenants::DeleteTenant),
    /// Count every tenant's contexts and versions and check them against the counts writes
    /// keep (for plan caps and version retention); set right and print (JSON) the tenants
    /// whose counts differed, which only an edit around the server makes. Scans the database.
    Recount(tenants::Recount),
    /// Verify the audit chains (every tenant's, or one): hashes, links, heads, and with the
    /// audit key every MAC; with --checkpoint also that nothing the checkpoint saw was removed,
    /// rolled back or re-written. Exits 1 and names the first bad row.
    VerifyAudit(audit::VerifyAudit),
    /// Print a checkpoint of every audit chain head, signed with the audit key, as JSON; keep it
    /// outside the database (refused when the log does not verify).
    AuditCheckpoint(audit::AuditCheckpoint),
    /// Recovery for a tenant's chain that a server without the audit key extended after the
    /// log was keyed (its head no longer verifies): if its hashes and links verify, key it again
    /// from its next row (the rows since it was keyed stay hash-chained only). Never for a
    /// chain you suspect was tampered with (docs/schema.md).
    RepairAuditKeying(audit::RepairAuditKeying),
    /// Copy the whole database to a new file (0600) while servers keep serving: tenants,
    /// workspaces (empty ones too), keys (names, scopes, workspaces; hashes only), every
    /// context and version, redaction marks, the audit log. SQLite: `VACUUM INTO` (a SQLite
    /// file); PostgreSQL: `pg_dump --format=custom` (needs PostgreSQL's client programs). Keep
    /// the audit key file with it: a restored log verifies with that key.
    Backup(backup::Backup),
    /// Put a backup (of `admin backup`) into a new database at --database-url (a SQLite path
    /// where nothing is, or an empty PostgreSQL database), bring its schema up to date and
    /// verify its audit log (with --audit-key-file, the key it was keyed with). Exits 1 if the
    /// log does not verify.
    Restore(backup::Restore),
    /// Create the audit key file given by --audit-key-file (0600; an existing one is kept) and
    /// key the database's audit log with it from each chain's next row on. A log that already
    /// has rows is keyed only with --never-keyed: a log stripped of its keying looks the same.
    InitAuditKey(audit::InitAuditKey),
}

pub(crate) async fn run(args: AdminArgs) -> Result<ExitCode> {
    let AdminArgs {
        database_url,
        audit_key_file,
        command,
    } = args;
    // A restore writes a new database: nothing may open (and so create) it before.
    if let Admin::Restore(restore) = command {
        return restore.run(&database_url, audit_key_file.as_deref()).await;
    }
    let init = matches!(command, Admin::InitAuditKey(_));
    let mut options = if init {
        DbOptions::default()
    } else {
        crate::db_options(audit_key_file.as_deref())?
    };
    if let Admin::InitAuditKey(c) = &command {
        let path = audit_key_file
            .as_deref()
            .context("init-audit-key needs --audit-key-file PATH (or CONTEXTQ_AUDIT_KEY_FILE)")?;
        let (key, created) = contextq_server::audit::AuditKey::load_or_create(path)?;
        eprintln!(
            "{} audit key {} (fingerprint {})",
            if created { "created" } else { "using" },
            path.display(),
            key.fingerprint()
        );
        options.audit_key = Some(key);
        options.adopt_audit_key = c.never_keyed;
    }
    // verify-audit opens a log that lost its keying, to report it.
    options.inspect_audit = matches!(command, Admin::VerifyAudit(_));
    // Only these create a database; the others open an existing one (a typo in the URL
    // must not make a new, empty database that then "verifies").
    options.existing_only = !matches!(
        command,
        Admin::Bootstrap(_) | Admin::CreateTenant(_) | Admin::InitAuditKey(_)
    );
    // Listings change nothing: they need no audit key.
    options.reads_only = matches!(
        command,
        Admin::ListKeys(_) | Admin::ListTenants(_) | Admin::ListWorkspaces(_) | Admin::Backup(_)
    );
    let db = Db::connect(&database_url, &options).await?;
    let code = match command {
        Admin::Backup(c) => c.run(&db, &database_url).await,
        Admin::Restore(_) => unreachable!("a restore runs before the database is opened"),
        Admin::Bootstrap(c) => c.run(&db).await,
        Admin::CreateTenant(c) => c.run(&db).await,
        Admin::CreateKey(c) => c.run(&db).await,
        Admin::ListKeys(c) => c.run(&db).await,
        Admin::ListTenants(c) => c.run(&db).await,
        Admin::ListWorkspaces(c) => c.run(&db).await,
        Admin::RevokeKey(c) => c.run(&db).await,
        Admin::ExpireKey(c) => c.run(&db).await,
        Admin::ArchiveWorkspace(c) => c.run(&db).await,
        Admin::DeleteWorkspace(c) => c.run(&db).await,
        Admin::SetPlan(c) => c.run(&db).await,
        Admin::CreateWorkspace(c) => c.run(&db).await,
        Admin::DeleteTenant(c) => c.run(&db).await,
        Admin::Recount(c) => c.run(&db).await,
        Admin::VerifyAudit(c) => c.run(&db).await,
        Admin::AuditCheckpoint(c) => c.run(&db).await,
        Admin::RepairAuditKeying(c) => c.run(&db).await,
        Admin::InitAuditKey(c) => c.run(&db).await,
    };
    db.close().await;
    code
}

/// A listing printed: [`admin::text::listing`].
pub(crate) fn print_listing<T: serde::Serialize>(
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<()> {
    print!("{}", admin::text::listing(json, items, header, row)?);
    Ok(())
}
