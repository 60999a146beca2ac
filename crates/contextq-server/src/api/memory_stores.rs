//! The Memory Stores door (`/v1/memory_stores...`, extension `memory-stores`,
//! docs/memory-stores.md): Anthropic's API as its official SDKs call it, over the store's own
//! rows ([`crate::store::memory_stores`]). The key is ours (`Authorization: Bearer` or
//! `X-Api-Key`), checked as on every route; every error on `/v1` is Anthropic's envelope
//! ([`anthropic_errors`] turns the contract's into it, the handlers' own are made here); page
//! tokens are sealed with a MAC bound to the tenant and the query.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use contextq_api::memory_stores::{
    self as ms, CreateMemory, CreateStore, DeletedMemory, DeletedMemoryStore, ErrorObject,
    ErrorResponse, Page, UpdateMemory, UpdateStore,
};
use contextq_api::{ErrorCode, ErrorEnvelope, Scope};

use crate::audit::AuditKey;
use crate::store::memory_stores::{
    self as door, MemoryChange, MemoryRow, Refusal, Store, StoreChange, StoreQuery, VersionQuery,
};

use super::extract::{Admin, JsonBody, Writer};
use super::{ApiError, AppState, Caller};

/// An error of this door: its status, Anthropic's error type, a message, and for a path
/// conflict the memory in the way.
#[derive(Debug)]
pub(crate) struct DoorError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    conflict: Option<door::PathConflict>,
}

impl DoorError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        DoorError {
            status,
            kind,
            message: message.into(),
            conflict: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found_error", message)
    }
}

/// Anthropic's error type for a status of ours.
fn kind_of(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        408 | 504 => "timeout_error",
        503 | 529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

impl From<ApiError> for DoorError {
    fn from(e: ApiError) -> Self {
        // Anthropic answers a request it cannot take 400, not 422.
        let status = match e.code {
            ErrorCode::ValidationFailed | ErrorCode::PreconditionFailed => StatusCode::BAD_REQUEST,
            _ => e.status(),
        };
        DoorError::new(status, kind_of(e.status().as_u16()), e.message)
    }
}

impl From<crate::store::Error> for DoorError {
    fn from(e: crate::store::Error) -> Self {
        use crate::store::Error as E;
        match e {
            E::WorkspaceArchived { .. } => DoorError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "this memory store is archived: its memories can be read, deleted and their versions redacted, not created or changed",
            ),
            E::LiveContent { .. } => DoorError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                "this version holds the memory's current content: update or delete the memory first, then redact the version",
            ),
            E::WorkspaceNotEmpty { contexts, .. } => DoorError::new(
                StatusCode::CONFLICT,
                "conflict_error",
                format!(
                    "the store's workspace still holds {contexts} contexts that are not memories (written through /api/contexts at other external ids): delete them there first"
                ),
            ),
            other => DoorError::from(ApiError::from(other)),
        }
    }
}

impl From<Refusal> for DoorError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Path(c) => DoorError {
                status: StatusCode::CONFLICT,
                kind: "memory_path_conflict_error",
                message: format!(
                    "the path overlaps the memory {} at {:?}: a memory's path cannot be another's, nor a directory of another's",
                    c.memory_id, c.path
                ),
                conflict: Some(c),
            },
            Refusal::Precondition(m) => {
                DoorError::new(StatusCode::CONFLICT, "memory_precondition_failed_error", m)
            }
            Refusal::Store(e) => DoorError::from(e),
        }
    }
}

/// A request id for the envelope and the `request-id` header.
fn request_id() -> String {
    format!("req_{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..))
}

/// Anthropic's envelope for `status`, `kind` and `message`.
fn envelope(
    status: StatusCode,
    kind: &str,
    message: String,
    conflict: Option<door::PathConflict>,
) -> Response {
    let id = request_id();
    let body = ErrorResponse {
        kind: "error".into(),
        error: ErrorObject {
            kind: kind.to_string(),
            message,
            conflicting_memory_id: conflict.as_ref().map(|c| c.memory_id.clone()),
            conflicting_path: conflict.map(|c| c.path),
        },
        request_id: Some(id.clone()),
    };
    let mut response = (status, Json(body)).into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&id) {
        headers.insert("request-id", v);
    }
    // The SDKs retry a 409 unless told not to; a conflict here is an answer, not a blip.
    if status == StatusCode::CONFLICT {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
    }
    response
}

