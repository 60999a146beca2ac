//! `admin` commands on the audit log: its key, its verification, checkpoints, repair.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use contextq_server::{Db, admin};

/// Verify the audit chains (every tenant's, or one): hashes, links, heads, and with the
/// audit key every MAC; with --checkpoint also that nothing the checkpoint saw was removed,
/// rolled back or re-written. Exits 1 and names the first bad row.
#[derive(clap::Args)]
pub(crate) struct VerifyAudit {
    /// Only this tenant's chain (its id, tenantId).
    #[arg(
        long = "tenant-id",
        visible_alias = "tenant",
        conflicts_with = "checkpoint"
    )]
    pub(crate) tenant: Option<String>,
    /// A checkpoint written by `audit-checkpoint` (needs the audit key).
    #[arg(long)]
    pub(crate) checkpoint: Option<std::path::PathBuf>,
    /// An empty log (no rows, no tenants) is what you expect: exit 0 for it. Without this
    /// flag an empty log exits 1, since it is more often the wrong database than a new one.
    #[arg(long)]
    pub(crate) allow_empty: bool,
}

impl VerifyAudit {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let VerifyAudit {
            tenant,
            checkpoint,
            allow_empty,
        } = self;
        let v = match checkpoint {
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let c: contextq_server::audit::checkpoint::Checkpoint = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not an audit checkpoint", path.display()))?;
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
        Ok(ExitCode::SUCCESS)
    }
}

/// Print a checkpoint of every audit chain head, signed with the audit key, as JSON; keep it
/// outside the database (refused when the log does not verify).
#[derive(clap::Args)]
pub(crate) struct AuditCheckpoint {}

impl AuditCheckpoint {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let c = contextq_server::audit::checkpoint::take(db).await?;
        println!("{}", serde_json::to_string_pretty(&c)?);
        Ok(ExitCode::SUCCESS)
    }
}

/// Recovery for a tenant's chain that a server without the audit key extended after the
/// log was keyed (its head no longer verifies): if its hashes and links verify, key it again
/// from its next row (the rows since it was keyed stay hash-chained only). Never for a
/// chain you suspect was tampered with (docs/schema.md).
#[derive(clap::Args)]
pub(crate) struct RepairAuditKeying {
    /// The tenant whose chain to repair.
    #[arg(long)]
    pub(crate) tenant_id: String,
}

impl RepairAuditKeying {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let RepairAuditKeying { tenant_id } = self;
        let r = admin::repair_audit_keying(db, &tenant_id).await?;
        eprintln!(
            "tenant {}: keyed again from row {}; rows {}..={} are hash-chained only from now on (they were written, or chained, without the key)",
            r.tenant_id,
            r.last + 1,
            r.first,
            r.last
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// Create the audit key file given by --audit-key-file (0600; an existing one is kept) and
/// key the database's audit log with it from each chain's next row on. A log that already
/// has rows is keyed only with --never-keyed: a log stripped of its keying looks the same.
#[derive(clap::Args)]
pub(crate) struct InitAuditKey {
    /// The log has rows and you know it was never keyed (its rows so far stay
    /// hash-chained only). Never pass it for a log that was keyed once: keying it again
    /// would bless whatever was rewritten while the keying was stripped.
    #[arg(long)]
    pub(crate) never_keyed: bool,
}

impl InitAuditKey {
    /// The key was loaded (or made) and adopted as the database opened (`super::run`).
    pub(crate) async fn run(self, _db: &Db) -> Result<ExitCode> {
        eprintln!("the audit log is keyed: new rows and heads carry a MAC");
        Ok(ExitCode::SUCCESS)
    }
}
