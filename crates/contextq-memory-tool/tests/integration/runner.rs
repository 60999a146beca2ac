//! The Messages client and ToolRunner against the scripted stand-in, which checks each request
//! as the real API would.

use std::sync::{Arc, Mutex};

use contextq_memory_tool::anthropic::{
    AnthropicConfig, AnthropicError, ClearToolUses, ContentBlock, MessageParam, MessageRequest,
    MessagesClient, StopReason, ToolRunner, memory_search_tool, memory_tool,
};
use contextq_memory_tool::store::{Entry, Listing, PutMode, Store, Version};
use contextq_memory_tool::testing::ScriptedClaude;
use contextq_memory_tool::{
    MemoryPath, MemoryStore, MemoryTool, MemoryToolHandlers, ToolDefinition,
};
use futures::StreamExt;
use serde_json::json;

fn client(url: &str) -> MessagesClient {
    let mut config = AnthropicConfig::new("sk-ant-test-0000000000000000");
    config.base_url = url.to_string();
    config.retry.initial_backoff = std::time::Duration::from_millis(5);
    MessagesClient::new(config).unwrap()
}

fn request(text: &str) -> MessageRequest {
    let mut r = MessageRequest::new("claude-opus-5", 1024);
    r.messages.push(MessageParam::user(text));
    r
}

#[tokio::test]
async fn remembers_and_recalls_through_the_tool_loop() {
    let claude = ScriptedClaude::start().await.unwrap();
    let store = Arc::new(MemoryTool::new(MemoryStore::new()));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let mut runner = ToolRunner::new(
        client(&claude.url),
        ClearToolUses::default().apply(request(
            "Remember under /memories/acme/ that FACT: the sky is green",
        )),
    )
    .tool(memory_tool(store.clone()))
    .on_tool_call(move |c| {
        seen.lock()
            .unwrap()
            .push((c.input.clone(), c.result.clone()))
    });
    let mut messages = Vec::new();
    while let Some(m) = runner.next_message().await {
        messages.push(m.unwrap());
    }
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].stop_reason, Some(StopReason::ToolUse));
    assert_eq!(messages[1].text(), "Saved it.");
    assert!(messages[1].context_management.is_some());
    assert_eq!(
        calls.lock().unwrap()[0].1.content,
        "File created successfully at: /memories/acme/fact.md"
    );
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());

    // The request the API saw: tool definition, headers, context management, tool results.
    let reqs = claude.requests();
    let first = &reqs[0];
    assert_eq!(
        first.body["tools"],
        json!([{"type": "memory_20250818", "name": "memory"}])
    );
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        first.header("anthropic-beta"),
        Some("context-management-2025-06-27")
    );
    assert_eq!(first.header("x-api-key"), Some("sk-ant-…0000"));
    // Claude is told the memory is there: the protocol once, in every request of the run.
    let guidance = contextq_memory_tool::protocol::MEMORY_GUIDANCE;
    for r in &reqs {
        assert_eq!(r.body["system"], guidance, "{}", r.body);
    }
    assert_eq!(
        first.body["context_management"]["edits"][0]["exclude_tools"],
        json!(["memory"])
    );
    let second = &reqs[1].body["messages"];
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(
        second[2]["content"][0]["tool_use_id"],
        second[1]["content"][1]["id"]
    );
    assert!(second[2]["content"][0].get("is_error").is_none());
    // The unknown block came back verbatim inside the assistant message.
    assert_eq!(
        second[1]["content"][2],
        json!({"type": "x_standin_marker", "seq": 1, "nested": {"keep": [1, 2, 3]}})
    );

    // A separate conversation recalls it.
    let mut recall = ToolRunner::new(
        client(&claude.url),
        request("What did I ask you to remember under /memories/acme/?"),
    )
    .tool(memory_tool(store));
    let last = recall.run().await.unwrap();
    assert_eq!(last.text(), "You told me: the sky is green");
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
}

#[tokio::test]
async fn memory_search_runs_beside_memory_after_the_write_of_its_turn() {
    let claude = ScriptedClaude::start().await.unwrap();
    let tool: Arc<dyn MemoryToolHandlers> = Arc::new(MemoryTool::new(MemoryStore::new()));
    let mut runner = ToolRunner::new(client(&claude.url), request("SEARCH for it"))
        .tool(memory_tool(tool.clone()))
        .tool(memory_search_tool(tool));
    let last = runner.run().await.unwrap();
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
    // The search ran after the create of the same turn, and found its line, numbered.
    assert_eq!(
        last.text(),
        "Saved it. You told me: the deploy key is OPS-4471"
    );
    let reqs = claude.requests();
    let tools = reqs[0].body["tools"].as_array().unwrap();
    assert_eq!(tools[1]["name"], "memory_search");
    assert_eq!(tools[1]["input_schema"]["required"], json!(["query"]));
    let results = &reqs[1].body["messages"][2]["content"];
    assert_eq!(
        results[1]["content"],
        "1 file in /memories match \"OPS-4471\", best first:\n\n/memories/s/key.md\n     2\tFACT: the deploy key is OPS-4471"
    );
}