impl IntoResponse for DoorError {
    fn into_response(self) -> Response {
        envelope(self.status, self.kind, self.message, self.conflict)
    }
}

/// Every error answer on `/v1` in Anthropic's envelope: the contract's envelope (from the key's
/// check, a body's, the router's fallback, a timeout) is rewritten, the door's own kept.
pub(crate) async fn anthropic_errors(req: Request, next: axum::middleware::Next) -> Response {
    if !req.uri().path().starts_with("/v1/") && req.uri().path() != "/v1" {
        return next.run(req).await;
    }
    let response = next.run(req).await;
    let status = response.status();
    if status.as_u16() < 400 {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 256 * 1024)
        .await
        .unwrap_or_default();
    let Ok(contract) = serde_json::from_slice::<ErrorEnvelope>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    let status = match status.as_u16() {
        422 | 412 => StatusCode::BAD_REQUEST,
        _ => status,
    };
    let mut answer = envelope(
        status,
        kind_of(parts.status.as_u16()),
        contract.error.message,
        None,
    );
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    answer
}

type DoorResult = Result<Response, DoorError>;

// ---------------------------------------------------------------------------------------------
// Query parameters and page tokens

/// The query of a request, by name.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `view`: `full` or `basic`, `default_full` when absent.
    fn full(&self, default_full: bool) -> Result<bool, DoorError> {
        match self.get("view") {
            None => Ok(default_full),
            Some("full") => Ok(true),
            Some("basic") => Ok(false),
            Some(v) => Err(DoorError::invalid(format!(
                "view: basic or full, got {v:?}"
            ))),
        }
    }

    /// `limit`: 1 to 100, 20 when absent; at most 20 with `view=full`.
    fn limit(&self, full: bool) -> Result<usize, DoorError> {
        let n = match self.get("limit") {
            None => ms::DEFAULT_PAGE,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=ms::MAX_PAGE).contains(&n) => n,
                _ => {
                    return Err(DoorError::invalid(format!(
                        "limit: an integer from 1 to {}, got {s:?}",
                        ms::MAX_PAGE
                    )));
                }
            },
        };
        Ok(if full { n.min(ms::MAX_FULL_PAGE) } else { n })
    }

    fn flag(&self, name: &str) -> Result<bool, DoorError> {
        match self.get(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(DoorError::invalid(format!(
                "{name}: true or false, got {v:?}"
            ))),
        }
    }

    fn time(&self, name: &str) -> Result<Option<String>, DoorError> {
        self.get(name)
            .map(|t| {
                crate::store::history::parse_time(t).map_err(|_| {
                    DoorError::invalid(format!(
                        "{name}: an RFC 3339 time such as 2026-12-07T10:00:00Z, got {t:?}"
                    ))
                })
            })
            .transpose()
    }

    /// Every parameter but the page's own (`page`, `limit`), as the query a token is bound to.
    fn fingerprint(&self, route: &str) -> String {
        let mut kept: Vec<String> = self
            .0
            .iter()
            .filter(|(k, _)| k != "page" && k != "limit")
            .map(|(k, v)| format!("{}={}", k.len(), k) + &format!("{}={v}", v.len()))
            .collect();
        kept.sort();
        format!("{route}?{}", kept.join("&"))
    }
}

/// The key page tokens are sealed with: the audit key's, or one of this process when the server
/// has none (tokens then last as long as the process).
fn page_mac(state: &AppState, parts: &[&str]) -> String {
    static OWN: OnceLock<Option<AuditKey>> = OnceLock::new();
    let key = state
        .db
        .audit_key()
        .or_else(|| OWN.get_or_init(|| AuditKey::generate().ok()).as_ref());
    match key {
        Some(k) => {
            let mut all = vec!["memory-stores page token"];
            all.extend_from_slice(parts);
            k.mac(&all)
        }
        None => String::new(),
    }
}

/// A token for the position `pos` of the listing `query` of `tenant`.
fn seal(state: &AppState, tenant: &str, query: &str, pos: &str) -> String {
    let mac = page_mac(state, &[tenant, query, pos]);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}", b64.encode(pos), &mac[..mac.len().min(32)])
}

