//! Answers that fit in Claude's context, through the public API on a store: a directory of
//! 3,000 files and a file of 20,000 lines are cut to the default budget with their last line
//! saying what was left out and how to see it; `AnswerBudget::UNLIMITED` gives the reference
//! answers; small answers are the same under any budget.

use std::sync::Arc;

use contextq_memory_tool::{AnswerBudget, MemoryStore, MemoryTool, MemoryToolHandlers};
use serde_json::json;

async fn run(tool: &MemoryTool<Arc<MemoryStore>>, input: serde_json::Value) -> String {
    let r = tool.execute(input).await;
    assert!(!r.is_error, "{}", r.content);
    r.content
}

#[tokio::test]
async fn large_answers_are_cut_to_the_budget_and_small_ones_are_not() {
    let store = Arc::new(MemoryStore::new());
    let tool = MemoryTool::new(store.clone());
    let whole = MemoryTool::new(store).answer_budget(AnswerBudget::UNLIMITED);
    for d in 0..30 {
        for f in 0..100 {
            run(
                &tool,
                json!({"command": "create", "path": format!("/memories/d{d:02}/f{f:03}.md"), "file_text": "x"}),
            )
            .await;
        }
    }
    let full = run(&whole, json!({"command": "view", "path": "/memories"})).await;
    assert_eq!(full.lines().count(), 2 + 30 + 3000);
    let cut = run(&tool, json!({"command": "view", "path": "/memories"})).await;
    assert!(cut.chars().count() <= 40_000);
    let lines: Vec<&str> = cut.lines().collect();
    assert_eq!(
        lines.len(),
        2 + 1000 + 2,
        "header, own line, 1,000 entries, blank, note"
    );
    assert_eq!(
        *lines.last().unwrap(),
        "Note: 2030 of 3030 entries (50750 characters) are not shown, to keep this answer short; view a subdirectory to see its entries, e.g. /memories/d09."
    );
    // Every directory is there; each shown line is a line of the whole listing.
    for d in 0..30 {
        assert!(cut.contains(&format!("\t/memories/d{d:02}/\n")), "d{d:02}");
    }
    for line in &lines[..lines.len() - 2] {
        assert!(full.lines().any(|l| l == *line), "{line}");
    }
    // Following the note: the subdirectory's listing is whole.
    let sub = run(&tool, json!({"command": "view", "path": "/memories/d09"})).await;
    assert_eq!(sub.lines().count(), 2 + 100);

    // A long file: the first lines, then where to read on; the range is exact.
    let text: String = (1..=20_000)
        .map(|n| format!("entry {n}: some remembered fact\n"))
        .collect();
    run(
        &tool,
        json!({"command": "create", "path": "/memories/log.md", "file_text": text}),
    )
    .await;
    let read = run(
        &tool,
        json!({"command": "view", "path": "/memories/log.md"}),
    )
    .await;
    assert!(read.chars().count() <= 100_000);
    let last = read.lines().last().unwrap();
    assert!(
        last.starts_with("Note: /memories/log.md has 20001 lines (")
            && last.contains("Read on with view_range ["),
        "{last}"
    );
    let shown = read.lines().count() - 3;
    let next = run(
        &tool,
        json!({"command": "view", "path": "/memories/log.md", "view_range": [shown + 1, shown + 2]}),
    )
    .await;
    assert_eq!(
        next,
        format!(
            "Here's the content of /memories/log.md with line numbers:\n{:>6}\tentry {}: some remembered fact\n{:>6}\tentry {}: some remembered fact",
            shown + 1,
            shown + 1,
            shown + 2,
            shown + 2
        )
    );
    // Small answers are the reference answers under any budget.
    run(
        &tool,
        json!({"command": "create", "path": "/memories/small/a.md", "file_text": "a\nb\n"}),
    )
    .await;
    for input in [
        json!({"command": "view", "path": "/memories/small"}),
        json!({"command": "view", "path": "/memories/small/a.md"}),
    ] {
        assert_eq!(run(&tool, input.clone()).await, run(&whole, input).await);
    }
}
