//! Which database a URL names ([`Backend`]), the URL forms each backend accepts, passwords kept
//! out of messages ([`redact_url`]), and creating a PostgreSQL database for tests and
//! provisioning.

use std::str::FromStr;

use sqlx::any::install_default_drivers;

use crate::error::{Error, Result};

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:PATH` (the default).
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
}

impl Backend {
    /// The backend for `url`, or an error naming the accepted schemes.
    pub fn from_url(url: &str) -> Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(Error::Config(format!(
                "unsupported database URL {:?}: use sqlite:PATH or postgres://USER:PASSWORD@HOST/DB",
                redact_url(url)
            )))
        }
    }

    /// `sqlite` or `postgresql`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgresql",
        }
    }
}

/// A URL with its password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => base.to_string(),
            },
            None => base.to_string(),
        },
        None => base.to_string(),
    };
    if let Some(q) = query {
        // `password=`, `sslpassword=`, ...: any parameter whose name mentions a password.
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.to_ascii_lowercase().contains("pass") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// Creates an empty PostgreSQL database `name` on the server `url` points at, and returns the
/// URL of the new database (same credentials and options). For tests, benchmarks and
/// provisioning scripts; `name` must be a plain identifier (letters, digits, `_`).
pub async fn create_postgres_database(url: &str, name: &str) -> Result<String> {
    admin_statement(url, name, &format!("CREATE DATABASE {name}")).await?;
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| i + scheme_end);
    let mut out = format!("{}/{name}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

/// Drops the PostgreSQL database `name` on the server `url` points at (an admin URL, as for
/// [`create_postgres_database`]), closing its other connections first; a database that is not
/// there is not an error. What tests and benchmarks call so that their databases do not pile up
/// on a long-lived server.
pub async fn drop_postgres_database(url: &str, name: &str) -> Result<()> {
    // WITH (FORCE) (PostgreSQL 13+): a pool being closed may still hold connections.
    admin_statement(
        url,
        name,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )
    .await
}

/// Runs `statement` about the database `name` on one admin connection to `url`, after checking
/// that `url` is PostgreSQL and `name` a plain identifier (it is spliced into the statement).
async fn admin_statement(url: &str, name: &str, statement: &str) -> Result<()> {
    use sqlx::Connection;
    if Backend::from_url(url)? != Backend::Postgres {
        return Err(Error::Config(format!(
            "{} is not a postgres:// URL",
            redact_url(url)
        )));
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Error::Config(format!(
            "{name:?} is not a plain database name"
        )));
    }
    install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(url)
        .await
        .map_err(|e| Error::Connect(redact_url(url), e))?;
    sqlx::query(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

/// `sqlite:PATH` with `mode=rwc` (create if missing) unless a mode was given.
pub(super) fn sqlite_url(url: &str) -> Result<String> {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    if rest.is_empty() || rest.starts_with(":memory:") {
        return Err(Error::Config(
            "in-memory SQLite is not supported (each pooled connection would get its own database): use sqlite:PATH".into(),
        ));
    }
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let query = if query.contains("mode=") {
        query.to_string()
    } else if query.is_empty() {
        "mode=rwc".to_string()
    } else {
        format!("{query}&mode=rwc")
    };
    Ok(format!("sqlite://{path}?{query}"))
}

impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Backend::from_url(s)
    }
}

/// The database `serve` uses: the one given, else, on a loopback address only,
/// `sqlite:contextq.db` in the working directory. A replica reachable from elsewhere started
/// without one would serve a fresh, empty file and answer 401 to every key: refused, naming
/// what to set.
pub fn database_url_for(given: Option<String>, listen: &str) -> crate::Result<String> {
    if let Some(url) = given.filter(|u| !u.trim().is_empty()) {
        return Ok(url);
    }
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        Ok("sqlite:contextq.db".to_string())
    } else {
        Err(crate::Error::Config(format!(
            "--listen {listen} is reachable beyond this machine: give the database with --database-url \
             (or CONTEXTQ_DATABASE_URL), e.g. postgres://USER:PASSWORD@HOST/DB; without one a \
             replica would serve an empty SQLite file in its working directory"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            Backend::from_url("sqlite:/tmp/x.db").unwrap(),
            Backend::Sqlite
        );
        assert_eq!(
            Backend::from_url("postgres://u:p@h/db").unwrap(),
            Backend::Postgres
        );
        let err = Backend::from_url("mysql://u:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sqlite:PATH") && !err.contains("secret"),
            "{err}"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db?password=secret&sslmode=require&sslpassword=x"),
            "postgres://u:***@h/db?password=***&sslmode=require&sslpassword=***"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?PassWord=secret"),
            "postgres://u@h/db?PassWord=***"
        );
        assert_eq!(
            sqlite_url("sqlite:/tmp/a.db").unwrap(),
            "sqlite:///tmp/a.db?mode=rwc"
        );
        assert_eq!(
            sqlite_url("sqlite:rel.db").unwrap(),
            "sqlite://rel.db?mode=rwc"
        );
        assert!(sqlite_url("sqlite::memory:").is_err());
    }

    #[test]
    fn a_server_beyond_loopback_names_its_database() {
        assert_eq!(
            database_url_for(None, "127.0.0.1:0").unwrap(),
            "sqlite:contextq.db"
        );
        assert_eq!(
            database_url_for(None, "[::1]:80").unwrap(),
            "sqlite:contextq.db"
        );
        assert_eq!(
            database_url_for(None, "localhost:1").unwrap(),
            "sqlite:contextq.db"
        );
        let e = database_url_for(None, "0.0.0.0:38200")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--database-url"), "{e}");
        assert!(database_url_for(None, "10.0.0.5:1").is_err());
        assert_eq!(
            database_url_for(Some("sqlite:x.db".into()), "0.0.0.0:1").unwrap(),
            "sqlite:x.db"
        );
    }
}
