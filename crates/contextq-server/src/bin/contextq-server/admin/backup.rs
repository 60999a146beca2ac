//! `admin backup` and `admin restore`: the whole database copied while serving, and put back.

use std::process::ExitCode;

use anyhow::Result;
use contextq_server::{Db, admin};

/// Copy the whole database to a new file (0600) while servers keep serving: tenants,
/// workspaces (empty ones too), keys (names, scopes, workspaces; hashes only), every
/// context and version, redaction marks, the audit log. SQLite: `VACUUM INTO` (a SQLite
/// file); PostgreSQL: `pg_dump --format=custom` (needs PostgreSQL's client programs). Keep
/// the audit key file with it: a restored log verifies with that key.
#[derive(clap::Args)]
pub(crate) struct Backup {
    /// The backup file to write (must not exist).
    #[arg(long)]
    pub(crate) out: std::path::PathBuf,
    /// Where pg_dump is, when not on PATH (PostgreSQL).
    #[arg(long)]
    pub(crate) pg_bin_dir: Option<std::path::PathBuf>,
}

impl Backup {
    /// `db` opened for reading only; `database_url` is its URL (pg_dump connects to it).
    pub(crate) async fn run(self, db: &Db, database_url: &str) -> Result<ExitCode> {
        let tools = admin::backup::PgTools {
            bin_dir: self.pg_bin_dir,
        };
        let contents = admin::backup::backup(db, database_url, &self.out, &tools).await?;
        println!("{}", serde_json::to_string(&contents)?);
        eprintln!("backed up {} to {}", contents.line(), self.out.display());
        Ok(ExitCode::SUCCESS)
    }
}

/// Put a backup (of `admin backup`) into a new database at --database-url (a SQLite path
/// where nothing is, or an empty PostgreSQL database), bring its schema up to date and
/// verify its audit log (with --audit-key-file, the key it was keyed with). Exits 1 if the
/// log does not verify.
#[derive(clap::Args)]
pub(crate) struct Restore {
    /// The backup file.
    pub(crate) file: std::path::PathBuf,
    /// Where pg_restore is, when not on PATH (PostgreSQL).
    #[arg(long)]
    pub(crate) pg_bin_dir: Option<std::path::PathBuf>,
}

impl Restore {
    /// Writes a new database: run before anything opens (and so creates) it.
    pub(crate) async fn run(
        self,
        database_url: &str,
        audit_key_file: Option<&std::path::Path>,
    ) -> Result<ExitCode> {
        let tools = admin::backup::PgTools {
            bin_dir: self.pg_bin_dir,
        };
        admin::backup::restore(&self.file, database_url, &tools).await?;
        let mut options = crate::db_options(audit_key_file)?;
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
}
