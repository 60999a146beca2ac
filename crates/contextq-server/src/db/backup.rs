//! `admin backup` and `admin restore`: the whole database (tenants, workspaces, empty ones too,
//! keys with their names, scopes and workspaces (hashes only), every context, every version,
//! redaction marks, the audit log and its heads), copied while the server keeps serving, and
//! put back into a new database that `verify-audit` then checks.
//!
//! Each database's own consistent copy, not a format of ours: SQLite's `VACUUM INTO` (one read
//! transaction: a snapshot, taken beside running writers) gives a SQLite file; PostgreSQL's
//! `pg_dump --format=custom` (one repeatable-read snapshot) gives its archive, and
//! `pg_restore` puts it back. A backup file is restored into the same kind of database, of
//! this schema version or an older one (the server's migrations bring it up to date).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::db::{Backend, Db};
use crate::error::{Error, Result};

/// What a backup holds, as counted in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Contents {
    /// Tenants.
    pub tenants: i64,
    /// Workspaces (archived and empty ones included).
    pub workspaces: i64,
    /// API keys (their hashes; revoked and inspector sessions included).
    pub keys: i64,
    /// Contexts (files).
    pub contexts: i64,
    /// Kept versions.
    pub versions: i64,
    /// Of which redacted.
    pub redacted: i64,
    /// Audit rows.
    pub audit_rows: i64,
}

impl Contents {
    /// One line for the operator.
    pub fn line(&self) -> String {
        format!(
            "{} tenants, {} workspaces, {} keys, {} contexts, {} versions ({} redacted), {} audit rows",
            self.tenants,
            self.workspaces,
            self.keys,
            self.contexts,
            self.versions,
            self.redacted,
            self.audit_rows
        )
    }
}

/// The counts of [`Contents`], one statement each, on any executor of a database `$db`.
macro_rules! count_contents {
    ($db:ty, $exec:expr) => {{
        let mut counts = [0i64; 7];
        for (n, sql) in [
            "SELECT COUNT(*) FROM tenants",
            "SELECT COUNT(*) FROM workspaces",
            "SELECT COUNT(*) FROM api_keys",
            "SELECT COUNT(*) FROM contexts",
            "SELECT COUNT(*) FROM context_versions",
            "SELECT COUNT(*) FROM context_versions WHERE redacted_at IS NOT NULL",
            "SELECT COUNT(*) FROM activity_logs",
        ]
        .into_iter()
        .enumerate()
        {
            let row: (i64,) = sqlx::query_as::<$db, (i64,)>(sql)
                .fetch_one(&mut *$exec)
                .await?;
            counts[n] = row.0;
        }
        Contents {
            tenants: counts[0],
            workspaces: counts[1],
            keys: counts[2],
            contexts: counts[3],
            versions: counts[4],
            redacted: counts[5],
            audit_rows: counts[6],
        }
    }};
}

/// Counts what the database at `url` holds (a restored one, or a SQLite backup file).
pub async fn contents(url: &str) -> Result<Contents> {
    use sqlx::Connection as _;
    let connect_error = |e| Error::Connect(crate::db::redact_url(url), e);
    Ok(match Backend::from_url(url)? {
        Backend::Sqlite => {
            let path = sqlite_path(url);
            let url = format!("sqlite://{}?mode=ro", path.display());
            let mut conn = sqlx::sqlite::SqliteConnection::connect(&url)
                .await
                .map_err(connect_error)?;
            let c = count_contents!(sqlx::Sqlite, &mut conn);
            let _ = conn.close().await;
            c
        }
        Backend::Postgres => {
            let mut conn = sqlx::postgres::PgConnection::connect(url)
                .await
                .map_err(connect_error)?;
            let c = count_contents!(sqlx::Postgres, &mut conn);
            let _ = conn.close().await;
            c
        }
    })
}

/// Where the PostgreSQL client programs are (`pg_dump`, `pg_restore`): on `PATH` unless given.
#[derive(Debug, Clone, Default)]
pub struct PgTools {
    /// The directory holding `pg_dump` and `pg_restore` (`None`: found on `PATH`).
    pub bin_dir: Option<PathBuf>,
}

