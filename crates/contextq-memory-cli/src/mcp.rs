//! `contextq-memory mcp`: the memory as an MCP server over stdio, or over streamable HTTP in
//! front of a ContextQ with each client's own key ([`http`]) (feature `mcp`, rmcp).
//!
//! Two tools: `memory`, whose input is the memory tool's command union and whose results are the
//! library's strings (`is_error` on failures), and `memory_search` beside it (full-text search,
//! `contextq_memory_tool::search`); and every memory file as a resource
//! (`memory:///memories/...`, list in pages of [`RESOURCES_PAGE`] with `nextCursor`, and read). Logs go to stderr; stdout carries only the protocol.
//!
//! Claude is told the memory is there: the initialize result's `instructions` and the
//! [`PROMPT_NAME`] prompt carry the memory protocol
//! ([`contextq_memory_tool::protocol::MEMORY_GUIDANCE`]).

use std::sync::Arc;

use anyhow::Result;
use contextq_memory_tool::protocol::{TOOL_DESCRIPTION, TOOL_NAME, input_schema};
use contextq_memory_tool::store::Page;
use contextq_memory_tool::{MemoryPath, MemoryToolHandlers, Store, ToolResult, render};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InitializeResult, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};

use crate::stores::Opened;

pub mod http;
pub mod sessions;

/// URI scheme of memory files: `memory:///memories/notes.md`.
pub const URI_PREFIX: &str = "memory://";

/// The prompt that tells Claude to use its memory, for clients that load prompts.
pub const PROMPT_NAME: &str = "memory";

/// Resources per `resources/list` page; `nextCursor` leads to the next.
pub const RESOURCES_PAGE: usize = 1_000;

/// What a `resources/list` cursor holds: the path of the last resource of the previous page.
/// Pages are ordered by path and a page starts after that path, so a walk stays stable under
/// concurrent writes: a file that exists for the whole walk is listed exactly once, whatever is
/// created or deleted meanwhile.
const CURSOR_PREFIX: &str = "after:";

/// A memory: the tool Claude calls and the store its files are resources of.
#[derive(Clone)]
pub struct Memory {
    /// The memory tool.
    pub tool: Arc<dyn MemoryToolHandlers>,
    /// Its store.
    pub store: Arc<dyn Store>,
}

/// Whose memory a request reaches.
#[derive(Clone)]
enum Source {
    /// One memory for the whole session (stdio).
    Fixed(Memory),
    /// The memory of the request's own key ([`http`]: the HTTP layer puts it in the request).
    PerRequest,
}

/// The MCP server.
#[derive(Clone)]
pub struct MemoryMcp {
    source: Source,
    describe: String,
}

impl MemoryMcp {
    /// Over an opened store.
    pub fn new(opened: &Opened) -> Self {
        MemoryMcp {
            source: Source::Fixed(Memory {
                tool: opened.tool.clone(),
                store: opened.store.clone(),
            }),
            describe: opened.describe(),
        }
    }

    /// Over the memory each request carries ([`http`]).
    fn per_request(describe: String) -> Self {
        MemoryMcp {
            source: Source::PerRequest,
            describe,
        }
    }

    fn memory(&self, context: &RequestContext<RoleServer>) -> Result<Memory, McpError> {
        match &self.source {
            Source::Fixed(memory) => Ok(memory.clone()),
            Source::PerRequest => context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Memory>())
                .cloned()
                .ok_or_else(|| {
                    McpError::internal_error("this request carries no ContextQ key", None)
                }),
        }
    }
}

fn tool() -> Tool {
    let schema = match input_schema() {
        serde_json::Value::Object(o) => o,
        _ => serde_json::Map::new(),
    };
    Tool::new(TOOL_NAME, TOOL_DESCRIPTION, Arc::new(schema))
}

/// `memory_search`, beside `memory` (`contextq_memory_tool::search`).
fn search_tool() -> Tool {
    use contextq_memory_tool::search;
    let schema = match search::input_schema() {
        serde_json::Value::Object(o) => o,
        _ => serde_json::Map::new(),
    };
    Tool::new(search::TOOL_NAME, search::DESCRIPTION, Arc::new(schema))
}

