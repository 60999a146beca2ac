//! The one retry engine of this crate's HTTP clients (ContextQ and the Claude Messages API):
//! exponential backoff with jitter, `Retry-After` honoured, bounded in count and in total time,
//! every retry logged as "retry n of max", and only where repeating is safe. Also the crate's
//! other backoff, [`Backoff`] (the tool's waits after a lost race), drawn under the same
//! exponential ceiling.
//!
//! Whether a failure may be retried depends on what the request does ([`Idempotency`]), which
//! each request states explicitly:
//!
//! | failure | `Safe` (reads, plain upserts, `PUT` without `If-Match`, Messages API calls) and `Keyed` (a write with an `Idempotency-Key` to a server that records outcomes) | `Unsafe` (conditional writes, create-only, `DELETE`, without a key) |
//! |---|---|---|
//! | connection refused (never sent) | retry | retry |
//! | 429, 503, 529 (refused before doing anything) | retry | retry |
//! | timeout, dropped connection, truncated body, 500, 502, 504 | retry | **no**: the outcome is unknown, the caller reconciles by reading back |
//! | other statuses | no | no |
//!
//! After an attempt that may have been applied, a later refusal of a `Safe` write says nothing
//! of it (the outcome stays unknown); a `Keyed` write's later answer other than 429, 503 or
//! 529 *is* its outcome (the server answered the repeat with what the first run did).
//!
//! An outage is ridden out on time, not on count: for a client that follows outages (the
//! ContextQ client), a 503 and a refused connection to a server that has answered it before do
//! not use up [`RetryConfig::max_retries`]; they are retried until
//! [`RetryConfig::retry_timeout`] (30 s by default), each wait at most [`OUTAGE_MAX_BACKOFF`], so
//! that a database failover of a few seconds costs the caller nothing. A refused connection
//! before the server ever answered (a wrong URL, a server not started) still fails after the
//! counted retries, in under a second.

// Without a client (neither `contextq` nor `runner`), only `Backoff` is used here.
#![cfg_attr(not(any(feature = "contextq", feature = "runner")), allow(dead_code))]

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
pub use crate::transport::TransportError;

/// How to retry. Defaults: 3 retries, 100 ms first backoff doubling to at most 5 s, 30 s in all.
/// Built from `Default` with its setters: `RetryConfig::default().max_retries(5)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryConfig {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles every retry.
    pub initial_backoff: Duration,
    /// Largest backoff.
    pub max_backoff: Duration,
    /// Total time after which no retry starts (a `Retry-After` beyond it ends retrying).
    pub retry_timeout: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(30),
        }
    }
}

contextq_api::setters!(RetryConfig {
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    retry_timeout: Duration,
});

/// Longest wait between two tries during an outage: short, so that the first request after
/// the service is back is not long in coming.
pub const OUTAGE_MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Whether repeating a request can change the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// A read, or a request with no lasting effect (a Messages API call): repeating it is
    /// harmless, and a lost attempt applied nothing, so a later answer (a 404, say) is the
    /// outcome.
    Read,
    /// A write that is harmless to repeat (a PUT of the whole content, an edit with an
    /// idempotency key); a lost attempt may still have been applied, so a later refusal does
    /// not hide it.
    Safe,
    /// Repeating it after an unknown outcome could apply it twice or misreport it.
    Unsafe,
    /// A write sent with an `Idempotency-Key` to a server that records outcomes (extension
    /// `idempotency`): every attempt carries the same key, so a repeat is answered with what the
    /// first applied attempt did, and an answer to it is the write's outcome.
    Keyed,
}

/// What went wrong with one attempt, for the retry decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection could not be made: the request was never sent.
    Connect,
    /// Sent, but no complete answer (timeout, reset, truncated body).
    Lost,
    /// An HTTP status.
    Status(u16),
}