/// The position a token names, if it was sealed for this tenant and this query.
fn unseal(state: &AppState, tenant: &str, query: &str, token: &str) -> Result<String, DoorError> {
    let refuse = || {
        DoorError::invalid(
            "page: not a next_page token of this listing (tokens are bound to the key's tenant and to the query's other parameters)",
        )
    };
    let (pos, mac) = token.split_once('.').ok_or_else(refuse)?;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let pos = String::from_utf8(b64.decode(pos).map_err(|_| refuse())?).map_err(|_| refuse())?;
    let want = page_mac(state, &[tenant, query, &pos]);
    let want = &want[..want.len().min(32)];
    // Constant time: a token's MAC is not guessed byte by byte.
    let same = want.len() == mac.len()
        && want
            .bytes()
            .zip(mac.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same && !want.is_empty() {
        Ok(pos)
    } else {
        Err(refuse())
    }
}

// ---------------------------------------------------------------------------------------------
// Stores

/// The store `store_id` as `caller` may see it: 404 for another tenant's, one the key does not
/// reach, and any id that is not a store's.
async fn store_of(state: &AppState, caller: &Caller, store_id: &str) -> Result<Store, DoorError> {
    let missing = || DoorError::not_found(format!("no memory store {store_id:?}"));
    let ws = door::workspace_of(store_id).ok_or_else(missing)?;
    match door::get_store(&state.db, &caller.tenant_id, ws).await? {
        Some(s) if caller.reaches(&s.slug) => {
            state.known_stores.put(&caller.tenant_id, &s);
            Ok(s)
        }
        _ => Err(missing()),
    }
}

fn json<T: serde::Serialize>(value: &T) -> Response {
    Json(value).into_response()
}

pub(super) async fn create_store(
    State(s): State<AppState>,
    Admin(caller): Admin,
    JsonBody(body, _room): JsonBody<CreateStore>,
) -> DoorResult {
    caller
        .require_every_workspace("creating a memory store")
        .map_err(DoorError::from)?;
    ms::check_name(&body.name).map_err(DoorError::invalid)?;
    if let Some(d) = &body.description {
        ms::check_description(d).map_err(DoorError::invalid)?;
    }
    if let Some(m) = &body.metadata {
        ms::check_metadata(m).map_err(DoorError::invalid)?;
    }
    let store = door::create_store(
        &s.db,
        caller.actor(),
        &body.name,
        body.description.as_deref(),
        body.metadata.as_ref(),
    )
    .await?;
    Ok(json(&store.to_api()?))
}

pub(super) async fn list_stores(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let p = Params(params);
    let route = p.fingerprint("stores");
    let after = match p.get("page") {
        None => None,
        Some(t) => {
            let pos = unseal(&s, &caller.tenant_id, &route, t)?;
            let (at, id) = pos
                .split_once('\n')
                .ok_or_else(|| DoorError::invalid("page: a malformed token"))?;
            Some((at.to_string(), id.to_string()))
        }
    };
    let q = StoreQuery {
        within: caller.workspaces.clone(),
        include_archived: p.flag("include_archived")?,
        created_gte: p.time("created_at[gte]")?,
        created_lte: p.time("created_at[lte]")?,
        after,
        limit: p.limit(false)?,
    };
    let (stores, more) = door::list_stores(&s.db, &caller.tenant_id, &q).await?;
    let next_page = match (more, stores.last()) {
        (true, Some(last)) => Some(seal(
            &s,
            &caller.tenant_id,
            &route,
            &format!("{}\n{}", last.created_at, last.workspace_id),
        )),
        _ => None,
    };
    let data = stores
        .iter()
        .map(Store::to_api)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json(&Page { data, next_page }))
}

pub(super) async fn get_store(
    State(s): State<AppState>,
    caller: Caller,
    Path(store_id): Path<String>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let store = store_of(&s, &caller, &store_id).await?;
    Ok(json(&store.to_api()?))
}

pub(super) async fn update_store(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(store_id): Path<String>,
    JsonBody(body, _room): JsonBody<UpdateStore>,
) -> DoorResult {
    let store = store_of(&s, &caller, &store_id).await?;
    if let Some(n) = &body.name {
        ms::check_name(n).map_err(DoorError::invalid)?;
    }
    if let Some(d) = &body.description {
        ms::check_description(d).map_err(DoorError::invalid)?;
    }
    let change = StoreChange {
        name: body.name.as_deref(),
        description: body.description.as_deref(),
        metadata: body.metadata.as_ref(),
    };
    let store = door::update_store(&s.db, caller.actor(), &store.workspace_id, change).await?;
    Ok(json(&store.to_api()?))
}

