//! The context endpoints (`/api/contexts/...`): the listing, search and tree, reads, the bulk
//! upsert, updates, text edits, renames and deletes of one context or of a prefix. Each
//! handler takes the [`Caller`], checks the scope, parses, and calls [`crate::store`].

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use contextq_api::bodies::{
    BulkUpsert, BulkUpsertResults, ContextPage, DeletePrefix, EditContext, EditedContext,
    EditedSummary, MAX_SNIPPET_LINES, PrefixChanges, RenameContext, RenamePrefix, RenamedContext,
    Tree, UpdateContext,
};
use contextq_api::{Context, ErrorCode, Scope};

use crate::store::{self, contexts, prefix};

use super::extract::{JsonBody, Writer};
use super::keyed::{Head, answer_as};
use super::{ApiError, AppState, Caller, error, keyed};

pub(super) fn with_etag(context: Context) -> Response {
    let version = context.version;
    tagged(Json(context).into_response(), version)
}

/// `response` with `ETag: "<version>"`.
pub(super) fn tagged(mut response: Response, version: i64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// A query parameter that takes one of `choices` (name, value); the first is the default.
pub(super) fn choice<T: Copy>(
    params: &HashMap<String, String>,
    name: &str,
    choices: &[(&str, T)],
) -> Result<T, ApiError> {
    let Some(given) = params.get(name) else {
        return Ok(choices[0].1);
    };
    choices
        .iter()
        .find(|(text, _)| text == given)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(text, _)| *text).collect();
            ApiError::new(
                ErrorCode::BadRequest,
                format!("{name} is {}, not {given:?}", names.join(" or ")),
            )
        })
}

/// A query parameter, `None` when absent or empty.
pub(super) fn nonempty(params: &HashMap<String, String>, k: &str) -> Option<String> {
    params.get(k).filter(|v| !v.is_empty()).cloned()
}

pub(super) fn encode_cursor(external_id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(external_id)
}

pub(super) fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                "invalid cursor: pass nextCursor back unchanged",
            )
        })
}

pub(super) async fn list_contexts(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<ContextPage>, ApiError> {
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let workspace = nonempty("workspace");
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let query = contexts::ListQuery {
        within: caller.workspaces.clone(),
        workspace,
        tag: nonempty("tag"),
        external_id_prefix: nonempty("externalIdPrefix"),
        limit: contexts::page_limit(params.get("limit").map(String::as_str))?,
        after: match (nonempty("cursor"), nonempty("startAfter")) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "cursor and startAfter both name where a page starts: send one",
                ));
            }
            (Some(c), None) => Some(decode_cursor(&c)?),
            (None, after) => after,
        },
    };
    let (page, next) = contexts::list(&s.db, &caller.tenant_id, &query).await?;
    Ok(Json(ContextPage {
        contexts: page,
        next_cursor: next.map(|n| encode_cursor(&n)),
    }))
}

/// `GET /api/contexts/search` (extension `search`): ranked full-text search within the
/// listing's scopes and the key's workspaces.
pub(super) async fn search(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<contextq_api::search::SearchPage>, ApiError> {
    use contextq_api::search::{DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, parse_cursor};
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let q = params.get("q").map(String::as_str).unwrap_or_default();
    let query = contextq_api::search::Query::parse(q)
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("q: {e}")))?;
    let workspace = nonempty("workspace");
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let limit = match nonempty("limit") {
        None => DEFAULT_LIMIT,
        Some(l) => match l.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    format!("limit must be an integer from 1 to {MAX_LIMIT}, got {l:?}"),
                ));
            }
        },
    };
    let offset = match nonempty("cursor") {
        None => 0,
        Some(c) => parse_cursor(&c).ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                format!(
                    "cursor {c:?} is not one this server gave (a search pages through its first {MAX_OFFSET} hits)"
                ),
            )
        })?,
    };
    let page = store::search::search(
        &s.db,
        &caller.tenant_id,
        &store::search::SearchQuery {
            query,
            workspace,
            within: caller.workspaces.clone(),
            tag: nonempty("tag"),
            prefix: nonempty("prefix"),
            limit,
            offset,
        },
    )
    .await?;
    Ok(Json(page))
}