impl RetryConfig {
    /// Whether `failure` of a request of `kind` may be retried.
    pub fn retryable(kind: Idempotency, failure: Failure) -> bool {
        match failure {
            Failure::Connect | Failure::Status(429 | 503 | 529) => true,
            Failure::Lost | Failure::Status(500 | 502 | 504) => kind != Idempotency::Unsafe,
            Failure::Status(_) => false,
        }
    }

    /// Whether a request that failed so may still have been applied by the server.
    pub fn may_have_applied(failure: Failure) -> bool {
        match failure {
            Failure::Lost => true,
            Failure::Status(s) => s >= 500 && s != 503 && s != 529,
            Failure::Connect => false,
        }
    }

    /// Whether `failure` says the service is down for now rather than refusing this request:
    /// a 503, or a refused connection once the service has answered (`reached`).
    pub fn is_outage(failure: Failure, reached: bool) -> bool {
        match failure {
            Failure::Status(503) => true,
            Failure::Connect => reached,
            _ => false,
        }
    }

    /// Backoff before retry number `retry` (0-based): exponential, jitter in [50%, 100%] (a
    /// retry after a failure waits at least half its ceiling: the service needs the time).
    pub fn backoff(&self, retry: u32) -> Duration {
        let jitter = 0.5 + fastrand::f64() * 0.5;
        ceiling(self.initial_backoff, self.max_backoff, retry).mul_f64(jitter)
    }
}

/// The ceiling of wait number `n` (0-based) of an exponential backoff: `base` doubled `n`
/// times, at most `max`. Both backoffs of the crate draw their waits under it.
fn ceiling(base: Duration, max: Duration, n: u32) -> Duration {
    base.saturating_mul(2u32.saturating_pow(n.min(20))).min(max)
}

/// The waits between attempts of a write that lost a race to another writer (the tool's
/// conditional writes): exponential from 2 ms, doubling to at most 1 s, each drawn uniformly
/// from zero to that ceiling ("full jitter": writers that collided once spread out, and nothing
/// failed, so no wait is owed), within a time budget that starts at the first attempt; the last
/// wait is cut to what is left of the budget, so one more attempt is made at its end. The 1 s
/// ceiling keeps many writers on one file from starving one another (a lower one did;
/// docs/benchmarks.md has the measurement).
#[derive(Debug)]
pub struct Backoff {
    started: Instant,
    budget: Duration,
    attempts: usize,
}

impl Backoff {
    /// The first wait's ceiling.
    pub const BASE: Duration = Duration::from_millis(2);
    /// The largest ceiling.
    pub const MAX: Duration = Duration::from_secs(1);

    /// A backoff whose budget starts now.
    pub fn new(budget: Duration) -> Backoff {
        Backoff {
            started: Instant::now(),
            budget,
            attempts: 1,
        }
    }

    /// After a lost race: waits before the next attempt and returns `true`, or returns
    /// `false` at once when the budget is spent.
    pub async fn retry(&mut self) -> bool {
        let Some(left) = self.budget.checked_sub(self.started.elapsed()) else {
            return false;
        };
        if left.is_zero() {
            return false;
        }
        let n = u32::try_from(self.attempts - 1).unwrap_or(u32::MAX);
        let wait = ceiling(Self::BASE, Self::MAX, n)
            .mul_f64(fastrand::f64())
            .min(left);
        tokio::time::sleep(wait).await;
        self.attempts += 1;
        true
    }

    /// Attempts so far (the first included).
    pub fn attempts(&self) -> usize {
        self.attempts
    }

    /// Time since the first attempt.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// A failed attempt: why (for the retry decision), the error to return if it is the last one,
/// and the server's `Retry-After`.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) failure: Failure,
    pub(crate) error: Error,
    pub(crate) retry_after: Option<Duration>,
}

/// One HTTP answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// `Retry-After` in whole seconds, when given.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    }
}