pub(super) async fn archive_store(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(store_id): Path<String>,
) -> DoorResult {
    let store = store_of(&s, &caller, &store_id).await?;
    let store = door::archive_store(&s.db, caller.actor(), &store).await?;
    Ok(json(&store.to_api()?))
}

pub(super) async fn delete_store(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(store_id): Path<String>,
) -> DoorResult {
    let store = store_of(&s, &caller, &store_id).await?;
    s.known_stores
        .forget(&caller.tenant_id, &store.workspace_id);
    door::delete_store(&s.db, caller.actor(), &store).await?;
    Ok(json(&DeletedMemoryStore {
        id: store.id(),
        kind: "memory_store_deleted".into(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Memories

/// The context id a memory id names.
fn context_of(memory_id: &str) -> Option<&str> {
    memory_id
        .strip_prefix(ms::MEMORY_ID_PREFIX)
        .filter(|s| !s.is_empty())
}

/// The store `store_id` and its memory `memory_id` as `caller` may see them, in one read: the
/// store's refusals as [`store_of`]'s, then 404 for a memory that is not the store's.
async fn store_and_memory_of(
    state: &AppState,
    caller: &Caller,
    (store_id, memory_id): (&str, &str),
    content: bool,
) -> Result<(Store, MemoryRow), DoorError> {
    let no_store = || DoorError::not_found(format!("no memory store {store_id:?}"));
    let no_memory = || DoorError::not_found(format!("no memory {memory_id:?} in this store"));
    let ws = door::workspace_of(store_id).ok_or_else(no_store)?;
    let Some(id) = context_of(memory_id) else {
        store_of(state, caller, store_id).await?;
        return Err(no_memory());
    };
    match door::store_and_memory(&state.db, &caller.tenant_id, (ws, id), content).await? {
        Some((store, memory)) if caller.reaches(&store.slug) => {
            state.known_stores.put(&caller.tenant_id, &store);
            Ok((store, memory.ok_or_else(no_memory)?))
        }
        _ => Err(no_store()),
    }
}

/// The memory `memory_id` of `store`, with its content when `content`.
async fn memory_of(
    state: &AppState,
    caller: &Caller,
    store: &Store,
    (memory_id, content): (&str, bool),
) -> Result<MemoryRow, DoorError> {
    let missing = || DoorError::not_found(format!("no memory {memory_id:?} in this store"));
    let id = context_of(memory_id).ok_or_else(missing)?;
    door::get_memory(&state.db, &caller.tenant_id, store, id, content)
        .await?
        .ok_or_else(missing)
}

pub(super) async fn create_memory(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(store_id): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
    JsonBody(body, _room): JsonBody<CreateMemory>,
) -> DoorResult {
    let full = Params(params).full(false)?;
    ms::check_path("path", &body.path).map_err(DoorError::invalid)?;
    let content = body.content.unwrap_or_default();
    ms::check_content(&content).map_err(DoorError::invalid)?;
    let missing = || DoorError::not_found(format!("no memory store {store_id:?}"));
    let ws = door::workspace_of(&store_id).ok_or_else(missing)?;
    // A store read before: no read before the write (its checks are made again under the
    // write's lock). A refusal that may come from what was kept being out of date (the store
    // gone, or its slug another's) is decided again from a fresh read.
    if let Some(store) = s.known_stores.get(&caller.tenant_id, ws) {
        if !caller.reaches(&store.slug) {
            return Err(missing());
        }
        let actor = caller.actor();
        match door::create_memory(&s.db, actor, (&store, None), &body.path, &content).await {
            Ok(m) => return Ok(json(&m.to_api(&store, full))),
            Err(door::Refusal::Store(
                crate::store::Error::WorkspaceNotFound { .. }
                | crate::store::Error::ChangedConcurrently { .. },
            )) => s.known_stores.forget(&caller.tenant_id, ws),
            Err(e) => return Err(e.into()),
        }
    }
    // The store and the overlap check in one read (the same refusals as `store_of`).
    let (store, blocked) =
        match door::store_and_overlap(&s.db, &caller.tenant_id, ws, (&body.path, None)).await? {
            Some((store, blocked)) if caller.reaches(&store.slug) => (store, blocked),
            _ => return Err(missing()),
        };
    s.known_stores.put(&caller.tenant_id, &store);
    let m = door::create_memory(
        &s.db,
        caller.actor(),
        (&store, blocked),
        &body.path,
        &content,
    )
    .await?;
    Ok(json(&m.to_api(&store, full)))
}

pub(super) async fn list_memories(
    State(s): State<AppState>,
    caller: Caller,
    Path(store_id): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let p = Params(params);
    let full = p.full(false)?;
    let limit = p.limit(full)?;
    let prefix = p.get("path_prefix").unwrap_or("/");
    ms::check_path_prefix(prefix).map_err(DoorError::invalid)?;
    let depth1 = match p.get("depth") {
        None | Some("0") => false,
        Some("1") => true,
        Some(d) => {
            return Err(DoorError::invalid(format!("depth: 0 or 1, got {d:?}")));
        }
    };
    let store = store_of(&s, &caller, &store_id).await?;
    let route = p.fingerprint(&format!("memories {}", store.id()));
    let after = p
        .get("page")
        .map(|t| unseal(&s, &caller.tenant_id, &route, t))
        .transpose()?;
    let page = door::list_memories(
        &s.db,
        &caller.tenant_id,
        &store,
        (prefix, depth1),
        after.as_deref(),
        (limit, full),
    )
    .await?;
    let next_page = page
        .next
        .map(|pos| seal(&s, &caller.tenant_id, &route, &pos));
    Ok(json(&Page {
        data: page.items,
        next_page,
    }))
}

pub(super) async fn get_memory(
    State(s): State<AppState>,
    caller: Caller,
    Path((store_id, memory_id)): Path<(String, String)>,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let full = Params(params).full(true)?;
    let (store, m) = store_and_memory_of(&s, &caller, (&store_id, &memory_id), full).await?;
    Ok(json(&m.to_api(&store, full)))
}

pub(super) async fn update_memory(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path((store_id, memory_id)): Path<(String, String)>,
    Query(params): Query<Vec<(String, String)>>,
    JsonBody(body, _room): JsonBody<UpdateMemory>,
) -> DoorResult {
    let full = Params(params).full(false)?;
    if let Some(p) = &body.path {
        ms::check_path("path", p).map_err(DoorError::invalid)?;
    }
    if let Some(c) = &body.content {
        ms::check_content(c).map_err(DoorError::invalid)?;
    }
    let expect = match &body.precondition {
        None => None,
        Some(p) if p.kind == "content_sha256" => Some(
            p.content_sha256
                .as_deref()
                .filter(|h| is_sha256_hex(h))
                .ok_or_else(|| {
                    DoorError::invalid(
                        "precondition.content_sha256: 64 lowercase hexadecimal characters",
                    )
                })?,
        ),
        Some(p) => {
            return Err(DoorError::invalid(format!(
                "precondition.type: content_sha256 is the only kind, got {:?}",
                p.kind
            )));
        }
    };
    // A content update in a store read before: no read before the write (its checks are made
    // under the write's lock); what that path leaves undecided is decided here after a read.
    if let (Some(content), None) = (&body.content, &body.path)
        && let Some(ws) = door::workspace_of(&store_id)
        && let Some(context_id) = context_of(&memory_id)
        && let Some(store) = s.known_stores.get(&caller.tenant_id, ws)
        && caller.reaches(&store.slug)
    {
        let actor = caller.actor();
        let done =
            door::update_content(&s.db, actor, &store, context_id, (content, expect)).await?;
        if let Some(m) = done {
            return Ok(json(&m.to_api(&store, full)));
        }
    }
    let (store, current) = store_and_memory_of(&s, &caller, (&store_id, &memory_id), false).await?;
    let change = MemoryChange {
        content: body.content.as_deref(),
        path: body.path.as_deref(),
        expect_sha256: expect,
    };
    let m = door::update_memory(&s.db, caller.actor(), &store, current, change).await?;
    // Nothing written (or the content not known): `view=full` reads it.
    let m = match (full, &m.content) {
        (true, None) => memory_of(&s, &caller, &store, (&memory_id, true)).await?,
        _ => m,
    };
    Ok(json(&m.to_api(&store, full)))
}

fn is_sha256_hex(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(super) async fn delete_memory(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path((store_id, memory_id)): Path<(String, String)>,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    let p = Params(params);
    let expect = p.get("expected_content_sha256");
    if let Some(h) = expect
        && !is_sha256_hex(h)
    {
        return Err(DoorError::invalid(
            "expected_content_sha256: 64 lowercase hexadecimal characters",
        ));
    }
    let (_, current) = store_and_memory_of(&s, &caller, (&store_id, &memory_id), false).await?;
    door::delete_memory(&s.db, caller.actor(), &current, expect).await?;
    Ok(json(&DeletedMemory {
        id: memory_id,
        kind: "memory_deleted".into(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Versions

/// The `seq` a version id names.
fn seq_of(version_id: &str) -> Option<i64> {
    version_id.strip_prefix(ms::VERSION_ID_PREFIX)?.parse().ok()
}

pub(super) async fn list_versions(
    State(s): State<AppState>,
    caller: Caller,
    Path(store_id): Path<String>,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let p = Params(params);
    let full = p.full(false)?;
    let store = store_of(&s, &caller, &store_id).await?;
    let route = p.fingerprint(&format!("versions {}", store.id()));
    let before = match p.get("page") {
        None => None,
        Some(t) => Some(
            unseal(&s, &caller.tenant_id, &route, t)?
                .parse::<i64>()
                .map_err(|_| DoorError::invalid("page: a malformed token"))?,
        ),
    };
    let context_id = match p.get("memory_id") {
        None => None,
        Some(m) => Some(
            context_of(m)
                .ok_or_else(|| DoorError::invalid(format!("memory_id: a mem_... id, got {m:?}")))?
                .to_string(),
        ),
    };
    // Our versions are written by keys only: a session or service account wrote none.
    if p.get("session_id").is_some() || p.get("service_account_id").is_some() {
        return Ok(json(&Page::<ms::MemoryVersion> {
            data: Vec::new(),
            next_page: None,
        }));
    }
    let q = VersionQuery {
        context_id,
        operation: p.get("operation").map(str::to_string),
        api_key_id: p.get("api_key_id").map(str::to_string),
        created_gte: p.time("created_at[gte]")?,
        created_lte: p.time("created_at[lte]")?,
        before,
        limit: p.limit(full)?,
        full,
    };
    let (data, next) = door::list_versions(&s.db, &caller.tenant_id, &store, &q).await?;
    let next_page = next.map(|seq| seal(&s, &caller.tenant_id, &route, &seq.to_string()));
    Ok(json(&Page { data, next_page }))
}

pub(super) async fn get_version(
    State(s): State<AppState>,
    caller: Caller,
    Path((store_id, version_id)): Path<(String, String)>,
    Query(params): Query<Vec<(String, String)>>,
) -> DoorResult {
    caller.require(Scope::Read).map_err(DoorError::from)?;
    let full = Params(params).full(true)?;
    let store = store_of(&s, &caller, &store_id).await?;
    let missing =
        || DoorError::not_found(format!("no memory version {version_id:?} in this store"));
    let seq = seq_of(&version_id).ok_or_else(missing)?;
    let v = door::get_version(&s.db, &caller.tenant_id, &store, seq, full)
        .await?
        .ok_or_else(missing)?;
    Ok(json(&v))
}

pub(super) async fn redact_version(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path((store_id, version_id)): Path<(String, String)>,
) -> DoorResult {
    let store = store_of(&s, &caller, &store_id).await?;
    let missing =
        || DoorError::not_found(format!("no memory version {version_id:?} in this store"));
    let seq = seq_of(&version_id).ok_or_else(missing)?;
    let v = door::redact_version(&s.db, caller.actor(), &store, seq)
        .await?
        .ok_or_else(missing)?;
    Ok(json(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_ignore_the_page_and_order() {
        let a = Params(vec![
            ("limit".into(), "5".into()),
            ("path_prefix".into(), "/a/".into()),
            ("depth".into(), "1".into()),
        ]);
        let b = Params(vec![
            ("depth".into(), "1".into()),
            ("page".into(), "x".into()),
            ("path_prefix".into(), "/a/".into()),
        ]);
        assert_eq!(a.fingerprint("r"), b.fingerprint("r"));
        let c = Params(vec![("path_prefix".into(), "/b/".into())]);
        assert_ne!(a.fingerprint("r"), c.fingerprint("r"));
    }

    #[test]
    fn sha256_hex_is_lowercase_and_64() {
        assert!(is_sha256_hex(&"a".repeat(64)));
        assert!(!is_sha256_hex(&"A".repeat(64)));
        assert!(!is_sha256_hex(&"a".repeat(63)));
    }
}
