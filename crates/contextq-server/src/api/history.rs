//! The read endpoints of the `history` extension (docs/contextq-api.md, "Versions"): a context's
//! versions by external id (every context that had it, deleted ones included) or by id, one
//! version with its content, and what every external id under a prefix was at a point in time.
//! And the tenant's audit trail (extension `audit-log`). Read scope, tenant-scoped like every
//! other read, paged. And the one write of history, redaction (extension `redaction`, admin
//! scope).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use contextq_api::ErrorCode;
use contextq_api::Scope;
use contextq_api::audit::AuditPage;
use contextq_api::history::{
    DiffLine, DiffOp, HistoryPage, RedactRequest, Redaction, Version, VersionDiff, VersionPage,
};

use super::extract::{Admin, JsonBody};
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
    if let Subject::External {
        workspace: Some(ws),
        ..
    } = &subject
    {
        caller.read_in(ws)?;
    }
    let limit = page_limit(params.get("limit").map(String::as_str))?;
    let before = nonempty(params, "cursor")
        .map(|c| history::decode_version_cursor(&c))
        .transpose()?;
    // A key limited to workspaces sees the versions written in them only, and a context with
    // none there is unknown to it, as one that never existed.
    let within = caller.workspaces.as_deref();
    let page = history::list(&s.db, &caller.tenant_id, &subject, within, limit, before).await?;
    Ok(Json(page))
}

/// Whether a version was written in a workspace the caller reaches.
fn reached(caller: &Caller, v: &contextq_api::history::VersionSummary) -> bool {
    caller.workspaces.is_none() || v.workspace.as_deref().is_some_and(|w| caller.reaches(w))
}

/// The versions of `external_id`, in the `workspace=` the query names if any.
fn by_external_in(external_id: String, params: &HashMap<String, String>) -> Subject {
    Subject::External {
        external_id,
        workspace: nonempty(params, "workspace"),
    }
}

/// One version, "not found" when the caller's key does not reach its workspace.
async fn one(
    s: &AppState,
    caller: &Caller,
    subject: &Subject,
    n: i64,
) -> Result<Version, ApiError> {
    let v = history::get(&s.db, &caller.tenant_id, subject, n).await?;
    if reached(caller, &v.summary) {
        Ok(v)
    } else {
        let id = match subject {
            Subject::External { external_id, .. } => external_id.clone(),
            Subject::Context(id) => id.clone(),
        };
        Err(crate::store::Error::VersionNotFound { id, version: n }.into())
    }
}

/// `GET /api/contexts/by-external/{externalId}/versions?workspace=&limit=&cursor=`.
pub(super) async fn by_external(
    State(s): State<AppState>,
    caller: Caller,
    Path(external_id): Path<String>,
    Query(params): Params,
) -> Result<Json<VersionPage>, ApiError> {
    let subject = by_external_in(external_id, &params);
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
    let subject = by_external_in(external_id, &params);
    let n = version_number(&version)?;
    Ok(Json(one(&s, &caller, &subject, n).await?))
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
    let subject = by_external_in(external_id, &params);
    let (a, b) = tokio::try_join!(
        one(&s, &caller, &subject, from),
        one(&s, &caller, &subject, to)
    )?;
    for v in [&a, &b] {
        if v.summary.is_redacted() {
            return Err(crate::store::Error::Redacted {
                id: v.summary.external_id.clone(),
                version: v.summary.version,
            }
            .into());
        }
    }
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
    Ok(Json(one(&s, &caller, &Subject::Context(id), n).await?))
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
    let workspace = nonempty(&params, "workspace");
    match &workspace {
        Some(ws) => caller.read_in(ws)?,
        None => caller.require_every_workspace("a point in time without workspace=")?,
    }
    let q = AtQuery {
        at,
        prefix: nonempty(&params, "externalIdPrefix"),
        workspace,
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
    caller.require_every_workspace("the audit trail")?;
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

/// `POST /api/redactions` (extension `redaction`): admin scope, a key of the whole tenant.
pub(super) async fn redact(
    State(s): State<AppState>,
    Admin(caller): Admin,
    head: super::keyed::Head,
    JsonBody(body, _room): JsonBody<RedactRequest>,
) -> Result<Json<Redaction>, ApiError> {
    use crate::store::redact::{Request, Target, Within};
    caller.require_every_workspace("a redaction")?;
    let keyed_request = head.keyed(&body)?;
    let bad = |m: &str| {
        Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("{m}; nothing was redacted"),
        ))
    };
    let external_id = body.external_id.as_deref().filter(|e| !e.is_empty());
    let prefix = body.external_id_prefix.as_deref().filter(|p| !p.is_empty());
    let target = match (body.version, body.matching.as_deref()) {
        (Some(version), None) => match (external_id, prefix) {
            (Some(external_id), None) => Target::Version {
                external_id,
                version,
            },
            _ => return bad("version goes with externalId (and without externalIdPrefix)"),
        },
        (None, Some(text)) => Target::Matching {
            text,
            within: match (external_id, prefix) {
                (Some(id), None) => Within::ExternalId(id),
                (None, Some(p)) => Within::Prefix(p),
                (None, None) => Within::Tenant,
                (Some(_), Some(_)) => {
                    return bad("send externalId or externalIdPrefix, not both");
                }
            },
        },
        _ => return bad("send version (with externalId) or matching: one of them"),
    };
    let request = Request {
        target,
        workspace: body.workspace.as_deref().filter(|w| !w.is_empty()),
        after_seq: body.after_seq,
        dry_run: body.dry_run,
    };
    let answer = super::keyed::answer_as(|r: &Redaction| super::keyed::ok(r));
    let keyed = keyed_request.as_ref().map(|r| r.keyed(&answer));
    let actor = caller.actor_keyed(keyed.as_ref());
    Ok(Json(
        crate::store::redact::redact(&s.db, actor, request).await?,
    ))
}
