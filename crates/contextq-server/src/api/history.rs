//! The read endpoints of the `history` extension (docs/contextq-api.md, "Versions"): a context's
//! versions by external id (every context that had it, deleted ones included) or by id, one
//! version with its content, and what every external id under a prefix was at a point in time.
//! And the tenant's audit trail (extension `audit-log`). Read scope, tenant-scoped like every
//! other read, paged.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use contextq_api::Scope;
use contextq_api::audit::AuditPage;
use contextq_api::history::{DiffLine, DiffOp, HistoryPage, Version, VersionDiff, VersionPage};

use super::{ApiError, AppState, Caller, decode_cursor, encode_cursor, nonempty};
use crate::store::contexts::page_limit;
use crate::store::history::{self, AtQuery, Subject};

type Params = Query<HashMap<String, String>>;

fn version_number(text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        crate::store::Error::BadParameter(format!("a version is a number from 1, got {text:?}"))
            .into()
    })
}

async fn page(
    s: &AppState,
    caller: &Caller,
    subject: Subject,
    params: &HashMap<String, String>,
) -> Result<Json<VersionPage>, ApiError> {
    caller.require(Scope::Read)?;
    let limit = page_limit(params.get("limit").map(String::as_str))?;
    let before = nonempty(params, "cursor")
        .map(|c| history::decode_version_cursor(&c))
        .transpose()?;
    Ok(Json(
        history::list(&s.db, &caller.tenant_id, &subject, limit, before).await?,
    ))
}

/// `GET /api/contexts/by-external/{externalId}/versions?workspace=&limit=&cursor=`.
pub(super) async fn by_external(
    State(s): State<AppState>,
    caller: Caller,
    Path(external_id): Path<String>,
    Query(params): Params,
) -> Result<Json<VersionPage>, ApiError> {
    let subject = Subject::External {
        external_id,
        workspace: nonempty(&params, "workspace"),
    };
    page(&s, &caller, subject, &params).await
}

/// `GET /api/contexts/{id}/versions?limit=&cursor=`.
pub(super) async fn by_id(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(params): Params,
) -> Result<Json<VersionPage>, ApiError> {
    page(&s, &caller, Subject::Context(id), &params).await
}

/// `GET /api/contexts/by-external/{externalId}/versions/{version}?workspace=`.
pub(super) async fn one_by_external(
    State(s): State<AppState>,
    caller: Caller,
    Path((external_id, version)): Path<(String, String)>,
    Query(params): Params,
) -> Result<Json<Version>, ApiError> {
    caller.require(Scope::Read)?;
    let subject = Subject::External {
        external_id,
        workspace: nonempty(&params, "workspace"),
    };
    let n = version_number(&version)?;
    Ok(Json(
        history::get(&s.db, &caller.tenant_id, &subject, n).await?,
    ))
}

/// `GET /api/contexts/by-external/{externalId}/diff?from=&to=&workspace=` (extension `diff`):
/// the two versions' line diff, computed here with `similar` (Myers, the CLI's diff too),
/// within a deadline: a pathological pair answers a coarser, still correct, diff.
pub(super) async fn diff(
    State(s): State<AppState>,
    caller: Caller,
    Path(external_id): Path<String>,
    Query(params): Params,
) -> Result<Json<VersionDiff>, ApiError> {
    caller.require(Scope::Read)?;
    let number = |name: &str| {
        nonempty(&params, name)
            .ok_or_else(|| {
                ApiError::from(crate::store::Error::BadParameter(format!(
                    "{name}= is required: a version number"
                )))
            })
            .and_then(|n| version_number(&n))
    };
    let (from, to) = (number("from")?, number("to")?);
    let subject = Subject::External {
        external_id,
        workspace: nonempty(&params, "workspace"),
    };
    let (a, b) = tokio::try_join!(
        history::get(&s.db, &caller.tenant_id, &subject, from),
        history::get(&s.db, &caller.tenant_id, &subject, to)
    )?;
    let (a, b) = (a.content.unwrap_or_default(), b.content.unwrap_or_default());
    let lines = tokio::task::spawn_blocking(move || {
        similar::TextDiff::configure()
            .timeout(std::time::Duration::from_secs(2))
            .diff_lines(&a, &b)
            .iter_all_changes()
            .map(|c| DiffLine {
                op: match c.tag() {
                    similar::ChangeTag::Equal => DiffOp::Same,
                    similar::ChangeTag::Delete => DiffOp::Del,
                    similar::ChangeTag::Insert => DiffOp::Add,
                },
                text: c.value().trim_end_matches(['\n', '\r']).to_string(),
            })
            .collect()
    })
    .await
    .map_err(|_| ApiError::internal())?;
    Ok(Json(VersionDiff { from, to, lines }))
}

/// `GET /api/contexts/{id}/versions/{version}`.
pub(super) async fn one_by_id(
    State(s): State<AppState>,
    caller: Caller,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<Version>, ApiError> {
    caller.require(Scope::Read)?;
    let n = version_number(&version)?;
    Ok(Json(
        history::get(&s.db, &caller.tenant_id, &Subject::Context(id), n).await?,
    ))
}

/// `GET /api/history?at=&workspace=&externalIdPrefix=&limit=&cursor=`.
pub(super) async fn at(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Params,
) -> Result<Json<HistoryPage>, ApiError> {
    caller.require(Scope::Read)?;
    let at = nonempty(&params, "at").ok_or_else(|| {
        ApiError::from(crate::store::Error::BadParameter(
            "at= is required: an RFC 3339 time such as 2026-12-03T10:00:00Z".into(),
        ))
    })?;
    let q = AtQuery {
        at,
        prefix: nonempty(&params, "externalIdPrefix"),
        workspace: nonempty(&params, "workspace"),
        limit: page_limit(params.get("limit").map(String::as_str))?,
        after: nonempty(&params, "cursor")
            .map(|c| decode_cursor(&c))
            .transpose()?,
    };
    let mut page = history::at(&s.db, &caller.tenant_id, &q).await?;
    page.next_cursor = page.next_cursor.map(|n| encode_cursor(&n));
    Ok(Json(page))
}

/// `GET /api/audit?externalIdPrefix=&keyId=&action=&limit=&cursor=`: the tenant's activity
/// log, newest first.
pub(super) async fn audit(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Params,
) -> Result<Json<AuditPage>, ApiError> {
    caller.require(Scope::Read)?;
    let q = crate::store::activity::AuditQuery {
        limit: page_limit(params.get("limit").map(String::as_str))?,
        before: nonempty(&params, "cursor")
            .map(|c| crate::store::activity::decode_cursor(&c))
            .transpose()?,
        external_id_prefix: nonempty(&params, "externalIdPrefix"),
        key_id: nonempty(&params, "keyId"),
        action: nonempty(&params, "action"),
    };
    Ok(Json(
        crate::store::activity::list(&s.db, &caller.tenant_id, &q).await?,
    ))
}
