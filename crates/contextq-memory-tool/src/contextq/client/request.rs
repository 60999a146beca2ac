//! Request building and transport: paths and queries encoded, one request through the retry
//! engine (or the in-process service), the answer's status, `ETag` and extensions read, bodies
//! encoded and decoded. Every endpoint method goes through [`Client::request`].

use super::*;

pub(super) fn etag_version(headers: &reqwest::header::HeaderMap) -> Option<i64> {
    headers
        .get(reqwest::header::ETAG)?
        .to_str()
        .ok()?
        .trim_start_matches("W/")
        .trim_matches('"')
        .parse()
        .ok()
}

/// The error of a refused request: the contract's envelope, or the start of whatever body came.
/// A text edit that cannot apply (`edit_failed` with its reason) is [`Error::EditRefused`] on
/// `path` (the request path: the store names the memory path instead).
pub(super) fn api_error(answer: &retry::Answer, path: &str) -> Error {
    let (code_text, message) = match serde_json::from_slice::<ErrorEnvelope>(&answer.body) {
        Ok(e) if e.error.edit.is_some() && answer.status == 409 => {
            return Error::EditRefused {
                path: path.to_string(),
                failure: e.error.edit.expect("checked"),
            };
        }
        Ok(e) => (e.error.code, e.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(&answer.body);
            let text: String = text.chars().take(300).collect();
            (format!("http_{}", answer.status), text)
        }
    };
    Error::from(ContextQError::Api {
        code: ErrorCode::of_answer(answer.status, Some(&code_text)),
        code_text,
        status: answer.status,
        message,
        retry_after: answer.retry_after().map(|d| d.as_secs()),
    })
}

/// `path` with a query of the parameters that are given, in order, each value percent-encoded
/// ([`segment`]); `path` alone when none is.
pub(super) fn with_query(path: &str, params: &[(&str, Option<String>)]) -> String {
    let query: Vec<String> = params
        .iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| format!("{k}={}", segment(v))))
        .collect();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

