//! Reading history (extension `history`): a file's versions, paged by an opaque cursor, by
//! external id or by row id; one version; and every file's version at a point in time.

use super::*;

/// The columns of a [`VersionSummary`] (`v` is `context_versions`, `w` its workspace, `k` its
/// key; both left joins).
macro_rules! version_columns {
    () => {
        "v.external_id, v.version, v.seq, v.context_id, v.context_version, w.slug AS workspace, v.action, \
         v.type, v.title, v.tags, v.size_bytes, v.content_sha256, v.api_key_id, k.key_last4, k.name AS key_name, v.created_at, v.renamed_from, v.redacted_at, v.restored_from"
    };
}

macro_rules! from_versions {
    () => {
        " FROM context_versions v LEFT JOIN workspaces w ON w.id = v.workspace_id \
         LEFT JOIN api_keys k ON k.id = v.api_key_id AND k.tenant_id = v.tenant_id "
    };
}

pub(super) fn summary_from_row(row: &Row) -> Result<VersionSummary> {
    let action: String = row.try_get("action")?;
    let restored_from: Option<i64> = row.try_get("restored_from")?;
    let action: Action = action
        .parse()
        .map_err(|e| Error::Corrupt(format!("context_versions.action: {e}")))?;
    // Stored as the create or update it was; shown as what it was for.
    let action = match (action, restored_from) {
        (Action::Create | Action::Update, Some(_)) => Action::Restore,
        (action, _) => action,
    };
    Ok(VersionSummary {
        external_id: row.try_get("external_id")?,
        version: row.try_get("version")?,
        seq: row.try_get("seq")?,
        context_id: row.try_get("context_id")?,
        context_version: row.try_get("context_version")?,
        workspace: row.try_get("workspace")?,
        action,
        kind: row.try_get("type")?,
        title: row.try_get("title")?,
        tags: tags_from(&row.try_get::<String, _>("tags")?),
        size_bytes: row.try_get::<i64, _>("size_bytes")?.max(0) as u64,
        content_sha256: row.try_get("content_sha256")?,
        key_id: row.try_get("api_key_id")?,
        key_last4: row.try_get("key_last4")?,
        key_name: row.try_get("key_name")?,
        created_at: row.try_get("created_at")?,
        restored_from: restored_from.filter(|_| action == Action::Restore),
        renamed_from: row.try_get("renamed_from")?,
        redacted_at: row.try_get("redacted_at")?,
    })
}

/// Whose versions to list.
#[derive(Debug, Clone)]
pub enum Subject {
    /// Every version of an external id (every context that had it), in `workspace` (slug) only
    /// when given.
    External {
        /// The external id.
        external_id: String,
        /// Only versions written in this workspace.
        workspace: Option<String>,
    },
    /// The versions of one context (by id), also after its deletion.
    Context(String),
}

/// A page cursor of versions: the version number to continue below.
pub fn decode_version_cursor(cursor: &str) -> Result<i64> {
    decode_number_cursor('v', cursor)
}

pub(super) fn encode_version_cursor(version: i64) -> String {
    format!("v{version}")
}

/// `$n` conditions for `subject` after `$1` (the tenant), with their binds.
pub(super) async fn subject_filter(
    db: &Db,
    tenant_id: &str,
    subject: &Subject,
    binds: &mut Vec<Bind>,
) -> Result<String> {
    let mut sql = String::new();
    match subject {
        Subject::External {
            external_id,
            workspace,
        } => {
            binds.push(Bind::Text(external_id.clone()));
            sql.push_str(&format!(" AND v.external_id = ${}", binds.len()));
            if let Some(slug) = workspace {
                let id = workspaces::id_of(db, tenant_id, slug).await?;
                binds.push(Bind::Text(id));
                sql.push_str(&format!(" AND v.workspace_id = ${}", binds.len()));
            }
        }
        Subject::Context(id) => {
            binds.push(Bind::Text(id.clone()));
            sql.push_str(&format!(" AND v.context_id = ${}", binds.len()));
        }
    }
    Ok(sql)
}