impl ServerHandler for MemoryMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                "contextq-memory",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "{}\n(The memory tool is `memory`; its store: {}.)",
                contextq_memory_tool::protocol::MEMORY_GUIDANCE,
                self.describe
            ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompt = Prompt::new(
            PROMPT_NAME,
            Some("Use the persistent memory directory: look before starting, record as you go"),
            None,
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != PROMPT_NAME {
            return Err(McpError::invalid_params(
                format!(
                    "no prompt {:?}: this server has {PROMPT_NAME:?}",
                    request.name
                ),
                None,
            ));
        }
        let text = contextq_memory_tool::protocol::MEMORY_GUIDANCE;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description("The memory protocol")
                .into(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![tool(), search_tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let search = request.name == contextq_memory_tool::search::TOOL_NAME;
        if request.name != TOOL_NAME && !search {
            let result = ToolResult::error(render::unknown_tool(&request.name));
            return Ok(CallToolResult::error(vec![ContentBlock::text(result.content)]).into());
        }
        let memory = self.memory(&context)?;
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let result = if search {
            memory.tool.execute_search(input).await
        } else {
            memory.tool.execute(input).await
        };
        let content = vec![ContentBlock::text(result.content)];
        Ok(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let memory = self.memory(&context)?;
        let after = match request.and_then(|r| r.cursor) {
            None => None,
            Some(cursor) => Some(
                cursor
                    .strip_prefix(CURSOR_PREFIX)
                    .and_then(|p| MemoryPath::parse(p).ok())
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!("{cursor:?} is not a cursor of this server: pass back a nextCursor it sent"),
                            None,
                        )
                    })?,
            ),
        };
        // One more than a page: whether another follows. The store starts at the cursor (a
        // ContextQ with `start-after` reads a page, not the whole store).
        let mut files: Vec<(String, Option<u64>)> = memory
            .store
            .list_after(
                &MemoryPath::root(),
                Page {
                    after: after.as_ref(),
                    limit: RESOURCES_PAGE + 1,
                },
            )
            .await
            .map_err(|e| McpError::internal_error(e.tool_message(), None))?
            .into_iter()
            .map(|f| (f.path.normalized(), f.size))
            .collect();
        let more = files.len() > RESOURCES_PAGE;
        files.truncate(RESOURCES_PAGE);
        let next_cursor = more
            .then(|| {
                files
                    .last()
                    .map(|(path, _)| format!("{CURSOR_PREFIX}{path}"))
            })
            .flatten();
        let resources = files
            .into_iter()
            .map(|(path, size)| {
                let mut r = Resource::new(format!("{URI_PREFIX}{path}"), path.clone())
                    .with_description(format!("Memory file {path}"))
                    .with_mime_type("text/plain");
                if let Some(size) = size {
                    r = r.with_size(size);
                }
                r
            })
            .collect();
        let mut page = ListResourcesResult::with_all_items(resources);
        page.next_cursor = next_cursor;
        Ok(page)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found =
            || McpError::resource_not_found(format!("no memory file at {}", request.uri), None);
        let raw = request.uri.strip_prefix(URI_PREFIX).ok_or_else(not_found)?;
        let path =
            MemoryPath::parse(raw).map_err(|e| McpError::invalid_params(e.message(), None))?;
        let memory = self.memory(&context)?;
        let entry = memory
            .store
            .get(&path)
            .await
            .map_err(|e| McpError::internal_error(e.tool_message(), None))?
            .ok_or_else(not_found)?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            entry.content,
            request.uri.clone(),
        )])
        .into())
    }
}

/// Serves MCP on stdin/stdout until the client disconnects.
pub async fn run(opened: &Opened) -> Result<()> {
    contextq_server::logs::notice(&format!("contextq-memory mcp: {}", opened.describe()));
    let service = MemoryMcp::new(opened)
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
