//! The wire protocol of the memory tool: what Claude sends and what goes back.
//!
//! - [`Command`] is the `input` of a `tool_use` block named `memory`, one type per command,
//!   tagged by `"command"` (serde `Serialize`/`Deserialize` for typed use).
//! - [`Command::from_value`] is the forgiving parser used on Claude's input: it never fails with
//!   a serde message but with a sentence Claude can act on (`Unknown command: bogus`, a missing
//!   field, a wrong type), and it ignores a `view_range` that is not two integers, as the spec says.
//! - [`ToolResult`] is the `tool_result` content: text plus `is_error`.
//! - [`ToolDefinition`] is the `{"type": "memory_20250818", "name": "memory"}` entry of `tools`,
//!   with any extra keys (`cache_control`, `defer_loading`, ...) passed through unchanged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::render;

/// The tool type of Claude's memory tool.
pub const TOOL_TYPE: &str = "memory_20250818";
/// The tool name Claude calls.
pub const TOOL_NAME: &str = "memory";

/// `view`: show a file (optionally a line range) or a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewCommand {
    /// The file or directory.
    pub path: String,
    /// `[start, end]`, 1-based and inclusive; `end = -1` means to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_range: Option<[i64; 2]>,
}

/// `create`: write a new file (never overwrites).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateCommand {
    /// Where to create it.
    pub path: String,
    /// The whole content.
    pub file_text: String,
}

/// `str_replace`: replace the one occurrence of `old_str`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrReplaceCommand {
    /// The file.
    pub path: String,
    /// Text to find; must occur exactly once (it may span lines).
    pub old_str: String,
    /// Replacement text.
    pub new_str: String,
}

/// `insert`: insert text after line `insert_line` (0 = at the top).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsertCommand {
    /// The file.
    pub path: String,
    /// The line after which to insert (0 puts the text first).
    pub insert_line: i64,
    /// The text to insert (one trailing newline is dropped).
    pub insert_text: String,
}

/// `delete`: delete a file or a directory with everything beneath it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCommand {
    /// The file or directory.
    pub path: String,
}

/// `rename`: move a file or directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameCommand {
    /// The source.
    pub old_path: String,
    /// The destination (must not exist).
    pub new_path: String,
}

/// One memory tool command, as Claude sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// See [`ViewCommand`].
    View(ViewCommand),
    /// See [`CreateCommand`].
    Create(CreateCommand),
    /// See [`StrReplaceCommand`].
    StrReplace(StrReplaceCommand),
    /// See [`InsertCommand`].
    Insert(InsertCommand),
    /// See [`DeleteCommand`].
    Delete(DeleteCommand),
    /// See [`RenameCommand`].
    Rename(RenameCommand),
}

impl Command {
    /// The command's name as Claude writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::View(_) => "view",
            Command::Create(_) => "create",
            Command::StrReplace(_) => "str_replace",
            Command::Insert(_) => "insert",
            Command::Delete(_) => "delete",
            Command::Rename(_) => "rename",
        }
    }

    /// The paths this command touches (for ordering concurrent calls).
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Command::View(c) => vec![&c.path],
            Command::Create(c) => vec![&c.path],
            Command::StrReplace(c) => vec![&c.path],
            Command::Insert(c) => vec![&c.path],
            Command::Delete(c) => vec![&c.path],
            Command::Rename(c) => vec![&c.old_path, &c.new_path],
        }
    }

    /// Parses Claude's tool input. The error is the message for Claude (without `Error: `).
    pub fn from_value(input: &Value) -> Result<Command, String> {
        let obj = input.as_object().ok_or_else(render::input_not_object)?;
        let name = match obj.get("command") {
            Some(Value::String(s)) => s.as_str(),
            Some(other) => return Err(render::unknown_command(&other.to_string())),
            None => return Err(render::missing_command()),
        };
        let fields = Fields { obj, command: name };
        Ok(match name {
            "view" => Command::View(ViewCommand {
                path: fields.string("path")?,
                view_range: parse_view_range(obj.get("view_range")),
            }),
            "create" => Command::Create(CreateCommand {
                path: fields.string("path")?,
                file_text: fields.string("file_text")?,
            }),
            "str_replace" => Command::StrReplace(StrReplaceCommand {
                path: fields.string("path")?,
                old_str: fields.string("old_str")?,
                new_str: fields.string("new_str")?,
            }),
            "insert" => Command::Insert(InsertCommand {
                path: fields.string("path")?,
                insert_line: fields.integer("insert_line")?,
                insert_text: fields.string("insert_text")?,
            }),
            "delete" => Command::Delete(DeleteCommand {
                path: fields.string("path")?,
            }),
            "rename" => Command::Rename(RenameCommand {
                old_path: fields.string("old_path")?,
                new_path: fields.string("new_path")?,
            }),
            other => return Err(render::unknown_command(other)),
        })
    }
}

