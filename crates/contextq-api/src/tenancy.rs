//! What a tenant may hold ([`Plan`]) and what a key may do ([`Scope`]).

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A tenant's plan: caps the number of contexts and of workspaces it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    /// 100 contexts, 10 workspaces.
    Free,
    /// 10,000 contexts, 1,000 workspaces.
    Pro,
    /// No cap on either.
    Unlimited,
}

impl Plan {
    /// The cap on contexts, if any.
    pub fn context_cap(self) -> Option<i64> {
        match self {
            Plan::Free => Some(100),
            Plan::Pro => Some(10_000),
            Plan::Unlimited => None,
        }
    }

    /// The cap on workspaces (a Memory Stores store is one), if any.
    pub fn workspace_cap(self) -> Option<i64> {
        match self {
            Plan::Free => Some(10),
            Plan::Pro => Some(1_000),
            Plan::Unlimited => None,
        }
    }

    /// The largest finite [`Plan::workspace_cap`]: how far a count of a tenant's workspaces
    /// needs to go (one past it) to decide any plan's cap.
    pub const MAX_WORKSPACE_CAP: i64 = 1_000;

    /// The name stored and shown: `free`, `pro`, `unlimited`.
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Unlimited => "unlimited",
        }
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Plan {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        [Plan::Free, Plan::Pro, Plan::Unlimited]
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| Error::UnknownPlan {
                given: s.to_string(),
            })
    }
}

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The `GET` endpoints.
    Read,
    /// Create, update and delete contexts.
    Write,
    /// Create, archive and delete workspaces.
    Admin,
}

impl Scope {
    /// The scope's name: `read`, `write`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Parses `read,write` (commas or spaces; sorted, without duplicates); at least one.
    pub fn parse_list(s: &str) -> Result<Vec<Scope>, Error> {
        let mut scopes: Vec<Scope> = s
            .split([',', ' '])
            .filter(|p| !p.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        scopes.sort();
        scopes.dedup();
        if scopes.is_empty() {
            return Err(Error::NoScopes);
        }
        Ok(scopes)
    }

    /// Scopes as stored and shown: `read,write`.
    pub fn format_list(scopes: &[Scope]) -> String {
        scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl std::str::FromStr for Scope {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim() {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(Error::UnknownScope {
                given: other.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_and_scopes_parse_and_name_what_to_change() {
        assert_eq!("pro".parse::<Plan>().unwrap(), Plan::Pro);
        assert_eq!(Plan::Free.context_cap(), Some(100));
        let e = "gold".parse::<Plan>().unwrap_err().to_string();
        assert!(e.contains("free, pro or unlimited"), "{e}");
        assert_eq!(
            Scope::parse_list("write, read,read").unwrap(),
            vec![Scope::Read, Scope::Write]
        );
        assert_eq!(
            Scope::format_list(&[Scope::Read, Scope::Admin]),
            "read,admin"
        );
        assert!(Scope::parse_list(" , ").is_err());
        let e = Scope::parse_list("read,root").unwrap_err().to_string();
        assert!(
            e.contains("root") && e.contains("read, write or admin"),
            "{e}"
        );
    }
}
