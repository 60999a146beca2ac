//! `ToolRunner`: the tool-use loop (the Rust shape of the TypeScript SDK's `toolRunner`).
//!
//! Send the request; if Claude stops for `tool_use`, run every `tool_use` block, answer with one
//! `tool_result` per block (same id, same order, `is_error` on failures) in the next user
//! message, and send again; stop at any other stop reason or after `max_iterations` requests.
//! Each assistant message is yielded as it arrives ([`ToolRunner::next_message`] or
//! [`ToolRunner::into_stream`]); [`ToolRunner::run`] returns the final one.
//!
//! Blocks of one turn run concurrently when they cannot affect each other: memory calls on
//! unrelated paths run together; calls whose paths overlap (one is the other or beneath it), and
//! calls of any other tool, keep their order.

use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use serde_json::Value;

use super::context::CONTEXT_MANAGEMENT_BETA;
use super::{
    ContentBlock, Message, MessageParam, MessageRequest, MessagesClient, Role, StopReason,
};
use crate::error::Result;
use crate::handlers::MemoryToolHandlers;
use crate::path::MemoryPath;
use crate::protocol::{Command, TOOL_NAME, ToolDefinition, ToolResult};

/// A tool the runner can call.
#[async_trait]
pub trait RunnableTool: Send + Sync {
    /// The name Claude calls.
    fn name(&self) -> &str;
    /// The `tools` entry.
    fn definition(&self) -> Value;
    /// Runs one call; never fails (failures are `is_error` results).
    async fn call(&self, input: Value) -> ToolResult;
    /// Whether two calls of this tool must keep their order (default: always).
    fn conflicts(&self, a: &Value, b: &Value) -> bool {
        let _ = (a, b);
        true
    }
    /// `anthropic-beta` values requests with this tool need.
    fn betas(&self) -> Vec<String> {
        Vec::new()
    }
    /// What the system prompt should tell Claude about this tool, added once by the runner
    /// unless [`ToolRunner::without_guidance`] (default: nothing).
    fn system_guidance(&self) -> Option<&'static str> {
        None
    }
}

/// The memory tool as a runnable tool (the TypeScript SDK's `betaMemoryTool(handlers)`).
#[derive(Clone)]
pub struct MemoryRunnableTool {
    handlers: Arc<dyn MemoryToolHandlers>,
    definition: ToolDefinition,
}

impl std::fmt::Debug for MemoryRunnableTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRunnableTool")
            .field("definition", &self.definition)
            .finish()
    }
}

/// Wraps any [`MemoryToolHandlers`] for the runner.
pub fn memory_tool(handlers: impl MemoryToolHandlers + 'static) -> MemoryRunnableTool {
    MemoryRunnableTool {
        handlers: Arc::new(handlers),
        definition: ToolDefinition::new(),
    }
}

impl MemoryRunnableTool {
    /// Shares already-shared handlers.
    pub fn from_arc(handlers: Arc<dyn MemoryToolHandlers>) -> Self {
        MemoryRunnableTool {
            handlers,
            definition: ToolDefinition::new(),
        }
    }

    /// Sends this definition (e.g. with `cache_control`).
    pub fn tool_definition(mut self, definition: ToolDefinition) -> Self {
        self.definition = definition;
        self
    }
}

fn paths_of(input: &Value) -> Option<Vec<MemoryPath>> {
    let command = Command::from_value(input).ok()?;
    command
        .paths()
        .into_iter()
        .map(|p| MemoryPath::parse(p).ok())
        .collect()
}

#[async_trait]
impl RunnableTool for MemoryRunnableTool {
    /// The memory protocol ([`crate::protocol::MEMORY_GUIDANCE`]).
    fn system_guidance(&self) -> Option<&'static str> {
        Some(crate::protocol::MEMORY_GUIDANCE)
    }
    fn name(&self) -> &str {
        TOOL_NAME
    }
    fn definition(&self) -> Value {
        self.definition.to_json()
    }
    async fn call(&self, input: Value) -> ToolResult {
        self.handlers.execute(input).await
    }
    fn conflicts(&self, a: &Value, b: &Value) -> bool {
        match (paths_of(a), paths_of(b)) {
            (Some(pa), Some(pb)) => pa
                .iter()
                .any(|x| pb.iter().any(|y| x.starts_with(y) || y.starts_with(x))),
            _ => true,
        }
    }
    fn betas(&self) -> Vec<String> {
        vec![CONTEXT_MANAGEMENT_BETA.to_string()]
    }
}