/// A page of `subject`'s versions, newest first: at most `limit`, below version `before`, only
/// those written in the workspaces `within` (slugs) when given. A subject without any such kept
/// version is [`Error::ContextNotFound`], so a key limited to workspaces cannot tell another
/// workspace's context from one that never existed.
pub async fn list(
    db: &Db,
    tenant_id: &str,
    subject: &Subject,
    within: Option<&[String]>,
    limit: i64,
    before: Option<i64>,
) -> Result<VersionPage> {
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let mut sql = String::from(concat!(
        "SELECT ",
        version_columns!(),
        from_versions!(),
        "WHERE v.tenant_id = $1"
    ));
    sql.push_str(&subject_filter(db, tenant_id, subject, &mut binds).await?);
    if let Some(slugs) = within {
        sql.push_str(" AND w.slug IN (");
        for (i, slug) in slugs.iter().enumerate() {
            binds.push(Bind::Text(slug.clone()));
            sql.push_str(&format!(
                "{}${}",
                if i == 0 { "" } else { ", " },
                binds.len()
            ));
        }
        if slugs.is_empty() {
            sql.push_str("NULL");
        }
        sql.push(')');
    }
    if let Some(before) = before {
        binds.push(Bind::Int(before));
        sql.push_str(&format!(" AND v.version < ${}", binds.len()));
    }
    binds.push(Bind::Int(limit + 1));
    sql.push_str(&format!(" ORDER BY v.version DESC LIMIT ${}", binds.len()));
    let rows = crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
        .fetch_all(&mut *db.reader().await?)
        .await?;
    let mut versions: Vec<VersionSummary> = Row::from_any_rows(&rows)?
        .iter()
        .map(summary_from_row)
        .collect::<Result<_>>()?;
    if versions.is_empty() && before.is_none() {
        return Err(Error::ContextNotFound {
            id: subject.id().to_string(),
        });
    }
    let next_cursor = if versions.len() as i64 > limit {
        versions.truncate(limit as usize);
        versions.last().map(|v| encode_version_cursor(v.version))
    } else {
        None
    };
    Ok(VersionPage {
        versions,
        next_cursor,
    })
}

impl Subject {
    /// The external id or context id asked for.
    pub(super) fn id(&self) -> &str {
        match self {
            Subject::External { external_id, .. } => external_id,
            Subject::Context(id) => id,
        }
    }
}

/// One version of `subject` with its content ([`Error::VersionNotFound`] if not kept).
pub async fn get(db: &Db, tenant_id: &str, subject: &Subject, version: i64) -> Result<Version> {
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let mut sql = String::from(concat!(
        "SELECT ",
        version_columns!(),
        ", v.content",
        from_versions!(),
        "WHERE v.tenant_id = $1"
    ));
    sql.push_str(&subject_filter(db, tenant_id, subject, &mut binds).await?);
    binds.push(Bind::Int(version));
    sql.push_str(&format!(" AND v.version = ${}", binds.len()));
    let row = db.read_one(&sql, binds).await?;
    match row {
        Some(row) => Ok(Version {
            summary: summary_from_row(&row)?,
            content: row.try_get("content")?,
        }),
        None => Err(Error::VersionNotFound {
            id: subject.id().to_string(),
            version,
        }),
    }
}

/// The content the context `context_id` had at its own version `context_version`, as kept in
/// its versions (`None`: that version was pruned, or its content redacted). A replay of a keyed
/// write rebuilds its answer's content from here ([`crate::store::outcome`]), so that no outcome record
/// holds a file's content.
pub async fn content_of(
    db: &Db,
    tenant_id: &str,
    context_id: &str,
    context_version: i64,
) -> Result<Option<String>> {
    let row = db
        .read_one(
            "SELECT v.content FROM context_versions v WHERE v.tenant_id = $1 AND v.context_id = $2 \
             AND v.context_version = $3 AND v.action <> 'delete'",
            vec![
                Bind::Text(tenant_id.to_string()),
                Bind::Text(context_id.to_string()),
                Bind::Int(context_version),
            ],
        )
        .await?;
    Ok(match row {
        Some(row) => row.try_get("content")?,
        None => None,
    })
}

/// `GET /api/history`: what external ids were at a point in time.
#[derive(Debug, Clone)]
pub struct AtQuery {
    /// The point in time (RFC 3339; read as UTC with milliseconds).
    pub at: String,
    /// Only external ids starting with this.
    pub prefix: Option<String>,
    /// Only versions written in this workspace (slug).
    pub workspace: Option<String>,
    /// Page size (1 to 500).
    pub limit: i64,
    /// Start after this external id (the decoded cursor).
    pub after: Option<String>,
}

/// Reads a point in time as the stored form (RFC 3339, UTC, milliseconds, `Z`).
pub fn parse_time(at: &str) -> Result<String> {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        })
        .map_err(|e| {
            Error::BadParameter(format!(
                "at must be an RFC 3339 time such as 2026-12-03T10:00:00Z, got {at:?} ({e})"
            ))
        })
}

