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

use crate::common;

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

// ---------------------------------------------------------------------------------------------
// Linearizability: concurrent clients on shared files through lossy proxies, each file's
// history checked against a register with create, delete, view and a whole-content
// str_replace (Wing and Gong's search, memoised on the set of operations placed and the state).

/// What an operation asked.
#[derive(Debug, Clone)]
enum Kind {
    Create(String),
    Delete,
    View,
    /// A `str_replace` of the whole content `old` by `new` (tokens are unique, so `old`
    /// appears once exactly when it is the content).
    Replace(String, String),
}

/// What it was told.
#[derive(Debug, Clone, PartialEq)]
enum Told {
    Done,
    Exists,
    Absent,
    Mismatch,
    Saw(Option<String>),
    /// "Did not confirm", or any failure that does not say it changed nothing: it may have
    /// taken effect at any point after it began, or never.
    Unknown,
}

#[derive(Debug, Clone)]
struct Op {
    /// Which client ran it (shown in a failure's report).
    #[allow(dead_code)]
    client: usize,
    kind: Kind,
    told: Told,
    begin: u64,
    /// `u64::MAX` for an unknown outcome (it may take effect any time after `begin`).
    end: u64,
}

/// The state after `op` at `state`, if what it was told fits (an unknown outcome fits when it
/// took effect).
fn apply(state: &Option<String>, op: &Op) -> Option<Option<String>> {
    use Told::*;
    match (&op.kind, &op.told, state) {
        (Kind::Create(v), Done | Unknown, None) => Some(Some(v.clone())),
        (Kind::Create(_), Exists, Some(_)) => Some(state.clone()),
        (Kind::Delete, Done | Unknown, Some(_)) => Some(None),
        (Kind::Delete, Absent, None) => Some(None),
        (Kind::View, Saw(seen), _) if seen == state => Some(state.clone()),
        (Kind::Replace(old, new), Done | Unknown, Some(s)) if s == old => Some(Some(new.clone())),
        (Kind::Replace(old, _), Mismatch, Some(s)) if s != old => Some(state.clone()),
        (Kind::Replace(..), Absent, None) => Some(None),
        _ => None,
    }
}

/// Whether `ops` (one file's, the file absent at first) have a linearization: every operation
/// with a known outcome placed once, after every operation that ended before it began, each
/// fitting the state it is placed at; unknown ones placed or left out. `Err` names how far the
/// search got, or says it gave up after `budget` states.
fn linearizable(ops: &[Op], budget: usize) -> Result<(), String> {
    let n = ops.len();
    let words = n.div_ceil(64).max(1);
    let known: Vec<usize> = (0..n).filter(|&i| ops[i].told != Told::Unknown).collect();
    let mut seen: std::collections::HashSet<(Vec<u64>, Option<String>)> = Default::default();
    // Depth-first, known operations tried before unknown ones.
    let mut stack = vec![(vec![0u64; words], None::<String>, 0usize)];
    let mut deepest = 0;
    while let Some((placed, state, depth)) = stack.pop() {
        let is_placed = |i: usize| placed[i / 64] >> (i % 64) & 1 == 1;
        if known.iter().all(|&i| is_placed(i)) {
            return Ok(());
        }
        deepest = deepest.max(depth);
        if seen.len() > budget {
            return Err(format!(
                "gave up after {budget} states (deepest {deepest} of {n})"
            ));
        }
        if !seen.insert((placed.clone(), state.clone())) {
            continue;
        }
        // The earliest end among known operations not placed yet: nothing that began after it
        // may come before it.
        let horizon = known
            .iter()
            .filter(|&&i| !is_placed(i))
            .map(|&i| ops[i].end)
            .min()
            .unwrap_or(u64::MAX);
        let mut next: Vec<usize> = (0..n)
            .filter(|&i| !is_placed(i) && ops[i].begin < horizon)
            .collect();
        next.sort_by_key(|&i| std::cmp::Reverse((ops[i].told != Told::Unknown, ops[i].begin)));
        for i in next {
            if let Some(after) = apply(&state, &ops[i]) {
                let mut p = placed.clone();
                p[i / 64] |= 1 << (i % 64);
                stack.push((p, after, depth + 1));
            }
        }
    }
    Err(format!(
        "no linearization (deepest {deepest} of {} known)",
        known.len()
    ))
}

/// What the tool's answer to `kind` says.
fn told(kind: &Kind, result: &Result<String, ToolError>) -> Told {
    match (kind, result) {
        (Kind::Create(_), Ok(_)) | (Kind::Delete, Ok(_)) | (Kind::Replace(..), Ok(_)) => Told::Done,
        (Kind::View, Ok(text)) => Told::Saw(Some(content_of_view(text))),
        (_, Err(e)) => {
            let m = e.message();
            if m.contains("did not confirm") {
                Told::Unknown
            } else if m.contains("does not exist") {
                match kind {
                    Kind::View => Told::Saw(None),
                    _ => Told::Absent,
                }
            } else if m.contains("already exists") {
                Told::Exists
            } else if m.contains("did not appear verbatim") {
                Told::Mismatch
            } else {
                // Refused before doing anything (429 past the budget, a 5xx never processed):
                // the message says nothing changed, but an unknown outcome is the weaker claim.
                Told::Unknown
            }
        }
    }
}

