//! Retry policy of the ContextQ client: exponential backoff with jitter, `Retry-After`
//! honoured, bounded in count and in total time, and only where repeating is safe.
//!
//! Whether a failure may be retried depends on what the request does ([`Idempotency`]):
//!
//! | failure | `Safe` (GET, plain upsert, PUT without `If-Match`) | `Unsafe` (conditional writes, create-only, DELETE) |
//! |---|---|---|
//! | connection refused (never sent) | retry | retry |
//! | 429, 503 (refused before doing anything) | retry | retry |
//! | timeout, dropped connection, 500, 502, 504 | retry | **no**: the outcome is unknown, the caller reconciles by reading back |
//! | other 4xx | no | no |

use std::time::Duration;

/// How to retry. Defaults: 3 retries, 100 ms first backoff doubling to at most 5 s, 30 s in all.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Whether repeating a request can change the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotency {
    /// Repeating it is harmless.
    Safe,
    /// Repeating it after an unknown outcome could apply it twice or misreport it.
    Unsafe,
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
            Failure::Connect | Failure::Status(429) | Failure::Status(503) => true,
            Failure::Lost | Failure::Status(500 | 502 | 504) => kind == Idempotency::Safe,
            Failure::Status(_) => false,
        }
    }

    /// Backoff before retry number `retry` (0-based): exponential, full jitter in [50%, 100%].
    pub fn backoff(&self, retry: u32) -> Duration {
        let base = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retry.min(20)))
            .min(self.max_backoff);
        let jitter = 0.5 + fastrand::f64() * 0.5;
        base.mul_f64(jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_things_repeat() {
        use Failure::*;
        use Idempotency::*;
        for f in [Connect, Status(429), Status(503)] {
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
        ] {
            assert!(!RetryConfig::retryable(Safe, f));
        }
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
}