impl Client {
    /// One request through the retry engine; a success (2xx) is read whole and teaches the
    /// client the server's extensions.
    pub(super) async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        kind: Idempotency,
    ) -> Result<Reply> {
        self.request_with(method, path, body, if_match, None, kind)
            .await
    }

    /// [`Client::request`] with an `Idempotency-Key`, the same on every attempt.
    pub(super) async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
        kind: Idempotency,
    ) -> Result<Reply> {
        let url = format!("{}{}", self.base_url, path);
        let what = format!("{method} {path}");
        let attempt = || async {
            let answer = match &self.local {
                Some(service) => {
                    let request =
                        self.local_request(&method, path, body, if_match, idempotency_key);
                    self.call_local(service.as_ref(), request, &url).await?
                }
                None => {
                    self.send(&method, &url, body, if_match, idempotency_key)
                        .await?
                }
            };
            if (200..300).contains(&answer.status) {
                let etag = etag_version(&answer.headers);
                self.learn(&answer.headers, etag);
                return Ok(Reply {
                    etag,
                    body: answer.body,
                });
            }
            Err(Attempt {
                failure: Failure::Status(answer.status),
                error: api_error(&answer, path),
                retry_after: answer.retry_after(),
            })
        };
        let done = retry::run(
            &self.retry,
            "ContextQ",
            &what,
            kind,
            Some(&self.learnt.reached),
            attempt,
        )
        .await;
        match done {
            // A keyed write whose outcome is unknown (its answers lost, or no retry left): asked
            // once more with its key, whatever the retry budget, as a read-back would be: the
            // server answers with what the write did. An answer (other than "busy") settles it;
            // none leaves it unknown.
            Err(e) if kind == Idempotency::Keyed && may_have_applied(&e) => match attempt().await {
                Ok(reply) => Ok(reply),
                Err(a) if matches!(a.failure, Failure::Status(s) if s < 500 && s != 429) => {
                    Err(a.error)
                }
                Err(_) => Err(e),
            },
            other => other,
        }
    }

    /// One attempt over HTTP.
    pub(super) async fn send(
        &self,
        method: &Method,
        url: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> std::result::Result<retry::Answer, Attempt> {
        let mut req = self
            .http
            .request(method.clone(), url)
            .bearer_auth(self.key.expose())
            .timeout(self.timeout);
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(v) = if_match {
            req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
        }
        if let Some(k) = idempotency_key {
            req = req.header(IDEMPOTENCY_KEY_HEADER, k);
        }
        if let Some(n) = self.restored_from(method) {
            req = req.header(contextq_api::RESTORED_FROM_HEADER, n.to_string());
        }
        retry::exchange(req, url, self.key.expose(), |t| {
            Error::from(ContextQError::Transport(t))
        })
        .await
    }

    /// The request [`Client::send`] would send, for a [`LocalService`] (its contract: the
    /// path and query as URI, the same headers and body).
    pub(super) fn local_request(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> http::Request<Vec<u8>> {
        use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, IF_MATCH};
        let mut request = http::Request::new(
            body.map(|b| serde_json::to_vec(b).expect("a JSON value serialises"))
                .unwrap_or_default(),
        );
        *request.method_mut() = method.clone();
        // A path the client built itself (segments percent-encoded); "/" if it were not a URI.
        *request.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
        let headers = request.headers_mut();
        let host = self
            .base_url
            .split_once("://")
            .map_or(self.base_url.as_str(), |(_, rest)| rest);
        if let Ok(v) = HeaderValue::from_str(host) {
            headers.insert(HOST, v);
        }
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", self.key.expose())) {
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        if body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(v) = if_match.and_then(|v| HeaderValue::from_str(&format!("\"{v}\"")).ok()) {
            headers.insert(IF_MATCH, v);
        }
        if let Some(v) = idempotency_key.and_then(|k| HeaderValue::from_str(k).ok()) {
            headers.insert(IDEMPOTENCY_KEY_HEADER, v);
        }
        if let Some(n) = self.restored_from(method) {
            headers.insert(contextq_api::RESTORED_FROM_HEADER, HeaderValue::from(n));
        }
        request
    }

    /// The version a write within [`restoring`] restores, when the server marks restores
    /// (extension `restore-marks`; a server without it gets a plain write).
    pub(super) fn restored_from(&self, method: &Method) -> Option<u64> {
        if *method != Method::PUT && *method != Method::POST {
            return None;
        }
        let n = RESTORING.try_with(|n| *n).ok()?;
        self.known_extensions()
            .is_some_and(|e| e.restore_marks)
            .then_some(n)
    }

    /// One attempt through a [`LocalService`], bounded by the client's timeout; no answer in
    /// time, or a failed call, is an answer lost after sending.
    pub(super) async fn call_local(
        &self,
        service: &dyn LocalService,
        request: http::Request<Vec<u8>>,
        url: &str,
    ) -> std::result::Result<retry::Answer, Attempt> {
        let lost = |message: String, timeout: bool| Attempt {
            failure: Failure::Lost,
            error: Error::from(ContextQError::Transport(crate::transport::TransportError {
                url: url.to_string(),
                message: message.replace(
                    self.key.expose(),
                    &contextq_api::mask_secret(self.key.expose()),
                ),
                timeout,
                sent: true,
            })),
            retry_after: None,
        };
        match tokio::time::timeout(self.timeout, service.call(request)).await {
            Ok(Ok(response)) => {
                let (parts, body) = response.into_parts();
                Ok(retry::Answer {
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    body,
                })
            }
            Ok(Err(e)) => Err(lost(
                format!("the server in this process failed: {e}"),
                false,
            )),
            Err(_) => Err(lost(
                format!(
                    "the server in this process did not answer within {:?}",
                    self.timeout
                ),
                true,
            )),
        }
    }

    pub(super) fn decode<T: DeserializeOwned>(&self, path: &str, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| {
            Error::from(ContextQError::Protocol {
                url: format!("{}{}", self.base_url, path),
                message: format!("invalid JSON: {e}"),
            })
        })
    }

    /// `body` as JSON for the request to `path`.
    pub(super) fn encode<B: serde::Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<serde_json::Value> {
        serde_json::to_value(body).map_err(|e| {
            Error::from(ContextQError::Protocol {
                url: format!("{}{path}", self.base_url),
                message: format!("cannot encode the request: {e}"),
            })
        })
    }
}

#[cfg(test)]
mod query_tests {
    use super::with_query;

    #[test]
    fn only_given_parameters_go_in_the_query_encoded() {
        assert_eq!(with_query("/p", &[("a", None)]), "/p");
        assert_eq!(
            with_query(
                "/p",
                &[
                    ("a", Some("x/y z".into())),
                    ("b", None),
                    ("c", Some("1".into()))
                ]
            ),
            "/p?a=x%2Fy%20z&c=1"
        );
    }
}