pub(super) async fn tree(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Tree>, ApiError> {
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let (tag, workspace) = (nonempty("requireTag"), nonempty("workspace"));
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let scope = contexts::Scope {
        tag: tag.as_deref(),
        workspace: workspace.as_deref(),
    };
    let prefix = params.get("prefix").map(String::as_str).unwrap_or_default();
    let workspace_first = choice(
        &params,
        "workspaceFirst",
        &[("false", false), ("true", true)],
    )?;
    let depth = choice(&params, "depth", &[("2", 2), ("1", 1)])?;
    // Extension `tree-file`: the context at `file`, within the same scope, instead of the tree
    // when it is there (a `view` of a path that may be a file or a directory, in one request:
    // the file wins, so the tree is not read).
    if let Some(external_id) = nonempty("file") {
        let file = contexts::get_by_external(&s.db, &caller.tenant_id, &external_id)
            .await?
            .filter(|c| {
                caller.reaches(&c.workspace)
                    && scope.tag.is_none_or(|t| c.tags.iter().any(|x| x == t))
                    && scope.workspace.is_none_or(|w| c.workspace == w)
            });
        if file.is_some() {
            return Ok(Json(Tree {
                file,
                ..Tree::default()
            }));
        }
    }
    Ok(Json(
        prefix::tree(
            &s.db,
            &caller.tenant_id,
            prefix,
            scope,
            prefix::TreeOptions {
                workspace_first,
                depth,
                within: caller.workspaces.as_deref(),
            },
        )
        .await?,
    ))
}

pub(super) async fn get_by_external(
    State(s): State<AppState>,
    caller: Caller,
    Path(external_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Scope::Read)?;
    let found = contexts::get_by_external(&s.db, &caller.tenant_id, &external_id)
        .await?
        .filter(|c| caller.reaches(&c.workspace));
    found_or(found, || {
        format!("no context with externalId {external_id:?}")
    })
}

/// The context with its `ETag`, or 404 with `missing`'s message.
pub(super) fn found_or(
    found: Option<Context>,
    missing: impl FnOnce() -> String,
) -> Result<Response, ApiError> {
    found
        .map(with_etag)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, missing()))
}

pub(super) async fn get_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Scope::Read)?;
    let found = contexts::get(&s.db, &caller.tenant_id, &id)
        .await?
        .filter(|c| caller.reaches(&c.workspace));
    found_or(found, || format!("context {id:?} does not exist"))
}

pub(super) async fn bulk_upsert(
    State(s): State<AppState>,
    Writer(caller): Writer,
    head: Head,
    JsonBody(body, _room): JsonBody<BulkUpsert>,
) -> Result<Json<BulkUpsertResults>, ApiError> {
    for item in &body.contexts {
        caller.write_in(&item.workspace)?;
    }
    let request = head.keyed(&body)?;
    let answer = answer_as(|results: &Vec<contextq_api::UpsertResult>| {
        keyed::ok(&serde_json::json!({ "results": results }))
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let results =
        contexts::bulk_upsert(&s.db, caller.actor_keyed(keyed.as_ref()), &body.contexts).await?;
    Ok(Json(BulkUpsertResults { results }))
}

/// What a keyed write records of a context it answers: the context without its content, with
/// its `ETag` (a replay puts the content back).
pub(super) fn context_recorded(context: &Context) -> store::outcome::Recorded {
    let mut body = serde_json::to_value(context.summary()).unwrap_or_default();
    if let Some(o) = body.as_object_mut() {
        o.remove("sizeBytes");
    }
    store::outcome::Recorded {
        etag: Some(context.version),
        ..keyed::ok(&body)
    }
}

/// A replayed context answer with `content` put back where [`context_recorded`] left it out.
pub(super) fn with_content(mut e: ApiError, content: impl FnOnce() -> Option<String>) -> ApiError {
    if let Some(recorded) = e.replay.as_mut()
        && recorded.status == 200
        && let Some(o) = recorded.body.as_object_mut()
    {
        match content() {
            Some(c) => {
                o.insert("content".into(), serde_json::Value::String(c));
            }
            None => return gone_content(),
        }
    }
    e
}

/// A replay whose content is no longer kept (its version pruned or redacted).
pub(super) fn gone_content() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "this Idempotency-Key's request was applied, but the content it wrote is no longer kept \
         (pruned or redacted), so its answer cannot be repeated: read the context",
    )
}

