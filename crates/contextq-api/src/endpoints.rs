//! The contract's endpoints, one row each: its method, its path pattern and the extension that
//! adds it (none for the seed's own). The server's routes are checked against this table by a
//! test, and the test proxy that plays a plain ContextQ refuses what it marks as an extension,
//! so the two can never disagree about which endpoint belongs to whom.

/// One endpoint of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The path, `{name}` standing for one segment (`/api/contexts/{id}`).
    pub path: &'static str,
    /// The extension's token (`Extensions::TOKENS`) that adds it; `None`: the seed's contract.
    pub extension: Option<&'static str>,
}

const fn seed(method: &'static str, path: &'static str) -> Endpoint {
    Endpoint {
        method,
        path,
        extension: None,
    }
}

const fn ext(method: &'static str, path: &'static str, token: &'static str) -> Endpoint {
    Endpoint {
        method,
        path,
        extension: Some(token),
    }
}

/// Every endpoint of the contract (`docs/contextq-api.md`). The server's operational
/// endpoints (`/ready`, `/metrics`, the inspector's `/ui`) are not part of it.
pub const ENDPOINTS: &[Endpoint] = &[
    seed("GET", "/health"),
    seed("GET", "/api/workspaces"),
    seed("POST", "/api/workspaces"),
    seed("POST", "/api/workspaces/{slug}/archive"),
    seed("DELETE", "/api/workspaces/{slug}"),
    seed("GET", "/api/contexts"),
    seed("POST", "/api/contexts/bulk-upsert"),
    seed("GET", "/api/contexts/by-external/{external_id}"),
    seed("GET", "/api/contexts/{id}"),
    seed("PUT", "/api/contexts/{id}"),
    seed("DELETE", "/api/contexts/{id}"),
    ext("GET", "/api/contexts/tree", "tree"),
    ext("GET", "/api/contexts/search", "search"),
    ext("POST", "/api/contexts/by-prefix/delete", "by-prefix"),
    ext("POST", "/api/contexts/by-prefix/rename", "by-prefix"),
    ext(
        "DELETE",
        "/api/contexts/by-external/{external_id}",
        "delete-by-external",
    ),
    ext(
        "POST",
        "/api/contexts/by-external/{external_id}/edit",
        "text-edit",
    ),
    ext(
        "POST",
        "/api/contexts/by-external/{external_id}/rename",
        "rename",
    ),
    ext(
        "GET",
        "/api/contexts/by-external/{external_id}/versions",
        "history",
    ),
    ext(
        "GET",
        "/api/contexts/by-external/{external_id}/versions/{version}",
        "history",
    ),
    ext(
        "GET",
        "/api/contexts/by-external/{external_id}/diff",
        "diff",
    ),
    ext("GET", "/api/contexts/{id}/versions", "history"),
    ext("GET", "/api/contexts/{id}/versions/{version}", "history"),
    ext("GET", "/api/history", "history"),
    ext("GET", "/api/audit", "audit-log"),
    ext("POST", "/api/redactions", "redaction"),
    ext("GET", "/v1/memory_stores", "memory-stores"),
    ext("POST", "/v1/memory_stores", "memory-stores"),
    ext("GET", "/v1/memory_stores/{store_id}", "memory-stores"),
    ext("POST", "/v1/memory_stores/{store_id}", "memory-stores"),
    ext("DELETE", "/v1/memory_stores/{store_id}", "memory-stores"),
    ext(
        "POST",
        "/v1/memory_stores/{store_id}/archive",
        "memory-stores",
    ),
    ext(
        "GET",
        "/v1/memory_stores/{store_id}/memories",
        "memory-stores",
    ),
    ext(
        "POST",
        "/v1/memory_stores/{store_id}/memories",
        "memory-stores",
    ),
    ext(
        "GET",
        "/v1/memory_stores/{store_id}/memories/{memory_id}",
        "memory-stores",
    ),
    ext(
        "POST",
        "/v1/memory_stores/{store_id}/memories/{memory_id}",
        "memory-stores",
    ),
    ext(
        "DELETE",
        "/v1/memory_stores/{store_id}/memories/{memory_id}",
        "memory-stores",
    ),
    ext(
        "GET",
        "/v1/memory_stores/{store_id}/memory_versions",
        "memory-stores",
    ),
    ext(
        "GET",
        "/v1/memory_stores/{store_id}/memory_versions/{version_id}",
        "memory-stores",
    ),
    ext(
        "POST",
        "/v1/memory_stores/{store_id}/memory_versions/{version_id}/redact",
        "memory-stores",
    ),
];

/// The endpoint `method path` reaches (the query, if any, ignored), as a router matches it: a
/// literal segment before a `{name}` one, so `/api/contexts/tree` is not `/api/contexts/{id}`.
pub fn find(method: &str, path: &str) -> Option<&'static Endpoint> {
    let path = path.split('?').next().unwrap_or("");
    let given: Vec<&str> = path.split('/').collect();
    // Among the patterns the path fits, the one whose first parameter comes latest.
    let fit = |pattern: &str| -> Option<usize> {
        let segments: Vec<&str> = pattern.split('/').collect();
        if segments.len() != given.len() {
            return None;
        }
        let mut first_param = segments.len();
        for (i, (p, g)) in segments.iter().zip(&given).enumerate() {
            if p.starts_with('{') {
                if g.is_empty() {
                    return None;
                }
                first_param = first_param.min(i);
            } else if p != g {
                return None;
            }
        }
        Some(first_param)
    };
    let best = ENDPOINTS
        .iter()
        .filter_map(|e| fit(e.path).map(|rank| (rank, e.path)))
        .max_by_key(|(rank, _)| *rank)?
        .1;
    ENDPOINTS
        .iter()
        .find(|e| e.path == best && e.method == method)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extensions::Extensions;

    #[test]
    fn literal_segments_win_and_methods_count() {
        let f = |m, p| find(m, p).map(|e| (e.path, e.extension));
        assert_eq!(
            f("GET", "/api/contexts/tree?prefix=a"),
            Some(("/api/contexts/tree", Some("tree")))
        );
        assert_eq!(
            f("GET", "/api/contexts/c_1"),
            Some(("/api/contexts/{id}", None))
        );
        assert_eq!(
            f("DELETE", "/api/contexts/by-external/a%2Fb"),
            Some((
                "/api/contexts/by-external/{external_id}",
                Some("delete-by-external")
            ))
        );
        // `tree` is taken by its literal route, which has no PUT: not `/api/contexts/{id}`.
        assert_eq!(f("PUT", "/api/contexts/tree"), None);
        assert_eq!(f("GET", "/api/contexts/"), None);
        assert_eq!(f("GET", "/nothing"), None);
    }

    #[test]
    fn every_extension_named_is_one_of_the_contract() {
        for e in ENDPOINTS {
            if let Some(token) = e.extension {
                assert!(Extensions::TOKENS.contains(&token), "{token}");
            }
        }
    }
}
