//! `context_management` with the memory tool protected by default.
//!
//! Anthropic's context editing (`clear_tool_uses_20250919`) clears old tool results once its
//! trigger fires, the memory tool's included, unless the request lists the tool in
//! `exclude_tools`. [`ClearToolUses`] always puts `"memory"` there (the TypeScript package's warning turned into
//! a default) and [`ClearToolUses::apply`] adds the beta header the feature needs.

use serde_json::{Value, json};

use super::MessageRequest;
use crate::protocol::TOOL_NAME;

/// The beta that enables context management (and the memory tool).
pub const CONTEXT_MANAGEMENT_BETA: &str = "context-management-2025-06-27";

/// The `clear_tool_uses_20250919` edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearToolUses {
    /// Clear once the input reaches this many tokens (default 30,000).
    pub trigger_input_tokens: u64,
    /// Keep this many most recent tool uses (`keep`).
    pub keep_tool_uses: Option<u64>,
    /// Clear at least this many tokens when clearing (`clear_at_least`).
    pub clear_at_least_input_tokens: Option<u64>,
    /// Also clear tool inputs (`clear_tool_inputs`).
    pub clear_tool_inputs: Option<bool>,
    /// Tools whose results are never cleared; `memory` is always added.
    pub exclude_tools: Vec<String>,
}

impl Default for ClearToolUses {
    fn default() -> Self {
        ClearToolUses {
            trigger_input_tokens: 30_000,
            keep_tool_uses: None,
            clear_at_least_input_tokens: None,
            clear_tool_inputs: None,
            exclude_tools: Vec::new(),
        }
    }
}

impl ClearToolUses {
    /// The edit object.
    pub fn edit(&self) -> Value {
        let mut exclude = vec![TOOL_NAME.to_string()];
        for t in &self.exclude_tools {
            if !exclude.contains(t) {
                exclude.push(t.clone());
            }
        }
        let mut edit = json!({
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": self.trigger_input_tokens},
            "exclude_tools": exclude,
        });
        if let Some(n) = self.keep_tool_uses {
            edit["keep"] = json!({"type": "tool_uses", "value": n});
        }
        if let Some(n) = self.clear_at_least_input_tokens {
            edit["clear_at_least"] = json!({"type": "input_tokens", "value": n});
        }
        if let Some(b) = self.clear_tool_inputs {
            edit["clear_tool_inputs"] = json!(b);
        }
        edit
    }

    /// `{"edits": [edit]}`.
    pub fn context_management(&self) -> Value {
        json!({"edits": [self.edit()]})
    }

    /// Sets the request's `context_management` and adds the beta it needs.
    pub fn apply(&self, request: MessageRequest) -> MessageRequest {
        let mut request = request.beta(CONTEXT_MANAGEMENT_BETA);
        request.context_management = Some(self.context_management());
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_always_excluded() {
        assert_eq!(
            ClearToolUses::default().context_management(),
            json!({"edits": [{"type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30000}, "exclude_tools": ["memory"]}]})
        );
        let e = ClearToolUses {
            trigger_input_tokens: 50_000,
            keep_tool_uses: Some(3),
            clear_at_least_input_tokens: Some(5_000),
            clear_tool_inputs: Some(true),
            exclude_tools: vec!["web_search".into(), "memory".into()],
        }
        .edit();
        assert_eq!(e["exclude_tools"], json!(["memory", "web_search"]));
        assert_eq!(e["keep"], json!({"type": "tool_uses", "value": 3}));
        assert_eq!(
            e["clear_at_least"],
            json!({"type": "input_tokens", "value": 5000})
        );
        assert_eq!(e["clear_tool_inputs"], json!(true));
        let r = ClearToolUses::default().apply(MessageRequest::new("m", 1));
        assert_eq!(r.betas, vec![CONTEXT_MANAGEMENT_BETA.to_string()]);
    }
}
