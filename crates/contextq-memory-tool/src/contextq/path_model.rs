//! Which path model a key gets: the one rule every transport (stdio, `mcp --http`, `serve`'s
//! `/mcp`, the CLI's commands) asks, so that one key sees one tree whichever door it uses.
//!
//! - A key limited to exactly one workspace sees that workspace as `/memories` (pinned),
//!   whatever the process pins: it could reach nothing else.
//! - A key limited to several workspaces sees the pinned workspace when the process pins one it
//!   reaches, else the per-workspace model (the first folder under `/memories` is the
//!   workspace).
//! - A key of the whole tenant sees the process's pinned workspace when there is one, else the
//!   per-workspace model.

/// What a key reaches, as ContextQ says ([`super::Client::key_reach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyReach {
    /// Every workspace of its tenant (every key of a ContextQ without `workspace-keys`).
    Tenant,
    /// Only these workspaces (slugs).
    Workspaces(Vec<String>),
}

/// How `/memories` maps onto workspaces for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathModel {
    /// `/memories` is this workspace.
    Pinned(String),
    /// The first folder under `/memories` is the workspace.
    PerWorkspace,
}

impl PathModel {
    /// The workspace to pin [`super::ContextQMemoryToolOptions::workspace`] to, if any.
    pub fn pinned(&self) -> Option<&str> {
        match self {
            PathModel::Pinned(slug) => Some(slug),
            PathModel::PerWorkspace => None,
        }
    }
}

/// The path model of a key that reaches `reach`, in a process that pins `pin` (its
/// `--workspace`, or the embedded store's own workspace); see the module's rule.
pub fn path_model(reach: &KeyReach, pin: Option<&str>) -> PathModel {
    match (reach, pin) {
        (KeyReach::Workspaces(slugs), _) if slugs.len() == 1 => PathModel::Pinned(slugs[0].clone()),
        (KeyReach::Workspaces(slugs), Some(pin)) if slugs.iter().any(|s| s == pin) => {
            PathModel::Pinned(pin.to_string())
        }
        (KeyReach::Workspaces(_), _) => PathModel::PerWorkspace,
        (KeyReach::Tenant, Some(pin)) => PathModel::Pinned(pin.to_string()),
        (KeyReach::Tenant, None) => PathModel::PerWorkspace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(slugs: &[&str]) -> KeyReach {
        KeyReach::Workspaces(slugs.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn one_workspace_is_pinned_whatever_the_process_pins() {
        for pin in [None, Some("default"), Some("acme")] {
            assert_eq!(
                path_model(&ws(&["acme"]), pin),
                PathModel::Pinned("acme".into())
            );
        }
    }

    #[test]
    fn several_workspaces_take_a_pin_they_reach_else_one_folder_each() {
        let two = ws(&["acme", "billing"]);
        assert_eq!(path_model(&two, None), PathModel::PerWorkspace);
        assert_eq!(path_model(&two, Some("default")), PathModel::PerWorkspace);
        assert_eq!(
            path_model(&two, Some("billing")),
            PathModel::Pinned("billing".into())
        );
    }

    #[test]
    fn the_tenant_takes_the_process_pin() {
        assert_eq!(path_model(&KeyReach::Tenant, None), PathModel::PerWorkspace);
        assert_eq!(
            path_model(&KeyReach::Tenant, Some("default")),
            PathModel::Pinned("default".into())
        );
        assert_eq!(PathModel::Pinned("x".into()).pinned(), Some("x"));
        assert_eq!(PathModel::PerWorkspace.pinned(), None);
    }
}