/// `clients` tools, each behind its own proxy injecting `chaos` percent of faults, run random
/// commands on `files` shared files for `secs`; each file's history must be linearizable.
/// Returns (operations, unknown outcomes, faults injected).
async fn lossy_history(b: Backend, keyed: bool, secs: u64) -> (usize, usize, usize) {
    const CLIENTS: usize = 6;
    const FILES: usize = 3;
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let hidden: &[&str] = if keyed { &[] } else { &["idempotency"] };
    let started = Instant::now();
    let clock = move || started.elapsed().as_nanos() as u64;
    let mut proxies = Vec::new();
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let proxy = Proxy::hiding(&server.url, hidden).await;
        proxy.chaos(15);
        let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
        proxies.push(proxy);
        tasks.push(tokio::spawn(async move {
            let mut ops = Vec::new();
            // The content this client last saw at each file (what its str_replace replaces).
            let mut last: Vec<Option<String>> = vec![None; FILES];
            let mut n = 0;
            while started.elapsed() < Duration::from_secs(secs) {
                n += 1;
                let file = fastrand::usize(0..FILES);
                let path = format!("/memories/f{file}.md");
                let token = format!("[c{client}-{n:05}]");
                let kind = match fastrand::u32(0..10) {
                    0..=2 => Kind::Create(token.clone()),
                    3..=4 => Kind::Delete,
                    5..=7 => Kind::View,
                    _ => match &last[file] {
                        Some(old) => Kind::Replace(old.clone(), token.clone()),
                        None => Kind::View,
                    },
                };
                let input = match &kind {
                    Kind::Create(v) => json!({"command": "create", "path": path, "file_text": v}),
                    Kind::Delete => json!({"command": "delete", "path": path}),
                    Kind::View => json!({"command": "view", "path": path}),
                    Kind::Replace(old, new) => json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new}),
                };
                let begin = clock();
                let command = Command::from_value(&input).unwrap();
                let result = tool.handle(command).await;
                let end = clock();
                let told = told(&kind, &result);
                if let Told::Saw(seen) = &told {
                    last[file] = seen.clone();
                }
                let end = if told == Told::Unknown { u64::MAX } else { end };
                ops.push((file, Op { client, kind, told, begin, end }));
            }
            ops
        }));
    }
    let mut per_file: Vec<Vec<Op>> = vec![Vec::new(); FILES];
    for t in tasks {
        for (file, op) in t.await.unwrap() {
            per_file[file].push(op);
        }
    }
    let faults: usize = proxies
        .iter()
        .map(|p| p.chaos_counts().values().sum::<usize>())
        .sum();
    let (mut total, mut unknown) = (0, 0);
    for (file, ops) in per_file.iter_mut().enumerate() {
        ops.sort_by_key(|o| o.begin);
        total += ops.len();
        unknown += ops.iter().filter(|o| o.told == Told::Unknown).count();
        if let Err(why) = linearizable(ops, 2_000_000) {
            let lines: Vec<String> = ops.iter().map(|o| format!("{o:?}")).collect();
            panic!("file f{file}: {why}\n{}", lines.join("\n"));
        }
    }
    (total, unknown, faults)
}

#[test]
fn the_checker_refuses_what_no_order_explains() {
    let op = |kind, told, begin, end| Op {
        client: 0,
        kind,
        told,
        begin,
        end,
    };
    let create = |v: &str| Kind::Create(v.to_string());
    // Two deletes both told "done" after one create: impossible.
    let twice = [
        op(create("a"), Told::Done, 0, 1),
        op(Kind::Delete, Told::Done, 2, 5),
        op(Kind::Delete, Told::Done, 3, 6),
    ];
    assert!(linearizable(&twice, 1000).is_err());
    // One of them unknown: fine (it may have found nothing).
    let mut one = twice.clone();
    one[2].told = Told::Unknown;
    one[2].end = u64::MAX;
    assert!(linearizable(&one, 1000).is_ok());
    // A create re-applied after a delete that ended before the repeat began, seen by a view
    // after both: the resurrection the lossy network showed.
    let resurrected = [
        op(create("a"), Told::Done, 0, 10),
        op(Kind::Delete, Told::Done, 1, 2),
        op(Kind::View, Told::Saw(Some("a".into())), 11, 12),
    ];
    assert!(linearizable(&resurrected, 1000).is_err());
    // The same with the view overlapping the create: its answer may come after the delete.
    assert!(linearizable(&resurrected[..2], 1000).is_ok());
    // A delete told "done" for a file absent throughout.
    let nothing = [op(Kind::Delete, Told::Done, 0, 1)];
    assert!(linearizable(&nothing, 1000).is_err());
}

async fn concurrent_clients_through_lossy_proxies_are_linearizable(b: Backend) {
    let secs = std::env::var("LINEARIZABLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    for keyed in [true, false] {
        let (ops, unknown, faults) = lossy_history(b, keyed, secs).await;
        eprintln!(
            "linearizable ({b:?}, {}): {ops} operations of 6 clients on 3 files in {secs} s, {faults} faults injected, {unknown} outcomes unknown",
            if keyed {
                "recorded outcomes"
            } else {
                "without them"
            }
        );
        assert!(ops > 50, "{ops}");
    }
}

contextq_server::database_tests!(
    concurrent_clients_through_lossy_proxies_are_linearizable,
    soak_with_faults_loses_nothing,
    soak_with_faults_on_a_plain_contextq_loses_nothing,
);