impl PgTools {
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }

    /// Runs `name` with `args`, the password (if the URL has one) in `PGPASSWORD` rather than
    /// on the command line, where other users' `ps` would see it.
    fn run(&self, name: &str, args: &[&str], password: Option<&str>) -> Result<()> {
        let mut command = Command::new(self.program(name));
        command.args(args);
        if let Some(p) = password {
            command.env("PGPASSWORD", p);
        }
        let out = command.output().map_err(|e| {
            Error::Config(format!(
                "cannot run {name} ({e}): install PostgreSQL's client programs (the package postgresql-client), or pass --pg-bin-dir"
            ))
        })?;
        if out.status.success() {
            Ok(())
        } else {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = match password {
                Some(p) if !p.is_empty() => said.replace(p, "***"),
                _ => said.to_string(),
            };
            Err(Error::Config(format!("{name} failed: {}", said.trim())))
        }
    }
}

/// `url` without its password, and the password (percent-decoded), for the PostgreSQL client
/// programs.
fn split_password(url: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_string(), None);
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return (url.to_string(), None);
    };
    match userinfo.split_once(':') {
        Some((user, password)) => {
            let password = percent_encoding::percent_decode_str(password)
                .decode_utf8_lossy()
                .to_string();
            (format!("{scheme}://{user}@{host}{tail}"), Some(password))
        }
        None => (url.to_string(), None),
    }
}

/// The file of a `sqlite:PATH` URL.
fn sqlite_path(url: &str) -> PathBuf {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    PathBuf::from(rest.split_once('?').map_or(rest, |(p, _)| p))
}

/// A temporary sibling of `out` (created by the backup, renamed over `out` when complete, so
/// that `out` is never a half-written backup).
fn partial(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    out.with_file_name(name)
}

/// Copies the database of `db` (reached at `url`) to `out` (a new file, 0600), while it keeps
/// serving; what the copy holds.
pub async fn backup(db: &Db, url: &str, out: &Path, tools: &PgTools) -> Result<Contents> {
    if out.exists() {
        return Err(Error::Config(format!(
            "{} exists: a backup is written to a new file (choose another name)",
            out.display()
        )));
    }
    let tmp = partial(out);
    let _ = std::fs::remove_file(&tmp);
    let made = async {
        let counted = match db.backend() {
            Backend::Sqlite => {
                // Made private first: VACUUM INTO writes into an empty file that is there.
                crate::private_file::create_new(&tmp)?;
                let target = tmp.to_string_lossy().to_string();
                sqlx::query("VACUUM INTO $1")
                    .bind(target)
                    .execute(db.pool())
                    .await?;
                std::fs::File::open(&tmp)?.sync_all()?;
                // Counted in the copy itself (the live database moves on).
                contents(&format!("sqlite:{}", tmp.display())).await?
            }
            Backend::Postgres => {
                use sqlx::Connection as _;
                crate::private_file::create_new(&tmp)?;
                // One snapshot for the dump and the counts: a transaction that exports it,
                // held open while pg_dump reads it (`--snapshot`).
                let mut conn = sqlx::postgres::PgConnection::connect(url)
                    .await
                    .map_err(|e| Error::Connect(crate::db::redact_url(url), e))?;
                sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .execute(&mut conn)
                    .await?;
                let (snapshot,): (String,) = sqlx::query_as("SELECT pg_export_snapshot()")
                    .fetch_one(&mut conn)
                    .await?;
                let counted = count_contents!(sqlx::Postgres, &mut conn);
                let (plain, password) = split_password(url);
                let target = tmp.to_string_lossy().to_string();
                let dumped = tools.run(
                    "pg_dump",
                    &[
                        "--format=custom",
                        "--no-owner",
                        "--no-privileges",
                        "--snapshot",
                        &snapshot,
                        "--file",
                        &target,
                        "--dbname",
                        &plain,
                    ],
                    password.as_deref(),
                );
                let _ = sqlx::query("COMMIT").execute(&mut conn).await;
                let _ = conn.close().await;
                dumped?;
                std::fs::File::open(&tmp)?.sync_all()?;
                counted
            }
        };
        std::fs::rename(&tmp, out)?;
        Ok::<Contents, Error>(counted)
    }
    .await;
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made
}

