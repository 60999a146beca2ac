//! The resources of the contract as JSON types (camelCase on the wire).
//!
//! Fields another ContextQ may leave out are `#[serde(default)]`, so that the client reads any
//! ContextQ; contextq-server always sends them all.

use serde::{Deserialize, Serialize};

/// A workspace: a named part of a tenant's contexts; archived ones are read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// The server's id of the workspace.
    pub id: String,
    /// Unique per tenant; see [`crate::slug`].
    pub slug: String,
    /// Display name (the slug when none was given).
    #[serde(default)]
    pub name: String,
    /// Writes into an archived workspace are refused with 409.
    #[serde(default)]
    pub archived: bool,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
}

/// A context, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// The server's id, used by `PUT`/`DELETE /api/contexts/:id`.
    pub id: String,
    /// The caller's key for the context, unique per tenant (not per workspace).
    pub external_id: String,
    /// The slug of its workspace.
    pub workspace: String,
    /// The caller's classification (the memory tool uses `reference`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Optional display title.
    #[serde(default)]
    pub title: Option<String>,
    /// The text.
    pub content: String,
    /// Labels; the memory tool scopes everything it does by one of them.
    #[serde(default)]
    pub tags: Vec<String>,
    /// 1 when created, +1 on every change.
    pub version: i64,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
    /// RFC 3339.
    #[serde(default)]
    pub updated_at: String,
}

impl Context {
    /// This context without its content (`sizeBytes` given).
    pub fn summary(&self) -> ContextSummary {
        ContextSummary {
            id: self.id.clone(),
            external_id: self.external_id.clone(),
            workspace: self.workspace.clone(),
            kind: self.kind.clone(),
            title: self.title.clone(),
            tags: self.tags.clone(),
            version: self.version,
            size_bytes: Some(self.content.len() as u64),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
        }
    }
}

/// A context without its content, as listings return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextSummary {
    /// See [`Context::id`].
    pub id: String,
    /// See [`Context::external_id`].
    pub external_id: String,
    /// See [`Context::workspace`].
    pub workspace: String,
    /// See [`Context::kind`].
    #[serde(rename = "type")]
    pub kind: String,
    /// See [`Context::title`].
    #[serde(default)]
    pub title: Option<String>,
    /// See [`Context::tags`].
    #[serde(default)]
    pub tags: Vec<String>,
    /// See [`Context::version`].
    pub version: i64,
    /// Extension (`size-bytes`): the UTF-8 length of the content. `None` from a server without
    /// the extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
    /// RFC 3339; the memory tool shows it in place of a size when there is none.
    #[serde(default)]
    pub updated_at: String,
}

/// One item of `POST /api/contexts/bulk-upsert`: created if its `externalId` is new, else
/// updated (absent `title` and `tags` keep the stored ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextInput {
    /// The key of the context; see [`Context::external_id`].
    pub external_id: String,
    /// The slug of an existing, unarchived workspace.
    pub workspace: String,
    /// See [`Context::kind`].
    #[serde(rename = "type")]
    pub kind: String,
    /// See [`Context::title`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The whole text.
    pub content: String,
    /// See [`Context::tags`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Extension (`conditional-requests`): create only; the whole request fails with 409 if the
    /// `externalId` exists. Only sent to a server that has the extension.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub if_absent: bool,
}

/// What a bulk upsert did to one item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpsertResult {
    /// The context's id.
    pub id: String,
    /// Its external id.
    pub external_id: String,
    /// `created` or `updated`.
    pub status: String,
    /// Its version afterwards (unchanged when nothing differed).
    pub version: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_contextq_may_leave_fields_out() {
        let s: ContextSummary = serde_json::from_value(serde_json::json!({
            "id": "c1", "externalId": "x", "workspace": "w", "type": "note", "version": 3
        }))
        .unwrap();
        assert_eq!((s.size_bytes, s.tags.len(), s.title), (None, 0, None));
        let w: Workspace =
            serde_json::from_value(serde_json::json!({"id": "w1", "slug": "w"})).unwrap();
        assert!(!w.archived);
    }

    #[test]
    fn inputs_send_only_what_is_set() {
        let i = ContextInput {
            external_id: "x".into(),
            workspace: "w".into(),
            kind: "reference".into(),
            title: None,
            content: "c".into(),
            tags: None,
            if_absent: false,
        };
        assert_eq!(
            serde_json::to_value(&i).unwrap(),
            serde_json::json!({"externalId": "x", "workspace": "w", "type": "reference", "content": "c"})
        );
    }
}
