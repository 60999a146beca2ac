//! Soak: 8 tool instances run random command sequences against contextq-server through a
//! fault-injecting proxy (5xx, 429, delays, dropped connections, lost answers), checked against a
//! model of the expected state:
//! - after every success, the store is read back (through a tool that bypasses the proxy) and
//!   must hold the command's new state;
//! - after every failure, each path the command touched must be in the state its typed error
//!   says ([`ToolError::effects`]): the old state when not applied (the default: nothing
//!   changed), the new one when applied, either when unknown; never anything else;
//! - at the end every instance's directory equals its model exactly.
//!
//! It runs against contextq-server directly and through a proxy that hides the contract's
//! extensions (the ContextQ the seed describes). Short in CI (`SOAK_SECS`, default 4 s per
//! database and variant); the long variant is `SOAK_SECS=600`.
//! Figures are printed (`--nocapture`) and recorded in docs/reliability.md.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{ALL, Server, options};
use contextq_memory_tool::contextq::{ContextQMemoryTool, contextq_memory_tool};
use contextq_memory_tool::handlers::{Applied, ToolError};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{Command, MemoryToolHandlers};
use contextq_server::Backend;
use contextq_server::Plan;
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
    /// Commands run (views included).
    commands: usize,
    /// Successes, each read back.
    ok: usize,
    /// Failures whose error said nothing was changed.
    unchanged: usize,
    /// Failures with an unknown outcome on some path, by what the store then held.
    unknown_old: usize,
    unknown_new: usize,
    /// Failures that said some step was applied (a rename that stopped part way).
    partial: usize,
    violations: Vec<String>,
}

async fn read(clean: &ContextQMemoryTool, path: &str) -> Option<String> {
    let r = clean
        .execute(json!({"command": "view", "path": path}))
        .await;
    (!r.is_error).then(|| content_of_view(&r.content))
}

/// What the error says of `path`: not applied unless it says otherwise.
fn applied(e: &ToolError, path: &str) -> Applied {
    e.effects()
        .iter()
        .find(|x| x.path == path)
        .map_or(Applied::No, |x| x.applied)
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
        next += 1;
        let files: Vec<String> = model.keys().cloned().collect();
        let pick = || files[fastrand::usize(0..files.len())].clone();
        let choice = if files.is_empty() {
            0
        } else {
            fastrand::u32(0..10)
        };
        // (input, paths touched with their state after a success)
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
            _ => (json!({"command": "view", "path": pick()}), Vec::new()),
        };
        tally.commands += 1;
        let command = Command::from_value(&input).expect("the soak sends valid commands");
        let result = tool.handle(command).await;
        if expect.is_empty() {
            // A view: on success it shows exactly the model's content.
            let p = input["path"].as_str().unwrap_or_default();
            match &result {
                Ok(text) => {
                    tally.ok += 1;
                    if content_of_view(text) != model[p] {
                        tally
                            .violations
                            .push(format!("view {p}: content differs from the model"));
                    }
                }
                Err(_) => tally.unchanged += 1,
            }
            continue;
        }
        // What the store holds now, path by path.
        let mut states = Vec::new();
        for (p, _) in &expect {
            states.push(read(&clean, p).await);
        }
        match &result {
            Ok(_) => {
                tally.ok += 1;
                for ((p, want), got) in expect.iter().zip(&states) {
                    if got != want {
                        tally.violations.push(format!(
                            "{input} succeeded but {p} holds {got:?}, not {want:?}"
                        ));
                    }
                }
            }
            Err(e) => {
                let mut any_unknown = false;
                let mut any_new = false;
                for ((p, new), got) in expect.iter().zip(&states) {
                    let old = model.get(p).cloned();
                    let ok = match applied(e, p) {
                        Applied::No => *got == old,
                        Applied::Yes => got == new,
                        Applied::Unknown => {
                            any_unknown = true;
                            *got == old || got == new
                        }
                    };
                    any_new |= got == new && *got != old;
                    if !ok {
                        tally.violations.push(format!(
                            "{input} failed with {:?} (effects {:?}) but {p} holds {got:?} (old {old:?}, new {new:?})",
                            e.message(),
                            e.effects()
                        ));
                    }
                }
                let partial = e.effects().iter().any(|x| x.applied == Applied::Yes);
                match (partial, any_unknown, any_new) {
                    (true, _, _) => tally.partial += 1,
                    (false, true, true) => tally.unknown_new += 1,
                    (false, true, false) => tally.unknown_old += 1,
                    (false, false, _) => tally.unchanged += 1,
                }
            }
        }
        // The model follows the store (checked above against what was allowed).
        for ((p, _), got) in expect.iter().zip(states) {
            match got {
                Some(c) => model.insert(p.clone(), c),
                None => model.remove(p),
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

async fn soak(b: Backend, plain: bool) {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let proxy = if plain {
        Proxy::plain(&server.url).await
    } else {
        Proxy::start(&server.url).await
    };
    proxy.chaos(10);
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for id in 0..8 {
        let mut o = options(&proxy.url, &key)
            .workspace("ws")
            .timeout(Duration::from_millis(2000));
        o.retry.max_retries = 2;
        let tool = contextq_memory_tool(o).unwrap();
        let clean = server.tool(&key);
        tasks.push(tokio::spawn(worker(id, tool, clean, until)));
    }
    let mut total = Tally::default();
    for t in tasks {
        let r = t.await.unwrap();
        total.commands += r.commands;
        total.ok += r.ok;
        total.unchanged += r.unchanged;
        total.unknown_old += r.unknown_old;
        total.unknown_new += r.unknown_new;
        total.partial += r.partial;
        total.violations.extend(r.violations);
    }
    let faults = proxy.chaos_counts();
    eprintln!(
        "soak {b:?}{} {secs}s: {} commands: {} ok (each read back), failures: {} with nothing changed, {} with an unknown outcome (store then held the old state {} times, the new {} times), {} partial; faults injected {faults:?} ({} in all); violations {}",
        if plain { " plain" } else { "" },
        total.commands,
        total.ok,
        total.unchanged,
        total.unknown_old + total.unknown_new,
        total.unknown_old,
        total.unknown_new,
        total.partial,
        faults.values().sum::<usize>(),
        total.violations.len()
    );
    assert!(total.violations.is_empty(), "{:#?}", total.violations);
    assert!(
        total.commands > 50,
        "the soak ran too few commands: {}",
        total.commands
    );
    assert!(faults.values().sum::<usize>() > 0);
}

async fn soak_with_faults_loses_nothing(b: Backend) {
    soak(b, false).await;
}

/// The same against the ContextQ the seed describes (no extensions): single writer per file,
/// so nothing may be lost there either.
async fn soak_with_faults_on_a_plain_contextq_loses_nothing(b: Backend) {
    soak(b, true).await;
}

contextq_server::database_tests!(
    soak_with_faults_loses_nothing,
    soak_with_faults_on_a_plain_contextq_loses_nothing,
);
