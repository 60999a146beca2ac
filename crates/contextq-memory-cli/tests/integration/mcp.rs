//! `contextq-memory mcp` as a child process, driven by a real MCP client (rmcp's): initialize,
//! list tools, the six commands with the library's exact strings, resources list and read, and
//! the errors for an unknown tool and for resource URIs that are missing, foreign or escaping.
#![cfg(feature = "mcp")]

use rmcp::ServiceError;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ErrorCode, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_contextq-memory");

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test]
async fn mcp_client_runs_every_command_and_reads_resources() {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("mcp")
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env_remove("CONTEXT_API_URL");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();

    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "contextq-memory");
    // Claude is told the memory is there: the protocol in `instructions` and the `memory` prompt.
    let guidance = contextq_memory_tool::protocol::MEMORY_GUIDANCE;
    assert!(
        info.instructions.as_deref().unwrap().starts_with(guidance),
        "{:?}",
        info.instructions
    );
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "memory");
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("memory"))
        .await
        .unwrap();
    assert_eq!(
        prompt.messages[0]
            .content
            .as_text()
            .map(|t| t.text.as_str()),
        Some(guidance)
    );
    assert!(
        client
            .get_prompt(rmcp::model::GetPromptRequestParams::new("other"))
            .await
            .is_err()
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].name, "memory");
    assert_eq!(tools[1].name, "memory_search");
    assert_eq!(tools[1].input_schema["required"], json!(["query"]));
    assert!(
        tools[1]
            .description
            .as_deref()
            .unwrap()
            .contains("Search the files")
    );
    assert_eq!(tools[0].input_schema["required"], json!(["command"]));
    assert!(
        tools[0].input_schema["properties"]["command"]["enum"]
            .as_array()
            .unwrap()
            .len()
            == 6
    );

    // A tool's answer: its text, and whether it is an error.
    let use_tool = async |tool: &'static str, input: Value| {
        let call = CallToolRequestParams::new(tool).with_arguments(args(input));
        let r = client.call_tool(call).await.unwrap();
        let text = r.content[0].as_text().expect("text").text.clone();
        (text, r.is_error.unwrap_or(false))
    };
    let call = async |input| use_tool("memory", input).await;
    let cases = [
        (
            json!({"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\n"}),
            "File created successfully at: /memories/notes.md",
            false,
        ),
        (
            json!({"command": "view", "path": "/memories/notes.md"}),
            "Here's the content of /memories/notes.md with line numbers:\n     1\tone\n     2\ttwo\n     3\t",
            false,
        ),
        (
            json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "two", "new_str": "2"}),
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tone\n     2\t2\n     3\t",
            false,
        ),
        (
            json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "zero"}),
            "The file /memories/notes.md has been edited.",
            false,
        ),
        (
            json!({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/d/notes.md"}),
            "Successfully renamed /memories/notes.md to /memories/d/notes.md",
            false,
        ),
        (
            json!({"command": "create", "path": "/memories/d/notes.md", "file_text": "x"}),
            "Error: File /memories/d/notes.md already exists",
            true,
        ),
        (
            json!({"command": "view", "path": "/memories/../etc"}),
            "Error: Path /memories/../etc would escape /memories directory",
            true,
        ),
        (
            json!({"command": "bogus"}),
            "Error: Unknown command: bogus",
            true,
        ),
    ];
    for (input, want, is_error) in cases {
        let (text, err) = call(input.clone()).await;
        assert_eq!(text, want, "{input}");
        assert_eq!(err, is_error, "{input}");
    }

    // memory_search beside memory: lines numbered as view numbers them; a bad query an error.
    let search = async |input| use_tool("memory_search", input).await;
    assert_eq!(
        search(json!({"query": "one"})).await,
        (
            "1 file in /memories match \"one\", best first:\n\n/memories/d/notes.md\n     2\tone"
                .to_string(),
            false
        )
    );
    let (text, err) = search(json!({"query": "\"open"})).await;
    assert!(err && text.contains("closing"), "{text}");

    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, vec!["memory:///memories/d/notes.md"]);
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "memory:///memories/d/notes.md",
        ))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "zero\none\n2\n"),
        other => panic!("{other:?}"),
    }
    // Reading what is not a memory file: the MCP error says why, nothing else is touched.
    let read_error = |uri: &'static str| {
        let client = &client;
        async move {
            match client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
            {
                Err(ServiceError::McpError(e)) => (e.code, e.message.to_string()),
                other => panic!("{uri}: {other:?}"),
            }
        }
    };
    // rmcp answers resource-not-found as invalid-params to peers of protocol 2026-07-28 or
    // newer (SEP-2164), which rmcp's client negotiates.
    let not_found = if info.protocol_version >= ProtocolVersion::V_2026_07_28 {
        ErrorCode::INVALID_PARAMS
    } else {
        ErrorCode::RESOURCE_NOT_FOUND
    };
    assert_eq!(
        read_error("memory:///memories/none.md").await,
        (
            not_found,
            "no memory file at memory:///memories/none.md".to_string()
        )
    );
    assert_eq!(
        read_error("file:///etc/passwd").await,
        (
            not_found,
            "no memory file at file:///etc/passwd".to_string()
        )
    );
    assert_eq!(
        read_error("memory:///memories/../etc/passwd").await,
        (
            ErrorCode::INVALID_PARAMS,
            "Path /memories/../etc/passwd would escape /memories directory".to_string()
        )
    );
    assert_eq!(
        read_error("memory:///etc/passwd").await,
        (
            ErrorCode::INVALID_PARAMS,
            "Path must start with /memories, got: /etc/passwd".to_string()
        )
    );

    // A tool other than `memory`: an error result naming it.
    let r = client
        .call_tool(
            CallToolRequestParams::new("notes")
                .with_arguments(args(json!({"command": "view", "path": "/memories"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            r.content[0].as_text().expect("text").text.as_str(),
            r.is_error
        ),
        ("Error: Unknown tool: notes", Some(true))
    );

    let (text, err) = call(json!({"command": "delete", "path": "/memories/d"})).await;
    assert_eq!(
        (text.as_str(), err),
        ("Successfully deleted /memories/d", false)
    );
    assert!(client.list_all_resources().await.unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// `resources/list` in pages of 1,000 with `nextCursor`, over a local directory of 2,500
/// files: every file once, in path order; files created and deleted during the walk do not
/// make a file that exists throughout appear twice or go missing; a foreign cursor is refused.
#[tokio::test]
async fn resources_are_paged_and_stable_under_concurrent_writes() {
    use rmcp::model::PaginatedRequestParams;
    let dir = tempfile::tempdir().unwrap();
    let memories = dir.path().join("memories");
    for d in 0..5 {
        std::fs::create_dir_all(memories.join(format!("d{d}"))).unwrap();
        for f in 0..500 {
            std::fs::write(memories.join(format!("d{d}/f{f:04}.md")), "x").unwrap();
        }
    }
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["mcp", "--store"])
        .arg(format!("local:{}", dir.path().display()))
        .env_remove("CONTEXT_API_URL")
        .env_remove("CONTEXT_API_KEY");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let page = |cursor: Option<String>| {
        let client = &client;
        async move {
            let mut params = PaginatedRequestParams::default();
            params.cursor = cursor;
            client.list_resources(Some(params)).await
        }
    };
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let p = page(cursor).await.unwrap();
        pages += 1;
        assert!(p.resources.len() <= 1_000);
        seen.extend(p.resources.iter().map(|r| r.uri.clone()));
        if pages == 1 {
            // Between pages: a file before the cursor and one after it appear, one after it
            // goes away.
            std::fs::write(memories.join("d0/a-new.md"), "x").unwrap();
            std::fs::write(memories.join("d4/z-new.md"), "x").unwrap();
            std::fs::remove_file(memories.join("d3/f0100.md")).unwrap();
        }
        match p.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen, "in path order, each once");
    for d in 0..5 {
        for f in 0..500 {
            let uri = format!("memory:///memories/d{d}/f{f:04}.md");
            assert_eq!(
                seen.contains(&uri),
                (d, f) != (3, 100),
                "{uri}: listed exactly when it existed throughout"
            );
        }
    }
    assert!(seen.contains(&"memory:///memories/d4/z-new.md".to_string()));
    assert!(!seen.contains(&"memory:///memories/d0/a-new.md".to_string()));
    match page(Some("page-2".into())).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("nextCursor"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    client.cancel().await.unwrap();
}

/// The log an operator reads: stdio `mcp` writes no line of rmcp's own for a session (its INFO
/// notes are held at warn), and with `--log-format json` every line on stderr is JSON, the
/// process's own notices included (stdio `mcp`, and `serve`).
#[test]
fn stderr_holds_this_programs_lines_only_and_json_when_asked() {
    use std::io::{Read as _, Write as _};
    use std::process::{Command, Stdio};
    let data = tempfile::tempdir().unwrap();
    let session = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        "\n"
    );
    for json in [false, true] {
        let mut cmd = Command::new(BIN);
        if json {
            cmd.args(["--log-format", "json"]);
        }
        let mut child = cmd
            .arg("mcp")
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env_remove("CONTEXT_API_URL")
            .env_remove("CONTEXT_API_KEY")
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(session.as_bytes()).unwrap();
        // Closed once both answers are out: the session ends as a client's would.
        let mut stdout = child.stdout.take().unwrap();
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while seen.matches("\"id\":").count() < 2 {
            let n = stdout.read(&mut buf).unwrap();
            assert!(n > 0, "{seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("rmcp"), "json={json}: {stderr}");
        assert!(!stderr.contains(" INFO "), "json={json}: {stderr}");
        if json {
            for line in stderr.lines() {
                serde_json::from_str::<Value>(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            }
            assert!(stderr.contains("contextq::notice"), "{stderr}");
        }
    }
    // `serve`: its notices (the sign-in link, where it serves) are JSON lines too.
    let log = tempfile::NamedTempFile::new().unwrap();
    let (mut child, _url) = contextq_server::testing::spawn_serving_logged(
        Command::new(BIN)
            .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0"])
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env_remove("CONTEXT_API_URL")
            .env_remove("CONTEXT_API_KEY")
            .env_remove("RUST_LOG"),
        log.reopen().unwrap().into(),
    );
    // The notices are written before the server serves: wait until they are there.
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(log.path())
        .unwrap()
        .contains("MCP over HTTP")
        && started.elapsed() < std::time::Duration::from_secs(10)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(text.contains("inspector: open"), "{text}");
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}
