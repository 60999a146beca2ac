//! The extension probe: what the server implements, learnt from its answers' header or asked
//! once (`GET /api/contexts?limit=1`), and the write key a keyed write sends.

use super::*;

impl Client {
    /// The extensions learnt so far, without a request (`None` before the first answer).
    pub fn known_extensions(&self) -> Option<Extensions> {
        let mut e = *self.learnt.advertised.get()?;
        e.conditional_requests |= self
            .learnt
            .etag_seen
            .load(std::sync::atomic::Ordering::Relaxed);
        Some(e)
    }

    /// The extensions of the server: learnt from earlier answers, else from one probe
    /// (`GET /api/contexts?limit=1`, which every ContextQ answers for a key with `read`).
    /// Cached for the life of the client and its clones.
    pub async fn extensions(&self) -> Result<Extensions> {
        if let Some(e) = self.known_extensions() {
            return Ok(e);
        }
        self.request(
            Method::GET,
            "/api/contexts?limit=1",
            None,
            None,
            Idempotency::Read,
        )
        .await?;
        Ok(self.known_extensions().unwrap_or_default())
    }

    /// A fresh `Idempotency-Key` for one write, when the server records outcomes (extension
    /// `idempotency`), and how the retry engine may repeat the write: with the key, `Keyed` (a
    /// repeat is answered with what the first applied attempt did); without, `otherwise`.
    pub(super) async fn write_key(
        &self,
        otherwise: Idempotency,
    ) -> Result<(Option<String>, Idempotency)> {
        Ok(if self.extensions().await?.idempotency {
            (
                Some(format!("mt-{:032x}", fastrand::u128(..))),
                Idempotency::Keyed,
            )
        } else {
            (None, otherwise)
        })
    }

    pub(super) fn learn(&self, headers: &reqwest::header::HeaderMap, etag: Option<i64>) {
        if self.learnt.advertised.get().is_none() {
            let advertised = headers
                .get(EXTENSIONS_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(Extensions::parse)
                .unwrap_or_default();
            let _ = self.learnt.advertised.set(advertised);
        }
        if etag.is_some() {
            self.learnt
                .etag_seen
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