#[tokio::test]
async fn errors_reach_claude_as_is_error_results() {
    let claude = ScriptedClaude::start().await.unwrap();
    let tool = MemoryTool::new(MemoryStore::new());
    let mut runner = ToolRunner::new(
        client(&claude.url),
        request("What is under /memories/nothing-here/?"),
    )
    .tool(memory_tool(tool));
    let last = runner.run().await.unwrap();
    assert!(
        last.text().starts_with(
            "The memory tool failed: Error: The path /memories/nothing-here/fact.md does not exist"
        ),
        "{}",
        last.text()
    );
    let reqs = claude.requests();
    assert_eq!(reqs[1].body["messages"][2]["content"][0]["is_error"], true);
    assert!(claude.violations().is_empty());
}

#[tokio::test]
async fn parallel_calls_keep_same_path_order_and_answer_every_id() {
    let claude = ScriptedClaude::start().await.unwrap();
    let tool = Arc::new(MemoryTool::new(MemoryStore::new()));
    let mut runner =
        ToolRunner::new(client(&claude.url), request("PARALLEL")).tool(memory_tool(tool.clone()));
    let last = runner.run().await.unwrap();
    assert!(claude.violations().is_empty(), "{:?}", claude.violations());
    // The view of a.md ran after its create (same path), so it saw the fact.
    assert!(last.text().contains("You told me: a"), "{}", last.text());
    let results = &runner.messages()[2].content;
    assert_eq!(results.len(), 3);
    for b in results {
        assert!(
            matches!(
                b,
                ContentBlock::ToolResult {
                    is_error: false,
                    ..
                }
            ),
            "{b:?}"
        );
    }
    assert!(
        !tool
            .execute(json!({"command": "view", "path": "/memories/p/b.md"}))
            .await
            .is_error
    );
}

/// A store that takes 20 ms over every call and records when each began and ended, so that
/// calls the runner runs concurrently overlap and calls it orders do not.
struct Slow {
    inner: MemoryStore,
    events: Mutex<Vec<(String, bool)>>,
}

impl Slow {
    async fn around<T>(&self, path: &MemoryPath, call: impl std::future::Future<Output = T>) -> T {
        self.events
            .lock()
            .unwrap()
            .push((path.raw().to_string(), true));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let out = call.await;
        self.events
            .lock()
            .unwrap()
            .push((path.raw().to_string(), false));
        out
    }

    /// The calls on `path` as (start, end) positions in the record, each start paired with the
    /// next end (a path's calls are checked not to overlap).
    fn calls(&self, path: &str) -> Vec<(usize, usize)> {
        let events = self.events.lock().unwrap();
        let mut out = Vec::new();
        let mut open = None;
        for (i, (p, start)) in events.iter().enumerate() {
            if p != path {
                continue;
            }
            if *start {
                open = Some(i);
            } else if let Some(s) = open.take() {
                out.push((s, i));
            }
        }
        out
    }
}

#[async_trait::async_trait]
impl Store for Slow {
    async fn get(&self, path: &MemoryPath) -> contextq_memory_tool::Result<Option<Entry>> {
        self.around(path, self.inner.get(path)).await
    }
    async fn list(&self, dir: &MemoryPath) -> contextq_memory_tool::Result<Option<Listing>> {
        self.around(dir, self.inner.list(dir)).await
    }
    async fn put(
        &self,
        path: &MemoryPath,
        text: &str,
        mode: PutMode,
    ) -> contextq_memory_tool::Result<Option<Version>> {
        self.around(path, self.inner.put(path, text, mode)).await
    }
    async fn delete(
        &self,
        path: &MemoryPath,
        expected: Option<Version>,
    ) -> contextq_memory_tool::Result<()> {
        self.around(path, self.inner.delete(path, expected)).await
    }
}

/// On a store that takes its time: the calls on a.md run in order (its view starts after its
/// create ended, and sees it), and the create of b.md runs beside them, not after.
#[tokio::test]
async fn parallel_calls_overlap_unless_they_share_a_path() {
    let claude = ScriptedClaude::start().await.unwrap();
    let store = Arc::new(MemoryTool::new(Arc::new(Slow {
        inner: MemoryStore::new(),
        events: Mutex::new(Vec::new()),
    })));
    let mut runner =
        ToolRunner::new(client(&claude.url), request("PARALLEL")).tool(memory_tool(store.clone()));
    let last = runner.run().await.unwrap();
    assert!(last.text().contains("You told me: a"), "{}", last.text());
    let slow = store.store();
    let events = slow.events.lock().unwrap().clone();
    let a = "/memories/p/a.md";
    let a_calls: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p == a)
        .map(|(i, _)| i)
        .collect();
    // a.md: create (start, end), then view (start, end), never interleaved.
    let starts: Vec<bool> = a_calls.iter().map(|&i| events[i].1).collect();
    assert!(
        starts.chunks(2).all(|c| c == [true, false]),
        "a.md's calls overlapped: {events:?}"
    );
    let b = slow.calls("/memories/p/b.md");
    assert!(
        b.iter()
            .any(|&(bs, be)| slow.calls(a).iter().any(|&(s, e)| bs < e && s < be)),
        "b.md ran alone, not beside a.md: {events:?}"
    );
}