/// Every external id with a kept version (in the query's workspace and prefix), what it was at
/// `q.at` and what it is now, by external id.
pub async fn at(db: &Db, tenant_id: &str, q: &AtQuery) -> Result<HistoryPage> {
    let at = parse_time(&q.at)?;
    let mut binds = vec![Bind::Text(tenant_id.to_string()), Bind::Text(at.clone())];
    let mut filter = String::new();
    if let Some(slug) = &q.workspace {
        let id = workspaces::id_of(db, tenant_id, slug).await?;
        binds.push(Bind::Text(id));
        filter.push_str(&format!(" AND workspace_id = ${}", binds.len()));
    }
    for (op, bound) in crate::store::external_id_range(q.prefix.as_deref(), q.after.as_deref()) {
        binds.push(Bind::Text(bound));
        filter.push_str(&format!(" AND external_id {op} ${}", binds.len()));
    }
    binds.push(Bind::Int(q.limit + 1));
    let sql = format!(
        "SELECT external_id, MIN(version) AS first_v, MAX(version) AS latest_v, \
         MAX(CASE WHEN created_at <= $2 THEN version END) AS at_v \
         FROM context_versions WHERE tenant_id = $1{filter} \
         GROUP BY external_id ORDER BY external_id LIMIT ${}",
        binds.len()
    );
    let groups = crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
        .fetch_all(&mut *db.reader().await?)
        .await?;
    let mut groups: Vec<(String, i64, i64, Option<i64>)> = groups
        .iter()
        .map(|r| {
            Ok((
                r.try_get("external_id")?,
                r.try_get("first_v")?,
                r.try_get("latest_v")?,
                r.try_get("at_v")?,
            ))
        })
        .collect::<Result<_>>()?;
    let next_cursor = if groups.len() as i64 > q.limit {
        groups.truncate(q.limit as usize);
        groups.last().map(|g| g.0.clone())
    } else {
        None
    };
    // The summaries of each external id's newest version and of the one in effect then.
    let mut wanted: Vec<(String, i64)> = Vec::new();
    for (id, first, latest, at_v) in &groups {
        wanted.push((id.clone(), *latest));
        match at_v {
            Some(v) if v != latest => wanted.push((id.clone(), *v)),
            Some(_) => {}
            // Absent then only if its first kept version is its creation.
            None if first != latest => wanted.push((id.clone(), *first)),
            None => {}
        }
    }
    let mut found: HashMap<(String, i64), VersionSummary> = HashMap::new();
    for chunk in wanted.chunks(250) {
        let mut binds = vec![Bind::Text(tenant_id.to_string())];
        let mut ors = Vec::new();
        for (id, v) in chunk {
            binds.push(Bind::Text(id.clone()));
            binds.push(Bind::Int(*v));
            ors.push(format!(
                "(v.external_id = ${} AND v.version = ${})",
                binds.len() - 1,
                binds.len()
            ));
        }
        let sql = format!(
            concat!(
                "SELECT ",
                version_columns!(),
                from_versions!(),
                "WHERE v.tenant_id = $1 AND ({})"
            ),
            ors.join(" OR ")
        );
        let rows = crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
            .fetch_all(&mut *db.reader().await?)
            .await?;
        for row in &Row::from_any_rows(&rows)? {
            let s = summary_from_row(row)?;
            found.insert((s.external_id.clone(), s.version), s);
        }
    }
    let mut paths = Vec::with_capacity(groups.len());
    for (id, first, latest, at_v) in groups {
        let take = |v: i64| {
            found
                .get(&(id.clone(), v))
                .cloned()
                .ok_or_else(|| Error::ChangedConcurrently {
                    id: format!("{id} version {v}"),
                })
        };
        let latest = take(latest)?;
        let (state, version) = match at_v {
            Some(v) => {
                let s = take(v)?;
                let state = if s.action == Action::Delete {
                    PastState::Deleted
                } else {
                    PastState::Present
                };
                (state, Some(s))
            }
            None if first == 1 && take(first)?.action == Action::Create => {
                (PastState::Absent, None)
            }
            None => (PastState::Unknown, None),
        };
        paths.push(PathAt {
            external_id: id,
            state,
            version,
            latest,
        });
    }
    Ok(HistoryPage {
        at,
        paths,
        next_cursor,
    })
}