struct Fields<'a> {
    obj: &'a Map<String, Value>,
    command: &'a str,
}

impl Fields<'_> {
    fn string(&self, field: &str) -> Result<String, String> {
        match self.obj.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => Err(render::missing_field(self.command, field)),
            Some(_) => Err(render::wrong_type(self.command, field, "a string")),
        }
    }

    fn integer(&self, field: &str) -> Result<i64, String> {
        match self.obj.get(field) {
            Some(v @ Value::Number(_)) => v
                .as_i64()
                .ok_or_else(|| render::wrong_type(self.command, field, "an integer")),
            None | Some(Value::Null) => Err(render::missing_field(self.command, field)),
            Some(_) => Err(render::wrong_type(self.command, field, "an integer")),
        }
    }
}

/// `[int, int]` or nothing: anything else is ignored, as the spec says.
fn parse_view_range(v: Option<&Value>) -> Option<[i64; 2]> {
    match v? {
        Value::Array(items) if items.len() == 2 => Some([items[0].as_i64()?, items[1].as_i64()?]),
        _ => None,
    }
}

/// A description of the memory tool for hosts that need one (MCP clients).
pub const TOOL_DESCRIPTION: &str = "Persistent memory: a directory of text files under /memories that survives across conversations. \
Check it before starting a task, and record progress, decisions and facts worth keeping. Commands: \
view (a file with line numbers, optionally view_range [start, end]; or a directory listing 2 levels deep), \
create (a new file; never overwrites), str_replace (replace one unique occurrence of old_str with new_str), \
insert (insert_text after line insert_line; 0 = at the top), delete (a file or a directory), \
rename (old_path to new_path).";

/// What Claude is told when the memory is offered: the memory tool's protocol (look first,
/// record as you go, assume interruption) and `memory_search` before walking the tree. Sent as
/// MCP's `instructions` and its `memory` prompt, and added to the system prompt by
/// `anthropic::ToolRunner` (and so `contextq-memory chat`) when it offers the memory tool.
pub const MEMORY_GUIDANCE: &str = "You have a persistent memory directory, /memories, that \
survives across conversations and context resets.
1. Before starting a task, view /memories (the memory tool's view command) and read what is \
relevant: earlier progress, decisions and facts about the user or the project.
2. As you work, record progress, decisions and what you learnt in files there (create, \
str_replace, insert), so that work can resume if your context is reset at any moment.
3. To find something, use memory_search with a few distinctive words before walking \
directories file by file.
Keep the directory tidy: one topic per file, short descriptive names, outdated notes updated \
or deleted.";

/// JSON Schema of the command union, as one object discriminated by `command` (the Claude
/// API refuses `oneOf` at the top level of a tool's input schema, and MCP hosts pass schemas on).
pub fn input_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
                        "description": "Which command to run."},
            "path": {"type": "string", "description": "A path under /memories (view, create, str_replace, insert, delete)."},
            "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                           "description": "view of a file: [start, end], 1-based, inclusive; end -1 = to the end."},
            "file_text": {"type": "string", "description": "create: the whole content."},
            "old_str": {"type": "string", "description": "str_replace: text that occurs exactly once."},
            "new_str": {"type": "string", "description": "str_replace: the replacement."},
            "insert_line": {"type": "integer", "description": "insert: the line after which to insert (0 = at the top)."},
            "insert_text": {"type": "string", "description": "insert: the text to insert."},
            "old_path": {"type": "string", "description": "rename: the source."},
            "new_path": {"type": "string", "description": "rename: the destination (must not exist)."}
        },
        "required": ["command"]
    })
}

/// The content of a `tool_result`: text, and whether it reports a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The text Claude reads.
    pub content: String,
    /// `true` for failures; their content starts with `Error: `.
    pub is_error: bool,
}

impl ToolResult {
    /// A success with `content`.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolResult {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failure: `Error: ` followed by `message`.
    pub fn error(message: impl AsRef<str>) -> Self {
        ToolResult {
            content: format!("Error: {}", message.as_ref()),
            is_error: true,
        }
    }
}