/// `memory_search` (`crate::search`) as a runnable tool beside [`memory_tool`]: a client tool
/// with an input schema, answered by the same handlers.
#[derive(Clone)]
pub struct MemorySearchTool {
    handlers: Arc<dyn MemoryToolHandlers>,
}

impl std::fmt::Debug for MemorySearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySearchTool").finish_non_exhaustive()
    }
}

/// Wraps any [`MemoryToolHandlers`] as the `memory_search` tool.
pub fn memory_search_tool(handlers: Arc<dyn MemoryToolHandlers>) -> MemorySearchTool {
    MemorySearchTool { handlers }
}

#[async_trait]
impl RunnableTool for MemorySearchTool {
    fn name(&self) -> &str {
        crate::search::TOOL_NAME
    }
    fn definition(&self) -> Value {
        crate::search::tool_definition()
    }
    async fn call(&self, input: Value) -> ToolResult {
        self.handlers.execute_search(input).await
    }
    /// Searches only read: they may run together.
    fn conflicts(&self, a: &Value, b: &Value) -> bool {
        let _ = (a, b);
        false
    }
}

/// One tool call the runner made, for display and logs.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// Its result.
    pub result: ToolResult,
}

type Observer = Arc<dyn Fn(&ToolCall) + Send + Sync>;

/// The tool-use loop.
pub struct ToolRunner {
    client: MessagesClient,
    request: MessageRequest,
    tools: Vec<Arc<dyn RunnableTool>>,
    max_iterations: usize,
    iterations: usize,
    done: bool,
    hit_limit: bool,
    observer: Option<Observer>,
    guidance: bool,
}

impl std::fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRunner")
            .field("request", &self.request)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("max_iterations", &self.max_iterations)
            .field("iterations", &self.iterations)
            .finish()
    }
}

/// Default bound on requests per run.
pub const DEFAULT_MAX_ITERATIONS: usize = 20;

impl ToolRunner {
    /// A runner for `request` (its `messages` are the conversation so far).
    pub fn new(client: MessagesClient, request: MessageRequest) -> Self {
        ToolRunner {
            client,
            request,
            tools: Vec::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            iterations: 0,
            done: false,
            hit_limit: false,
            observer: None,
            guidance: true,
        }
    }

    /// Leaves the system prompt as given: no tool's [`RunnableTool::system_guidance`] is added
    /// (by default each is appended once, after the caller's own system prompt).
    pub fn without_guidance(mut self) -> Self {
        self.guidance = false;
        self
    }

    /// The caller's system prompt with each tool's guidance appended once (not twice when the
    /// conversation is continued with a request that already carries it).
    fn guided_system(&self) -> Option<String> {
        let mut system = self.request.system.clone().unwrap_or_default();
        for guidance in self.tools.iter().filter_map(|t| t.system_guidance()) {
            if !system.contains(guidance) {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(guidance);
            }
        }
        (!system.is_empty()).then_some(system)
    }

    /// Adds a tool (its definition goes into `tools`, its betas into the request).
    pub fn tool(mut self, tool: impl RunnableTool + 'static) -> Self {
        self.request.tools.push(tool.definition());
        for b in tool.betas() {
            self.request = self.request.beta(b);
        }
        self.tools.push(Arc::new(tool));
        self
    }

    /// Bound on requests (default [`DEFAULT_MAX_ITERATIONS`]).
    pub fn max_iterations(mut self, n: usize) -> Self {
        self.max_iterations = n.max(1);
        self
    }

