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
//! server, and the page exchanges it once (`POST /ui/session`) for the key. A token works once,
//! for at most [`TOKEN_TTL`]; no key or token ever appears in a URL that reaches the server or its
//! log.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use contextq_api::ErrorCode;

use crate::api::{ApiError, AppState};

/// How long a sign-in token is valid: 10 minutes.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);

/// The policy of every answer under `/ui/`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

/// One-time sign-in tokens, each for one API key.
#[derive(Debug, Default)]
pub struct SignInTokens {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl SignInTokens {
    /// A new token for `api_key` (256 bits from the OS), valid once for [`TOKEN_TTL`].
    pub fn issue(&self, api_key: &str) -> String {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the OS random number generator is available");
        let token = hex::encode(bytes);
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
        tokens.insert(token.clone(), (api_key.to_string(), Instant::now()));
        token
    }

    /// The key of `token`, once: the token is gone afterwards (and when expired).
    pub fn redeem(&self, token: &str) -> Option<String> {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        let (key, at) = tokens.remove(token)?;
        (at.elapsed() < TOKEN_TTL).then_some(key)
    }
}

/// The routes of the inspector (merged into [`crate::app`]).
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
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
        .route("/ui/session", post(session))
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

#[derive(serde::Deserialize)]
struct SessionRequest {
    token: String,
}

/// `POST /ui/session` `{"token"}` → `{"apiKey"}`, once per token.
async fn session(State(s): State<AppState>, body: axum::body::Bytes) -> Result<Response, ApiError> {
    let request: SessionRequest = serde_json::from_slice(&body)
        .map_err(|_| ApiError::new(ErrorCode::BadRequest, "send {\"token\": \"...\"}"))?;
    match s.sign_in.redeem(&request.token) {
        Some(api_key) => {
            let mut response = Json(serde_json::json!({ "apiKey": api_key })).into_response();
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
