//! The memory inspector at `/ui/`: a small page (HTML, JavaScript, CSS compiled into the binary
//! from `ui/`, no external fonts or scripts) that reads the API like any client, with the key of
//! the person using it, and the one-time sign-in links that spare a local user copying a key.
//!
//! The page treats everything a model wrote as hostile: it renders paths and contents as text
//! only, and every answer of `/ui/` carries a strict Content-Security-Policy (scripts and styles
//! from this origin only, no inline script, no `eval`, nothing framed, no form posts elsewhere).
//!
//! Sign-in: a person types an API key once; the page keeps it in the tab's `sessionStorage` and
//! sends it in the `Authorization` header. A process that serves its own memory (the CLI's
//! `contextq-memory serve`) can instead issue a one-time token ([`SignInTokens::issue`]) and print
//! `http://HOST/ui/#token=...`: the token is in the URL fragment, which browsers never send to the
//! server, and the page exchanges it once (`POST /ui/session`) for a **session key**: a new key of
//! the same tenant, scopes and workspaces, minted then, that expires after [`SESSION_TTL`] or
//! when the key it stands for does, whichever comes first, ends when that key is revoked or
//! deleted, and is revoked by Sign out (`DELETE /ui/session`). A session key cannot ask for
//! sign-in tokens, so it never renews itself. The key the token stands for never leaves the server, so
//! whoever reads a sign-in link in a log holds, at most, one session for a few hours (and only
//! if they redeem it first, within [`TOKEN_TTL`]). No key or token ever appears in a URL that
//! reaches the server or its log.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use contextq_api::ErrorCode;

use crate::api::extract::{BodyLimit, JsonBody};
use crate::api::{ApiError, AppState, Caller};
use crate::store::tenants;

/// How long a sign-in session key works: 8 hours (a working day; sign in again after).
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// The policy of every answer under `/ui/`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

pub use crate::auth::{SignInTokens, TOKEN_TTL};

/// The routes of the inspector (merged into [`crate::app`]).
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        // The served address opened in a browser leads to the inspector, not a JSON 404.
        .route("/", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/ui/session", post(session).delete(sign_out))
        .route("/ui/sign-in-tokens", post(new_token))
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Adds the inspector's security headers to every answer under `/ui`.
pub async fn secure_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let is_ui = req.uri().path() == "/ui" || req.uri().path().starts_with("/ui/");
    let mut response = next.run(req).await;
    if is_ui {
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    response
}

/// The largest `POST /ui/session` body: `{"token": "<64 hex>"}` with room to spare.
pub const SESSION_BODY_BYTES: usize = 1024;

#[derive(serde::Deserialize)]
struct SessionRequest {
    token: String,
}

impl BodyLimit for SessionRequest {
    fn max_body_bytes(_: &crate::api::ServerConfig) -> usize {
        SESSION_BODY_BYTES
    }
}

/// `POST /ui/session` `{"token"}` → `{"apiKey", "expiresAt"}`, once per token: a session key
/// minted now (module docs). The body is read like every other: within its own small limit (a
/// larger declared length is 413 before a byte is read) and within the budget of bodies in
/// flight.
async fn session(
    State(s): State<AppState>,
    JsonBody(request, _permit): JsonBody<SessionRequest>,
) -> Result<Response, ApiError> {
    match s.sign_in.redeem(&request.token) {
        Some(api_key) => {
            let record = tenants::key_by_hash(&s.db, &crate::auth::hash_key(&api_key))
                .await?
                .filter(|r| !r.expired(&crate::db::now()))
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::Unauthorized,
                        "the key this sign-in link stands for was revoked or has expired",
                    )
                })?;
            // The session reaches what the key reaches, no more, and ends with it.
            let (minted, expires_at) =
                tenants::create_session_key(&s.db, &record, SESSION_TTL).await?;
            let mut response = Json(serde_json::json!({
                "apiKey": minted.api_key,
                "expiresAt": expires_at,
            }))
            .into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            Ok(response)
        }
        None => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "this sign-in link was already used or has expired",
        )),
    }
}

/// `POST /ui/sign-in-tokens` with a key of the `admin` scope: a new one-time sign-in token for
/// that key, `{"token", "expiresInSeconds"}`: how `contextq-memory sign-in-link` prints a fresh
/// link for a running server after the one it printed at start has expired. The key stays on the
/// server; redeeming the token mints a session key as usual.
async fn new_token(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(contextq_api::Scope::Admin)?;
    // A session renewing itself would outlive "at most one short session" for ever.
    if caller.ui_session {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "a sign-in session cannot make sign-in links: use the key it was minted from",
        ));
    }
    // The extractor checked this header; the token stands for the same key.
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::new(ErrorCode::Unauthorized, "use Authorization: Bearer <key>"))?;
    let token = s.sign_in.issue(key);
    let mut response = Json(serde_json::json!({
        "token": token,
        "expiresInSeconds": TOKEN_TTL.as_secs(),
    }))
    .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `DELETE /ui/session` with a session key: revokes it (204). A key typed in is not a session
/// and is left alone (400): signing out of the page never revokes an operator's key.
async fn sign_out(State(s): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    if !caller.ui_session {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "this key is not a sign-in session: it stays valid (revoke it with contextq-server admin revoke-key)",
        ));
    }
    tenants::revoke_key(&s.db, Some(&caller.key_id), None).await?;
    // This process at once: on PostgreSQL its own notification reaches its listener a moment
    // later, and the next request must not find the session in the cache meanwhile.
    s.key_cache.clear();
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_works_once() {
        let t = SignInTokens::default();
        let token = t.issue("sk_live_x");
        assert_eq!(token.len(), 64);
        assert_eq!(t.redeem(&token).as_deref(), Some("sk_live_x"));
        assert_eq!(t.redeem(&token), None);
        assert_eq!(t.redeem("nope"), None);
    }
}