/// Sends `request` and reads the whole answer (the HTTP clients only: features `contextq` and
/// `runner`); a transport failure (never sent, or no complete
/// answer) becomes an [`Attempt`] whose error (`wrap`ped into the client's own) never shows
/// `secret` (it is masked).
#[cfg(any(feature = "contextq", feature = "runner"))]
pub(crate) async fn exchange(
    request: reqwest::RequestBuilder,
    url: &str,
    secret: &str,
    wrap: fn(TransportError) -> Error,
) -> std::result::Result<Answer, Attempt> {
    let transport = |e: reqwest::Error, failure: Failure| {
        use std::error::Error as _;
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Attempt {
            failure,
            error: wrap(TransportError {
                url: url.to_string(),
                message: message.replace(secret, &contextq_api::mask_secret(secret)),
                timeout: e.is_timeout(),
                sent: failure != Failure::Connect,
            }),
            retry_after: None,
        }
    };
    let response = request.send().await.map_err(|e| {
        let failure = if e.is_connect() {
            Failure::Connect
        } else {
            Failure::Lost
        };
        transport(e, failure)
    })?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| transport(e, Failure::Lost))?;
    Ok(Answer {
        status,
        headers,
        body: body.to_vec(),
    })
}

/// Runs `attempt` until it succeeds, fails in a way that must not be retried for `kind`, or the
/// budget (retries or total time) is spent; then returns the last error, unless an earlier
/// attempt may have been applied (its answer was lost, or a 500/502/504): then that earlier
/// error, so that the caller knows the outcome is unknown (a later refusal, say a 503, says
/// nothing of the earlier attempt). With `reached` (a client that follows outages: whether the
/// service has answered it before, kept up to date here), an outage ([`RetryConfig::is_outage`])
/// is retried until the time budget only. Every retry is logged at `warn` with the request
/// (`what`, never carrying a secret) and the error.
pub(crate) async fn run<T, F, Fut>(
    config: &RetryConfig,
    service: &str,
    what: &str,
    kind: Idempotency,
    reached: Option<&AtomicBool>,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, Attempt>>,
{
    let started = Instant::now();
    let (mut retry, mut counted) = (0u32, 0u32);
    let mut maybe_applied: Option<Error> = None;
    loop {
        let failed = match attempt().await {
            Ok(done) => {
                if let Some(reached) = reached {
                    reached.store(true, Ordering::Relaxed);
                }
                return Ok(done);
            }
            Err(failed) => failed,
        };
        let outage = reached.is_some_and(|reached| {
            if matches!(failed.failure, Failure::Status(_)) {
                reached.store(true, Ordering::Relaxed);
            }
            RetryConfig::is_outage(failed.failure, reached.load(Ordering::Relaxed))
        });
        let give_up = |failed: Attempt, maybe_applied: Option<Error>| {
            let answered = matches!(failed.failure, Failure::Status(s) if s < 500 && s != 429);
            if RetryConfig::may_have_applied(failed.failure)
                || (kind == Idempotency::Keyed && answered)
            {
                failed.error
            } else {
                maybe_applied.unwrap_or(failed.error)
            }
        };
        if (!outage && counted >= config.max_retries)
            || !RetryConfig::retryable(kind, failed.failure)
        {
            return Err(give_up(failed, maybe_applied));
        }
        let mut delay = config.backoff(retry);
        if outage {
            delay = delay.min(OUTAGE_MAX_BACKOFF);
        }
        if let Some(after) = failed.retry_after {
            delay = delay.max(after);
        }
        if started.elapsed() + delay > config.retry_timeout {
            return Err(give_up(failed, maybe_applied));
        }
        retry += 1;
        if outage {
            tracing::warn!(
                service,
                request = what,
                retry,
                delay_ms = delay.as_millis() as u64,
                error = %failed.error,
                "{service} is unavailable; retry {retry} in {} ms, for up to {} s in all",
                delay.as_millis(),
                config.retry_timeout.as_secs()
            );
        } else {
            counted += 1;
            tracing::warn!(
                service,
                request = what,
                retry = counted,
                max_retries = config.max_retries,
                delay_ms = delay.as_millis() as u64,
                error = %failed.error,
                "{service} request failed; retry {counted} of {} in {} ms",
                config.max_retries,
                delay.as_millis()
            );
        }
        if kind != Idempotency::Read
            && RetryConfig::may_have_applied(failed.failure)
            && maybe_applied.is_none()
        {
            maybe_applied = Some(failed.error);
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_things_repeat() {
        use Failure::*;
        use Idempotency::*;
        for f in [Connect, Status(429), Status(503), Status(529)] {
            assert!(RetryConfig::retryable(Unsafe, f));
            assert!(RetryConfig::retryable(Safe, f));
        }
        for f in [Lost, Status(500), Status(502), Status(504)] {
            assert!(!RetryConfig::retryable(Unsafe, f));
            assert!(RetryConfig::retryable(Safe, f));
        }
        for f in [
            Status(400),
            Status(404),
            Status(409),
            Status(412),
            Status(402),
            Status(501),
        ] {
            assert!(!RetryConfig::retryable(Safe, f));
        }
    }

    #[test]
    fn what_may_have_been_applied() {
        use Failure::*;
        for f in [Lost, Status(500), Status(502), Status(504)] {
            assert!(RetryConfig::may_have_applied(f), "{f:?}");
        }
        for f in [
            Connect,
            Status(503),
            Status(529),
            Status(429),
            Status(404),
            Status(409),
        ] {
            assert!(!RetryConfig::may_have_applied(f), "{f:?}");
        }
    }

    #[test]
    fn retry_after_is_whole_seconds_when_given() {
        let answer = |v: Option<&str>| {
            let mut headers = http::HeaderMap::new();
            if let Some(v) = v {
                headers.insert(http::header::RETRY_AFTER, v.parse().unwrap());
            }
            Answer {
                status: 429,
                headers,
                body: Vec::new(),
            }
        };
        assert_eq!(
            answer(Some("3")).retry_after(),
            Some(Duration::from_secs(3))
        );
        assert_eq!(answer(None).retry_after(), None);
        // A date is not read (the server sends seconds).
        assert_eq!(
            answer(Some("Wed, 21 Oct 2015 07:28:00 GMT")).retry_after(),
            None
        );
    }

    /// A connection refused was never sent (nothing can have been applied); an answer dropped
    /// after the request was read may have been.
    #[cfg(any(feature = "contextq", feature = "runner"))]
    #[tokio::test]
    async fn a_refused_connection_was_not_sent_and_a_dropped_answer_was() {
        use tokio::io::AsyncReadExt as _;
        let wrap: fn(TransportError) -> Error = |t| Error::Config {
            message: format!("sent={}", t.sent),
        };
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        // What failed, and whether the request was sent.
        let attempt = async |url: String| {
            let a = exchange(reqwest::Client::new().get(&url), &url, "sk", wrap)
                .await
                .unwrap_err();
            let said = a.error.to_string();
            let sent = [true, false]
                .into_iter()
                .find(|s| said.contains(&format!("sent={s}")));
            (a.failure, sent)
        };
        let refused = attempt(format!("http://127.0.0.1:{port}/x")).await;
        assert_eq!(refused, (Failure::Connect, Some(false)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
        });
        assert_eq!(attempt(url).await, (Failure::Lost, Some(true)));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let c = RetryConfig::default();
        for r in 0..30 {
            let b = c.backoff(r);
            let base = (c.initial_backoff * 2u32.pow(r.min(20))).min(c.max_backoff);
            assert!(b <= base && b >= base / 2, "{r}: {b:?}");
        }
    }

    fn failure(f: Failure) -> Attempt {
        Attempt {
            failure: f,
            error: Error::Config {
                message: format!("{f:?}"),
            },
            retry_after: None,
        }
    }

    /// Runs a request of `kind` whose attempt `n` (from 1) answers `outcome(n)`, for a client
    /// that follows outages when given `reached`; returns the attempts made and the outcome.
    async fn attempts<T>(
        config: &RetryConfig,
        kind: Idempotency,
        reached: Option<&AtomicBool>,
        outcome: impl Fn(usize) -> std::result::Result<T, Attempt>,
    ) -> (usize, Result<T>) {
        let mut n = 0;
        let r = run(config, "test", "POST /x", kind, reached, || {
            n += 1;
            let answer = outcome(n);
            async move { answer }
        })
        .await;
        (n, r)
    }

    /// Runs a request whose first attempt loses its answer and every later one fails with
    /// `then`; returns the attempts made and the outcome.
    async fn lost_then(
        config: &RetryConfig,
        kind: Idempotency,
        then: Failure,
    ) -> (usize, Result<()>) {
        attempts(config, kind, None, |n| {
            Err(failure(if n == 1 { Failure::Lost } else { then }))
        })
        .await
    }

    #[tokio::test]
    async fn the_engine_retries_within_its_budget_and_stops_on_what_is_unsafe() {
        let config = RetryConfig {
            max_retries: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            retry_timeout: Duration::from_secs(5),
        };
        // Two refusals, then success: three attempts.
        let (n, r) = attempts(&config, Idempotency::Unsafe, None, |n| match n {
            1 | 2 => Err(failure(Failure::Status(503))),
            n => Ok(n),
        })
        .await;
        assert_eq!((n, r.unwrap()), (3, 3));
        // A lost answer of an unsafe request: one attempt, its error.
        let lost = |_| Err::<(), _>(failure(Failure::Lost));
        let (n, r) = attempts(&config, Idempotency::Unsafe, None, lost).await;
        assert_eq!(n, 1);
        assert!(r.unwrap_err().to_string().contains("Lost"));
        // Always failing: 1 + max_retries attempts.
        let failing = |_| Err::<(), _>(failure(Failure::Status(500)));
        let (n, r) = attempts(&config, Idempotency::Safe, None, failing).await;
        assert!(r.is_err());
        assert_eq!(n, 4);
        // A Retry-After beyond the time budget ends retrying at once.
        let (n, r) = attempts(&config, Idempotency::Safe, None, |_| {
            let mut a = failure(Failure::Status(429));
            a.retry_after = Some(Duration::from_secs(60));
            Err::<(), _>(a)
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n, 1);
        // A lost answer, then refusals: the refusals say nothing of the first attempt, which
        // may have been applied; its error is the one returned (found by the soak).
        let (n, r) = lost_then(&config, Idempotency::Safe, Failure::Status(503)).await;
        assert_eq!(n, 4);
        assert!(r.unwrap_err().to_string().contains("Lost"));
        // A read applies nothing: a lost answer, then a 404, is a 404 (a lost attempt reported
        // instead made a create's existence check fail 2% of the time in the plain soak).
        let (n, r) = lost_then(&config, Idempotency::Read, Failure::Status(404)).await;
        assert_eq!(n, 2);
        assert!(
            r.unwrap_err().to_string().contains("404"),
            "the later answer"
        );
        // A keyed write: the server answered the repeat with the first run's outcome, so a
        // refusal after a lost answer is the outcome; a 503 still says nothing of it.
        let (n, r) = lost_then(&config, Idempotency::Keyed, Failure::Status(404)).await;
        assert_eq!(n, 2);
        assert!(r.unwrap_err().to_string().contains("404"));
        let (n, r) = lost_then(&config, Idempotency::Keyed, Failure::Status(503)).await;
        assert_eq!(n, 4);
        assert!(r.unwrap_err().to_string().contains("Lost"));
        // A Safe write's 404 after a lost answer is not its outcome.
        let (_, r) = lost_then(&config, Idempotency::Safe, Failure::Status(404)).await;
        assert!(r.unwrap_err().to_string().contains("Lost"));
    }

    /// Runs a request that fails with `f` every time, for a client that follows outages and
    /// has (`reached`) or has not been answered before; returns the attempts made.
    async fn always(config: &RetryConfig, f: Failure, reached: Option<bool>) -> usize {
        let flag = reached.map(AtomicBool::new);
        let read = Idempotency::Read;
        let (n, r) = attempts(config, read, flag.as_ref(), |_| Err::<(), _>(failure(f))).await;
        assert!(r.is_err());
        n
    }

    #[tokio::test]
    async fn an_outage_is_ridden_out_on_time_not_on_count() {
        let config = RetryConfig {
            max_retries: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            retry_timeout: Duration::from_millis(400),
        };
        // A 503 to a client that follows outages: tried until the time budget, far past the
        // count; to one that does not (the Messages API): 1 + max_retries.
        assert!(always(&config, Failure::Status(503), Some(false)).await > 20);
        assert_eq!(always(&config, Failure::Status(503), None).await, 4);
        // A refused connection: an outage once the server has answered, a wrong URL before.
        assert!(always(&config, Failure::Connect, Some(true)).await > 20);
        assert_eq!(always(&config, Failure::Connect, Some(false)).await, 4);
        // Neither a 500 nor a 429 is an outage.
        assert_eq!(always(&config, Failure::Status(500), Some(true)).await, 4);
        assert_eq!(always(&config, Failure::Status(429), Some(true)).await, 4);
        // An answer marks the server reached: a 503, then refused connections, ride on.
        let reached = AtomicBool::new(false);
        let (n, r) = attempts(&config, Idempotency::Read, Some(&reached), |n| {
            Err::<(), _>(failure(match n {
                1 => Failure::Status(503),
                _ => Failure::Connect,
            }))
        })
        .await;
        assert!(r.is_err() && n > 20, "{n}");
        assert!(reached.load(Ordering::Relaxed));
        // A success marks it too.
        let reached = AtomicBool::new(false);
        let (_, r) = attempts(&config, Idempotency::Read, Some(&reached), |_| Ok(())).await;
        assert!(r.is_ok() && reached.load(Ordering::Relaxed));
        // Each wait of an outage is at most OUTAGE_MAX_BACKOFF, however long the backoff grew.
        let slow = RetryConfig {
            initial_backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(10),
            retry_timeout: Duration::from_secs(3),
            ..config
        };
        let started = Instant::now();
        let n = always(&slow, Failure::Status(503), Some(true)).await;
        assert!(n >= 2, "{n}");
        assert!(
            started.elapsed() <= Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn the_race_backoff_grows_and_stops_at_the_budget() {
        let budget = Duration::from_millis(300);
        let mut backoff = Backoff::new(budget);
        let mut waits = 0;
        while backoff.retry().await {
            waits += 1;
            assert!(waits < 1_000, "never stopped");
        }
        // The first seven ceilings (2, 4, ..., 128 ms) add up to 254 ms: they always fit.
        assert!(waits >= 7, "{waits} waits");
        // The last wait ends at the budget, not past it.
        assert_eq!(backoff.attempts(), waits + 1);
        let spent = backoff.elapsed();
        assert!(spent <= budget + Duration::from_millis(50), "{spent:?}");
        // No budget: no second attempt.
        assert!(!Backoff::new(Duration::ZERO).retry().await);
    }

    #[test]
    fn ceilings_double_and_stop_at_their_maximum() {
        let (base, max) = (Duration::from_millis(2), Duration::from_secs(1));
        assert_eq!(ceiling(base, max, 0), base);
        assert_eq!(ceiling(base, max, 3), Duration::from_millis(16));
        assert_eq!(ceiling(base, max, 9), max);
        assert_eq!(ceiling(base, max, u32::MAX), max);
    }
}
