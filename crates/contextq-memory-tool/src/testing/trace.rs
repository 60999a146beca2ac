//! A deterministic, realistic command trace that every implementation can run: ours through
//! `contextq-memory exec` or a store directly, and the official SDKs' local-filesystem tools
//! (the benchmarks' reference traces, and tests that compare stores on the same work).
//!
//! Mix (by draw): view file 30%, str_replace 20%, insert 18%, create 15%, view directory 7%,
//! rename 5%, delete 5%. Every command is valid against the state the trace itself builds, so
//! all implementations do the same work.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// `n` commands from `seed`.
pub fn generate(n: usize, seed: u64) -> Vec<Value> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut uid = 0usize;
    let mut out = Vec::with_capacity(n);
    let dirs = [
        "notes",
        "projects/alpha",
        "projects/beta",
        "people",
        "prefs",
    ];
    while out.len() < n {
        uid += 1;
        let draw = rng.u32(0..100);
        let names: Vec<String> = files.keys().cloned().collect();
        let pick = |rng: &mut fastrand::Rng| names[rng.usize(0..names.len())].clone();
        if names.len() < 5 || (draw < 15 && names.len() < 300) {
            let dir = dirs[rng.usize(0..dirs.len())];
            let path = format!("/memories/{dir}/m{uid}.md");
            let lines: Vec<String> = (0..rng.usize(2..8))
                .map(|k| format!("tok-{uid}-{k} some remembered detail {k}"))
                .collect();
            out.push(json!({"command": "create", "path": path, "file_text": format!("{}\n", lines.join("\n"))}));
            files.insert(path, lines);
        } else if draw < 45 {
            out.push(json!({"command": "view", "path": pick(&mut rng)}));
        } else if draw < 65 {
            let path = pick(&mut rng);
            let lines = files.get_mut(&path).expect("known file");
            let i = rng.usize(0..lines.len());
            let old = lines[i].split(' ').next().unwrap_or("").to_string();
            let new = format!("tok-{uid}-r");
            lines[i] = lines[i].replacen(&old, &new, 1);
            out.push(
                json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new}),
            );
        } else if draw < 83 {
            let path = pick(&mut rng);
            let lines = files.get_mut(&path).expect("known file");
            if lines.len() > 40 {
                continue;
            }
            let at = rng.usize(0..=lines.len());
            let text = format!("tok-{uid}-i inserted line");
            lines.insert(at, text.clone());
            out.push(
                json!({"command": "insert", "path": path, "insert_line": at, "insert_text": text}),
            );
        } else if draw < 90 {
            let dir = if rng.bool() {
                "/memories".to_string()
            } else {
                format!("/memories/{}", dirs[rng.usize(0..dirs.len())])
            };
            if !files.keys().any(|f| f.starts_with(&format!("{dir}/"))) {
                continue;
            }
            out.push(json!({"command": "view", "path": dir}));
        } else if draw < 95 {
            let path = pick(&mut rng);
            let to = format!("/memories/{}/r{uid}.md", dirs[rng.usize(0..dirs.len())]);
            let lines = files.remove(&path).expect("known file");
            files.insert(to.clone(), lines);
            out.push(json!({"command": "rename", "old_path": path, "new_path": to}));
        } else {
            let path = pick(&mut rng);
            files.remove(&path);
            out.push(json!({"command": "delete", "path": path}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryStore, MemoryTool, MemoryToolHandlers};

    #[tokio::test]
    async fn every_command_of_the_trace_succeeds() {
        let trace = generate(3000, 7);
        assert_eq!(trace, generate(3000, 7), "deterministic");
        let tool = MemoryTool::new(MemoryStore::new());
        for input in trace {
            let r = tool.execute(input.clone()).await;
            assert!(!r.is_error, "{input}: {}", r.content);
        }
    }
}
