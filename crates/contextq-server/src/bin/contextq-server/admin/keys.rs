//! `admin` commands on API keys: create, list, revoke, expire.

use std::process::ExitCode;

use anyhow::Result;

use super::print_listing;
use contextq_server::{Db, Scope, admin};

/// Mint a key for a tenant; prints {"keyId","apiKey"} (the key is shown only this once).
#[derive(clap::Args)]
pub(crate) struct CreateKey {
    /// The tenant's id (tenantId, as bootstrap and create-tenant print it).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// Comma-separated: read, write, admin.
    #[arg(long, default_value = "read,write")]
    pub(crate) scopes: String,
    /// The key stops working this long after its creation (e.g. 90m, 8h, 30d; a number
    /// and s, m, h or d). Checked on every request. Default: never expires.
    #[arg(long, value_parser = admin::text::parse_duration)]
    pub(crate) expires_in: Option<std::time::Duration>,
    /// Comma-separated workspace slugs: the key reads and writes only these (the server
    /// answers 404 for reads and 403 for writes elsewhere; the audit trail is refused).
    /// Each must exist (either case). Default: every workspace of the tenant.
    #[arg(long)]
    pub(crate) workspaces: Option<String>,
    /// A name for the key (1 to 64 characters), shown by list-keys and in the audit log.
    #[arg(long)]
    pub(crate) name: Option<String>,
}

impl CreateKey {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let CreateKey {
            tenant_id,
            scopes,
            expires_in,
            workspaces,
            name,
        } = self;
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
        Ok(ExitCode::SUCCESS)
    }
}

/// List a tenant's keys: id, name, last four characters, scopes, workspaces, expiry, last
/// use (never the key). No audit key needed.
#[derive(clap::Args)]
pub(crate) struct ListKeys {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ListKeys {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let ListKeys { tenant_id, json } = self;
        let keys = admin::list_keys(db, &tenant_id).await?;
        print_listing(json, &keys, &admin::text::KEY_HEADER, admin::text::key_row)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Revoke a key, given its id or the key itself, with the inspector sessions minted from
/// it (audited).
#[derive(clap::Args)]
pub(crate) struct RevokeKey {
    /// The key's id (keyId) or the key itself (sk_live_...).
    pub(crate) key: String,
}

impl RevokeKey {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let RevokeKey { key } = self;
        if !admin::revoke_key(db, &key).await? {
            eprintln!("no active key matched");
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("revoked");
        Ok(ExitCode::SUCCESS)
    }
}

/// Make a key stop working after a while (e.g. 1h), with its sessions (audited).
#[derive(clap::Args)]
pub(crate) struct ExpireKey {
    /// The key's id (keyId) or the key itself (sk_live_...).
    pub(crate) key: String,
    /// How long from now (a number and s, m, h or d; 0s: now).
    #[arg(long = "in", value_parser = admin::text::parse_duration_or_zero)]
    pub(crate) expires_in: std::time::Duration,
}

impl ExpireKey {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let ExpireKey { key, expires_in } = self;
        if !admin::expire_key(db, &key, expires_in).await? {
            eprintln!("no active key matched");
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("the key stops working in {}s", expires_in.as_secs());
        Ok(ExitCode::SUCCESS)
    }
}