#[tokio::test]
async fn retries_429_and_529_and_streams_messages() {
    let claude = ScriptedClaude::start().await.unwrap();
    let runner = ToolRunner::new(
        client(&claude.url),
        request("RATE_LIMITED_ONCE OVERLOADED_ONCE hi"),
    );
    let messages: Vec<_> = runner.into_stream().collect().await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].as_ref().unwrap().text(),
        "Hello from the stand-in."
    );
    assert_eq!(claude.requests().len(), 3, "429, 529, then success");
}

#[tokio::test]
async fn api_errors_keep_status_type_and_request_id() {
    let claude = ScriptedClaude::start().await.unwrap();
    // A memory tool definition with a wrong name is refused the way the API would.
    let mut r = request("hi");
    r.tools.push(
        ToolDefinition::new()
            .extra("name", json!("ignored"))
            .to_json(),
    );
    r.tools[0]["name"] = json!("notes");
    let err = client(&claude.url)
        .create(&r.beta("context-management-2025-06-27"))
        .await
        .unwrap_err();
    match err.backend_error::<AnthropicError>() {
        Some(AnthropicError::Api {
            status,
            error_type,
            message,
            request_id,
        }) => {
            let status = *status;
            assert_eq!(status, 400);
            assert_eq!(error_type, "invalid_request_error");
            assert!(message.contains("named \"memory\""), "{message}");
            assert_eq!(request_id.as_deref(), Some("req_standin"));
        }
        other => panic!("{other:?}"),
    }
    // Without the beta the memory tool is refused too; the runner adds it by itself.
    let mut plain = request("hi");
    plain.tools.push(ToolDefinition::new().to_json());
    let err = client(&claude.url).create(&plain).await.unwrap_err();
    match err.backend_error::<AnthropicError>() {
        Some(AnthropicError::Api {
            status,
            error_type,
            message,
            ..
        }) => assert_eq!(
            (*status, error_type.as_str(), message.as_str()),
            (
                400,
                "invalid_request_error",
                "the memory tool requires the context-management-2025-06-27 beta"
            )
        ),
        other => panic!("{other:?}"),
    }
    let last = ToolRunner::new(client(&claude.url), request("hi"))
        .tool(memory_tool(MemoryTool::new(MemoryStore::new())))
        .run()
        .await
        .unwrap();
    assert_eq!(
        (last.stop_reason.clone(), last.text().as_str()),
        (Some(StopReason::EndTurn), "Hello from the stand-in.")
    );
}

#[tokio::test]
async fn max_iterations_bounds_the_loop() {
    let claude = ScriptedClaude::start().await.unwrap();
    let mut runner = ToolRunner::new(
        client(&claude.url),
        request("Remember under /memories/x/ that FACT: y"),
    )
    .tool(memory_tool(MemoryTool::new(MemoryStore::new())))
    .max_iterations(1);
    let last = runner.run().await.unwrap();
    assert_eq!(last.stop_reason, Some(StopReason::ToolUse));
    assert!(runner.hit_iteration_limit());
    assert_eq!(claude.requests().len(), 1);
}

/// The memory protocol goes after the caller's own system prompt, once, also when a
/// conversation continues with a request that carries it; `without_guidance` leaves it out.
#[tokio::test]
async fn the_system_prompt_carries_the_memory_protocol_once() {
    let guidance = contextq_memory_tool::protocol::MEMORY_GUIDANCE;
    let claude = ScriptedClaude::start().await.unwrap();
    let tool = Arc::new(MemoryTool::new(MemoryStore::new()));
    let mut first = request("Remember under /memories/acme/ that FACT: tea");
    first.system = Some("You are terse.".into());
    let mut runner = ToolRunner::new(client(&claude.url), first).tool(memory_tool(tool.clone()));
    runner.run().await.unwrap();
    let messages = runner.into_messages();
    let mut again = request("and?");
    again.system = Some(format!("You are terse.\n\n{guidance}"));
    again.messages = messages;
    again.messages.push(MessageParam::user("and?"));
    let _ = ToolRunner::new(client(&claude.url), again)
        .tool(memory_tool(tool.clone()))
        .max_iterations(1)
        .run()
        .await;
    let _ = ToolRunner::new(client(&claude.url), request("hello"))
        .tool(memory_tool(tool))
        .without_guidance()
        .max_iterations(1)
        .run()
        .await;
    let reqs = claude.requests();
    let want = format!("You are terse.\n\n{guidance}");
    assert!(reqs.len() >= 3, "{}", reqs.len());
    for r in &reqs[..reqs.len() - 1] {
        assert_eq!(r.body["system"], want.as_str());
    }
    assert!(
        reqs.last()
            .unwrap()
            .body
            .get("system")
            .is_none_or(|s| s.is_null())
    );
}
