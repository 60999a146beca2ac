//! The HTTP side of keyed writes (extension `idempotency`, [`crate::store::outcome`]): the
//! `Idempotency-Key` header, the digest of the request it stands for, and what each endpoint
//! records of its answer.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, Uri, header};
use contextq_api::ErrorCode;
use contextq_api::bodies::IDEMPOTENCY_KEY_HEADER;

use super::ApiError;
use crate::store;
use crate::store::outcome::{Answer, Keyed, Recorded};

/// What a write needs of its request's head: the method, the URI and the headers
/// (`Idempotency-Key`, `If-Match`), taken once for every write handler.
#[derive(Debug)]
pub(crate) struct Head {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl<S: Send + Sync> FromRequestParts<S> for Head {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Head {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
        })
    }
}

impl Head {
    /// The request's key and digest with `body` ([`KeyedRequest::of`]).
    pub(crate) fn keyed(
        &self,
        body: &impl serde::Serialize,
    ) -> Result<Option<KeyedRequest>, ApiError> {
        KeyedRequest::of(&self.headers, &self.method, &self.uri, body)
    }

    /// Its `If-Match` ([`super::extract::if_match`]).
    pub(crate) fn if_match(&self) -> Result<Option<i64>, ApiError> {
        super::extract::if_match(&self.headers)
    }
}

/// A write's `Idempotency-Key` and the digest of its request: method, path and query,
/// `If-Match` and body (as parsed, so that the same request spelled with other whitespace is
/// the same request).
#[derive(Debug)]
pub(crate) struct KeyedRequest {
    key: String,
    sha256: String,
}

impl KeyedRequest {
    /// The request's key, if it sent one (400 when malformed: 1 to 128 visible ASCII).
    pub(crate) fn of(
        headers: &HeaderMap,
        method: &Method,
        uri: &Uri,
        body: &impl serde::Serialize,
    ) -> Result<Option<KeyedRequest>, ApiError> {
        let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else {
            return Ok(None);
        };
        let key = value
            .to_str()
            .ok()
            .filter(|k| !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::BadRequest,
                    "Idempotency-Key must be 1 to 128 visible ASCII characters; nothing was changed",
                )
            })?;
        let if_match = headers
            .get(header::IF_MATCH)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let body = serde_json::to_string(body).unwrap_or_default();
        let path = uri.path_and_query().map_or("", |p| p.as_str());
        let request = format!("{method} {path}\nIf-Match: {if_match}\n{body}");
        Ok(Some(KeyedRequest {
            key: key.to_string(),
            sha256: store::history::sha256_hex(&request),
        }))
    }

    /// The key as the data layer takes it, recording successes with `answer`.
    pub(crate) fn keyed<'a>(&'a self, answer: Answer<'a>) -> Keyed<'a> {
        Keyed {
            key: &self.key,
            request_sha256: &self.sha256,
            answer,
            refusal: &refusal,
        }
    }
}

/// What a keyed write records of a refusal: the answer the client got, when it follows from
/// the request and the state it met.
fn refusal(e: &store::Error) -> Option<Recorded> {
    match e {
        // Rows changed under the write: a repeat runs again.
        store::Error::ChangedConcurrently { .. } => None,
        e => ApiError::of(e).map(|a| a.recorded()),
    }
}

/// An [`Answer`] for results of type `T`, recorded as `record` says.
pub(crate) fn answer_as<T: 'static>(
    record: impl Fn(&T) -> Recorded + Send + Sync,
) -> impl Fn(&dyn std::any::Any) -> Option<Recorded> + Send + Sync {
    move |out| out.downcast_ref::<T>().map(&record)
}

/// An answer of 200 with `body` (as JSON) and no `ETag`.
pub(crate) fn ok(body: &impl serde::Serialize) -> Recorded {
    Recorded {
        status: 200,
        body: serde_json::to_value(body).unwrap_or_default(),
        etag: None,
    }
}

/// An answer of 204.
pub(crate) fn no_content() -> Recorded {
    Recorded {
        status: 204,
        body: serde_json::Value::Null,
        etag: None,
    }
}
