//! Soak: 8 tool instances run random command sequences against contextq-server through a
//! fault-injecting proxy (5xx, 429, delays, dropped connections, lost answers), checked against a
//! model of the expected state:
//! - every command Claude was told succeeded is reflected in the store;
//! - every failure was reported as an error, and nothing changed, except where the error said the
//!   outcome is unknown (then the store holds either the old or the new state, never anything else);
//! - at the end every instance's directory equals its model exactly.
//!
//! Short in CI (`SOAK_SECS`, default 4 s per backend); the long variant is `SOAK_SECS=600`.
//! Figures are printed and recorded in docs/reliability.md.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::{ALL, Server, backends, options};
use contextq_memory_tool::contextq::{ContextQMemoryTool, contextq_memory_tool};
use contextq_memory_tool::{MemoryToolHandlers, ToolResult};
use contextq_server::model::Plan;
use serde_json::{Value, json};

fn content_of_view(view: &str) -> String {
    view.split_once('\n')
        .map(|(_, body)| {
            body.split('\n')
                .map(|l| l.split_once('\t').map_or("", |(_, t)| t))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A rename that reported "incomplete: both files now exist".
fn reported_partial_rename(r: &ToolResult) -> bool {
    r.content.contains("is incomplete") && r.content.contains("Both files now exist")
}

fn uncertain(r: &ToolResult) -> bool {
    [
        "may not have been applied",
        "did not answer in time",
        "unreachable",
        "nothing was confirmed",
        "failed (",
    ]
    .iter()
    .any(|m| r.content.contains(m))
}

fn insert_model(content: &str, at: usize, text: &str) -> String {
    let mut lines: Vec<&str> = content.split('\n').collect();
    if content.ends_with('\n') || content.is_empty() {
        lines.pop();
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let mut out: Vec<&str> = lines[..at].to_vec();
    out.extend(text.split('\n'));
    out.extend_from_slice(&lines[at..]);
    let mut s = out.join("\n");
    s.push('\n');
    s
}

#[derive(Default, Debug)]
struct Tally {
    ops: usize,
    ok: usize,
    errors: usize,
    uncertain_resolved: usize,
    partial_reported: usize,
    violations: Vec<String>,
}

async fn read(clean: &ContextQMemoryTool, path: &str) -> Option<String> {
    let r = clean
        .execute(json!({"command": "view", "path": path}))
        .await;
    (!r.is_error).then(|| content_of_view(&r.content))
}

/// One instance: random commands on its own directory.
async fn worker(
    id: usize,
    tool: ContextQMemoryTool,
    clean: ContextQMemoryTool,
    until: Instant,
) -> Tally {
    let dir = format!("/memories/t{id}");
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let mut tally = Tally::default();
    let mut next = 0usize;
    while Instant::now() < until {
        tally.ops += 1;
        next += 1;
        let files: Vec<String> = model.keys().cloned().collect();
        let pick = || files[fastrand::usize(0..files.len())].clone();
        let choice = if files.is_empty() {
            0
        } else {
            fastrand::u32(0..10)
        };
        // (input, paths touched, expected state of those paths on success)
        let (input, expect): (Value, Vec<(String, Option<String>)>) = match choice {
            0 | 1 => {
                let p = format!("{dir}/f{next}.md");
                let text = format!("created {next}\nline a{next}\n");
                (
                    json!({"command": "create", "path": p, "file_text": text}),
                    vec![(p, Some(text))],
                )
            }
            2 | 3 => {
                let p = pick();
                let old = model[&p].clone();
                let token = old
                    .lines()
                    .find(|l| l.starts_with("line "))
                    .unwrap_or("")
                    .to_string();
                if token.is_empty() || old.matches(&token).count() != 1 {
                    continue;
                }
                let new = format!("line r{next}");
                (
                    json!({"command": "str_replace", "path": p, "old_str": token, "new_str": new}),
                    vec![(p.clone(), Some(old.replacen(&token, &new, 1)))],
                )
            }
            4 | 5 => {
                let p = pick();
                let old = model[&p].clone();
                let n = old.lines().count();
                let at = fastrand::usize(0..=n);
                let text = format!("line i{next}");
                (
                    json!({"command": "insert", "path": p, "insert_line": at, "insert_text": text}),
                    vec![(p.clone(), Some(insert_model(&old, at, &text)))],
                )
            }
            6 => {
                let p = pick();
                (json!({"command": "delete", "path": p}), vec![(p, None)])
            }
            7 => {
                let p = pick();
                let to = format!("{dir}/moved{next}.md");
                let c = model[&p].clone();
                (
                    json!({"command": "rename", "old_path": p, "new_path": to}),
                    vec![(p, None), (to, Some(c))],
                )
            }
            _ => {
                let p = pick();
                let r = tool.execute(json!({"command": "view", "path": p})).await;
                if r.is_error {
                    tally.errors += 1;
                } else {
                    tally.ok += 1;
                    if content_of_view(&r.content) != model[&p] {
                        tally
                            .violations
                            .push(format!("view {p}: content differs from the model"));
                    }
                }
                continue;
            }
        };
        let result = tool.execute(input.clone()).await;
        if !result.is_error {
            tally.ok += 1;
            for (p, c) in expect {
                match c {
                    Some(c) => model.insert(p, c),
                    None => model.remove(&p),
                };
            }
            continue;
        }
        tally.errors += 1;
        // A failure: the store must hold the old state, or (only when the error said the outcome
        // is unknown) the new one.
        let mut states = Vec::new();
        for (p, _) in &expect {
            states.push(read(&clean, p).await);
        }
        let old: Vec<Option<String>> = expect.iter().map(|(p, _)| model.get(p).cloned()).collect();
        let new: Vec<Option<String>> = expect.iter().map(|(_, c)| c.clone()).collect();
        if states == old {
            continue;
        }
        if states == new && uncertain(&result) {
            tally.uncertain_resolved += 1;
            for (p, c) in expect {
                match c {
                    Some(c) => model.insert(p, c),
                    None => model.remove(&p),
                };
            }
            continue;
        }
        // The seed's named gap, reported explicitly: the copy exists and the source was kept.
        if reported_partial_rename(&result)
            && states.len() == 2
            && states[0] == old[0]
            && states[1] == old[0]
        {
            tally.partial_reported += 1;
            model.insert(expect[1].0.clone(), old[0].clone().unwrap_or_default());
            continue;
        }
        tally.violations.push(format!(
            "{input} failed with {:?} but the store changed: {states:?}",
            result.content
        ));
        // Re-sync to keep checking the rest.
        for (p, s) in expect.iter().map(|(p, _)| p.clone()).zip(states) {
            match s {
                Some(c) => model.insert(p, c),
                None => model.remove(&p),
            };
        }
    }
    // Final check: the directory equals the model.
    let listing = clean.execute(json!({"command": "view", "path": dir})).await;
    let listed: Vec<String> = if listing.is_error {
        Vec::new()
    } else {
        listing
            .content
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once('\t').map(|(_, p)| p.to_string()))
            .filter(|p| !p.ends_with('/'))
            .collect()
    };
    let expected: Vec<String> = model.keys().cloned().collect();
    if listed != expected {
        tally
            .violations
            .push(format!("t{id}: listed {listed:?}, model {expected:?}"));
    }
    for (p, c) in &model {
        if read(&clean, p).await.as_ref() != Some(c) {
            tally
                .violations
                .push(format!("{p}: final content differs from the model"));
        }
    }
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_with_faults_loses_nothing() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for b in backends() {
        let server = Server::start(b).await;
        let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
        let proxy = Proxy::start(&server.url).await;
        proxy.chaos(10);
        let until = Instant::now() + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for id in 0..8 {
            let mut o = options(&proxy.url, &key)
                .workspace("ws")
                .timeout(Duration::from_millis(2000));
            o.retry.max_retries = 2;
            let tool = contextq_memory_tool(o).unwrap();
            let clean = contextq_memory_tool(options(&server.url, &key).workspace("ws")).unwrap();
            tasks.push(tokio::spawn(worker(id, tool, clean, until)));
        }
        let mut total = Tally::default();
        for t in tasks {
            let r = t.await.unwrap();
            total.ops += r.ops;
            total.ok += r.ok;
            total.errors += r.errors;
            total.uncertain_resolved += r.uncertain_resolved;
            total.partial_reported += r.partial_reported;
            total.violations.extend(r.violations);
        }
        let faults = proxy.chaos_counts();
        eprintln!(
            "soak {b:?} {secs}s: {} commands ({} ok, {} errors reported, {} unknown outcomes resolved, {} partial renames reported as such), faults injected {faults:?} ({} in all), violations {}",
            total.ops,
            total.ok,
            total.errors,
            total.uncertain_resolved,
            total.partial_reported,
            faults.values().sum::<usize>(),
            total.violations.len()
        );
        assert!(total.violations.is_empty(), "{:#?}", total.violations);
        assert!(
            total.ops > 50,
            "the soak ran too few commands: {}",
            total.ops
        );
        assert!(faults.values().sum::<usize>() > 0);
    }
}