/// The kind of database a backup file is a copy of.
pub fn kind_of(file: &Path) -> Result<Backend> {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    let n = std::fs::File::open(file)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| Error::Config(format!("cannot read {}: {e}", file.display())))?;
    let head = &head[..n];
    if head.starts_with(b"SQLite format 3\0") {
        Ok(Backend::Sqlite)
    } else if head.starts_with(b"PGDMP") {
        Ok(Backend::Postgres)
    } else {
        Err(Error::Config(format!(
            "{} is not a backup of `admin backup` (neither a SQLite database nor a pg_dump archive)",
            file.display()
        )))
    }
}

/// Puts the backup `file` into the new, empty database at `url` (a SQLite path where nothing
/// is; a PostgreSQL database without tables). Opening it afterwards ([`Db::connect`]) brings an
/// older schema up to date; `verify-audit` checks it.
pub async fn restore(file: &Path, url: &str, tools: &PgTools) -> Result<()> {
    let kind = kind_of(file)?;
    let target = Backend::from_url(url)?;
    if kind != target {
        return Err(Error::Config(format!(
            "{} is a {} backup and --database-url is {}: restore into the same kind of database (export and import move files between kinds)",
            file.display(),
            kind.as_str(),
            target.as_str()
        )));
    }
    match kind {
        Backend::Sqlite => {
            let path = sqlite_path(url);
            let taken = ["", "-wal", "-shm", "-journal"].iter().find(|suffix| {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                Path::new(&p).exists()
            });
            if taken.is_some() {
                return Err(Error::Config(format!(
                    "{} exists: restore into a new database (a path where nothing is), never over one",
                    path.display()
                )));
            }
            let tmp = partial(&path);
            let copied = (|| {
                let mut to = crate::private_file::create_new(&tmp)?;
                let mut from = std::fs::File::open(file)?;
                std::io::copy(&mut from, &mut to)?;
                to.sync_all()?;
                std::fs::rename(&tmp, &path)
            })();
            if let Err(e) = copied {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::Config(format!(
                    "cannot write {}: {e}",
                    path.display()
                )));
            }
        }
        Backend::Postgres => {
            let (plain, password) = split_password(url);
            // Empty: no table of ours (a restore never merges into a live database).
            let has_tables = {
                use sqlx::Connection as _;
                let mut conn = sqlx::postgres::PgConnection::connect(url)
                    .await
                    .map_err(|e| Error::Connect(crate::db::redact_url(url), e))?;
                let row: (i64,) = sqlx::query_as(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'",
                )
                .fetch_one(&mut conn)
                .await?;
                let _ = conn.close().await;
                row.0 > 0
            };
            if has_tables {
                return Err(Error::Config(format!(
                    "the database at {} has tables: restore into a new, empty database (createdb), never over one",
                    crate::db::redact_url(url)
                )));
            }
            let source = file.to_string_lossy().to_string();
            tools.run(
                "pg_restore",
                &[
                    "--no-owner",
                    "--no-privileges",
                    "--exit-on-error",
                    "--single-transaction",
                    "--dbname",
                    &plain,
                    &source,
                ],
                password.as_deref(),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_leaves_the_url() {
        assert_eq!(
            split_password("postgres://u:p%40ss@h:5432/db?sslmode=require"),
            (
                "postgres://u@h:5432/db?sslmode=require".to_string(),
                Some("p@ss".to_string())
            )
        );
        assert_eq!(
            split_password("postgres://u@h/db"),
            ("postgres://u@h/db".to_string(), None)
        );
        assert_eq!(
            sqlite_path("sqlite:/tmp/a.db?mode=rwc"),
            PathBuf::from("/tmp/a.db")
        );
    }

    #[test]
    fn a_file_that_is_no_backup_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, "hello").unwrap();
        assert!(
            kind_of(&f)
                .unwrap_err()
                .to_string()
                .contains("not a backup")
        );
        std::fs::write(&f, b"PGDMP\x01\x0e").unwrap();
        assert_eq!(kind_of(&f).unwrap(), Backend::Postgres);
    }
}