/// The `tools` entry that makes Claude use the memory tool.
///
/// Serialises to `{"type": "memory_20250818", "name": "memory", ...extra}`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolDefinition {
    /// Extra keys passed through unchanged (`cache_control`, `allowed_callers`, `defer_loading`,
    /// `strict`, `input_examples`, or anything newer).
    pub extra: Map<String, Value>,
}

impl ToolDefinition {
    /// The plain definition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an extra key, e.g. `("cache_control", json!({"type": "ephemeral"}))`.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The JSON object for the `tools` array.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("type".into(), Value::String(TOOL_TYPE.into()));
        obj.insert("name".into(), Value::String(TOOL_NAME.into()));
        for (k, v) in &self.extra {
            if k != "type" && k != "name" {
                obj.insert(k.clone(), v.clone());
            }
        }
        Value::Object(obj)
    }
}

impl Serialize for ToolDefinition {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolDefinition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut obj = Map::deserialize(deserializer)?;
        match obj.remove("type") {
            Some(Value::String(t)) if t == TOOL_TYPE => {}
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expected \"type\": \"{TOOL_TYPE}\", got {other:?}"
                )));
            }
        }
        obj.remove("name");
        Ok(ToolDefinition { extra: obj })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_every_command() {
        let cases = [
            json!({"command": "view", "path": "/memories"}),
            json!({"command": "view", "path": "/memories/a", "view_range": [1, -1]}),
            json!({"command": "create", "path": "/memories/a", "file_text": "x"}),
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": "y"}),
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "y"}),
            json!({"command": "delete", "path": "/memories/a"}),
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
        ];
        for c in cases {
            let parsed = Command::from_value(&c).unwrap();
            // The typed serde form agrees with the forgiving parser.
            let typed: Command = serde_json::from_value(c.clone()).unwrap();
            assert_eq!(parsed, typed);
            assert_eq!(serde_json::to_value(&typed).unwrap(), c);
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |v: Value| Command::from_value(&v).unwrap_err();
        assert_eq!(err(json!({"command": "bogus"})), "Unknown command: bogus");
        assert_eq!(
            err(json!({"command": "create", "path": "/memories/a"})),
            "Missing required parameter `file_text` for command `create`"
        );
        assert_eq!(
            err(
                json!({"command": "insert", "path": "/memories/a", "insert_line": "3", "insert_text": ""})
            ),
            "Parameter `insert_line` of command `insert` must be an integer"
        );
        assert_eq!(
            err(json!({"command": "view", "path": 3})),
            "Parameter `path` of command `view` must be a string"
        );
        assert!(err(json!({"path": "/memories"})).contains("`command`"));
        assert!(err(json!([1, 2])).contains("JSON object"));
        assert_eq!(err(json!({"command": 7})), "Unknown command: 7");
    }

    #[test]
    fn bad_view_range_is_ignored() {
        for r in [
            json!([1]),
            json!("1,2"),
            json!([1.5, 2]),
            json!([1, 2, 3]),
            json!(null),
        ] {
            let c = Command::from_value(
                &json!({"command": "view", "path": "/memories/a", "view_range": r}),
            )
            .unwrap();
            assert_eq!(
                c,
                Command::View(ViewCommand {
                    path: "/memories/a".into(),
                    view_range: None
                })
            );
        }
    }

    #[test]
    fn tool_definition_passes_extras_through() {
        let def = ToolDefinition::new().extra("cache_control", json!({"type": "ephemeral"}));
        let v = serde_json::to_value(&def).unwrap();
        assert_eq!(
            v,
            json!({"type": "memory_20250818", "name": "memory", "cache_control": {"type": "ephemeral"}})
        );
        let back: ToolDefinition = serde_json::from_value(v).unwrap();
        assert_eq!(back, def);
        assert_eq!(
            ToolDefinition::new().to_json(),
            json!({"type": "memory_20250818", "name": "memory"})
        );
    }

    #[test]
    fn input_schema_names_every_field_of_every_command() {
        let schema = input_schema();
        let props = schema["properties"].as_object().unwrap();
        for field in [
            "command",
            "path",
            "view_range",
            "file_text",
            "old_str",
            "new_str",
            "insert_line",
            "insert_text",
            "old_path",
            "new_path",
        ] {
            assert!(props.contains_key(field), "{field}");
        }
        assert!(schema.get("oneOf").is_none());
        assert_eq!(
            schema["properties"]["command"]["enum"]
                .as_array()
                .unwrap()
                .len(),
            6
        );
    }

    #[test]
    fn error_results_have_the_prefix() {
        let r = ToolResult::error("The path /memories/x does not exist");
        assert!(r.is_error);
        assert_eq!(r.content, "Error: The path /memories/x does not exist");
    }
}