pub(super) async fn update_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(id): Path<String>,
    head: Head,
    JsonBody(body, _room): JsonBody<UpdateContext>,
) -> Result<Response, ApiError> {
    let expected = head.if_match()?;
    write_to_row(&s, &caller, &id).await?;
    let request = head.keyed(&body)?;
    let answer = answer_as(context_recorded);
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let content = body.content.clone();
    let context = contexts::update(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        &id,
        &body.content,
        body.title,
        body.tags,
        expected,
    )
    .await
    // A repeat wrote this same content (the digest says so).
    .map_err(|e| with_content(e.into(), || Some(content)))?;
    Ok(with_etag(context))
}

pub(super) async fn edit_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    head: Head,
    JsonBody(body, _room): JsonBody<EditContext>,
) -> Result<Response, ApiError> {
    let expected = head.if_match()?;
    let request = head.keyed(&body)?;
    limited_write(&caller, body.within.workspace.as_deref())?;
    if body.snippet_lines.is_some_and(|n| n > MAX_SNIPPET_LINES) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("snippetLines is at most {MAX_SNIPPET_LINES}; nothing was changed"),
        ));
    }
    // Recorded without content (nor the snippet, which is content): a replay rebuilds both
    // from the version the edit wrote.
    let answer = answer_as(|e: &EditedContext| {
        let mut recorded = context_recorded(&e.context);
        recorded.body =
            serde_json::json!({"context": recorded.body, "changedLine": e.changed_line});
        recorded
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let edited = contexts::edit(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        &external_id,
        &body.edit,
        contexts::Scope::from(&body.within),
        expected,
    )
    .await;
    let edited = match edited {
        Ok(edited) => edited,
        Err(e) => {
            let e = ApiError::from(e);
            return match &e.replay {
                Some(recorded) if recorded.status == 200 => {
                    replayed_edit(&s, &caller, recorded, body.snippet_lines).await
                }
                _ => Err(e),
            };
        }
    };
    let version = edited.context.version;
    let response = match body.snippet_lines {
        Some(n) => Json::<EditedSummary>(edited.summary(n)).into_response(),
        None => Json::<EditedContext>(edited).into_response(),
    };
    Ok(tagged(response, version))
}

/// The answer to a repeat of a keyed text edit: the edit as it was applied, its content read
/// from the version it wrote, marked `replayed`.
pub(super) async fn replayed_edit(
    s: &AppState,
    caller: &Caller,
    recorded: &store::outcome::Recorded,
    snippet_lines: Option<usize>,
) -> Result<Response, ApiError> {
    let corrupt = |m: String| ApiError::from(store::Error::Corrupt(m));
    let mut context = recorded.body["context"].clone();
    let changed_line = recorded.body["changedLine"].as_u64().map(|n| n as usize);
    let (id, version) = (
        context["id"].as_str().unwrap_or_default().to_string(),
        context["version"].as_i64().unwrap_or_default(),
    );
    let content = store::history::content_of(&s.db, &caller.tenant_id, &id, version).await?;
    let response = match (content, snippet_lines) {
        (Some(content), n) => {
            context["content"] = serde_json::Value::String(content);
            let context: Context = serde_json::from_value(context)
                .map_err(|e| corrupt(format!("a recorded edit: {e}")))?;
            let edited = EditedContext {
                context,
                changed_line,
                replayed: true,
            };
            match n {
                Some(n) => Json::<EditedSummary>(edited.summary(n)).into_response(),
                None => Json::<EditedContext>(edited).into_response(),
            }
        }
        // The snippet is gone with the content; the summary still says what was applied.
        (None, Some(_)) => Json(serde_json::json!({
            "context": context,
            "changedLine": changed_line,
            "replayed": true,
        }))
        .into_response(),
        (None, None) => return Err(gone_content()),
    };
    let mut response = tagged(response, version);
    response
        .headers_mut()
        .insert(error::REPLAYED_HEADER, HeaderValue::from_static("true"));
    Ok(response)
}

pub(super) async fn rename_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    head: Head,
    JsonBody(body, _room): JsonBody<RenameContext>,
) -> Result<Response, ApiError> {
    let request = head.keyed(&body)?;
    limited_write(&caller, body.within.workspace.as_deref())?;
    let rename = contexts::Rename {
        from: &external_id,
        to: &body.to,
        title: body.title.as_deref(),
    };
    let scope = contexts::Scope::from(&body.within);
    let answer = answer_as(|c: &Context| store::outcome::Recorded {
        etag: Some(c.version),
        ..keyed::ok(&RenamedContext {
            context: c.summary(),
        })
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let c = contexts::rename(&s.db, caller.actor_keyed(keyed.as_ref()), rename, scope).await?;
    let version = c.version;
    let context = c.summary();
    Ok(tagged(
        Json(RenamedContext { context }).into_response(),
        version,
    ))
}

pub(super) async fn delete_prefix(
    State(s): State<AppState>,
    Writer(caller): Writer,
    head: Head,
    JsonBody(body, _room): JsonBody<DeletePrefix>,
) -> Result<Json<PrefixChanges>, ApiError> {
    let request = head.keyed(&body)?;
    limited_write(&caller, body.within.workspace.as_deref())?;
    let scope = contexts::Scope::from(&body.within);
    let answer = answer_as(|c: &PrefixChanges| keyed::ok(c));
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let actor = caller.actor_keyed(keyed.as_ref());
    let changes = prefix::delete_prefix(&s.db, actor, &body.prefix, scope).await?;
    Ok(Json(changes))
}

pub(super) async fn rename_prefix(
    State(s): State<AppState>,
    Writer(caller): Writer,
    head: Head,
    JsonBody(body, _room): JsonBody<RenamePrefix>,
) -> Result<Json<PrefixChanges>, ApiError> {
    let request = head.keyed(&body)?;
    limited_write(&caller, body.within.workspace.as_deref())?;
    let retitle = match (body.title_from.as_deref(), body.title_to.as_deref()) {
        (Some(from), Some(to)) => Some(prefix::Retitle { from, to }),
        (None, None) => None,
        _ => {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "titleFrom and titleTo go together: send both or neither; nothing was changed",
            ));
        }
    };
    let scope = contexts::Scope::from(&body.within);
    let answer = answer_as(|c: &PrefixChanges| keyed::ok(c));
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let changes = prefix::rename_prefix(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        prefix::Move {
            from: &body.from,
            to: &body.to,
            retitle,
        },
        scope,
    )
    .await?;
    Ok(Json(changes))
}