    /// Called after every tool call.
    pub fn on_tool_call(mut self, f: impl Fn(&ToolCall) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(f));
        self
    }

    /// The conversation so far (including tool results).
    pub fn messages(&self) -> &[MessageParam] {
        &self.request.messages
    }

    /// The conversation, to continue it later.
    pub fn into_messages(self) -> Vec<MessageParam> {
        self.request.messages
    }

    /// Whether the run stopped because of `max_iterations` with tool calls still pending.
    pub fn hit_iteration_limit(&self) -> bool {
        self.hit_limit
    }

    /// The next assistant message, or `None` when the loop is over.
    pub async fn next_message(&mut self) -> Option<Result<Message>> {
        if self.done {
            return None;
        }
        if self.iterations >= self.max_iterations {
            self.done = true;
            self.hit_limit = true;
            return None;
        }
        if self.iterations == 0 && self.guidance {
            self.request.system = self.guided_system();
        }
        self.iterations += 1;
        let message = match self.client.create(&self.request).await {
            Ok(m) => m,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        self.request.messages.push(message.to_param());
        match message.stop_reason {
            Some(StopReason::ToolUse) => {
                let results = self.run_tools(&message).await;
                self.request.messages.push(MessageParam {
                    role: Role::User,
                    content: results,
                });
            }
            Some(StopReason::PauseTurn) => {}
            _ => self.done = true,
        }
        Some(Ok(message))
    }

    /// Every assistant message as it arrives.
    pub fn into_stream(self) -> impl Stream<Item = Result<Message>> {
        futures::stream::unfold(self, |mut runner| async move {
            runner.next_message().await.map(|m| (m, runner))
        })
    }

    /// Runs the loop to the end; returns the final message.
    pub async fn run(&mut self) -> Result<Message> {
        let mut last = None;
        while let Some(m) = self.next_message().await {
            last = Some(m?);
        }
        last.ok_or_else(|| crate::Error::Config {
            message: "max_iterations is 0".into(),
        })
    }

    async fn run_tools(&self, message: &Message) -> Vec<ContentBlock> {
        let calls: Vec<(String, String, Value)> = message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse {
                    id, name, input, ..
                } => Some((id.clone(), name.clone(), input.clone())),
                _ => None,
            })
            .collect();
        // Group calls that must keep their order (union of conflicts); groups run concurrently.
        let n = calls.len();
        let mut group: Vec<usize> = (0..n).collect();
        fn root(g: &mut [usize], mut i: usize) -> usize {
            while g[i] != i {
                g[i] = g[g[i]];
                i = g[i];
            }
            i
        }
        for j in 0..n {
            for i in 0..j {
                // Calls of two different tools keep their order (`memory_search` after a
                // `memory` write of the same turn sees it); calls of one tool, unless it says
                // they are independent.
                let ordered = calls[i].1 != calls[j].1 || {
                    let tool = self.tools.iter().find(|t| t.name() == calls[j].1);
                    tool.is_none_or(|t| t.conflicts(&calls[i].2, &calls[j].2))
                };
                if ordered {
                    let (a, b) = (root(&mut group, i), root(&mut group, j));
                    group[b.max(a)] = a.min(b);
                }
            }
        }
        let mut chains: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for i in 0..n {
            let r = root(&mut group, i);
            chains.entry(r).or_default().push(i);
        }
        let runs = chains.into_values().map(|chain| {
            let calls = &calls;
            async move {
                let mut out = Vec::new();
                for i in chain {
                    let (_, name, input) = &calls[i];
                    let result = match self.tools.iter().find(|t| t.name() == name) {
                        Some(tool) => tool.call(input.clone()).await,
                        None => ToolResult::error(format!("Unknown tool: {name}")),
                    };
                    out.push((i, result));
                }
                out
            }
        });
        let mut results: Vec<Option<ToolResult>> = vec![None; n];
        for chain in futures::future::join_all(runs).await {
            for (i, r) in chain {
                results[i] = Some(r);
            }
        }
        calls
            .iter()
            .zip(results)
            .map(|((id, name, input), result)| {
                let result = result.unwrap_or_else(|| ToolResult::error("the tool did not run"));
                if let Some(obs) = &self.observer {
                    obs(&ToolCall {
                        name: name.clone(),
                        input: input.clone(),
                        result: result.clone(),
                    });
                }
                ContentBlock::tool_result(id.clone(), result.content, result.is_error)
            })
            .collect()
    }
}