/// A write to the row `id` by a key limited to workspaces: 403 when the row lives in another
/// (a row never changes workspace, so the check holds for the write). Absent: the write says so.
pub(super) async fn write_to_row(s: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    if caller.workspaces.is_some()
        && let Some(c) = contexts::get(&s.db, &caller.tenant_id, id).await?
    {
        caller.write_in(&c.workspace)?;
    }
    Ok(())
}

/// A write by external id (text edit, rename, a directory) by a key limited to workspaces: it
/// must name its workspace (the write then touches no row of another) and reach it.
pub(super) fn limited_write(caller: &Caller, workspace: Option<&str>) -> Result<(), ApiError> {
    match (&caller.workspaces, workspace) {
        (None, _) => Ok(()),
        (Some(_), Some(ws)) => caller.write_in(ws),
        (Some(w), None) => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "this API key is limited to the workspaces {}: name the workspace of the write (\"workspace\"); nothing was changed",
                w.join(", ")
            ),
        )),
    }
}

/// Extension `delete-by-external`: `?requireTag=&workspace=` scope the delete as an edit's
/// body does (outside them the context is "not found"); `If-Match` as on `DELETE /:id`.
pub(super) async fn delete_by_external(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    head: Head,
) -> Result<Response, ApiError> {
    let expected = head.if_match()?;
    let request = head.keyed(&())?;
    let (tag, workspace) = (
        nonempty(&params, "requireTag"),
        nonempty(&params, "workspace"),
    );
    limited_write(&caller, workspace.as_deref())?;
    let scope = contexts::Scope {
        tag: tag.as_deref(),
        workspace: workspace.as_deref(),
    };
    let answer = answer_as(|_: &()| keyed::no_content());
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let actor = caller.actor_keyed(keyed.as_ref());
    contexts::delete_by_external(&s.db, actor, &external_id, scope, expected).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn delete_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(id): Path<String>,
    head: Head,
) -> Result<Response, ApiError> {
    let expected = head.if_match()?;
    let request = head.keyed(&())?;
    write_to_row(&s, &caller, &id).await?;
    let answer = answer_as(|_: &()| keyed::no_content());
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    contexts::delete(&s.db, caller.actor_keyed(keyed.as_ref()), &id, expected).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
